#pragma once
// The SimGrid side of a run, behind a header that does not include SimGrid:
// creates the one engine of this process, applies the network-model defaults
// for GPU fabrics (overridable with --sg-cfg), loads a platform file and lists
// its GPUs in natural host-name order (rank r runs on the r-th GPU).
// The defaults are network/model:CM02, network/crosstraffic:0 and network/TCP-gamma:0: SimGrid's
// LV08 TCP model would inflate NVLink and InfiniBand transfers by its latency and bandwidth
// factors and window. GPU hosts are the hosts with a `gpu` property and hbm_capacity,
// hbm_bandwidth, peak_fp32, peak_tf32, peak_fp16, peak_bf16; a host's speed is its dense 16-bit
// peak; its node is its zone (or its `node` property). A node's CPU is a host with role=cpu.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cluster/gpu.hpp"

namespace trainsim {

struct SimulationOptions {
  std::vector<std::string> sg_cfg;  // "key:value", applied after our defaults
  std::vector<std::string> sg_log;  // SimGrid --log settings, e.g. "root.thres:info"
};

// The network-model settings applied before any --sg-cfg (see docs/architecture.md).
const std::vector<std::string>& default_network_config();

// InputError naming the first --sg-cfg or --sg-log setting SimGrid refuses (an unknown key or
// value, a malformed log setting). SimGrid aborts the process on some of these, so they are
// tried in a short-lived child process; commands call this once, before any work.
void check_simulation_options(const SimulationOptions& options);

class SimulationContext {
public:
  explicit SimulationContext(const SimulationOptions& options);
  ~SimulationContext();
  SimulationContext(const SimulationContext&) = delete;
  SimulationContext& operator=(const SimulationContext&) = delete;

  // Throws InputError naming the file, host and property.
  std::vector<GpuInfo> load_platform(const std::filesystem::path& file);
  // How errors name the platform: the file loaded, or what it was generated from.
  const std::filesystem::path& platform_file() const { return platform_file_; }
  void name_platform(const std::filesystem::path& name) { platform_file_ = name; }

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::filesystem::path platform_file_;
};

} // namespace trainsim
