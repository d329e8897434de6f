// Described clusters: the GPU catalog, PCIe bandwidths and the structure of the generated
// platform XML (read back with an XML parser).
#include <doctest/doctest.h>

#include <cmath>

#include <functional>
#include <map>
#include <sstream>

#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>

#include "cluster/cluster.hpp"
#include "common/error.hpp"
#include "common/units.hpp"
#include "config/scenario.hpp"
#include "test_support.hpp"

using namespace trainsim;
namespace pt = boost::property_tree;

namespace {

pt::ptree parse(const std::string& xml) {
  pt::ptree tree;
  std::istringstream in(xml);
  pt::read_xml(in, tree);
  return tree;
}

int count(const pt::ptree& tree, const std::string& name) {
  int found = 0;
  for (const auto& [key, child] : tree)
    found += (key == name) + count(child, name);
  return found;
}

ClusterSpec cluster(const std::map<std::string, std::string>& keys) {
  std::map<std::string, std::pair<std::string, std::string>> given;
  for (const auto& [key, value] : keys)
    given["platform." + key] = {value, "--" + key};
  return parse_cluster(given);
}

std::string error_of(const std::map<std::string, std::string>& keys) {
  try {
    cluster(keys);
  } catch (const InputError& error) {
    return error.what();
  }
  FAIL("accepted");
  return "";
}

} // namespace

TEST_CASE("PCIe x16 carries 16 lanes at 8, 16, 32 GT/s with 128b/130b encoding") {
  CHECK(pcie_x16_bandwidth(3) == doctest::Approx(16 * 8e9 / 8 * 128 / 130));   // 15.75 GB/s
  CHECK(pcie_x16_bandwidth(4) == doctest::Approx(16 * 16e9 / 8 * 128 / 130));  // 31.5 GB/s
  CHECK(pcie_x16_bandwidth(5) == doctest::Approx(16 * 32e9 / 8 * 128 / 130));  // 63 GB/s
}

TEST_CASE("every catalog GPU has its peaks, memory and a usable fabric") {
  for (const GpuSpec& gpu : gpu_catalog()) {
    CAPTURE(gpu.key);
    CHECK(gpu.peak_fp32 > 0);
    CHECK(gpu.peak_bf16 >= gpu.peak_fp32);
    CHECK(gpu.peak_fp16 >= gpu.peak_tf32);
    CHECK(gpu.hbm_capacity > 16e9);
    CHECK(gpu.hbm_bandwidth > 500e9);
    CHECK((gpu.fabric == "pcie" || gpu.gpu_link > 0));
    CHECK(!gpu.source.empty());
  }
  // Spot checks against the datasheets: H100 SXM 989 TFLOP/s bf16 dense, 3.35 TB/s.
  CHECK(find_gpu("h100-sxm", "t").peak_bf16 == 989e12);
  CHECK(find_gpu("h100-sxm", "t").hbm_bandwidth == 3350e9);
  CHECK(find_gpu("a100-80gb", "t").peak_fp8 == 0);
}

TEST_CASE("catalog capacities are what the devices report, in one unit") {
  // nvidia-smi's memory total (rocm-smi's for the MI300X), in MiB: a whole number of MiB for every
  // GPU, not a mix of "80 GiB" and "141e9 bytes".
  const double mib = 1024.0 * 1024;
  for (const GpuSpec& gpu : gpu_catalog()) {
    CAPTURE(gpu.key);
    CHECK(std::fmod(gpu.hbm_capacity, mib) == 0);
  }
  CHECK(find_gpu("a100-80gb", "t").hbm_capacity == 81920 * mib);  // = 80 GiB
  CHECK(find_gpu("h100-sxm", "t").hbm_capacity == 81559 * mib);   // less than 80 GiB
  CHECK(find_gpu("h200", "t").hbm_capacity == 143771 * mib);      // 150.76e9 B, not 141e9
  CHECK(find_gpu("b200", "t").hbm_capacity == 183359 * mib);
  CHECK(find_gpu("mi300x", "t").hbm_capacity == 205822885888.0);  // rocm-smi: VRAM Total Memory (B)
}

