#pragma once
// Running configurations as separate trainsim processes (SimGrid holds one simulation per
// process): used by sweep and plan.
#include <functional>
#include <string>
#include <vector>

#include "platform/simulation_context.hpp"
#include "sweep/sweep.hpp"

namespace trainsim::cli {

// Runs `trainsim run scenario --set fixed... --set config...` for each configuration, `jobs` at a
// time, killing any that runs longer than `timeout` seconds (0: no limit); `on_row` hears each
// result as it finishes: ok, invalid (the scenario refused it) or failed (crash, time limit).
void run_workers(const std::string& scenario, const std::vector<std::string>& fixed, const std::vector<SweepConfig>& todo,
                 int jobs, double timeout, const SimulationOptions& simulation,
                 const std::function<void(SweepRow)>& on_row);

// One configuration in one worker, waited for: its row.
SweepRow run_one_worker(const std::string& scenario, const std::vector<std::string>& fixed, const SweepConfig& config,
                        const SimulationOptions& simulation);

} // namespace trainsim::cli
