#include "platform/gpu.hpp"

#include "common/error.hpp"
#include "common/units.hpp"
#include "program/program.hpp"

namespace trainsim {

void check_node_targets(const Workload& workload, const std::vector<GpuInfo>& gpus) {
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    const GpuInfo& gpu = gpus[rank];
    if (rank > 0 && &workload.program(rank) == &workload.program(rank - 1) && gpu.cpu_host == gpus[rank - 1].cpu_host &&
        gpu.nvme_disk.empty() == gpus[rank - 1].nvme_disk.empty())
      continue;  // a replica on a node like its predecessor's: the same answer
    const std::string where = "rank " + std::to_string(rank) + " (" + gpu.host + ", node " + gpu.node + ")";
    for (const Op& op : workload.program(rank).ops) {
      const auto op_name = [&op] { return op.kind == OpKind::alloc ? "alloc " + op.tensor : op.name; };
      const bool uses_cpu = op.target == node_cpu || (op.kind == OpKind::alloc && op.device == Device::host);
      const bool uses_nvme = op.target == node_nvme || (op.kind == OpKind::alloc && op.device == Device::nvme);
      if (uses_cpu && gpu.cpu_host.empty())
        throw InputError(where + " op " + op_name() + " needs its node's CPU host and the platform has none: a <host> "
                         "with <prop id=\"role\" value=\"cpu\"/> in the node's zone or with <prop id=\"node\" value=\"" +
                         gpu.node + "\"/> (described clusters have one)");
      if (uses_nvme && gpu.nvme_disk.empty())
        throw InputError(where + " op " + op_name() + " needs an NVMe drive on its node's CPU host and the platform has "
                         "none (a <disk> in that host; described clusters: platform.nvme_per_node >= 1)");
      // Whether offloaded states fit is part of the answer: a tier of unknown size cannot say.
      if (op.kind == OpKind::alloc && op.device == Device::host && !(gpu.host_memory_capacity > 0))
        throw InputError("host " + gpu.cpu_host + " lacks property 'dram_capacity', which " + where +
                         " needs to place its offloaded states; accepted: a size such as 2TiB");
      if (op.kind == OpKind::alloc && op.device == Device::nvme && !(gpu.nvme_capacity > 0))
        throw InputError("the disks of host " + gpu.cpu_host + " lack property 'size', which " + where +
                         " needs to place its offloaded states; accepted: a size such as 3.84TB");
    }
  }
}

GpuInfo gpu_from_properties(const std::string& file, const std::string& host, const std::string& node, double speed,
                            const std::function<const char*(const char*)>& property) {
  const auto quantity = [&](const char* name, double (*parse)(std::string_view), const char* accepted) {
    const char* text = property(name);
    if (text == nullptr || *text == '\0')
      throw InputError(file + ": GPU host " + host + " lacks property '" + name + "'; accepted: " + accepted);
    try {
      const double value = parse(text);
      if (!(value > 0))
        throw UnitError(std::string("must be positive; accepted: ") + accepted);
      return value;
    } catch (const UnitError& error) {
      throw InputError(file + ": GPU host " + host + " property '" + name + "' = '" + text + "': " + error.what());
    }
  };
  GpuInfo gpu;
  gpu.host = host;
  gpu.node = node;
  const char* model = property("gpu");
  gpu.model = model ? model : "";
  if (gpu.model.empty())
    throw InputError(file + ": GPU host " + host + " has an empty 'gpu' property; accepted: the GPU model's name");
  if (!(speed > 0))
    throw InputError(file + ": GPU host " + host + " has speed 0; accepted: its dense 16-bit peak, e.g. 312Tf");
  gpu.speed = speed;
  gpu.hbm_capacity = quantity("hbm_capacity", parse_bytes, "a size such as 80GiB");
  gpu.hbm_bandwidth = quantity("hbm_bandwidth", parse_bandwidth, "a bandwidth such as 2039GBps");
  gpu.peak_fp32 = quantity("peak_fp32", parse_flops, "a FLOP rate such as 19.5Tf");
  gpu.peak_tf32 = quantity("peak_tf32", parse_flops, "a FLOP rate such as 156Tf");
  gpu.peak_fp16 = quantity("peak_fp16", parse_flops, "a FLOP rate such as 312Tf");
  gpu.peak_bf16 = quantity("peak_bf16", parse_flops, "a FLOP rate such as 312Tf");
  if (property("peak_fp8") != nullptr)
    gpu.peak_fp8 = quantity("peak_fp8", parse_flops, "a FLOP rate such as 1979Tf");
  return gpu;
}

} // namespace trainsim
