#include "calibrate/calibration.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"

namespace trainsim {
namespace {

using json = nlohmann::json;

constexpr double microseconds = 1e-6;  // Chrome trace timestamps and durations

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// A complete ("X") event's field, or `fallback` when it is absent or not a number.
double number_field(const json& event, const char* key, double fallback) {
  const auto it = event.find(key);
  return it != event.end() && it->is_number() ? it->get<double>() : fallback;
}

// The total length of the union of [start, end) intervals.
double union_length(std::vector<std::pair<double, double>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  double total = 0, start = 0, end = 0;
  bool open = false;
  for (const auto& [from, to] : intervals) {
    if (open && from <= end) {
      end = std::max(end, to);
      continue;
    }
    if (open)
      total += end - start;
    start = from;
    end = to;
    open = true;
  }
  return open ? total + end - start : total;
}

std::string percent_change(double before, double after) { return signed_percent(after / before - 1); }

} // namespace

std::string steps_text(int steps) { return std::to_string(steps) + (steps == 1 ? " step" : " steps"); }

std::string signed_percent(double fraction) {
  // What rounds to zero prints as +0.0, never -0.0.
  const double percent = std::fabs(fraction) < 5e-4 ? 0.0 : fraction * 100;
  char text[32];
  std::snprintf(text, sizeof text, "%+.1f %%", percent);
  return text;
}

MeasuredStep read_profile(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in)
    throw InputError(file.string() + ": no such file; expected a PyTorch profiler trace (Chrome trace JSON)");
  json trace;
  try {
    trace = json::parse(in);
  } catch (const json::exception&) {
    throw InputError(file.string() + ": not JSON; expected a PyTorch profiler trace (Chrome trace JSON), as "
                                     "torch.profiler's export_chrome_trace writes it");
  }
  const json* events = trace.is_array() ? &trace : nullptr;
  if (trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array())
    events = &trace["traceEvents"];
  if (events == nullptr)
    throw InputError(file.string() + ": no traceEvents array; expected a PyTorch profiler trace (Chrome trace JSON)");

  std::vector<double> steps;
  struct Kernel {
    double device, start, end;
    bool nccl;
  };
  std::vector<Kernel> kernels;
  for (const json& event : *events) {
    if (!event.is_object() || event.value("ph", "") != "X" || !event.contains("name") || !event["name"].is_string())
      continue;
    const std::string name = event["name"].get<std::string>();
    const std::string category = lower(event.value("cat", ""));
    const double start = number_field(event, "ts", NAN), duration = number_field(event, "dur", NAN);
    if (!(std::isfinite(start) && duration >= 0))
      continue;
    // Longer than a day: no training step or kernel; the file is not what it seems.
    constexpr double one_day = 86400e6;
    if (duration > one_day)
      throw InputError(file.string() + ": event '" + name + "' lasts " + format_double(duration) +
                       " us, more than a day; expected a trace of training steps (timestamps in microseconds)");
    // The CPU's step spans; newer profilers mirror them on the GPU timeline, counted once here.
    if (name.rfind("ProfilerStep#", 0) == 0 && category != "gpu_user_annotation") {
      steps.push_back(duration);
    } else if (category == "kernel") {
      const json* args = event.contains("args") && event["args"].is_object() ? &event["args"] : nullptr;
      const double device = args ? number_field(*args, "device", number_field(event, "pid", 0)) : number_field(event, "pid", 0);
      kernels.push_back({device, start, start + duration, lower(name).find("nccl") != std::string::npos});
    }
  }
  if (steps.empty())
    throw InputError(file.string() + ": no ProfilerStep#N spans; record a few steps with torch.profiler.profile(schedule=...) "
                                     "and call prof.step() after each");
  if (kernels.empty())
    throw InputError(file.string() + ": no GPU kernels (events of category 'kernel'); record with "
                                     "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]");
  // One rank: the first GPU the trace shows.
  const double device = std::min_element(kernels.begin(), kernels.end(), [](const Kernel& a, const Kernel& b) {
                          return a.device < b.device;
                        })->device;
  std::vector<std::pair<double, double>> compute;
  double nccl = 0;
  for (const Kernel& kernel : kernels) {
    if (kernel.device != device)
      continue;
    if (kernel.nccl)
      nccl += kernel.end - kernel.start;
    else
      compute.emplace_back(kernel.start, kernel.end);
  }
  MeasuredStep measured;
  measured.steps = static_cast<int>(steps.size());
  double total = 0;
  for (double step : steps)
    total += step;
  measured.step_s = total / measured.steps * microseconds;
  measured.compute_s = union_length(std::move(compute)) / measured.steps * microseconds;
  measured.comm_s = nccl / measured.steps * microseconds;
  measured.source = file.filename().string();
  if (!(measured.step_s > 0 && measured.compute_s > 0))
    throw InputError(file.string() + ": its steps or compute kernels last no time; expected a trace of training steps");
  return measured;
}

