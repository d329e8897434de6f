#include "report/kernel_report.hpp"

#include <cstdio>
#include <set>
#include <sstream>
#include <vector>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "model/kernel_timing.hpp"
#include "program/compute_time.hpp"

namespace trainsim {

namespace {

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string shape_of(const Kernel& kernel) {
  if (kernel.kind == KernelKind::memory)
    return "";
  std::string shape = format_double(kernel.m) + "x" + format_double(kernel.n) + "x" + format_double(kernel.k);
  if (kernel.batch != 1)
    shape += " (x" + format_double(kernel.batch) + ")";
  return shape;
}

struct TimedKernel {
  const Kernel* kernel;
  KernelTime time;
};

std::vector<TimedKernel> timed(const KernelSet& set, const GpuInfo& gpu, const StepInfo& step,
                               const KernelProfile& profile) {
  std::vector<TimedKernel> kernels;
  for (const Kernel& kernel : set.kernels)
    kernels.push_back({&kernel, time_kernel(kernel, gpu, step.precision, step.efficiency.allow_tf32, profile)});
  return kernels;
}

// The kernel sets some rank's program uses whose name starts with `piece`, in the workload's order;
// of sets named alike (the same piece on ranks with programs of their own, as the places of an
// expert-parallel group under uneven routing) the first.
std::vector<const KernelSet*> used_sets(const Workload& workload, const std::string& piece) {
  std::vector<bool> used(workload.kernel_sets.size(), false);
  const Program* last = nullptr;
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    const Program& program = workload.program(rank);
    if (&program == last)
      continue;
    last = &program;
    for (const Op& op : program.ops)
      if (op.kernel_set >= 0)
        used[static_cast<std::size_t>(op.kernel_set)] = true;
  }
  std::vector<const KernelSet*> sets;
  std::string names;
  std::set<std::string> shown;
  for (std::size_t i = 0; i < used.size(); ++i) {
    if (!used[i])
      continue;
    const KernelSet& set = workload.kernel_sets[i];
    if (!shown.insert(set.name).second)
      continue;
    names += (names.empty() ? "" : ", ") + set.name;
    if (set.name.rfind(piece, 0) == 0)
      sets.push_back(&set);
  }
  if (sets.empty())
    throw InputError("--piece " + piece + ": no piece of this step starts with it; accepted: " + names);
  return sets;
}

double achieved_flops(const Kernel& kernel, const KernelTime& time) {
  return time.seconds > 0 ? kernel.flops * kernel.count / time.seconds : 0.0;
}

} // namespace

std::string kernel_table(const Workload& workload, const GpuInfo& gpu, const std::string& piece) {
  const KernelProfile& profile = kernel_profile(gpu, workload.step.efficiency.attention);
  const StepInfo& step = workload.step;
  std::ostringstream out;
  out << "kernels on " << gpu.model << " (" << to_string(gpu.architecture) << ", " << gpu.sm_count << " SMs, "
      << to_string(step.precision)
      << (runs_fused_attention(workload) ? std::string(", attention ") + to_string(profile.attention_kernel) : "")
      << "), one micro-batch on one rank\n";
  if (step.efficiency.model == ComputeModel::roofline)
    out << "compute.model = roofline: runs time each piece at fixed efficiencies; compute.model = kernels times them as below\n";
  for (const KernelSet* shown : used_sets(workload, piece)) {
    const KernelSet& set = *shown;
    const std::vector<TimedKernel> kernels = timed(set, gpu, step, profile);
    double total = 0;
    for (const TimedKernel& k : kernels)
      total += k.time.seconds;
    out << '\n' << set.name << "  " << format_seconds(total) << '\n';
    std::vector<std::vector<std::string>> rows = {
        {"  kernel", "kind", "M x N x K", "GFLOP", "MB", "time", "TFLOP/s", "of peak", "bound", "share"}};
    for (const TimedKernel& k : kernels) {
      const Kernel& kernel = *k.kernel;
      const double flops = achieved_flops(kernel, k.time);
      rows.push_back({"  " + kernel.name + (kernel.count != 1 ? " x" + format_double(kernel.count) : ""),
                      to_string(kernel.kind), shape_of(kernel), fixed(kernel.flops * kernel.count / 1e9, 2),
                      fixed(kernel.bytes * kernel.count / 1e6, 1), format_seconds(k.time.seconds),
                      flops > 0 ? fixed(flops / 1e12, 1) : "", flops > 0 ? fixed(100 * k.time.efficiency, 1) + " %" : "",
                      k.time.bound, fixed(total > 0 ? 100 * k.time.seconds / total : 0, 1) + " %"});
    }
    out << aligned_columns(rows, {false, false, false, true, true, true, true, true, false, true});
  }
  return out.str();
}

nlohmann::json kernel_json(const Workload& workload, const GpuInfo& gpu, const std::string& piece) {
  const KernelProfile& profile = kernel_profile(gpu, workload.step.efficiency.attention);
  nlohmann::json pieces = nlohmann::json::array();
  for (const KernelSet* shown : used_sets(workload, piece)) {
    const KernelSet& set = *shown;
    nlohmann::json kernels = nlohmann::json::array();
    double total = 0;
    for (const TimedKernel& k : timed(set, gpu, workload.step, profile)) {
      const Kernel& kernel = *k.kernel;
      total += k.time.seconds;
      kernels.push_back({{"name", kernel.name}, {"kind", to_string(kernel.kind)}, {"m", kernel.m}, {"n", kernel.n},
                         {"k", kernel.k}, {"batch", kernel.batch}, {"count", kernel.count},
                         {"flops", kernel.flops * kernel.count}, {"bytes", kernel.bytes * kernel.count},
                         {"seconds", k.time.seconds}, {"fraction_of_peak", k.time.efficiency},
                         {"bound", k.time.bound}});
    }
    pieces.push_back({{"piece", set.name}, {"seconds", total}, {"kernels", kernels}});
  }
  return {{"gpu", gpu.model}, {"architecture", to_string(gpu.architecture)}, {"sm_count", gpu.sm_count},
          {"precision", to_string(workload.step.precision)},
          {"attention_kernel", runs_fused_attention(workload) ? to_string(profile.attention_kernel) : "none"},
          {"pieces", pieces}};
}

} // namespace trainsim
