#pragma once
// Calibration from a user's own run: what was measured (a step time, or a PyTorch profiler trace
// that also splits it into kernels and NCCL), how the two efficiencies trainsim cannot know for a
// machine are moved towards it, and the calibration file that carries them to other scenarios.
// Pure: the simulations in between are the CLI's (one per process).
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace trainsim {

// One training step as measured on rank 0.
struct MeasuredStep {
  double step_s = 0;
  // From a profile: GPU time in compute kernels (their union over streams) and in NCCL kernels
  // (summed, as trainsim sums each collective's time); negative when only a step time was given.
  double compute_s = -1;
  double comm_s = -1;
  int steps = 1;       // steps the profile averaged
  std::string source;  // "a measured step time of 1.234 s", or the profile's file name
  bool split() const { return compute_s >= 0; }
};

// A PyTorch profiler (Kineto) trace in Chrome trace JSON, as torch.profiler's
// export_chrome_trace or tensorboard_trace_handler writes it: steps are its ProfilerStep#N spans,
// kernels the "kernel" events of its first GPU; NCCL kernels are those named nccl*.
// InputError naming the file when it is not such a trace.
MeasuredStep read_profile(const std::filesystem::path& file);

// The two parameters calibrate fits.
struct Efficiencies {
  double matmul = 0.55;    // compute.matmul_efficiency
  double bandwidth = 1.0;  // comm.bandwidth_efficiency
};

// What one simulation with given efficiencies gave, on the rank the summary reports.
struct SimulatedStep {
  double step_s = 0;
  double compute_s = 0;  // compute, recompute and optimizer
  double comm_s = 0;     // every kind's transfer time, summed
};

// The next efficiencies to simulate, from those tried so far (oldest first, at least one).
// Compute time is nearly linear in 1/matmul efficiency and transfer time in 1/bandwidth
// efficiency (a part of each, latencies and memory-bound work, does not scale), so each efficiency
// is fitted by a secant step in its inverse through the last two tries that differ in it; with
// one try, the time is taken as all scaling. With only a step time the matmul efficiency fits the
// step (a pipeline's bubble scales with it too). NaN where the time did not change between two
// tries (it does not depend on that efficiency); the results are not clamped to [0.01, 1].
using Try = std::pair<Efficiencies, SimulatedStep>;
Efficiencies next_efficiencies(const MeasuredStep& measured, const std::vector<Try>& tried);

// Relative gap between a simulation and the measurement on what is fitted (the largest of the
// compute and communication gaps with a profile, else the step time's).
double fit_gap(const MeasuredStep& measured, const SimulatedStep& simulated);

// The calibration file: the GPU it was fitted on, compute.model = roofline and the two fitted
// efficiencies, with a comment saying against what and how far the fit moved.
struct CalibrationResult {
  std::string scenario;  // as given
  std::string gpu;       // the platform's GPU model
  MeasuredStep measured;
  Efficiencies before, after;
  SimulatedStep simulated_before, simulated_after;
};
std::string calibration_file_text(const CalibrationResult& result);

// "1 step", "3 steps".
std::string steps_text(int steps);
// "+1.5 %", "-17.0 %", "+0.0 %" for a relative change.
std::string signed_percent(double fraction);

} // namespace trainsim
