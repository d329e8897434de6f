#pragma once
// trace.json: the recorded ranks' ops in the Chrome trace-event format, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open. One process per rank (named with its
// coordinates and host), one thread per stream, a slice per op (name, bytes, FLOPs, layer,
// micro-batch in args), a memory counter track per rank, and flow arrows from each send to
// its receive when both ranks are recorded. Timestamps in microseconds.
#include <string>
#include <vector>

#include "layout/layout.hpp"
#include "cluster/gpu.hpp"
#include "report/metrics.hpp"
#include "report/spans.hpp"

namespace trainsim {

// `coords` may be empty (a replayed trace has no layout).
std::string chrome_trace(const Workload& workload, const std::vector<GpuInfo>& gpus,
                         const std::vector<RankCoords>& coords, const SpanRecorder& spans, const StepMetrics& metrics);

// "dp0 tp3 pp1 cp0", or "" without coordinates.
std::string coordinates_label(const std::vector<RankCoords>& coords, int rank);

} // namespace trainsim
