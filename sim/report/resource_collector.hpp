#pragma once
// How busy the platform's shared resources were over a replay: a collector of the replay's
// resource events, like SimGrid's link_load plugin (per-resource state fed by events, nothing
// counted inside the replay loop). Links are busy for the bytes they carried over their
// bandwidth, drives for their reads and writes, CPUs for the work handed to them.
#include <string>
#include <vector>

#include "engine/observer.hpp"

namespace trainsim {

// How busy one class of shared resource was: links by what they join (nvlink, pcie-gpu,
// pcie-uplink, nic, network), the NVMe drives (nvme), the nodes' CPUs (cpu); the metrics add
// the GPUs' compute (gpu).
struct ResourceUse {
  std::string kind;
  int count = 0;            // resources of that class in the platform that were used
  std::string busiest;      // the one that was busy longest
  double busy_s = 0;        // its busy time: bytes / bandwidth (links, drives) or work at full speed (CPUs)
  double bytes = 0;         // moved through all of them (links: summed over each link crossed)
};

class ResourceCollector : public ReplayObserver {
public:
  void op_started(int, OpId, double) override {}
  void op_finished(int, OpId, double) override {}
  void op_transferred(int, OpId, const Transfer&) override {}
  void resources_bound(const PlatformResources& resources) override;
  void link_carried(const std::vector<int>& links, double bytes) override;
  void cpu_worked(int cpu, double seconds, double bytes) override;
  void drive_worked(int drive, bool read, double seconds, double bytes) override;

  // The classes that carried anything (links by LinkClass, "nvme" for drives, "cpu"), by kind;
  // within a class, resources are visited links in platform order, drives and CPUs by name.
  std::vector<ResourceUse> uses() const;

private:
  struct DriveUse {
    double read_s = 0;
    double write_s = 0;
    double bytes = 0;
  };
  struct CpuUse {
    double busy_s = 0;
    double bytes = 0;
  };
  PlatformResources resources_;
  std::vector<double> link_bytes_;
  std::vector<DriveUse> drives_;
  std::vector<CpuUse> cpus_;
};

} // namespace trainsim
