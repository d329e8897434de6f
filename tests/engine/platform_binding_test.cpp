// The platform binding on one DGX A100 node with NVMe drives (platforms/dgx-a100-nvme.xml): its
// CPU host node0-cpu (4.6 TFLOP/s, dram_bandwidth 410GBps) holds drives node0-nvme0..3 (read
// 6.8GBps, write 4GBps), each behind a PCIe port host and switch uplink k; drives are dealt to
// the GPUs in turn.
#include <doctest/doctest.h>

#include <memory>
#include <sstream>
#include <string>

#include "child_process.hpp"
#include "platform/platform_binding.hpp"
#include "platform/simulation_context.hpp"

using namespace trainsim;

namespace {

Op op_of(OpKind kind, const std::string& name, const std::string& target) {
  Op op;
  op.kind = kind;
  op.name = name;
  op.target = target;
  op.bytes = 1e6;
  op.flops = 1e9;
  op.stream = kind == OpKind::compute ? Stream::cpu : kind == OpKind::read ? Stream::io_read : Stream::copy;
  return op;
}

// A collective of 1 GB on the workload's group 0.
Op collective_op(Collective collective, Stream stream) {
  Op op;
  op.kind = OpKind::collective;
  op.collective = collective;
  op.stream = stream;
  op.name = "call";
  op.bytes = 1e9;
  op.group = 0;
  return op;
}

// `ranks` GPUs of the node, each running `ops` and nothing else.
Workload ranks_running(const std::vector<Op>& ops, int ranks = 2) {
  Program program;
  for (const Op& op : ops)
    program.add(op);
  Workload workload;
  const auto shared = std::make_shared<const Program>(std::move(program));
  workload.programs.assign(static_cast<std::size_t>(ranks), shared);
  return workload;
}

// What binding `workload` on a platform says: the InputError, or what `describe` makes of it.
std::string bound(const Workload& workload,
                  const std::function<std::string(const PlatformBinding&)>& describe = [](const PlatformBinding&) {
                    return std::string("bound");
                  },
                  const std::string& platform = test::platform_file("dgx-a100-nvme.xml"), const BindSettings& settings = {}) {
  return test::in_child([&] {
    SimulationContext context({});
    const std::vector<GpuInfo> gpus = context.load_platform(platform);
    const PlatformBinding binding(workload, gpus, settings);
    return describe(binding);
  });
}

std::string link_names(const PlatformBinding& binding, int route) {
  std::string names;
  for (int link : binding.route(route).links)
    names += binding.resources().links[link].name + "(" + to_string(binding.resources().links[link].kind) + ") ";
  return names;
}

} // namespace

TEST_CASE("@cpu and @nvme name the rank's node CPU and the drive dealt to its GPU, with their routes") {
  Op upload = op_of(OpKind::copy, "h2d", node_cpu);
  upload.inbound = true;
  const Workload workload =
      ranks_running({op_of(OpKind::compute, "adam", node_cpu), upload, op_of(OpKind::read, "load", node_nvme)});
  const std::string described = bound(workload, [](const PlatformBinding& binding) {
    std::ostringstream out;
    for (int rank = 0; rank < 2; ++rank) {
      const BoundTarget& cpu = binding.target(rank, 0);
      const BoundTarget& copy = binding.target(rank, 1);
      const BoundTarget& drive = binding.target(rank, 2);
      out << "rank " << rank << ": cpu " << binding.resources().cpus[cpu.cpu] << " " << cpu.speed << " "
          << cpu.dram_bandwidth << "; copy " << (copy.host == cpu.host) << " " << (copy.route_out < 0) << "; drive "
          << binding.resources().drives[drive.drive].name << " " << binding.resources().drives[drive.drive].combined_bandwidth
          << " read " << link_names(binding, drive.route_read) << "write " << drive.route_write << "\n";
    }
    return out.str();
  });
  // One CPU for both ranks; the copy goes to the same host and only inwards (no route out is
  // taken); rank 1's drive is the second one; a read crosses the drive's own link, then its
  // switch's uplink towards the CPU (drive k on uplink k); nothing is written, so no write route.
  CHECK(described == "rank 0: cpu node0-cpu 4.6e+12 4.1e+11; copy 1 1; drive node0-nvme0 6.8e+09 read "
                     "node0-nvme0-read(pcie-nvme) node0-pcie-up0_UP(pcie-uplink) write -1\n"
                     "rank 1: cpu node0-cpu 4.6e+12 4.1e+11; copy 1 1; drive node0-nvme1 6.8e+09 read "
                     "node0-nvme1-read(pcie-nvme) node0-pcie-up1_UP(pcie-uplink) write -1\n");
}