Efficiencies next_efficiencies(const MeasuredStep& measured, const std::vector<Try>& tried) {
  const Try& last = tried.back();
  // One efficiency: `of` picks it, `time` the simulated time it should bring to `target`, and
  // `scaling` the part of that time taken to scale with 1/efficiency on a first try.
  const auto fit = [&](double Efficiencies::*of, double target, double SimulatedStep::*time, double scaling) -> double {
    const double u = 1 / (last.first.*of), t = last.second.*time;
    for (auto earlier = tried.rbegin() + 1; earlier != tried.rend(); ++earlier) {
      const double u0 = 1 / (earlier->first.*of), t0 = earlier->second.*time;
      if (u0 == u)
        continue;
      if (std::fabs(t - t0) <= 1e-12 * std::fabs(t))
        return NAN;
      const double next_u = u + (target - t) * (u - u0) / (t - t0);
      return next_u > 0 ? 1 / next_u : INFINITY;
    }
    // The scaling part becomes what is wanted, the rest stays.
    const double wanted = scaling + target - t;
    return wanted > 0 ? (last.first.*of) * scaling / wanted : INFINITY;
  };
  Efficiencies next = last.first;
  if (!measured.split()) {
    next.matmul = fit(&Efficiencies::matmul, measured.step_s, &SimulatedStep::step_s, last.second.compute_s);
    return next;
  }
  next.matmul = fit(&Efficiencies::matmul, measured.compute_s, &SimulatedStep::compute_s, last.second.compute_s);
  if (measured.comm_s > 0)
    next.bandwidth = fit(&Efficiencies::bandwidth, measured.comm_s, &SimulatedStep::comm_s, last.second.comm_s);
  return next;
}

double fit_gap(const MeasuredStep& measured, const SimulatedStep& simulated) {
  if (!measured.split())
    return std::fabs(simulated.step_s / measured.step_s - 1);
  const double compute = std::fabs(simulated.compute_s / measured.compute_s - 1);
  const double comm = measured.comm_s > 0 && simulated.comm_s > 0 ? std::fabs(simulated.comm_s / measured.comm_s - 1) : 0.0;
  return std::max(compute, comm);
}

std::string calibration_file_text(const CalibrationResult& result) {
  const MeasuredStep& measured = result.measured;
  const auto simulated_line = [](const SimulatedStep& step) {
    return "step " + format_seconds(step.step_s) + ", compute " + format_seconds(step.compute_s) + ", communication " +
           format_seconds(step.comm_s);
  };
  const bool bandwidth_fitted = measured.split() && measured.comm_s > 0;
  std::ostringstream out;
  out << "# trainsim calibrate " << result.scenario << " on " << result.gpu << ", against " << measured.source;
  if (measured.split())
    out << " (" << steps_text(measured.steps) << ")";
  out << "\n# measured: step " << format_seconds(measured.step_s);
  if (measured.split())
    out << ", compute kernels " << format_seconds(measured.compute_s) << ", NCCL kernels " << format_seconds(measured.comm_s);
  out << "\n# simulated before: " << simulated_line(result.simulated_before)
      << "\n# simulated after:  " << simulated_line(result.simulated_after) << "; step time "
      << percent_change(measured.step_s, result.simulated_after.step_s) << " from the measured"
      << "\n# compute.matmul_efficiency " << format_double(result.before.matmul) << " -> " << format_double(result.after.matmul)
      << " (" << percent_change(result.before.matmul, result.after.matmul) << ")";
  if (bandwidth_fitted)
    out << "; comm.bandwidth_efficiency " << format_double(result.before.bandwidth) << " -> "
        << format_double(result.after.bandwidth) << " (" << percent_change(result.before.bandwidth, result.after.bandwidth) << ")";
  out << "\n# A scenario uses it with platform.calibration = this file (its GPU must be " << result.gpu << ").\n"
      << "[calibration]\ngpu = " << result.gpu << "\n"
      << "[compute]\nmodel = roofline\nmatmul_efficiency = " << format_double(result.after.matmul) << "\n";
  // A bandwidth efficiency the scenario set is part of what the matmul efficiency was fitted with.
  if (bandwidth_fitted || result.after.bandwidth != 1)
    out << "[comm]\nbandwidth_efficiency = " << format_double(result.after.bandwidth) << "\n";
  return out.str();
}

} // namespace trainsim
