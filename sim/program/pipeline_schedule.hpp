#pragma once
// The order in which one pipeline rank runs the forward and backward passes of its
// micro-batches and model chunks: GPipe (all forwards, then all backwards), 1F1B
// (Narayanan et al. 2021, PipeDream-Flush), interleaved 1F1B with virtual stages (Megatron-LM),
// the zero-bubble schedules ZB-H1, ZB-H2 and ZB-V (Qi et al. 2024), which split each backward
// into its input-gradient pass (B) and its weight-gradient pass (W) and move W into the bubbles,
// and DualPipe (DeepSeek-AI 2024) and its V form DualPipeV, which also split some backwards; on a
// micro-batch's first virtual stage a W right after its own B runs with it as one backward.
// Pure: the replay makes the bubbles, this only says the order.
// 1F1B runs p - stage - 1 warm-up forwards, then alternates; interleaved follows Megatron-Core's
// order over chunks: micro-batches in groups of N (its microbatch_group_size_per_vp_stage,
// default p), each group through every chunk in turn, the last group the rest, with
// (p - stage - 1) x 2 + (v - 1) x N warm-up steps.
#include <vector>

#include "config/schedule.hpp"

namespace trainsim {

// backward: input and weight gradients in one pass; backward_input and backward_weight: the two
// passes of a split backward.
enum class Pass { forward, backward, backward_input, backward_weight };

struct PipelineStep {
  Pass pass = Pass::forward;
  long long micro_batch = 0;
  int chunk = 0;              // model chunk on this rank; virtual stage = chunk * pp + stage
  // A whole backward paired with the forward before it (DualPipe's overlapped pairs): the two
  // may run interleaved (parallel.overlap_pairs).
  bool beside_previous = false;
};

// The virtual stage of a rank's chunk: chunk x pp + stage, or in ZB-V's V chunk 1 at
// 2 pp - 1 - stage; and the pipeline rank of a virtual stage.
int virtual_stage(Schedule schedule, int pp, int chunk, int stage);
int stage_of_virtual_stage(Schedule schedule, int pp, int virtual_stage);
// Whether a micro-batch enters the model (embedding) or leaves it (loss) at a virtual stage: the
// first and the last of the pp x chunks, or under DualPipe those of each direction.
bool first_virtual_stage(Schedule schedule, int pp, int virtual_stage);
bool last_virtual_stage(Schedule schedule, int pp, int chunks, int virtual_stage);

// `stage` in [0, pp), `micro_batches` per pipeline per step, `chunks` = vpp, `group`: the
// interleaved schedule's micro-batch group (0: pp). DualPipe sends micro-batches 0 to m/2 - 1
// down the pipeline (chunk 0) and the rest up it (chunk 1).
std::vector<PipelineStep> pipeline_schedule(Schedule schedule, int pp, int chunks, long long micro_batches, int stage,
                                            long long group = 0);

// The first micro-batch a rank's chunk runs: 0, or under DualPipe m / 2 going up (chunk 1).
long long first_micro_batch(Schedule schedule, int chunk, long long micro_batches);

// The most micro-batch chunks whose activations a rank holds at once under the schedule (from a
// forward until the pass that ends its backward; a split backward holds some until W).
long long peak_in_flight(const std::vector<PipelineStep>& steps);

} // namespace trainsim
