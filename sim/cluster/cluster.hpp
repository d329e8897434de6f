#pragma once
// Clusters described, not drawn: a GPU from the catalog, how many per node, how they are
// joined inside a node (NVSwitch, NVLink pairs, a full mesh, PCIe only), how many nodes,
// their NICs and the network between them, the PCIe generation and NVMe drives. The
// generator writes the SimGrid platform XML that a hand-written platform would be, so both
// go through one loader. Pure: no SimGrid.
// The XML: one zone per node with Full routing and explicit routes inside it. Between nodes,
// zones nest as the switches do (nodes in leaves, leaves in pods, pods in the cluster), each
// routing only among its members by explicit zoneRoutes, so a fat tree of 16,384 nodes holds a
// few routes per node (SimGrid 3.32's Dijkstra routing across zones aborted on such a platform;
// one flat zone routing every pair of nodes capped clusters at 512). A node's NVMe drives are disks of its CPU host whose
// `pcie_port` names a small host standing for the drive's end of the PCIe tree, joined to the CPU
// by a read and a write link at the drive's rates and the uplink of the switch it hangs on.
// Rail-optimised clusters give each GPU a zone (its PCIe link, NIC and a router) with a `node`
// property, and a zoneRoute per pair of GPUs: NVLink inside a node, rail switch k between GPUs k,
// rail switch - uplink - spine - uplink - rail switch otherwise.
#include <string>
#include <vector>

#include "cluster/gpu.hpp"

namespace trainsim {

// One catalog entry: published dense peaks (FLOP/s), memory and links of a GPU.
struct GpuSpec {
  std::string key;            // what scenarios name it by: a100-80gb, h100-sxm, ...
  std::string model;          // the `gpu` property: A100-SXM4-80GB
  double peak_fp32 = 0, peak_tf32 = 0, peak_fp16 = 0, peak_bf16 = 0, peak_fp8 = 0;
  double hbm_capacity = 0;    // bytes
  double hbm_bandwidth = 0;   // bytes/s
  double gpu_link = 0;        // bytes/s per direction to the node fabric (NVLink / Infinity Fabric), 0: none
  std::string fabric;         // usual intra-node fabric: nvswitch, nvlink-pairs, mesh, pcie
  int pcie_gen = 4;
  double nic_speed = 0;       // bytes/s per direction of the NIC such nodes usually carry
  std::string source;         // where the numbers come from
  GpuArchitecture architecture = GpuArchitecture::unknown;
  int sm_count = 0;           // streaming multiprocessors (AMD: compute units)
};

// The catalog entry whose `model` (the `gpu` property) is `model`; nullptr when none is.
const GpuSpec* find_gpu_model(const std::string& model);

const std::vector<GpuSpec>& gpu_catalog();
// Throws InputError naming `where` and the accepted keys.
const GpuSpec& find_gpu(const std::string& key, const std::string& where);
// The catalog's keys in order, joined by `separator`: what help texts and errors list.
std::string gpu_keys(const std::string& separator);

enum class Fabric { nvswitch, nvlink_pairs, mesh, pcie };
// single_switch: one non-blocking switch; fat_tree: leaf switches of nodes_per_leaf nodes with
// oversubscribed uplinks to a spine, or with pods, to their pod's spine, whose uplinks (again
// oversubscribed) reach the core: a three-tier Clos; rail_optimized: one switch per rail (GPU k of every node),
// rail switches joined by a spine through oversubscribed uplinks.
enum class Topology { single_switch, fat_tree, rail_optimized };

// The most members a zone that routes every pair of them may have (a single switch's nodes, a
// core's pods, a rail-optimised cluster's GPUs): its routes grow as the square.
constexpr int max_pairwise_routed = 512;

struct ClusterSpec {
  GpuSpec gpu;
  int gpus_per_node = 8;
  int nodes = 1;
  Fabric fabric = Fabric::nvswitch;
  int nics_per_node = 8;
  double nic_speed = 25e9;          // bytes/s per direction
  Topology topology = Topology::single_switch;
  int nodes_per_leaf = 4;           // fat tree: nodes under one leaf switch
  int leaves_per_pod = 0;           // fat tree: leaves under one pod's spine; 0: one pod of all (two tiers)
  double pod_oversubscription = 1;  // fat tree with pods: a pod spine's downlink / uplink bandwidth to the core
  double oversubscription = 1;      // fat tree, rail-optimised: switch downlink / uplink bandwidth
  int pcie_gen = 4;
  int gpus_per_pcie_switch = 2;     // GPUs (with their NICs and drives) behind one PCIe switch
  int nvme_per_node = 0;
  double host_memory = 2.0 * 1024 * 1024 * 1024 * 1024;  // bytes of DRAM per node
  double host_memory_bandwidth = 200e9;                  // bytes/s
  double cpu_speed = 2e12;                               // FLOP/s of the node's CPUs together
};

const char* to_string(Fabric fabric);
const char* to_string(Topology topology);
// A fat tree's leaf switches and pods (1: two tiers).
int fat_tree_leaves(const ClusterSpec& cluster);
int fat_tree_pods(const ClusterSpec& cluster);
// PCIe x16 bandwidth per direction of a generation (3: 16 GB/s ... 6: 128 GB/s, after encoding).
double pcie_x16_bandwidth(int generation);

// The platform file, with a comment saying what was asked for.
std::string platform_xml(const ClusterSpec& cluster);
// "2 x 8 H100-SXM5-80GB, NVSwitch, single switch": for reports.
std::string describe(const ClusterSpec& cluster);

} // namespace trainsim
