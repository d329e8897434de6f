// trainsim calibrate: fits compute.matmul_efficiency (and, from a profile, comm.bandwidth_efficiency)
// so that the scenario simulates what the user measured on their own machine; each guess is a
// `trainsim run` in a worker process, as sweeps run them.
#include <algorithm>
#include <cmath>
#include <iostream>

#include "calibrate/calibration.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/workers.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "config/scenario.hpp"
#include "config/scenario_options.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace trainsim::cli {
namespace {

// The fit stops when the fitted quantities are within 0.1 % of the measured. Secant steps in the
// inverse efficiency are exact where time is linear in it, so a few suffice; more mean the time
// hardly depends on the efficiency.
constexpr double close_enough = 1e-3;
constexpr int max_simulations = 16;

// Four significant digits: what a calibration can claim, and a file people can read.
double rounded(double value) {
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(value)));
  return std::round(value * scale) / scale;
}

// The next value of one efficiency, kept within [0.01, 1]: a guess beyond a bound is tried at the
// bound once; beyond a bound already tried, the scenario cannot be the run that was measured.
// Where the time did not change between two tries (memory-bound pieces ignore the matmul
// efficiency until it is low enough), the efficiency is halved or doubled towards the measurement.
double within_bounds(double next, double last, bool simulated_faster, const std::string& key, const std::string& measured,
                     const std::string& simulated) {
  const std::string accepted = "; accepted: a measurement of the scenario's model, batch, recompute and parallelism on "
                               "hardware like its platform's";
  if (std::isnan(next) && (simulated_faster ? last > 0.01 : last < 1))
    next = simulated_faster ? last / 2 : last * 2;
  if (std::isnan(next))
    throw InputError("calibrate: the simulated " + simulated + " does not change with " + key + " down to " +
                     format_double(last) + ", so it cannot reach the measured " + measured + accepted);
  if (next > 1 && last == 1)
    throw InputError("calibrate: " + key + " would need to exceed 1 to reach the measured " + measured +
                     " (the scenario simulates " + simulated + " at 1)" + accepted);
  if (next < 0.01 && last == 0.01)
    throw InputError("calibrate: " + key + " would need to fall below 0.01 to reach the measured " + measured +
                     " (the scenario simulates " + simulated + " at 0.01)" + accepted);
  return std::clamp(next, 0.01, 1.0);
}

} // namespace

