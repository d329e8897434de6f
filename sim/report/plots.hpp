#pragma once
// The pictures of a run, as SVG written by trainsim (report/svg): memory over time per rank,
// the pipeline as a Gantt chart, where the step time and the peak memory go, host memory and NVMe
// over time when a run offloads; and report.html, one self-contained page with the summary and
// the plots.
// Memory bands keep one point per pixel column, the column's fullest, so the drawn top is the
// peak; the Gantt merges a micro-batch's consecutive kernels unless the gap would show and lists
// in its legend exactly the colours it drew; legends wrap at the canvas edge (0.6 em per
// character). Each panel, row and bar carries its data extent as data-* attributes, which the
// tests compare with summary.json. report.html is XHTML, so an XML parser reads it.
#include <string>
#include <vector>

#include "layout/layout.hpp"
#include "cluster/gpu.hpp"
#include "report/metrics.hpp"
#include "report/spans.hpp"

namespace trainsim {

// One panel per rank in `ranks` (those with a memory timeline): memory stacked by category
// over simulated time, the GPU's capacity as a dashed line, the peak marked.
std::string memory_svg(const StepMetrics& metrics, const std::vector<int>& ranks, const std::vector<GpuInfo>& gpus,
                       const std::vector<RankCoords>& coords);

// Host memory and NVMe over the step, per node with a timeline (StepMetrics::node_timelines; the
// fullest node first, at most four nodes), one panel per tier the node uses, its capacity dashed
// when within four times the peak (else in the title only); "" when no node offloads anything.
std::string node_memory_svg(const StepMetrics& metrics, const std::vector<GpuInfo>& gpus);

// One row per recorded rank: forward, backward, recompute and optimizer kernels, with
// micro-batch numbers where they fit, transfers by kind in a strip below, idle left blank.
std::string pipeline_svg(const Workload& workload, const SpanRecorder& spans, const StepMetrics& metrics,
                         const std::vector<RankCoords>& coords);

// The critical rank's step breakdown as one bar, and the peak rank's memory at its peak.
std::string breakdown_svg(const StepMetrics& metrics);

// A table of the report: communication by kind, stage peaks, the settings.
struct ReportTable {
  std::string name;   // its class in the page
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string note;   // a line under it ("" for none)
};

struct ReportPage {
  std::string title;                                          // run name
  std::vector<std::pair<std::string, std::string>> facts;     // scenario and results, in order
  std::string bottleneck;
  std::string memory_svg, pipeline_svg, breakdown_svg;
  std::string node_memory_svg;                                // "" without offloading
  std::vector<ReportTable> tables;                            // after the breakdown, in order
};

// Well-formed XHTML: inline SVG, inline style, no scripts, fonts or links to fetch.
std::string report_html(const ReportPage& page);

} // namespace trainsim