TEST_CASE("binding names the rank and the first op whose host or disk the platform lacks") {
  CHECK(bound(ranks_running({op_of(OpKind::copy, "h2d", node_cpu), op_of(OpKind::copy, "away", "nowhere"),
                                 op_of(OpKind::read, "load", "nodisk")})) ==
        "InputError: rank 0 (node0-gpu0, node node0) op away: copy host 'nowhere' is not in the platform");
  CHECK(bound(ranks_running({op_of(OpKind::read, "load", "nodisk"), op_of(OpKind::copy, "away", "nowhere")})) ==
        "InputError: rank 0 (node0-gpu0, node node0) op load: neither node0-gpu0 nor its node's CPU host has a disk "
        "'nodisk'");
  CHECK(bound(ranks_running({op_of(OpKind::compute, "adam", "nowhere")})) ==
        "InputError: rank 0 (node0-gpu0, node node0) op adam: compute host 'nowhere' is not in the platform");
}

TEST_CASE("binding refuses a CPU memory bandwidth that is none and a drive port that is not a host") {
  const std::string platform = std::string(TRAINSIM_SOURCE_DIR) + "/tests/fixtures/bad-node-properties.xml";
  const auto as_bound = [](const PlatformBinding&) { return std::string("bound"); };
  const std::string bandwidth = bound(ranks_running({op_of(OpKind::compute, "adam", node_cpu)}, 1), as_bound, platform);
  CHECK(bandwidth.rfind("InputError: host node0-cpu: dram_bandwidth 'fast': ", 0) == 0);
  CHECK(bound(ranks_running({op_of(OpKind::read, "load", node_nvme)}, 1), as_bound, platform) ==
        "InputError: disk node0-nvme0: pcie_port 'nowhere' is not a host of the platform (the drive's end of its PCIe "
        "route to the CPU)");
  // Copies to that CPU need neither: they bind.
  CHECK(bound(ranks_running({op_of(OpKind::copy, "d2h", node_cpu)}, 1), as_bound, platform) == "bound");
}