TEST_CASE("the generated platform has the hosts, links, disks and routes asked for") {
  // 3 nodes of 8 A100s on NVSwitch, 8 NICs each, 2 drives per node, one switch between nodes.
  const ClusterSpec spec = cluster({{"gpu", "a100-80gb"}, {"nodes", "3"}, {"nvme_per_node", "2"}});
  const pt::ptree xml = parse(platform_xml(spec));
  CHECK(count(xml, "host") == 3 * (8 + 1 + 2));  // GPUs, one CPU and each drive's PCIe port per node
  CHECK(count(xml, "disk") == 3 * 2);
  // Per node: 8 PCIe links to the GPUs, 4 switch uplinks (2 GPUs per switch), 8 NICs, 8 NVLinks,
  // a read and a write link per drive, the switch's port.
  CHECK(count(xml, "link") == 3 * (8 + 4 + 8 + 8 + 2 * 2 + 1));
  // Per node: 28 GPU pairs, 8 routes to the gateway, 8 to the CPU, 1 CPU to the gateway, each
  // drive to and from the CPU; 3 node pairs.
  CHECK(count(xml, "route") == 3 * (28 + 8 + 8 + 1 + 2 * 2));
  CHECK(count(xml, "zoneRoute") == 3);
  CHECK(count(xml, "zone") == 1 + 1 + 3);  // the cluster, the zone holding every link, the nodes
}

TEST_CASE("fabrics: GPU pairs over a bridge or PCIe, a full mesh, PCIe only") {
  const pt::ptree pairs = parse(platform_xml(cluster({{"gpu", "h100-pcie"}, {"gpus_per_node", "4"}})));
  CHECK(count(pairs, "link") == 4 + 2 + 2 + 2);  // PCIe, switch uplinks, 2 NICs (one per pair), 2 bridges
  const pt::ptree mesh = parse(platform_xml(cluster({{"gpu", "mi300x"}})));
  CHECK(count(mesh, "link") == 8 + 4 + 8 + 28);  // 28 GPU-to-GPU links
  const pt::ptree pcie = parse(platform_xml(cluster({{"gpu", "rtx4090"}, {"gpus_per_node", "4"}, {"nvme_per_node", "1"}})));
  CHECK(count(pcie, "link") == 4 + 2 + 1 + 2);  // no GPU-to-GPU links, one NIC, the drive's two
  CHECK(count(pcie, "disk") == 1);
}

TEST_CASE("a fat tree adds leaf switches with oversubscribed uplinks and a spine") {
  const ClusterSpec spec =
      cluster({{"gpu", "h100-sxm"}, {"nodes", "4"}, {"topology", "fat-tree"}, {"nodes_per_leaf", "2"}, {"oversubscription", "4"}});
  CHECK(spec.oversubscription == 4);
  const std::string xml = platform_xml(spec);
  // Leaf uplink: 2 nodes x 8 NICs x 50 GB/s / 4 = 200 GB/s.
  CHECK(xml.find("<link id=\"leaf0-up\" bandwidth=\"200GBps\"") != std::string::npos);
  // Per leaf: its node pair and each node's way up; the spine: the leaf pair.
  CHECK(count(parse(xml), "zoneRoute") == 2 * (1 + 2) + 1);
  // Per node: 8 PCIe links, 4 PCIe switch uplinks, 8 NICs, 8 NVLinks. Per leaf: a port per node,
  // one for the way out and the uplink; the spine: a port per leaf. No link is on every route.
  CHECK(count(parse(xml), "link") == 4 * (8 + 4 + 8 + 8) + 2 * (2 + 1 + 1) + 2);
  CHECK(xml.find("FATPIPE") == std::string::npos);
  // A port at its member's bandwidth: a node's 8 x 50 GB/s NICs; at the spine, a leaf's uplink.
  CHECK(xml.find("<link id=\"leaf0-node1\" bandwidth=\"400GBps\" latency=\"250ns\"") != std::string::npos);
  CHECK(xml.find("<link id=\"spine-leaf1\" bandwidth=\"200GBps\" latency=\"250ns\"") != std::string::npos);
  CHECK(xml.find("<link id=\"leaf0-out\" bandwidth=\"200GBps\" latency=\"250ns\"") != std::string::npos);
  CHECK(xml.find("<zoneRoute src=\"node0\" dst=\"leaf0-top\" gw_src=\"node0-gw\" gw_dst=\"leaf0-gw\"><link_ctn "
                 "id=\"leaf0-node0\" direction=\"UP\"/><link_ctn id=\"leaf0-out\" direction=\"DOWN\"/><link_ctn "
                 "id=\"leaf0-up\" direction=\"UP\"/></zoneRoute>") != std::string::npos);
  CHECK(fat_tree_pods(spec) == 1);
}

