#include "program/compute_time.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "common/text.hpp"
#include "model/costs.hpp"

namespace trainsim {

const KernelProfile* kernel_timing_of(const ComputeEfficiency& efficiency, const GpuInfo& gpu) {
  switch (efficiency.model) {
  case ComputeModel::roofline: return nullptr;
  case ComputeModel::kernels: return &kernel_profile(gpu, efficiency.attention);
  case ComputeModel::automatic: return find_kernel_profile(gpu, efficiency.attention);
  }
  return nullptr;
}

bool runs_fused_attention(const Workload& workload) {
  for (const KernelSet& set : workload.kernel_sets)
    for (const Kernel& kernel : set.kernels)
      if (kernel.kind == KernelKind::attention_forward || kernel.kind == KernelKind::attention_backward)
        return true;
  return false;
}

std::string compute_model_description(const Workload& workload, const std::vector<GpuInfo>& gpus) {
  const ComputeEfficiency& efficiency = workload.step.efficiency;
  std::set<std::string> seen;
  std::string description;
  const bool fused_attention = runs_fused_attention(workload);
  for (std::size_t rank = 0; rank < workload.ranks() && rank < gpus.size(); ++rank) {
    const GpuInfo& gpu = gpus[rank];
    if (!seen.insert(gpu.model).second)
      continue;
    const std::string generation = to_string(gpu.architecture);
    const KernelProfile* profile = kernel_timing_of(efficiency, gpu);
    std::string line = profile != nullptr
                           ? "kernels (" + gpu.model + ": " + generation + " calibration" +
                                 (fused_attention ? std::string(", attention ") + to_string(profile->attention_kernel)
                                                  : std::string()) +
                                 ")"
                           : "roofline at " + format_double(efficiency.matmul) + " of peak FLOP/s and " +
                                 format_double(efficiency.memory) + " of HBM bandwidth (" + gpu.model +
                                 (efficiency.model == ComputeModel::roofline ? ": compute.model = roofline)"
                                                                              : ": no kernel calibration for " + generation + ")");
    description += (description.empty() ? "" : "; ") + line;
  }
  return description;
}

ComputeTimer::ComputeTimer(const Workload& workload, const std::vector<GpuInfo>& gpus)
    : workload_(workload), gpus_(gpus) {
  const StepInfo& step = workload.step;
  std::map<std::string, int> kinds;  // GPUs of one model time kernels alike
  for (std::size_t rank = 0; rank < workload.ranks() && rank < gpus.size(); ++rank) {
    const GpuInfo& gpu = gpus[rank];
    const auto [found, added] = kinds.emplace(gpu.model, static_cast<int>(profiles_.size()));
    kind_of_rank_.push_back(found->second);
    if (!added)
      continue;
    const KernelProfile* profile = kernel_timing_of(step.efficiency, gpu);
    profiles_.push_back(profile);
    std::vector<double>& seconds = set_seconds_.emplace_back();
    if (profile != nullptr)
      for (const KernelSet& set : workload.kernel_sets)
        seconds.push_back(kernel_set_seconds(set, gpu, step.precision, step.efficiency.allow_tf32, *profile));
  }
}

double ComputeTimer::seconds(const Op& op, std::size_t rank) const {
  const StepInfo& step = workload_.step;
  const GpuInfo& gpu = gpus_[rank];
  const int kind = kind_of_rank_[rank];
  const KernelProfile* profile = profiles_[kind];
  if (profile == nullptr)
    return std::max(0.0, kernel_seconds(Work{op.flops, op.bytes}, gpu, step.precision, step.efficiency));
  if (op.kernel_set >= 0)
    return set_seconds_[kind][op.kernel_set];
  if (op.flops <= 0 && op.bytes <= 0)
    return 0.0;
  return opaque_kernel_seconds(Work{op.flops, op.bytes}, gpu, step.precision, step.efficiency.allow_tf32, *profile);
}

} // namespace trainsim