TEST_CASE("an all-to-all's pairs load each GPU's NIC with the half of its bytes that leaves the node, a FATPIPE with one pair's") {
  // 16 ranks on platforms/dgx-h100-2n.xml (per GPU: an NVLink port to the NVSwitch, a PCIe link
  // to its own NIC; a FATPIPE fabric between the nodes), one group of all of them running an
  // all-to-all. Per byte of a member's data: a GPU's NVLink port carries the 7 pairs it sends to
  // inside its node (7/16), its PCIe link and NIC the 8 pairs it sends out of it (8/16), the
  // receiving side of a PCIe link the 8 pairs coming from the other node; the fabric, whose
  // flows do not share its bandwidth, the largest pair's 1/16 (not the 128 pairs' sum, 8).
  Workload workload = ranks_running({collective_op(Collective::all_to_all, Stream::ep_comm)}, 16);
  workload.groups.push_back({"ep0", "ep", {}});
  for (int rank = 0; rank < 16; ++rank)
    workload.groups[0].ranks.push_back(rank);
  const auto describe = [](const PlatformBinding& binding) {
    const BoundGroup& group = binding.group(0);
    std::ostringstream out;
    out << "analytic " << group.analytic_all_to_all << ";";
    for (const AllToAllLoad::Link& link : group.all_to_all.links) {
      const std::string& name = binding.resources().links[link.index].name;
      if (name == "node0-nvlink0_UP" || name == "node0-nic0_UP" || name == "node1-pcie3_DOWN" || name == "fabric")
        out << " " << name << " " << link.share[0] * 16 << "/16 nvlink " << link.share[1] * 16 << "/16 network;";
    }
    // Member 0's own flows: 7 pairs over NVLink crossing 2 links each, 8 leaving the node
    // crossing 5 (its PCIe and NIC, the fabric, the other GPU's NIC and PCIe): 54 link-pairs.
    double link_pairs = 0;
    for (const auto& [links, share] : group.all_to_all.carried[0])
      link_pairs += static_cast<double>(links.size()) * share * 16;
    out << " member 0 carries " << link_pairs << " link-pairs; pair 0-9 route " << link_names(binding, group.pair_route[9]);
    return out.str();
  };
  const std::string platform = test::platform_file("dgx-h100-2n.xml");
  CHECK(bound(workload, describe, platform, BindSettings{0, true}) ==
        "analytic 1; fabric 0/16 nvlink 1/16 network; node0-nic0_UP 0/16 nvlink 8/16 network; "
        "node0-nvlink0_UP 7/16 nvlink 0/16 network; node1-pcie3_DOWN 0/16 nvlink 8/16 network; member 0 carries 54 link-pairs; "
        "pair 0-9 route node0-pcie0_UP(pcie-gpu) node0-nic0_UP(nic) fabric(network) node1-nic1_DOWN(nic) "
        "node1-pcie1_DOWN(pcie-gpu) ");
  // Simulated as flows under the flows fidelity, and wherever members run different programs
  // (they may reach a call at different times, which the load model does not wait for).
  CHECK(bound(workload, describe, platform).rfind("analytic 0;", 0) == 0);
  // Nor on two kinds of GPU (the same program reaches each call at a different time on each).
  const std::string mixed = std::string(TRAINSIM_SOURCE_DIR) + "/tests/fixtures/mixed-gpus-2n.xml";
  CHECK(bound(workload, describe, mixed, BindSettings{0, true}).rfind("analytic 0;", 0) == 0);
  workload.programs[5] = std::make_shared<const Program>(*workload.programs[5]);
  CHECK(bound(workload, describe, platform, BindSettings{0, true}).rfind("analytic 0;", 0) == 0);
}

TEST_CASE("a ring's pace over a FATPIPE switch is one edge's, not the sum of the edges crossing it") {
  // tests/fixtures/fatpipe-leaves-4n.xml: four one-GPU nodes, two per leaf switch (FATPIPE,
  // 50 GB/s), 25 GB/s NICs. One ring 0 -> 1 -> 2 -> 3 -> 0 crosses leaf0 three times (0-1, 1-2,
  // 3-0) and each NIC once per direction. Every flow across a FATPIPE gets its whole bandwidth:
  // the leaf costs 1 / 50 GB/s per byte, the NICs 1 / 25 GB/s, which pace the ring (summing the
  // leaf's edges would say 3 / 50 GB/s and shift NCCL's choices).
  Workload workload = ranks_running({collective_op(Collective::all_reduce, Stream::dp_comm)}, 4);
  workload.groups.push_back({"dp0", "dp", {0, 1, 2, 3}});
  const auto pace = [](const PlatformBinding& binding) {
    const double seconds_per_byte = binding.group(0).shape.seconds_per_byte[static_cast<int>(EdgeKind::network)];
    return std::to_string(seconds_per_byte * 25e9);
  };
  const std::string platform = std::string(TRAINSIM_SOURCE_DIR) + "/tests/fixtures/fatpipe-leaves-4n.xml";
  CHECK(bound(workload, pace, platform, BindSettings{1, false}) == std::to_string(1.0));
}
