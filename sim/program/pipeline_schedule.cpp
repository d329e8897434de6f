#include "program/pipeline_schedule.hpp"

#include <algorithm>

namespace trainsim {

std::vector<PipelineStep> pipeline_schedule(Schedule schedule, int pp, int chunks, long long micro_batches, int stage) {
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
  if (splits_backward(schedule)) {
    // Qi et al. 2024, section 2: in time slot x stage i runs F of micro-batch x, B of x - (p-1-i)
    // and W of x - (p-1), those that exist. B follows F as soon as 1F1B would let it, so the
    // first stage keeps p micro-batches in flight as under 1F1B; W waits (p-1) slots and fills
    // the tail's bubbles: ZB-H1. ZB-H2 doubles both lags, warming up with 2(p-1-i) forwards
    // (2p-1 micro-batches in flight on the first stage) so that no stage waits.
    // A W right after its own B runs with it as one backward, as the authors' Megatron
    // implementation does (it keeps tensor parallelism's overlaps and its gathered inputs): on
    // the first stage always.
    const long long lag = schedule == Schedule::zb_h2 ? 2 : 1;
    const long long input_lag = lag * (pp - 1 - stage), weight_lag = lag * (pp - 1);
    const auto exists = [&](long long mb) { return mb >= 0 && mb < m; };
    for (long long x = 0; x < m + weight_lag; ++x) {
      if (exists(x))
        steps.push_back({forward, x, 0});
      if (exists(x - input_lag))
        steps.push_back({Pass::backward_input, x - input_lag, 0});
      if (!exists(x - weight_lag))
        continue;
      if (input_lag == weight_lag)
        steps.back().pass = backward;
      else
        steps.push_back({Pass::backward_weight, x - weight_lag, 0});
    }
    return steps;
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
  // Interleaved (Megatron-LM): micro-batches go through the chunks in groups of pp.
  const long long total = m * chunks;
  const long long group = static_cast<long long>(pp) * chunks;
  const auto forward_step = [&](long long k) {
    return PipelineStep{forward, (k / group) * pp + k % pp, static_cast<int>((k % group) / pp)};
  };
  const auto backward_step = [&](long long k) {
    PipelineStep step = forward_step(k);
    step.pass = backward;
    step.chunk = chunks - 1 - step.chunk;
    return step;
  };
  const long long warmup =
      m == pp ? total : std::min<long long>(static_cast<long long>(pp - stage - 1) * 2 + (chunks - 1) * pp, total);
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
