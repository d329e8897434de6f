#pragma once
// A run made ready, without SimGrid: the scenario and its model read, the per-rank programs
// built on the platform's GPUs, and the names the reports give the run. `run/run.hpp` loads the
// platform and simulates; `run/memory_estimate.hpp` accounts memory without simulating.
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "config/scenario.hpp"
#include "model/model.hpp"
#include "cluster/gpu.hpp"
#include "program/program.hpp"
#include "report/writers.hpp"

namespace trainsim {

struct PreparedRun {
  Scenario scenario;                   // the defaults for a replayed trace
  ModelSpec model;                     // empty for a replayed trace
  std::vector<GpuInfo> platform_gpus;  // every GPU of the platform
  std::vector<GpuInfo> gpus;           // one per rank
  Workload workload;
  RunInfo run;
};

// The scenario file with its --set overrides, and its model: all that --show-config needs.
PreparedRun read_scenario(const std::filesystem::path& file, const std::vector<std::string>& overrides);

// Builds the per-rank programs on the platform's first GPUs (rank r on platform_gpus[r]); the
// smallest of them bounds the memory plan. Names the run for the reports.
void build_programs(PreparedRun& prepared, std::vector<GpuInfo> platform_gpus);

// The first `ranks` GPUs of a platform; InputError naming the platform when it has fewer.
std::vector<GpuInfo> gpus_for(std::vector<GpuInfo> gpus, const std::filesystem::path& platform, std::size_t ranks);

// What the process is building or simulating, for the message when memory runs out: " while
// building the programs of 1024 ranks", " while simulating 1024 ranks of up to 19312640 ops";
// empty before a layout is known. Written before the work starts, so reading it allocates nothing.
const std::string& work_in_progress();
void note_work(const std::string& doing);
// "1024 ranks of up to 18860 ops"
std::string program_scale(const Workload& workload);

} // namespace trainsim
