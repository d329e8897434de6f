#pragma once
// Data-parallel training with ZeRO (Rajbhandari et al. 2020) / FSDP, as one rank's program,
// with tensor and context parallelism inside each layer (LayerOps) but no pipeline. What each
// rank keeps and which collectives move it is the ModelStatePlan's; this writes the ops.
//
// Model states are allocated first and never freed (they persist across steps). Then each
// micro-batch's forward (embedding, layers, head: each allocates the activations it keeps) and
// backward (an activation-gradient buffer, the head, layers in reverse, the embedding: each frees
// what its forward kept), the recompute the RecomputePlan asks for, and the optimizer step.
//
// Gradients are reduced while backward runs, in buckets of comm.bucket_size filled in the order
// gradients become final (a tied embedding only after the embedding's backward): BucketFiller
// cuts the backward's gradient bytes, so a layer larger than a bucket fills several (each reduced
// once the layer's backward is done) and small pieces share one; every bucket is a collective and
// pays its latency. DDP all-reduces in place, ZeRO-1 reduce-scatters in place, ZeRO-2/3
// reduce-scatter out of bucket buffers each the size of its bucket, at most two at a time: a
// further bucket waits on the compute stream for the oldest (DeepSpeed's overlap_comm double
// buffer). comm.grad_sync says whether this happens after the last micro-batch only or after each;
// ZeRO-2/3 reducing only at the end first accumulate an unsharded gradient. The optimizer waits
// for every reduction; ZeRO-1/2 then all-gather the updated parameters in buckets.
//
// ZeRO-3 gathers each parameter group (embedding, each layer, head) before each use, in program
// order (forward; backward in reverse, a checkpointed segment's layers gathered once for its
// recompute and kept until their backward), prefetch_depth uses ahead on the dp-comm stream into
// fresh buffers freed after the use: prefetch_depth + 1 gathered groups live at most, and the
// parameters move 3 Psi per step with the gradients' reduce-scatters.
//
// Offload (ZeRO-Offload / ZeRO-Infinity): each reduced bucket's share goes to the host and the
// step runs on the CPU (OffloadedOptimizer); offloaded ZeRO-3 parameters are read from NVMe (if
// there) and copied up before their gather; offloaded activation checkpoints are copied to host
// memory once produced and back one segment ahead in backward.
//
// Under expert parallelism the local experts' states are a second set beside the dense ones,
// planned over the expert-data-parallel group: everything above (buckets, bucket buffers, the
// ZeRO-3 gathers of each layer's experts, the offloaded gradients) happens per set over its own
// group, and one optimizer step (on the GPU or the CPU) updates both.
//
// Every alloc and free sits on the compute stream (a free that waits for a transfer carries a
// dependency), so the replay meets them in program order and `trainsim memory` gives the same
// peaks as `run`.
#include "config/scenario.hpp"
#include "model/costs.hpp"
#include "model/model.hpp"
#include "program/model_states.hpp"
#include "program/program.hpp"
#include "program/program_writer.hpp"
#include "program/recompute_plan.hpp"
#include "program/runtime_memory.hpp"

namespace trainsim {

// `gradient_group` (of `states.ranks` ranks: dp x cp) reduces the gradients and shards the states
// as `states` plans.
Program build_data_parallel_program(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs,
                                    const ModelStatePlan& states, const RecomputePlan& plan, int gradient_group,
                                    const ModelParallelGroups& parallel, const RuntimeMemory& runtime);

// What the GPU has left for layer activations at the program's peak without them.
double data_parallel_activation_budget(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs,
                                       const ModelStatePlan& states, const ModelStatePlan* expert_states,
                                       double gpu_capacity);

} // namespace trainsim