TEST_CASE("a three-tier fat tree nests nodes in leaves and leaves in pods, each zone routing only its members") {
  // Llama 3's cluster (Dubey et al. 2024, "The Llama 3 Herd of Models", section 3.3.1): racks of
  // 2 nodes under one ToR switch, 192 racks a pod at full bisection, pods joined at 1:7.
  const ClusterSpec spec = cluster({{"gpu", "h100-sxm"}, {"nodes", "3072"}, {"topology", "fat-tree"},
                                    {"nodes_per_leaf", "2"}, {"leaves_per_pod", "192"}, {"pod_oversubscription", "7"}});
  CHECK(fat_tree_leaves(spec) == 1536);
  CHECK(fat_tree_pods(spec) == 8);
  CHECK(describe(spec).find("fat-tree of 8 pods (192 leaves of 2 nodes each)") != std::string::npos);
  const std::string text = platform_xml(spec);
  // A pod's uplink: 192 leaves x 2 nodes x 8 NICs x 50 GB/s / 7.
  const std::string uplink = "<link id=\"pod0-spine-up\" bandwidth=\"";
  const std::size_t at = text.find(uplink) + uplink.size();
  CHECK(parse_bandwidth(text.substr(at, text.find('"', at) - at)) == doctest::Approx(192 * 2 * 8 * 50e9 / 7));
  const pt::ptree xml = parse(text);
  // Routes grow with the members of each zone squared, not with the nodes squared: per leaf its
  // node pair and 2 ways up, per pod 192 x 191 / 2 leaf pairs and 192 ways up, 8 x 7 / 2 pod pairs.
  CHECK(count(xml, "zoneRoute") == 1536 * (1 + 2) + 8 * (192 * 191 / 2 + 192) + 28);
  // The cluster, the links' zone, 8 pods with their way out, 1,536 leaves with theirs, the nodes.
  CHECK(count(xml, "zone") == 2 + 8 * 2 + 1536 * 2 + 3072);
  // Auto: one pod up to 64 leaves (a 64-port spine), else pods of 32.
  CHECK(fat_tree_pods(cluster({{"gpu", "h100-sxm"}, {"nodes", "256"}, {"topology", "fat-tree"}})) == 1);
  CHECK(cluster({{"gpu", "h100-sxm"}, {"nodes", "16384"}, {"topology", "fat-tree"}}).leaves_per_pod == 32);
  CHECK(error_of({{"gpu", "h100-sxm"}, {"nodes", "4"}, {"topology", "fat-tree"}, {"pod_oversubscription", "2"}})
            .find("has no effect here; it needs platform.topology = fat-tree with more leaves") != std::string::npos);
  CHECK(error_of({{"gpu", "h100-sxm"}, {"nodes", "1024"}, {"topology", "fat-tree"}, {"nodes_per_leaf", "1"},
                  {"leaves_per_pod", "1"}})
            .find("makes 1024 pods, and the core routes every pair of them; accepted: at most 512 pods (2 or more") !=
        std::string::npos);
  CHECK(error_of({{"gpu", "h100-sxm"}, {"nodes", "1024"}}).find("a single switch routes every pair of nodes") !=
        std::string::npos);
  CHECK(error_of({{"gpu", "h100-sxm"}, {"nodes", "16385"}, {"topology", "fat-tree"}}).find("out of range") !=
        std::string::npos);
}

TEST_CASE("rail-optimised: a zone per GPU, routed between nodes by rail") {
  const ClusterSpec spec = cluster({{"gpu", "h100-sxm"}, {"nodes", "2"}, {"topology", "rail-optimized"}});
  const pt::ptree xml = parse(platform_xml(spec));
  CHECK(count(xml, "zone") == 1 + 2 * 8 + 2);   // the cluster, a zone per GPU, a CPU zone per node
  CHECK(count(xml, "host") == 2 * (8 + 1));
  // Inside a node: 28 GPU pairs and 8 GPU-to-CPU; between the nodes: 8 x 8 GPU pairs.
  CHECK(count(xml, "zoneRoute") == 2 * (28 + 8) + 64);
  // Links: per GPU PCIe and NIC; per node 4 switch uplinks and 8 NVLinks; 8 rails with uplinks, a spine.
  CHECK(count(xml, "link") == 2 * (8 + 8 + 4 + 8) + 8 * 2 + 1);
  CHECK(error_of({{"gpu", "h100-sxm"}, {"topology", "rail-optimized"}, {"nics_per_node", "4"}})
            .find("rail-optimized needs one NIC per GPU") != std::string::npos);
}

