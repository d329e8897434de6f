#pragma once
// Data-parallel training with ZeRO (Rajbhandari et al. 2020) / FSDP, as per-rank programs:
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
#include "model/model.hpp"
#include "program/program.hpp"
#include "program/recompute_plan.hpp"

namespace trainsim {

struct DataParallelBuild {
  Workload workload;
  RecomputePlan recompute;
};

// `gpu_capacity` (bytes, 0 when unknown) sets the default activation budget of the optimal
// recompute plan. Throws InputError when the scenario does not suit the model.
DataParallelBuild build_data_parallel_workload(const Scenario& scenario, const ModelSpec& model, double gpu_capacity);

// Bytes per parameter of the weights a rank keeps: 16-bit (fp8 training adds a cached fp8 copy)
// or 32-bit.
double weight_bytes_per_parameter(Precision precision);

} // namespace trainsim
