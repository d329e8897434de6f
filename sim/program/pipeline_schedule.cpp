#include "program/pipeline_schedule.hpp"

#include <algorithm>

namespace trainsim {

std::vector<PipelineStep> pipeline_schedule(Schedule schedule, int pp, int chunks, long long micro_batches, int stage) {
  std::vector<PipelineStep> steps;
  const long long m = micro_batches;
  if (schedule == Schedule::gpipe) {
    for (long long mb = 0; mb < m; ++mb)
      steps.push_back({true, mb, 0});
    for (long long mb = 0; mb < m; ++mb)
      steps.push_back({false, mb, 0});
    return steps;
  }
  if (schedule == Schedule::one_f_one_b || chunks == 1) {
    const long long warmup = std::min<long long>(pp - stage - 1, m);
    for (long long mb = 0; mb < warmup; ++mb)
      steps.push_back({true, mb, 0});
    for (long long i = 0; i < m - warmup; ++i) {
      steps.push_back({true, warmup + i, 0});
      steps.push_back({false, i, 0});
    }
    for (long long mb = m - warmup; mb < m; ++mb)
      steps.push_back({false, mb, 0});
    return steps;
  }
  // Interleaved (Megatron-LM): micro-batches go through the chunks in groups of pp.
  const long long total = m * chunks;
  const long long group = static_cast<long long>(pp) * chunks;
  const auto micro_batch_of = [&](long long k) { return (k / group) * pp + k % pp; };
  const auto forward_chunk = [&](long long k) { return static_cast<int>((k % group) / pp); };
  const auto backward_chunk = [&](long long k) { return chunks - 1 - forward_chunk(k); };
  const long long warmup =
      m == pp ? total : std::min<long long>(static_cast<long long>(pp - stage - 1) * 2 + (chunks - 1) * pp, total);
  for (long long k = 0; k < warmup; ++k)
    steps.push_back({true, micro_batch_of(k), forward_chunk(k)});
  for (long long k = 0; k < total - warmup; ++k) {
    steps.push_back({true, micro_batch_of(warmup + k), forward_chunk(warmup + k)});
    steps.push_back({false, micro_batch_of(k), backward_chunk(k)});
  }
  for (long long k = total - warmup; k < total; ++k)
    steps.push_back({false, micro_batch_of(k), backward_chunk(k)});
  return steps;
}

long long peak_in_flight(const std::vector<PipelineStep>& steps) {
  long long live = 0, peak = 0;
  for (const PipelineStep& step : steps) {
    live += step.forward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

} // namespace trainsim