TEST_CASE("described clusters are checked like every other input") {
  CHECK(error_of({{"gpu", "h100x"}}).find("--gpu: platform.gpu: unknown GPU 'h100x'; accepted: a100-40gb") != std::string::npos);
  CHECK(error_of({{"gpu", "rtx4090"}, {"fabric", "nvswitch"}}).find("has no GPU-to-GPU links") != std::string::npos);
  CHECK(error_of({{"gpu", "h100-sxm"}, {"nodes", "0"}}).find("out of range") != std::string::npos);
  CHECK(error_of({{"gpu", "h100-sxm"}, {"oversubscription", "0.5"}}).find("1 (non-blocking) to 64") != std::string::npos);
  CHECK(error_of({{"nodes", "2"}}).find("--gpu is required") != std::string::npos);
}

TEST_CASE("a scenario names a platform file or describes its cluster, not both") {
  const auto file = test::write_temp_file("cluster.ini", test::tiny_scenario_ini);
  const Scenario described = load_scenario(file, {"platform.gpu=h100-sxm", "platform.nodes=2"});
  REQUIRE(described.cluster);
  CHECK(described.cluster->nodes == 2);
  CHECK(described.cluster->nic_speed == 50e9);  // 400 Gb/s, the H100 generation's NICs
  CHECK(described.platform_file.empty());
  // --set platform.file replaces a described cluster; a cluster key next to a file is refused.
  CHECK_FALSE(load_scenario(file, {"platform.gpu=h100-sxm", "platform.file=dgx-a100.xml"}).cluster);
  CHECK_THROWS_WITH_AS(load_scenario(file, {"platform.nodes=2"}),
                       doctest::Contains("platform.nodes describes a generated cluster and needs platform.gpu"),
                       InputError);
}

TEST_CASE("the host side of a node: CPU speed, DRAM, drives and GPUs per PCIe switch as described") {
  // A DGX-2-like node: 16 V100s, a switch per GPU pair by default, 1.5 TB of DRAM at 256 GB/s,
  // 4.1 TFLOP/s of CPU, 8 drives.
  const ClusterSpec spec = cluster({{"gpu", "v100-32gb"}, {"gpus_per_node", "16"}, {"host_memory", "1.5TB"},
                                    {"host_memory_bandwidth", "256GBps"}, {"cpu_speed", "4.1Tf"},
                                    {"nvme_per_node", "8"}});
  const pt::ptree xml = parse(platform_xml(spec));
  const pt::ptree* cpu = nullptr;
  std::function<void(const pt::ptree&)> find_cpu = [&](const pt::ptree& tree) {
    for (const auto& [key, child] : tree) {
      if (key == "host" && child.get<std::string>("<xmlattr>.id") == "node0-cpu")
        cpu = &child;
      find_cpu(child);
    }
  };
  find_cpu(xml);
  REQUIRE(cpu != nullptr);
  std::map<std::string, std::string> props;
  for (const auto& [key, child] : *cpu)
    if (key == "prop")
      props[child.get<std::string>("<xmlattr>.id")] = child.get<std::string>("<xmlattr>.value");
  CHECK(props["role"] == "cpu");
  CHECK(parse_bytes(props["dram_capacity"]) == 1.5e12);
  CHECK(parse_bandwidth(props["dram_bandwidth"]) == 256e9);
  CHECK(parse_flops(cpu->get<std::string>("<xmlattr>.speed")) == doctest::Approx(4.1e12).epsilon(1e-12));
  CHECK(count(*cpu, "disk") == 8);
  // One node (no network beyond it): 16 PCIe links, 8 uplinks (2 GPUs per switch), 16 NICs, 16
  // NVSwitch ports, 8 drives' read and write links.
  CHECK(count(xml, "link") == 16 + 8 + 16 + 16 + 16);
  // Each GPU on its own root port: 16 uplinks.
  const ClusterSpec direct = cluster({{"gpu", "v100-32gb"}, {"gpus_per_node", "16"}, {"gpus_per_pcie_switch", "1"}});
  CHECK(count(parse(platform_xml(direct)), "link") == 16 + 16 + 16 + 16);
  CHECK(error_of({{"gpu", "a100-80gb"}, {"host_memory", "0GB"}}).find("platform.host_memory") != std::string::npos);
  CHECK(error_of({{"gpu", "a100-80gb"}, {"gpus_per_pcie_switch", "0"}}).find("out of range") != std::string::npos);
}
