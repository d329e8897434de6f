#include "report/resource_collector.hpp"

#include <algorithm>
#include <map>

namespace trainsim {

void ResourceCollector::resources_bound(const PlatformResources& resources) {
  resources_ = resources;
  link_bytes_.assign(resources.links.size(), 0.0);
  drives_.assign(resources.drives.size(), {});
  cpus_.assign(resources.cpus.size(), {});
}

void ResourceCollector::link_carried(const std::vector<int>& links, double bytes) {
  for (int link : links)
    link_bytes_[link] += bytes;
}

void ResourceCollector::cpu_worked(int cpu, double seconds, double bytes) {
  cpus_[cpu].busy_s += seconds;
  cpus_[cpu].bytes += bytes;
}

void ResourceCollector::drive_worked(int drive, bool read, double seconds, double bytes) {
  DriveUse& use = drives_[drive];
  use.bytes += bytes;
  (read ? use.read_s : use.write_s) += seconds;
}

std::vector<ResourceUse> ResourceCollector::uses() const {
  std::map<std::string, ResourceUse> by_kind;
  const auto add = [&](const std::string& kind, const std::string& name, double busy_s, double bytes) {
    if (kind.empty() || (!(bytes > 0) && !(busy_s > 0)))
      return;
    ResourceUse& use = by_kind[kind];
    use.kind = kind;
    ++use.count;
    use.bytes += bytes;
    if (busy_s > use.busy_s) {
      use.busy_s = busy_s;
      use.busiest = name;
    }
  };
  for (std::size_t i = 0; i < link_bytes_.size(); ++i) {
    const PlatformResources::Link& link = resources_.links[i];
    add(to_string(link.kind), link.name, link_bytes_[i] / link.bandwidth, link_bytes_[i]);
  }
  std::map<std::string, std::size_t> drives_by_name, cpus_by_name;
  for (std::size_t i = 0; i < drives_.size(); ++i)
    drives_by_name.emplace(resources_.drives[i].name, i);
  for (std::size_t i = 0; i < cpus_.size(); ++i)
    cpus_by_name.emplace(resources_.cpus[i], i);
  for (const auto& [name, i] : drives_by_name) {
    const DriveUse& use = drives_[i];
    // Busy for the least time its traffic needs: each direction at its own rate, both together
    // at most at the faster one's.
    add("nvme", name, std::max({use.read_s, use.write_s, use.bytes / resources_.drives[i].combined_bandwidth}),
        use.bytes);
  }
  for (const auto& [name, i] : cpus_by_name)
    add("cpu", name, cpus_[i].busy_s, cpus_[i].bytes);
  std::vector<ResourceUse> uses;
  for (auto& [kind, use] : by_kind)
    uses.push_back(std::move(use));
  return uses;
}

} // namespace trainsim
