#pragma once
// `trainsim kernels`: each piece of the step (a layer's attention and MLP, forward and backward,
// the embedding, the head) as the kernels it launches on one GPU, with each kernel's shape, work,
// time, achieved FLOP/s and what bounds it.
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/gpu.hpp"
#include "program/program.hpp"

namespace trainsim {

// InputError when the GPU's generation has no kernel calibration.
// `piece`: only the pieces whose name starts with it (all when empty); InputError naming the
// pieces when none does.
std::string kernel_table(const Workload& workload, const GpuInfo& gpu, const std::string& piece = "");
nlohmann::json kernel_json(const Workload& workload, const GpuInfo& gpu, const std::string& piece = "");

} // namespace trainsim
