#pragma once
// Data-parallel training with ZeRO (Rajbhandari et al. 2020) / FSDP, as one rank's program,
// with tensor and context parallelism inside each layer (LayerOps) but no pipeline:
// (what each stage keeps and moves is decided by the ModelStatePlan)
// - stage 0 (DDP): every rank holds everything; gradients are all-reduced in buckets on the
//   dp-comm stream while backward runs;
// - stage 1: optimizer states are sharded; gradients are reduce-scattered, each rank updates
//   its shard, and the updated parameters are all-gathered;
// - stage 2: gradients are sharded too: each bucket is reduce-scattered out of a bucket buffer
//   as backward produces it;
// - stage 3 (FSDP): parameters are sharded too: each layer's parameters are all-gathered into a
//   buffer before its forward and its backward (prefetch_depth layers ahead) and released after.
// Activation recompute follows a RecomputePlan; gradient accumulation runs micro-batches back to
// back with the gradient reduction after the last one or after each (comm.grad_sync).
#include "config/scenario.hpp"
#include "model/costs.hpp"
#include "model/model.hpp"
#include "program/model_states.hpp"
#include "program/program.hpp"
#include "program/program_writer.hpp"
#include "program/recompute_plan.hpp"

namespace trainsim {

// `gradient_group` (of `states.ranks` ranks: dp x cp) reduces the gradients and shards the states
// as `states` plans.
Program build_data_parallel_program(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs,
                                    const ModelStatePlan& states, const RecomputePlan& plan, int gradient_group,
                                    const ModelParallelGroups& parallel);

// What the GPU has left for layer activations at the program's peak without them.
double data_parallel_activation_budget(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs,
                                       const ModelStatePlan& states, double gpu_capacity);

} // namespace trainsim
