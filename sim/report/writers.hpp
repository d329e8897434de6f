#pragma once
// Reports written from metrics: the stdout summary table, summary.json and
// memory.csv for `run`/`replay`, and the memory-only report of `trainsim memory`.
// Everything here is deterministic: keys sorted, numbers printed round-trip.
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memory/memory_tracker.hpp"
#include "layout/layout.hpp"
#include "cluster/gpu.hpp"
#include "program/recompute_plan.hpp"
#include "report/metrics.hpp"
#include "report/plots.hpp"
#include "sweep/sweep.hpp"

namespace trainsim {

// What was run, as the reports name it.
struct RunInfo {
  std::string name;                              // scenario name, or the trace directory
  std::string platform;                          // platform file name
  std::map<std::string, std::string> settings;   // effective scenario keys (empty for a replayed trace)
  std::string layout;                            // e.g. "dp=16"
  std::string fidelity;                          // comm.fidelity the replay used: flows or fast
  std::string collectives;                       // how collectives ran (describe(CommTuning))
  std::string framework;                         // the framework imitated and its overlap (empty for a trace)
  std::string routing;                           // a mixture's uneven routing and what it loads; empty when even
  std::string experts;                           // under expert parallelism, the experts a rank holds and their states
  double uniform_routing_step_s = 0;             // under uneven routing, the step with uniform routing; 0: not run
  std::string calibration;                       // the calibration file and what it set; empty without one
  long long micro_batch = 0;                     // 0 when unknown
  long long grad_accum = 0;
  long long global_batch = 0;
  long long seq_len = 0;
  double training_tokens = 0;
  std::optional<RecomputePlan> recompute;        // absent for a replayed trace; the first rank's first chunk's
  double recompute_flops_per_step = 0;           // every rank's recompute FLOPs in a step
  std::vector<RankCoords> coords;                // per rank; empty for a replayed trace
};

// What limits the step, in one line: "compute-bound: 91.0% of the step computes; the largest
// overhead is exposed tp communication, 6.0% (rank 0)", "tp-communication-bound: ...", "idle-bound: ...",
// prefixed with "does not fit: ..." when a GPU overflows.
std::string bottleneck_line(const StepMetrics& metrics);

nlohmann::json summary_json(const StepMetrics& metrics, const Workload& workload, const std::vector<GpuInfo>& gpus,
                            const RunInfo& run);
void print_summary(std::ostream& out, const StepMetrics& metrics, const Workload& workload,
                   const std::vector<GpuInfo>& gpus, const RunInfo& run);
std::string memory_csv(const StepMetrics& metrics);
// The report page's table: model, platform, layout, fidelity, step time, throughput, MFU, peak.
// report.html's tables: communication and offload by kind on the critical rank, each pipeline
// stage's memory peak (with more than one), the settings.
std::vector<ReportTable> report_tables(const StepMetrics& metrics, const RunInfo& run);
std::vector<std::pair<std::string, std::string>> report_facts(const StepMetrics& metrics, const Workload& workload,
                                                              const std::vector<GpuInfo>& gpus, const RunInfo& run);

// `trainsim memory`: peaks from program order.
nlohmann::json memory_json(const std::vector<RankMemory>& ranks, const Workload& workload,
                           const std::vector<GpuInfo>& gpus, const RunInfo& run);
void print_memory(std::ostream& out, const std::vector<RankMemory>& ranks, const Workload& workload,
                  const std::vector<GpuInfo>& gpus, const RunInfo& run);

// One row of `trainsim memory --compare`: a value of the compared key and its memory per rank.
struct ComparisonRow {
  std::string value;
  std::vector<RankMemory> ranks;
  std::vector<GpuInfo> gpus;
};
// A markdown table: the breakdown at the peak rank's peak, the peak, and whether it fits.
void print_memory_comparison_table(std::ostream& out, const std::string& key, const std::vector<ComparisonRow>& rows);

// One strategy of `trainsim plan` that was simulated and fits; a plan lists them best first.
struct PlanEntry {
  int gpus = 0, dp = 1, tp = 1, pp = 1, vpp = 1, cp = 1;
  long long micro_batch = 1;
  int zero = 0;
  std::string recompute;
  std::string offload;
  std::string schedule;        // the pipeline schedule; empty without a pipeline
  SweepRow simulated;          // its throughput, step time, MFU, peak memory and bottleneck
  double time_to_train_s = 0;
  double gpu_hours = 0;
  std::string decisions;       // the memory techniques tried on its layout, and why each was left
  std::string sizes;           // its parallel sizes as reports name them: "dp=2 tp=2+sp pp=1 cp=1"
  int ep = 1;                  // a mixture's expert parallelism
  int etp = 1;                 // and its expert tensor parallelism (tp unless chosen otherwise)
  std::string dispatcher;      // and its token dispatcher (moe.dispatcher); empty without ep
  std::string fixed;           // plan --set: the settings every candidate took, "key=value key=value"
  double cost = -1;            // GPU-hours at plan --gpu-hour-price; -1: no price given
  bool within_deadline = true; // trains the tokens within plan --deadline (true without one)
};
// plan.csv and plan.json: one row per entry, ranked from 1 in the order given (those past the
// deadline last).
std::string plan_csv(const std::vector<PlanEntry>& entries);
nlohmann::json plan_json(const std::vector<PlanEntry>& entries);

} // namespace trainsim
