#pragma once
// How one rank keeps and moves the model's states (weights, gradients, optimizer states and
// their copies), decided once from the scenario and the size of the gradient group: the bytes
// per parameter of each, where it lives (GPU, host DRAM, NVMe), whether it is sharded over the
// gradient group, and which collectives move it. The program writers, the pipeline's activation
// budget and the reports' labels read this plan instead of comparing ZeRO stages (the planner
// names candidates by their scenario settings, which become plans when built, and skips stages
// that take no effect); a framework's convention is a plan, not a branch:
// - PyTorch DDP: everything replicated, gradients all-reduced;
// - DeepSpeed ZeRO-1/2 (and Megatron's distributed optimizer, which is ZeRO-1 across pipelines):
//   optimizer states (ZeRO-2: and gradients) sharded, gradients reduce-scattered, the updated
//   parameters all-gathered after the step;
// - ZeRO-3 / PyTorch FSDP: parameters sharded too, each parameter group all-gathered before
//   each use; FSDP2 keeps its shards in fp32 (16 bytes per parameter, no separate master copy);
// - ZeRO-Offload / ZeRO-Infinity: the optimizer states (and ZeRO-3 parameters) in host memory or
//   on NVMe, with CPU Adam (the ZeRO-Offload table of REFERENCES.md).
#include <string>

#include "config/scenario.hpp"
#include "program/program.hpp"

namespace trainsim {

// One model state on one rank.
struct StatePlacement {
  double bytes_per_parameter = 0;  // 0: the rank does not hold it
  Device device = Device::gpu;
  bool sharded = false;            // over the gradient group: ceil(parameters / ranks) per rank
};

struct ModelStatePlan {
  int configured_stage = 0;  // memory.zero, as the user named it
  int stage = 0;             // the ZeRO stage in effect: 0 when one rank has nothing to shard
  int ranks = 1;  // the gradient group (dp x cp) the states are sharded over

  StatePlacement weights;              // training precision (fp8 adds a 1-byte copy)
  StatePlacement gradients;            // where they are reduced, in grad_precision
  StatePlacement optimizer;            // fp32 master copy, momentum, variance (+ fp32 gradient copy)
  StatePlacement offloaded_gradients;  // fp32 gradients beside offloaded optimizer states
  double pinned_buffer_bytes = 0;      // host memory staging NVMe traffic

  double gradient_element_bytes = 0;   // a reduced gradient, in grad_precision
  double parameter_element_bytes = 0;  // a gathered or uploaded parameter, in the training precision
  Collective gradient_reduction = Collective::all_reduce;  // reduce_scatter when gradients or optimizer are sharded
  bool gathers_after_step = false;     // the updated shards are all-gathered (ZeRO-1/2 over more than one rank)
  bool gathers_per_use = false;        // each parameter group gathered before each use (ZeRO-3)
  // Gradients reduced after the last micro-batch only while they are sharded: the full gradients
  // accumulate in an unsharded buffer first.
  bool accumulates_unsharded = false;
  // Each bucket is copied out of the backward's gradients into a buffer of its own and reduced
  // from there into the rank's shard (ZeRO-2/3 reducing every micro-batch).
  bool reduces_from_bucket_buffers = false;

  bool offloads_optimizer() const { return optimizer.device != Device::gpu; }
  bool offloads_weights() const { return weights.device != Device::gpu; }
  bool reduces_gradients() const { return ranks > 1 || offloads_optimizer(); }

  // The parameters this rank keeps of `parameters` in a state sharded as `state` is.
  double held(const StatePlacement& state, double parameters) const;
  double shard(double parameters) const;  // ceil(parameters / ranks)
  // The bytes `parameters` take on the GPU in model states (not gathered buffers).
  double gpu_bytes(double parameters) const;
  // "ZeRO-1", "ZeRO-3" (the configured stage); empty for DDP.
  std::string label() const;
};

// The stage that takes effect for `zero` over `gradient_ranks`: one rank has nothing to shard,
// but under offload the stage still says what streams off the GPU (ZeRO-2's gradients bucket by
// bucket, ZeRO-3's parameters per use). The planner skips stages that collapse.
int effective_zero_stage(int zero, int gradient_ranks, bool offloads);

// "ZeRO-2": how reports and the planner name a stage.
std::string zero_stage_label(int stage);

// `gradient_ranks`: the ranks that reduce the gradients and shard the states (dp x cp).
ModelStatePlan plan_model_states(const Scenario& scenario, int gradient_ranks);

} // namespace trainsim
