#include "program/pipeline_schedule.hpp"

#include <algorithm>
#include <deque>
#include <initializer_list>
#include <utility>

namespace trainsim {

int virtual_stage(Schedule schedule, int pp, int chunk, int stage) {
  return v_placement(schedule) && chunk == 1 ? 2 * pp - 1 - stage : chunk * pp + stage;
}

int stage_of_virtual_stage(Schedule schedule, int pp, int virtual_stage) {
  return v_placement(schedule) && virtual_stage >= pp ? 2 * pp - 1 - virtual_stage : virtual_stage % pp;
}

bool first_virtual_stage(Schedule schedule, int pp, int virtual_stage) {
  return virtual_stage == 0 || (two_directions(schedule) && virtual_stage == pp);
}

bool last_virtual_stage(Schedule schedule, int pp, int chunks, int virtual_stage) {
  return virtual_stage == pp * chunks - 1 || (two_directions(schedule) && virtual_stage == pp - 1);
}

long long first_micro_batch(Schedule schedule, int chunk, long long micro_batches) {
  return two_directions(schedule) ? chunk * (micro_batches / 2) : 0;
}

namespace {

// Qi et al. 2024, section 6 (ZB-V, handcrafted for T_F = T_B = T_W; the order PyTorch's
// ScheduleZBVZeroBubble also runs): on rank r of p, with n = max(m, 2p - 1) micro-batches (those
// past m left out), warm up with 2(p - r) - 1 forwards of chunk 0, then r pairs F1 F0, then
// p - r triples F1 B1 W1; in the steady state F0 B0 W0 F1 B1 W1; cool down with r pairs B0 B1,
// p - r pairs B0 W0, and the W left, chunk 1's first. Its first stage holds at most 2p chunks,
// as many layers as 1F1B's p micro-batches.
std::vector<PipelineStep> zb_v_schedule(int pp, long long m, int rank) {
  const long long n = std::max<long long>(m, 2LL * pp - 1);
  std::vector<PipelineStep> steps;
  long long next[3][2] = {};  // per pass (F, B, W) and chunk: the next micro-batch
  const auto run = [&](Pass pass, int chunk) {
    const int kind = pass == Pass::forward ? 0 : pass == Pass::backward_input ? 1 : 2;
    const long long mb = next[kind][chunk]++;
    if (mb < m)
      steps.push_back({pass, mb, chunk});
  };
  const Pass F = Pass::forward, B = Pass::backward_input, W = Pass::backward_weight;
  // `count` times the passes (pass, chunk) in order.
  const auto repeat = [&](int count, std::initializer_list<std::pair<Pass, int>> passes) {
    for (int i = 0; i < count; ++i)
      for (const auto& [pass, chunk] : passes)
        run(pass, chunk);
  };
  repeat(2 * (pp - rank) - 1, {{F, 0}});
  repeat(rank, {{F, 1}, {F, 0}});
  repeat(pp - rank, {{F, 1}, {B, 1}, {W, 1}});
  while (next[0][1] < next[0][0] || next[0][0] < n) {
    if (next[0][0] < n)
      run(F, 0);
    repeat(1, {{B, 0}, {W, 0}, {F, 1}, {B, 1}, {W, 1}});
  }
  repeat(rank, {{B, 0}, {B, 1}});
  repeat(pp - rank, {{B, 0}, {W, 0}});
  while (next[2][1] < n)
    run(W, 1);
  while (next[2][0] < n)
    run(W, 0);
  return steps;
}

// The eight steps DeepSeek's DualPipe and DualPipeV share (deepseek-ai/DualPipe), on a rank at
// `position` r of `ranks` p (DualPipeV: its rank of pp; DualPipe: its distance from the nearer
// end, of pp / 2) with n micro-batches in each of its two phases; `chunk` is the phase and
// `micro_batch` counts within it. Phase 0's forwards start the warm-up: 2(p - r - 1) of them;
// r + 1 pairs F0 F1; p - r - 1 triples B1 W F1 (W: the oldest weight-gradient pass held back);
// n - 2p + r + 1 pairs of overlapped (F0 with a whole backward of phase 1, then F1 with one of
// phase 0; with `first_pair_apart` the first F0 and B1 not overlapped, as DualPipe's middle ranks
// run them); p - r - 1 pairs B1 (whole), F1 with B0; r + 1 pairs B1 B0, whole until the middle of
// them, input gradients only from there; p - r - 1 pairs W, B0 (input gradients); the r + 1 W
// left. The backward of an overlapped pair is marked beside_previous.
std::vector<PipelineStep> dual_phases(long long p, long long r, long long n, bool first_pair_apart) {
  std::vector<PipelineStep> steps;
  long long next_forward[2] = {}, next_backward[2] = {};
  std::deque<PipelineStep> held_weights;  // W passes owed, oldest first
  const auto forward = [&](int phase) { steps.push_back({Pass::forward, next_forward[phase]++, phase}); };
  const auto backward = [&](int phase, bool split, bool beside_forward = false) {
    const PipelineStep step{split ? Pass::backward_input : Pass::backward, next_backward[phase]++, phase,
                            beside_forward};
    steps.push_back(step);
    if (split)
      held_weights.push_back({Pass::backward_weight, step.micro_batch, phase});
  };
  const auto held_weight = [&] {
    if (held_weights.empty())
      return;
    steps.push_back(held_weights.front());
    held_weights.pop_front();
  };
  for (long long i = 0; i < 2 * (p - r - 1); ++i)
    forward(0);
  for (long long i = 0; i < r + 1; ++i) {
    forward(0);
    forward(1);
  }
  for (long long i = 0; i < p - r - 1; ++i) {
    backward(1, true);
    held_weight();
    forward(1);
  }
  for (long long i = 0; i < n - 2 * p + r + 1; ++i) {
    forward(0);
    backward(1, false, !(i == 0 && first_pair_apart));
    forward(1);
    backward(0, false, true);
  }
  for (long long i = 0; i < p - r - 1; ++i) {
    backward(1, false);
    forward(1);
    backward(0, false, true);
  }
  bool split = false;
  for (long long i = 0; i < r + 1; ++i) {
    split = split || (i == (r + 1) / 2 && r % 2 == 1);
    backward(1, split);
    split = split || (i == (r + 1) / 2 && r % 2 == 0);
    backward(0, split);
  }
  for (long long i = 0; i < p - r - 1; ++i) {
    held_weight();
    backward(0, true);
  }
  while (!held_weights.empty())
    held_weight();
  return steps;
}

// DualPipeV (DeepSeek's DualPipe cut in half, the order PyTorch's ScheduleDualPipeV runs): the V
// of ZB-V, its two phases its two chunks, each micro-batch through both, fed so that each rank
// runs a forward of one chunk beside a whole backward of the other through the steady state.
// The last rank runs its first F0 and B1 apart, as both DeepSeek's DualPipeV and PyTorch's do.
std::vector<PipelineStep> dualpipev_schedule(int pp, long long m, int rank) {
  return dual_phases(pp, rank, m, rank == pp - 1);
}

// DualPipe (DeepSeek-AI 2024; the order of deepseek-ai/DualPipe's DualPipe.step): rank r and rank
// pp - 1 - r run the same steps, r's phase 0 being its chunk going down and the other's its chunk
// going up; the middle two ranks do not overlap their first pair.
std::vector<PipelineStep> dualpipe_schedule(int pp, long long m, int rank) {
  const int half_ranks = pp / 2;
  const int position = std::min(rank, pp - 1 - rank);
  const int second_half = rank >= half_ranks ? 1 : 0;
  std::vector<PipelineStep> steps = dual_phases(half_ranks, position, m / 2, position == half_ranks - 1);
  for (PipelineStep& step : steps) {
    step.chunk ^= second_half;
    step.micro_batch += first_micro_batch(Schedule::dualpipe, step.chunk, m);
  }
  return steps;
}

// On a micro-batch's first virtual stage, whose input gradient goes nowhere, a W right after its
// own B (same micro-batch and chunk) runs with it as one backward, as the authors' Megatron
// implementation does: it keeps tensor parallelism's overlaps. Elsewhere that would hold the
// input gradient back from the previous stage until W is done as well.
std::vector<PipelineStep> joined_backwards(std::vector<PipelineStep> steps, Schedule schedule, int pp, int stage) {
  std::vector<PipelineStep> joined;
  for (const PipelineStep& step : steps) {
    PipelineStep* previous = joined.empty() ? nullptr : &joined.back();
    if (step.pass == Pass::backward_weight && previous && previous->pass == Pass::backward_input &&
        previous->micro_batch == step.micro_batch && previous->chunk == step.chunk &&
        first_virtual_stage(schedule, pp, virtual_stage(schedule, pp, step.chunk, stage)))
      previous->pass = Pass::backward;
    else
      joined.push_back(step);
  }
  return joined;
}

} // namespace

std::vector<PipelineStep> pipeline_schedule(Schedule schedule, int pp, int chunks, long long micro_batches, int stage,
                                            long long group) {
  std::vector<PipelineStep> steps;
  const long long m = micro_batches;
  const Pass forward = Pass::forward, backward = Pass::backward;
  if (schedule == Schedule::gpipe) {
    for (long long mb = 0; mb < m; ++mb)
      steps.push_back({forward, mb, 0});
    for (long long mb = 0; mb < m; ++mb)
      steps.push_back({backward, mb, 0});
    return steps;
  }
  if (schedule == Schedule::zb_v)
    return joined_backwards(zb_v_schedule(pp, m, stage), schedule, pp, stage);
  if (schedule == Schedule::dualpipev)
    return joined_backwards(dualpipev_schedule(pp, m, stage), schedule, pp, stage);
  if (schedule == Schedule::dualpipe)
    return joined_backwards(dualpipe_schedule(pp, m, stage), schedule, pp, stage);
  if (splits_backward(schedule)) {
    // Qi et al. 2024, section 2: in time slot x stage i runs F of micro-batch x, B of x - (p-1-i)
    // and W of x - (p-1), those that exist. B follows F as soon as 1F1B would let it, so the
    // first stage keeps p micro-batches in flight as under 1F1B; W waits (p-1) slots and fills
    // the tail's bubbles: ZB-H1. ZB-H2 doubles both lags, warming up with 2(p-1-i) forwards
    // (2p-1 micro-batches in flight on the first stage) so that no stage waits. (On the first
    // stage each W follows its B: whole backwards.)
    const long long lag = schedule == Schedule::zb_h2 ? 2 : 1;
    const long long input_lag = lag * (pp - 1 - stage), weight_lag = lag * (pp - 1);
    const auto exists = [&](long long mb) { return mb >= 0 && mb < m; };
    for (long long x = 0; x < m + weight_lag; ++x) {
      if (exists(x))
        steps.push_back({forward, x, 0});
      if (exists(x - input_lag))
        steps.push_back({Pass::backward_input, x - input_lag, 0});
      if (exists(x - weight_lag))
        steps.push_back({Pass::backward_weight, x - weight_lag, 0});
    }
    return joined_backwards(std::move(steps), schedule, pp, stage);
  }
  if (schedule == Schedule::one_f_one_b || chunks == 1) {
    const long long warmup = std::min<long long>(pp - stage - 1, m);
    for (long long mb = 0; mb < warmup; ++mb)
      steps.push_back({forward, mb, 0});
    for (long long i = 0; i < m - warmup; ++i) {
      steps.push_back({forward, warmup + i, 0});
      steps.push_back({backward, i, 0});
    }
    for (long long mb = m - warmup; mb < m; ++mb)
      steps.push_back({backward, mb, 0});
    return steps;
  }
  // Interleaved (Megatron-Core's get_schedule_table): micro-batches go through the chunks in
  // groups of N, the last group the rest; backwards take the chunks in reverse.
  const long long total = m * chunks;
  const long long n = group > 0 ? group : pp;
  std::vector<PipelineStep> table;
  for (long long first = 0; first < m; first += n)
    for (int chunk = 0; chunk < chunks; ++chunk)
      for (long long mb = first; mb < std::min(first + n, m); ++mb)
        table.push_back({forward, mb, chunk});
  const auto forward_step = [&](long long k) { return table[static_cast<std::size_t>(k)]; };
  const auto backward_step = [&](long long k) {
    PipelineStep step = forward_step(k);
    step.pass = backward;
    step.chunk = chunks - 1 - step.chunk;
    return step;
  };
  const long long warmup =
      m == pp ? total : std::min<long long>(static_cast<long long>(pp - stage - 1) * 2 + (chunks - 1) * n, total);
  for (long long k = 0; k < warmup; ++k)
    steps.push_back(forward_step(k));
  for (long long k = 0; k < total - warmup; ++k) {
    steps.push_back(forward_step(warmup + k));
    steps.push_back(backward_step(k));
  }
  for (long long k = total - warmup; k < total; ++k)
    steps.push_back(backward_step(k));
  return steps;
}

long long peak_in_flight(const std::vector<PipelineStep>& steps) {
  long long live = 0, peak = 0;
  for (const PipelineStep& step : steps) {
    if (step.pass == Pass::forward)
      ++live;
    else if (step.pass != Pass::backward_input)
      --live;
    peak = std::max(peak, live);
  }
  return peak;
}

} // namespace trainsim
