#pragma once
// From a scenario and a model to the per-rank programs of one training step: checks that the
// layout suits the model, lays out the ranks and their groups, plans activation recompute, and
// builds each rank's program (data parallel with ZeRO when there is no pipeline, the pipeline
// schedule otherwise). Ranks whose programs would be identical share one.
#include <optional>
#include <vector>

#include "config/scenario.hpp"
#include "layout/layout.hpp"
#include "model/model.hpp"
#include "program/model_states.hpp"
#include "program/program.hpp"
#include "program/recompute_plan.hpp"

namespace trainsim {

struct WorkloadBuild {
  Workload workload;
  RecomputePlan recompute;            // of the first chunk of the first pipeline rank
  double recompute_flops = 0;         // what every rank's plans recompute for one micro-batch, all ranks together
  ModelStatePlan states;              // how every rank keeps and moves the model states
  std::optional<ModelStatePlan> expert_states;  // the local experts' under expert parallelism
  Layout layout;
  std::vector<RankCoords> coords;     // per rank
};

// `gpu_capacity` (bytes, 0 when unknown) sets the default activation budget of the optimal
// recompute plan; `node_of_rank` numbers the node of each rank, which DeepEP's dispatch needs
// (moe.dispatcher = deepep; unused otherwise). Throws InputError naming the numbers that clash.
WorkloadBuild build_workload(const Scenario& scenario, const ModelSpec& model, double gpu_capacity,
                             const std::vector<int>& node_of_rank = {});

} // namespace trainsim
