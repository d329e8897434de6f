#pragma once
// A whole run in this process: prepare a scenario (or a trace) on its platform, simulate it, and
// get its metrics and op spans back. Writing files is the caller's: the CLI writes the reports,
// a test reads the numbers. SimGrid holds one engine per process, so a process has one context
// and simulates once.
#include <filesystem>
#include <string>
#include <vector>

#include "engine/replay.hpp"
#include "platform/simulation_context.hpp"
#include "report/metrics.hpp"
#include "report/spans.hpp"
#include "run/prepared_run.hpp"

namespace trainsim {

// Loads the scenario's platform into `context` (a described cluster through a generated platform
// file) and builds the programs on its GPUs.
void load_platform_and_build(SimulationContext& context, PreparedRun& prepared);

// read_scenario and load_platform_and_build.
PreparedRun prepare(SimulationContext& context, const std::filesystem::path& scenario_file,
                    const std::vector<std::string>& overrides);

// A trace's programs on a platform file: what `trainsim replay` simulates, named after the
// trace's directory.
PreparedRun prepare_trace(SimulationContext& context, Workload workload, const std::filesystem::path& trace_directory,
                          const std::filesystem::path& platform_file, double training_tokens);

// The replay as the scenario's comm keys set it.
ReplaySettings replay_settings(const Scenario& scenario);

struct SimulatedRun {
  StepMetrics metrics;
  SpanRecorder spans;
};

// Replays the programs with the collectors listening: metrics of every rank, with the memory
// timelines of `timeline_ranks` (see StepCollector), and the op spans of `span_ranks`; with
// `progress`, a long replay tells where it stands on stderr (RunProgress).
SimulatedRun simulate(SimulationContext& context, const PreparedRun& prepared, const ReplaySettings& settings,
                      const std::vector<bool>& timeline_ranks, const std::vector<int>& span_ranks,
                      bool progress = false);

} // namespace trainsim