int calibrate_command(const std::vector<std::string>& arguments) {
  CommonOptions options;
  std::string scenario_file, step_time, profile;
  po::options_description visible("Options");
  visible.add_options()("step-time", po::value(&step_time), "the measured time of one training step, e.g. 1.84s")(
      "profile", po::value(&profile),
      "a PyTorch profiler trace (Chrome trace JSON) of a few steps on rank 0: fits compute and NCCL separately")(
      "set", po::value(&options.overrides)->composing(), "override a scenario key: section.key=value (repeatable)")(
      "out,o", po::value(&options.out), "the calibration file (default: results/SCENARIO/calibration.ini)");
  visible.add(common_options(options));
  po::options_description all = visible;
  all.add_options()("scenario", po::value(&scenario_file)->required(), "scenario INI file");
  po::positional_options_description positional;
  positional.add("scenario", 1);
  if (!parse_arguments("calibrate", arguments, visible, all, positional,
                       "trainsim calibrate SCENARIO (--step-time T | --profile TRACE.json) [--set KEY=VALUE] [-o FILE]",
                       options, false))
    return 0;
  if (step_time.empty() == profile.empty())
    throw InputError("calibrate: give the measurement as --step-time T (e.g. 1.84s) or --profile TRACE.json, one of them");

  const Scenario scenario = load_scenario(scenario_file, options.overrides);
  if (scenario.efficiency.model == ComputeModel::kernels)
    throw InputError(scenario_file + ": compute.model = kernels: calibrate fits the roofline's "
                                     "compute.matmul_efficiency; accepted: roofline or auto");
  if (!scenario.calibration.file.empty())
    throw InputError(scenario_file + ": platform.calibration is set; calibrate starts from the scenario's own "
                                     "efficiencies: accepted: no platform.calibration");
  MeasuredStep measured;
  if (!profile.empty()) {
    measured = read_profile(profile);
  } else {
    try {
      measured.step_s = parse_seconds(step_time);
    } catch (const UnitError& error) {
      throw InputError("--step-time " + step_time + ": " + error.what());
    }
    if (!(measured.step_s > 0))
      throw InputError("--step-time " + step_time + ": accepted: a positive time such as 1.84s");
    measured.source = "a measured step of " + format_seconds(measured.step_s);
  }
  const fs::path out = options.out.empty() ? fs::path("results") / scenario.name / "calibration.ini" : fs::path(options.out);
  // Made before the simulations, so that a folder that cannot be made fails first.
  OutputDirectory out_folder(out.has_parent_path() ? out.parent_path() : fs::path("."));

  // Every simulation runs the scenario with the roofline, the --set overrides and the guess.
  std::vector<std::string> fixed = options.overrides;
  fixed.push_back("compute.model=roofline");
  // The roofline times attention with the other matmuls: a kernel named for compute.model =
  // auto has nothing to time here.
  fixed.push_back("compute.attention_kernel=auto");
  int simulations = 0;
  const auto simulate = [&](const Efficiencies& guess) {
    const SweepConfig config{static_cast<std::size_t>(simulations++),
                             {{"compute.matmul_efficiency", format_double(guess.matmul)},
                              {"comm.bandwidth_efficiency", format_double(guess.bandwidth)}}};
    const SweepRow result = run_one_worker(scenario_file, fixed, config, options.simulation);
    if (result.status != "ok")
      throw InputError("calibrate: simulating " + scenario_file + " with " + config.label() + ": " + result.reason);
    std::cerr << "trainsim calibrate: " << config.label() << ": step " << format_seconds(result.step_time_s)
              << ", compute " << format_seconds(result.compute_s) << ", communication " << format_seconds(result.comm_s)
              << '\n';
    return result;
  };
  const auto step_of = [](const SweepRow& row) { return SimulatedStep{row.step_time_s, row.compute_s, row.comm_s}; };

  CalibrationResult result;
  result.scenario = scenario_file;
  result.measured = measured;
  result.before = {scenario.efficiency.matmul, scenario.bandwidth_efficiency};
  const SweepRow first = simulate(result.before);
  result.gpu = first.gpu;
  result.simulated_before = step_of(first);
  // A profile's NCCL time and the scenario's communication come together or not at all: one
  // without the other is a different run (or a trace of another rank).
  if (measured.split() && (measured.comm_s > 0) != (first.comm_s > 0))
    throw InputError(measured.comm_s > 0
                         ? profile + ": " + format_seconds(measured.comm_s) + " per step in NCCL kernels, but " + scenario_file +
                               " communicates nothing; accepted: a profile of the scenario's run (or --step-time)"
                         : profile + ": no NCCL kernels, but " + scenario_file + " communicates " +
                               format_seconds(first.comm_s) + " per step; accepted: a profile of the scenario's run, "
                               "its NCCL kernels included (or --step-time)");
  std::vector<Try> tried = {{result.before, result.simulated_before}};
  while (fit_gap(measured, tried.back().second) > close_enough) {
    const SimulatedStep& simulated = tried.back().second;
    if (simulations == max_simulations)
      throw InputError("calibrate: no fit within 0.1 % after " + std::to_string(max_simulations) + " simulations (last gap " +
                       signed_percent(fit_gap(measured, simulated)) + "); the time hardly depends on the efficiencies");
    const Efficiencies next = next_efficiencies(measured, tried);
    const Efficiencies& last = tried.back().first;
    Efficiencies guess;
    guess.matmul = measured.split()
                       ? within_bounds(next.matmul, last.matmul, simulated.compute_s < measured.compute_s,
                                       "compute.matmul_efficiency", "compute time " + format_seconds(measured.compute_s),
                                       "compute time " + format_seconds(simulated.compute_s))
                       : within_bounds(next.matmul, last.matmul, simulated.step_s < measured.step_s,
                                       "compute.matmul_efficiency", "step time " + format_seconds(measured.step_s),
                                       "step time " + format_seconds(simulated.step_s));
    guess.bandwidth = measured.split() && measured.comm_s > 0
                          ? within_bounds(next.bandwidth, last.bandwidth, simulated.comm_s < measured.comm_s,
                                          "comm.bandwidth_efficiency",
                                          "NCCL time " + format_seconds(measured.comm_s),
                                          "communication " + format_seconds(simulated.comm_s))
                          : last.bandwidth;
    tried.push_back({guess, step_of(simulate(guess))});
  }
  const Efficiencies& guess = tried.back().first;
  // The file holds rounded efficiencies; the residual reported is theirs.
  result.after = {rounded(guess.matmul), rounded(guess.bandwidth)};
  result.simulated_after = step_of(simulate(result.after));

  write_file_atomically(out, calibration_file_text(result));
  out_folder.keep();
  const auto change = [](double before, double after) {
    return format_double(before) + " -> " + format_double(after) + " (" + signed_percent(after / before - 1) + ")";
  };
  std::cout << "trainsim calibrate: " << scenario.name << " on " << result.gpu << ", against " << measured.source
            << (measured.split() ? " (" + steps_text(measured.steps) + ")" : "") << '\n'
            << "  compute.matmul_efficiency  " << change(result.before.matmul, result.after.matmul) << '\n';
  if (measured.split() && measured.comm_s > 0)
    std::cout << "  comm.bandwidth_efficiency  " << change(result.before.bandwidth, result.after.bandwidth) << '\n';
  else
    std::cout << "  comm.bandwidth_efficiency  " << format_double(result.before.bandwidth)
              << " (not fitted: a step time alone cannot split compute from communication; --profile can)\n";
  std::cout << "  step time                  measured " << format_seconds(measured.step_s) << "; simulated "
            << format_seconds(result.simulated_before.step_s) << " before, " << format_seconds(result.simulated_after.step_s)
            << " after (" << signed_percent(result.simulated_after.step_s / measured.step_s - 1) << ")\n";
  if (measured.split())
    std::cout << "  compute                    measured " << format_seconds(measured.compute_s) << "; simulated "
              << format_seconds(result.simulated_after.compute_s) << " after ("
              << signed_percent(result.simulated_after.compute_s / measured.compute_s - 1) << ")\n"
              << "  communication              measured " << format_seconds(measured.comm_s) << " in NCCL kernels; simulated "
              << format_seconds(result.simulated_after.comm_s) << " after\n";
  std::cout << "  simulations                " << simulations << '\n'
            << "  output                     " << out.string() << " (use: --set platform.calibration=" << out.string() << ")\n";
  return 0;
}

} // namespace trainsim::cli
