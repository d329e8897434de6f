#pragma once
// What the simulator needs to know about one GPU, read from the properties of its SimGrid host
// when the platform is loaded (SimulationContext). Plain data beside the catalog of GPUs the
// cluster descriptions use, below every module that reads it: no SimGrid here.
#include <functional>
#include <string>
#include <vector>

#include "common/precision.hpp"

namespace trainsim {

// The GPU generations whose kernels trainsim times (model/kernel_timing): each has its own
// calibration of GEMM, attention and streaming efficiency.
enum class GpuArchitecture { unknown, volta, ampere, ada, hopper, blackwell, cdna3 };
const char* to_string(GpuArchitecture architecture);

struct GpuInfo {
  std::string host;              // SimGrid host name
  std::string node;              // the zone holding it: GPUs of one node share a zone
  std::string model;             // e.g. "A100-SXM4-80GB"
  double speed = 0;              // host speed in FLOP/s: the dense 16-bit tensor peak
  double hbm_capacity = 0;       // bytes
  double hbm_bandwidth = 0;      // bytes/s
  double peak_fp32 = 0;          // FLOP/s, dense
  double peak_tf32 = 0;
  double peak_fp16 = 0;
  double peak_bf16 = 0;
  double peak_fp8 = 0;           // 0: the GPU has no fp8 tensor cores
  // Streaming multiprocessors (compute units): what GEMM and attention tiles are spread over.
  // From the `sm_count` and `architecture` properties, else from the catalog entry of `model`;
  // 0 and unknown when neither names them.
  int sm_count = 0;
  GpuArchitecture architecture = GpuArchitecture::unknown;
  // The node's CPU host (a host with role=cpu on the same node), where offloaded work runs and
  // offloaded states live; empty when the platform has none.
  std::string cpu_host;
  std::string nvme_disk;         // the node's NVMe drive serving this GPU (drives dealt out in turn); empty: none
  double host_memory_capacity = 0;  // bytes of the node's DRAM (shared by its GPUs); 0: unknown
  double nvme_capacity = 0;      // bytes of the node's NVMe drives together; 0: unknown
};

// Reads a GPU from its host's properties (`property` returns nullptr for a missing one).
// Throws InputError naming the file, the host and the property.
GpuInfo gpu_from_properties(const std::string& file, const std::string& host, const std::string& node, double speed,
                            const std::function<const char*(const char*)>& property);

// The node of each GPU of `gpus`, numbered in order of first appearance.
std::vector<int> node_numbers(const std::vector<GpuInfo>& gpus);

// The dense peak a matmul in this precision reaches on this GPU.
inline double matmul_peak(const GpuInfo& gpu, Precision precision, bool allow_tf32) {
  switch (precision) {
  case Precision::fp32: return allow_tf32 && gpu.peak_tf32 > 0 ? gpu.peak_tf32 : gpu.peak_fp32;
  case Precision::fp16: return gpu.peak_fp16;
  case Precision::bf16: return gpu.peak_bf16;
  case Precision::fp8: return gpu.peak_fp8;
  }
  return gpu.speed;
}

} // namespace trainsim
