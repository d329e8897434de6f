#pragma once
// Pipeline-parallel training (GPipe, 1F1B, interleaved 1F1B, ZB-H1/H2/V, DualPipeV) as one rank's program,
// with tensor and context parallelism inside each layer (LayerOps), data parallelism across
// pipelines (gradients all-reduced, or reduce-scattered with ZeRO-1 / Megatron's distributed
// optimizer, once each chunk's last backward, or last weight-gradient pass, is done) and
// activation recompute per chunk. Activations go to the next virtual stage and gradients to the
// previous one as sends and receives tagged by micro-batch and virtual stage; each rank waits for
// their real arrival.
//
// Layers are split into pp x vpp virtual stages (uniformly, parallel.layers_per_stage, or
// first/last_stage_layers); rank r holds the virtual stages of its chunks (pipeline_schedule's
// virtual_stage: c x pp + r, or the V of ZB-V and DualPipeV, whose turn on the last rank passes between its two
// chunks without a transfer); the first holds the embedding, the last the output layer (with a
// tied embedding on another rank the last stage holds a copy and the two all-reduce its
// gradient, group kind `emb`). DualPipe's two directions each pass the whole model in pp
// stages: rank r holds stage r going down and stage pp - 1 - r going up, a copy of the stage its
// mirror rank pp - 1 - r holds going down; the two sum their gradients (group kind `mirror`, an
// all-reduce of what each holds after the data-parallel reduction, bucket by bucket) and keep
// both copies' weights, gradients and optimizer states, as the reference DualPipe module under
// one optimizer does. A forward step receives (pp-comm), runs the chunk's layers and
// sends on; a backward step receives the gradient (pp-bwd), recomputes, runs backward (or its
// input-gradient pass, keeping what the weight-gradient pass needs) and sends back. Receives are
// posted two steps ahead and sends and receives are not stream-ordered, so the schedule
// cannot deadlock on a busy peer; nothing computes the bubble. With comm.pp_scatter_gather (tp
// without SP) each tp rank sends 1/tp of the boundary and the receiver all-gathers it over tp. The
// optimal recompute budget is shared among the chunk forwards the schedule keeps in flight on
// stage 0. ZeRO-2/3 are refused with pipelines (as DeepSpeed does), and so are parameter and
// activation offload.
#include <vector>

#include "config/scenario.hpp"
#include "layout/layout.hpp"
#include "model/costs.hpp"
#include "model/model.hpp"
#include "program/model_states.hpp"
#include "program/program.hpp"
#include "program/recompute_plan.hpp"
#include "program/runtime_memory.hpp"

namespace trainsim {

// The stages one micro-batch passes through the model: pp x vpp, or under DualPipe pp.
long long stages_of_a_pass(const Scenario& scenario);
// Layers of each virtual stage (pp x vpp of them): the scenario's list (stages_of_a_pass counts),
// or an equal split; under DualPipe the pp stages going down, then the same going up.
std::vector<long long> layers_per_virtual_stage(const Scenario& scenario, const ModelSpec& model);
// Each virtual stage's first layer in the model, from the layers of each.
std::vector<long long> first_layer_of_virtual_stages(const Scenario& scenario, const std::vector<long long>& stage_layers);

struct PipelinePlacement {
  const Layout* layout = nullptr;
  const LayoutGroups* groups = nullptr;
  // Per rank, the group of the pair of ranks summing copies' gradients, -1 if none: the first and
  // last stages tying the embedding, or under DualPipe rank r and its mirror pp - 1 - r.
  std::vector<int> copies_group;
  std::vector<RuntimeMemory> runtime; // per rank: the CUDA context and NCCL buffers
  const ModelStatePlan* expert_states = nullptr;  // under expert parallelism: the local experts' plan
};

// `plans[c]` is the recompute plan of chunk c on this rank; `states` keeps the model states.
Program build_pipeline_program(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs,
                               const ModelStatePlan& states, const std::vector<RecomputePlan>& plans,
                               const PipelinePlacement& placement, int rank);

} // namespace trainsim
