#include <doctest/doctest.h>

#include "report/resource_collector.hpp"

using namespace trainsim;

namespace {

PlatformResources two_nvlinks_a_nic_a_drive_two_cpus() {
  PlatformResources resources;
  resources.links = {{"gpu0-nvlink", LinkClass::nvlink, 100e9},
                     {"gpu1-nvlink", LinkClass::nvlink, 50e9},
                     {"gpu0-nic", LinkClass::nic, 25e9},
                     {"__loopback__", LinkClass::loopback, 1e12}};
  resources.drives = {{"nvme0", 6e9}};
  resources.cpus = {"node1-cpu", "node0-cpu"};
  return resources;
}

} // namespace

TEST_CASE("links are busy for the bytes they carried over their bandwidth, counted per class") {
  ResourceCollector collector;
  collector.resources_bound(two_nvlinks_a_nic_a_drive_two_cpus());
  collector.link_carried({0, 1}, 10e9);  // gpu0 -> gpu1: both NVLinks
  collector.link_carried({0}, 10e9);
  collector.link_carried({3}, 5e9);      // a loopback is not reported
  const std::vector<ResourceUse> uses = collector.uses();
  REQUIRE(uses.size() == 1);
  // gpu0-nvlink: 20 GB / 100 GB/s = 0.2 s; gpu1-nvlink: 10 GB / 50 GB/s = 0.2 s, not busier.
  CHECK(uses[0].kind == "nvlink");
  CHECK(uses[0].count == 2);
  CHECK(uses[0].busiest == "gpu0-nvlink");
  CHECK(uses[0].busy_s == doctest::Approx(0.2));
  CHECK(uses[0].bytes == doctest::Approx(30e9));
}

TEST_CASE("a drive is busy for the longer of each direction's time and all its bytes at the faster rate") {
  ResourceCollector collector;
  collector.resources_bound(two_nvlinks_a_nic_a_drive_two_cpus());
  // Reads of 6 GB at 6 GB/s (1 s) and writes of 6 GB at 3 GB/s (2 s): 12 GB at 6 GB/s is 2 s too.
  collector.drive_worked(0, true, 1.0, 6e9);
  collector.drive_worked(0, false, 2.0, 6e9);
  collector.link_carried({2}, 50e9);  // the NIC: 2 s
  const std::vector<ResourceUse> uses = collector.uses();
  REQUIRE(uses.size() == 2);
  CHECK(uses[0].kind == "nic");
  CHECK(uses[0].busy_s == doctest::Approx(2.0));
  CHECK(uses[1].kind == "nvme");
  CHECK(uses[1].busy_s == doctest::Approx(2.0));
  CHECK(uses[1].bytes == doctest::Approx(12e9));
  // Reads alone at the faster rate: 3 GB in 0.5 s, both bounds agree.
  ResourceCollector reads;
  reads.resources_bound(two_nvlinks_a_nic_a_drive_two_cpus());
  reads.drive_worked(0, true, 0.5, 3e9);
  CHECK(reads.uses()[0].busy_s == doctest::Approx(0.5));
}

TEST_CASE("CPUs add up the work handed to them and a tie keeps the first by name") {
  ResourceCollector collector;
  collector.resources_bound(two_nvlinks_a_nic_a_drive_two_cpus());
  collector.cpu_worked(0, 1.5, 1e9);  // node1-cpu
  collector.cpu_worked(1, 1.0, 2e9);  // node0-cpu
  collector.cpu_worked(1, 0.5, 0);
  const std::vector<ResourceUse> uses = collector.uses();
  REQUIRE(uses.size() == 1);
  CHECK(uses[0].kind == "cpu");
  CHECK(uses[0].count == 2);
  CHECK(uses[0].busy_s == doctest::Approx(1.5));
  CHECK(uses[0].busiest == "node0-cpu");
  CHECK(uses[0].bytes == doctest::Approx(3e9));
}
