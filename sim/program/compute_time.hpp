#pragma once
// How long each compute op of a workload takes on the GPU of each rank: the sum of its kernels'
// times (model/kernel_timing), or its FLOPs and bytes at the scenario's fixed efficiencies (the
// roofline). compute.model decides which, per kind of GPU: kernels (an error for a GPU whose
// generation has no kernel calibration), roofline, or auto (kernels where calibrated). Kernel
// sets are timed once per kind of GPU, so the replay's cost per op is a lookup.
#include <cstddef>
#include <string>
#include <vector>

#include "cluster/gpu.hpp"
#include "model/kernel_timing.hpp"
#include "program/program.hpp"

namespace trainsim {

// The calibration that times this GPU's kernels one by one; nullptr when it is timed as a
// roofline. InputError under compute.model = kernels for a GPU without one.
const KernelProfile* kernel_timing_of(const ComputeEfficiency& efficiency, const GpuInfo& gpu);

// Whether the workload's layers launch a fused attention kernel (FlashAttention-style), whose
// implementation compute.attention_kernel picks; eager attention is GEMMs and a softmax.
bool runs_fused_attention(const Workload& workload);

// One line per kind of GPU, for the summary: "kernels (A100-SXM4-80GB: ampere calibration,
// attention fa2)",
// "roofline at 0.55 of peak FLOP/s and 0.8 of HBM bandwidth (RTX-4090-24GB: no kernel calibration)".
std::string compute_model_description(const Workload& workload, const std::vector<GpuInfo>& gpus);

class ComputeTimer {
public:
  ComputeTimer(const Workload& workload, const std::vector<GpuInfo>& gpus);
  // Seconds of a compute op on `rank`'s GPU (not for ops that run on a host CPU).
  double seconds(const Op& op, std::size_t rank) const;

private:
  const Workload& workload_;
  const std::vector<GpuInfo>& gpus_;
  std::vector<int> kind_of_rank_;                 // index into the two tables below
  std::vector<const KernelProfile*> profiles_;    // nullptr: the roofline
  std::vector<std::vector<double>> set_seconds_;  // per kind of GPU, per kernel set
};

} // namespace trainsim
