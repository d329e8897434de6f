#include "run/run.hpp"

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>

#include <unistd.h>

#include "common/files.hpp"
#include "report/run_progress.hpp"

namespace fs = std::filesystem;

namespace trainsim {

void load_platform_and_build(SimulationContext& context, PreparedRun& prepared) {
  const Scenario& scenario = prepared.scenario;
  std::vector<GpuInfo> platform_gpus;
  if (scenario.cluster) {
    // A described cluster goes through the same loader as a platform file.
    const fs::path generated =
        scratch_directory() / ("trainsim-" + std::to_string(::getpid()) + "-platform.xml");
    write_file_atomically(generated, platform_xml(*scenario.cluster));
    try {
      platform_gpus = context.load_platform(generated);
    } catch (...) {
      fs::remove(generated);
      throw;
    }
    fs::remove(generated);
    prepared.scenario.platform_file = "generated cluster (" + describe(*scenario.cluster) + ")";
    context.name_platform(prepared.scenario.platform_file);
  } else {
    platform_gpus = context.load_platform(scenario.platform_file);
  }
  build_programs(prepared, std::move(platform_gpus));
}

PreparedRun prepare(SimulationContext& context, const fs::path& scenario_file, const std::vector<std::string>& overrides) {
  PreparedRun prepared = read_scenario(scenario_file, overrides);
  load_platform_and_build(context, prepared);
  return prepared;
}

PreparedRun prepare_trace(SimulationContext& context, Workload workload, const fs::path& trace_directory,
                          const fs::path& platform_file, double training_tokens) {
  PreparedRun prepared;
  prepared.platform_gpus = context.load_platform(platform_file);
  prepared.gpus = gpus_for(prepared.platform_gpus, platform_file, workload.ranks());
  prepared.workload = std::move(workload);
  RunInfo& run = prepared.run;
  fs::path trace_path = trace_directory.lexically_normal();
  if (trace_path.filename().empty())
    trace_path = trace_path.parent_path();
  run.name = trace_path.filename().string();
  run.platform = platform_file.filename().string();
  run.layout = std::to_string(prepared.workload.ranks()) + " ranks, " + std::to_string(prepared.workload.groups.size()) +
               " groups";
  run.training_tokens = training_tokens;
  return prepared;
}

ReplaySettings replay_settings(const Scenario& scenario) {
  ReplaySettings settings;
  settings.channels = scenario.channels;
  settings.fast_collectives = scenario.fast_collectives;
  settings.comm_slowdown = scenario.comm_slowdown;
  settings.bandwidth_efficiency = scenario.bandwidth_efficiency;
  settings.tuning = scenario.comm_tuning;
  return settings;
}

SimulatedRun simulate(SimulationContext& context, const PreparedRun& prepared, const ReplaySettings& settings,
                      const std::vector<bool>& timeline_ranks, const std::vector<int>& span_ranks,
                      bool progress) {
  const Workload& workload = prepared.workload;
  const std::vector<GpuInfo>& gpus = prepared.gpus;
  note_work("while simulating " + program_scale(workload));
  StepCollector collector(workload, gpus, timeline_ranks, prepared.scenario.reserve);
  SpanRecorder spans(workload, span_ranks);
  std::vector<ReplayObserver*> listening{&collector, &spans};
  std::optional<RunProgress> reporter;
  if (progress) {
    reporter.emplace(workload, std::cerr, ::isatty(STDERR_FILENO) != 0);
    listening.push_back(&*reporter);
  }
  ObserverFanout observers(listening);
  replay(context, workload, gpus, settings, observers);
  return {collector.finish(prepared.run.training_tokens), std::move(spans)};
}

} // namespace trainsim
