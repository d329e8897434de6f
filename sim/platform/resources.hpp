#pragma once
// The platform's shared resources as reports count them: links by what they join, drives, CPUs.
// Plain data, found when a workload is bound to the platform; no SimGrid here.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace trainsim {

// What a link joins, decided once per link when the platform is bound, from its name (the
// platform files and the cluster generator name links by what they join).
enum class LinkClass : std::uint8_t { loopback, nvlink, pcie_nvme, pcie_uplink, pcie_gpu, nic, network };

// nvlink (names holding nvlink, nvswitch, bridge or mesh), pcie_nvme (a drive's own link),
// pcie_uplink (pcie-up), pcie_gpu (other pcie), nic, else network; loopback for SimGrid's link
// from a host to itself.
LinkClass link_class(const std::string& link_name);

// An NVLink link that is a port of an NVSwitch (named nvlink or nvswitch), not a bridge between
// two GPUs or a mesh link: what NVLink SHARP needs.
bool nvswitch_port(const std::string& link_name);

// The reports' name of a class: "nvlink", "pcie-nvme", ...; "" for loopback, which is not reported.
const char* to_string(LinkClass link_class);

// What a link carries with one more flow's `share` added to `carried`: the sum, or on a FATPIPE
// link, whose flows do not share it, the largest.
inline double with_flow(double carried, double share, bool fatpipe) {
  return fatpipe ? std::max(carried, share) : carried + share;
}

// Resources that replay events name by index.
struct PlatformResources {
  struct Link {
    std::string name;
    LinkClass kind = LinkClass::network;
    double bandwidth = 0;  // bytes/s
    // SimGrid's FATPIPE (a switch's backplane): every flow across it gets the whole bandwidth,
    // flows do not share it.
    bool fatpipe = false;
  };
  struct Drive {
    std::string name;
    // A drive serves reads and writes side by side, together at most at the rate of its faster
    // direction (SimGrid's default for a disk).
    double combined_bandwidth = 0;
  };
  std::vector<Link> links;        // every link of the platform, in SimGrid's order
  std::vector<Drive> drives;      // by name: drives of one name are counted as one
  std::vector<std::string> cpus;  // hosts that run work handed over by the ranks
};

} // namespace trainsim
