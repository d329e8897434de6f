// NCCL's choice of algorithm and protocol and the times it predicts, derived by hand from the
// calibration in program/nccl_model.cpp, and checked against the published nccl-tests tables the
// calibration cites (the fit promised them within 12 % on A100 and 6 % on H100).
#include <doctest/doctest.h>

#include <cmath>

#include "program/nccl_model.hpp"

using namespace trainsim;

namespace {

constexpr double us = 1e-6;
constexpr double GiB = 1024.0 * 1024 * 1024;
constexpr double MiB = 1024.0 * 1024;
constexpr int nvlink = static_cast<int>(EdgeKind::nvlink), network = static_cast<int>(EdgeKind::network);

// n GPUs on one NVSwitch node, each port `port` bytes/s per direction, one ring.
RingShape one_node(int n, double port) {
  RingShape ring;
  ring.members = n;
  ring.nodes = 1;
  ring.seconds_per_byte[nvlink] = 1 / port;
  ring.route_latency = 2 * us;
  ring.nvswitch = true;
  return ring;
}

// Two DGX A100 nodes, 8 rings, one per rail: each GPU's port carries 7 of its 8 rings' edges,
// each NIC (25 GB/s) one.
RingShape two_dgx_a100() {
  RingShape ring;
  ring.members = 16;
  ring.nodes = 2;
  ring.seconds_per_byte[nvlink] = (7.0 / 8) / 300e9;
  ring.seconds_per_byte[network] = (1.0 / 8) / 25e9;
  ring.route_latency = 3.5 * us;
  return ring;
}

CommChoice choose(GpuArchitecture architecture, const RingShape& ring, Collective collective, double bytes,
                  CommTuning tuning = {}) {
  return choose_collective(nccl_profile(architecture), ring, collective, bytes, tuning);
}

double bus_bandwidth(double bytes, double seconds, int n) { return bytes / seconds * 2 * (n - 1) / n; }

} // namespace

TEST_CASE("NCCL on 8 A100s: small all-reduces run LL at its latency, as nccl-tests measure") {
  // LL: 6.6 us + 14 ring steps x 1.81 us = 31.94 us; 64 bytes add nothing measurable.
  // Oracle's all_reduce_perf on 8 A100s: 32.0 us from 64 B to 32 KB.
  const CommChoice small = choose(GpuArchitecture::ampere, one_node(8, 300e9), Collective::all_reduce, 64);
  CHECK(small.algorithm == CommAlgorithm::ring);
  CHECK(small.protocol == CommProtocol::ll);
  CHECK(small.seconds == doctest::Approx(31.94 * us).epsilon(1e-3));
  CHECK(small.seconds == doctest::Approx(32.0 * us).epsilon(0.02));
  // Two phases share the latency; a flow pays its 2 us route itself.
  CHECK(small.phase_latency == doctest::Approx(31.94 * us / 2).epsilon(1e-3));
}

TEST_CASE("NCCL on 8 A100s: large all-reduces run Simple at .734 of NVLink") {
  // Simple: 8.4 + 14 x 8.26 = 124.04 us, then 2 x 7/8 x 1 GiB at .734 x 300 GB/s.
  const double seconds = 124.04 * us + 2 * 7.0 / 8 * GiB / (0.734 * 300e9);
  const CommChoice large = choose(GpuArchitecture::ampere, one_node(8, 300e9), Collective::all_reduce, GiB);
  CHECK(large.protocol == CommProtocol::simple);
  CHECK(large.seconds == doctest::Approx(seconds).epsilon(1e-3));
  CHECK(large.efficiency[nvlink] == doctest::Approx(0.734));
  // Measured at 1 GiB: 8166.8 us (Oracle), busbw 228.1 GB/s (Azure ND A100 v4): 6 % and 5 % off.
  CHECK(large.seconds == doctest::Approx(8166.8 * us).epsilon(0.07));
  CHECK(bus_bandwidth(GiB, large.seconds, 8) == doctest::Approx(228.1e9).epsilon(0.07));
}

TEST_CASE("NCCL on 8 A100s: mid-sized all-reduces take LL128 where it beats both") {
  // 4 MiB: LL 31.94 us + 7 MiB / (.25 x .734 x 300 GB/s); LL128 14 + 14 x 5.73 = 94.23 us +
  // 7 MiB / (.92 x .734 x 300 GB/s); Simple 124.04 us + 7 MiB / (.734 x 300 GB/s).
  const double bus = 2 * 7.0 / 8 * 4 * MiB;
  const double ll = 31.94 * us + bus / (0.25 * 0.734 * 300e9);
  const double ll128 = (14 + 14 * 1.81 * 1.9 / 0.6) * us + bus / (0.92 * 0.734 * 300e9);
  const double simple = 124.04 * us + bus / (0.734 * 300e9);
  REQUIRE(ll128 < ll);
  REQUIRE(ll128 < simple);
  const CommChoice mid = choose(GpuArchitecture::ampere, one_node(8, 300e9), Collective::all_reduce, 4 * MiB);
  CHECK(mid.protocol == CommProtocol::ll128);
  CHECK(mid.seconds == doctest::Approx(ll128).epsilon(1e-3));
  // Oracle measured 134.5 us.
  CHECK(mid.seconds == doctest::Approx(134.5 * us).epsilon(0.05));
}

TEST_CASE("NCCL across two DGX A100s: the rail NICs bound the rings, network steps cost more") {
  // 16 ranks: 30 ring steps, 2 x 2 nodes of them over the network: 8.4 + 26 x 8.26 + 4 x 16.7 =
  // 290.0 us. Bytes: 2 x 15/16 x 1 GiB through each NIC's eighth at .94 x 25 GB/s (the ports'
  // 7/8 at .734 x 300 GB/s are faster).
  CommTuning rings;
  rings.algorithm = CommAlgorithm::ring;
  const CommChoice choice = choose(GpuArchitecture::ampere, two_dgx_a100(), Collective::all_reduce, GiB, rings);
  CHECK(choice.algorithm == CommAlgorithm::ring);
  CHECK(choice.protocol == CommProtocol::simple);
  const double seconds = 290.0 * us + 2 * 15.0 / 16 * GiB * (1.0 / 8) / (0.94 * 25e9);
  CHECK(choice.seconds == doctest::Approx(seconds).epsilon(1e-3));
  // Measured on 2 x 8 A100 over 8 x 200 Gb/s InfiniBand (facebookresearch/gcm, NCCL 2.12, whose
  // curve from 32 MB up has a ring's slope): 11013 us.
  CHECK(choice.seconds == doctest::Approx(11013 * us).epsilon(0.03));
}

TEST_CASE("NCCL across nodes: small all-reduces take the tree, whose latency grows with log2 of the nodes") {
  // Tree LL on two DGX A100s: 6.8 + 2 x (7 intra-node hops x 1.81 + 1 network hop x 16.7 x
  // 2.7 / 14) = 38.58 us, against the ring's 6.6 + 26 x 1.81 + 4 x 3.22 = 66.5 us. Oracle's
  // all_reduce_perf on two 8-A100 nodes: 36.47 us at 8 bytes.
  const CommChoice small = choose(GpuArchitecture::ampere, two_dgx_a100(), Collective::all_reduce, 8);
  CHECK(small.algorithm == CommAlgorithm::tree);
  CHECK(small.protocol == CommProtocol::ll);
  CHECK(small.seconds == doctest::Approx((6.8 + 2 * (7 * 1.81 + 16.7 * 2.7 / 14)) * us).epsilon(1e-3));
  CHECK(small.seconds == doctest::Approx(36.47 * us).epsilon(0.07));
  // 16 DGX A100s, a 25 MiB gradient bucket: a ring's 254 steps, 32 over the network, cost
  // 8.4 + 222 x 8.26 + 32 x 16.7 = 2376 us of latency in Simple alone; the tree's 2 x (7 x 8.26
  // + 4 x 16.7) = 249 us.
  RingShape sixteen = two_dgx_a100();
  sixteen.members = 128;
  sixteen.nodes = 16;
  const CommChoice bucket = choose(GpuArchitecture::ampere, sixteen, Collective::all_reduce, 25 * MiB);
  CHECK(bucket.algorithm == CommAlgorithm::tree);
  CHECK(bucket.seconds < 2376 * us);
  CommTuning simple_tree;
  simple_tree.algorithm = CommAlgorithm::tree;
  simple_tree.protocol = CommProtocol::simple;
  CHECK(choose(GpuArchitecture::ampere, sixteen, Collective::all_reduce, 25 * MiB, simple_tree).phase_latency ==
        doctest::Approx(2 * (7 * 8.26 + 4 * 16.7) * us / 2).epsilon(1e-3));
}

TEST_CASE("a tree moves 2 S through each GPU and 2 S (N - 1) / N through each node's NICs") {
  // Against a ring's 2 S (n - 1) / n: on 2 nodes (n = 16) the NICs carry 1/2 x 16/15 of the
  // ring's bytes, on 16 nodes (n = 128) 15/16 x 128/127; each GPU's links 16/15 and 128/127.
  const CommChoice two = choose(GpuArchitecture::ampere, two_dgx_a100(), Collective::all_reduce, 8);
  CHECK(two.byte_scale[network] == doctest::Approx(0.5 * 16 / 15));
  CHECK(two.byte_scale[nvlink] == doctest::Approx(16.0 / 15));
  RingShape sixteen = two_dgx_a100();
  sixteen.members = 128;
  sixteen.nodes = 16;
  const CommChoice many = choose(GpuArchitecture::ampere, sixteen, Collective::all_reduce, 8);
  CHECK(many.byte_scale[network] == doctest::Approx(15.0 / 16 * 128 / 127));
  // Inside one node there is no tree: a forced tree leaves the call to rings.
  CommTuning tree;
  tree.algorithm = CommAlgorithm::tree;
  CHECK(choose(GpuArchitecture::ampere, one_node(8, 300e9), Collective::all_reduce, GiB, tree).algorithm ==
        CommAlgorithm::ring);
  CHECK(choose(GpuArchitecture::ampere, two_dgx_a100(), Collective::all_gather, GiB, tree).algorithm ==
        CommAlgorithm::ring);
}

TEST_CASE("NVLink SHARP on 8 H100s: each GPU moves 9/8 of the data, at the published bus bandwidth") {
  // NVLS: 66 us + 9/8 x 1 GiB at .664 x 450 GB/s = 4108 us; Azure ND H100 v5: busbw 466.35 GB/s.
  const CommChoice nvls = choose(GpuArchitecture::hopper, one_node(8, 450e9), Collective::all_reduce, GiB);
  CHECK(nvls.algorithm == CommAlgorithm::nvls);
  CHECK(nvls.protocol == CommProtocol::simple);
  CHECK(nvls.byte_scale[nvlink] == doctest::Approx(9.0 / 14));  // (n + 1) / (2 (n - 1)) of the ring's bytes
  CHECK(nvls.seconds == doctest::Approx(66 * us + 9.0 / 8 * GiB / (0.664 * 450e9)).epsilon(1e-3));
  CHECK(bus_bandwidth(GiB, nvls.seconds, 8) == doctest::Approx(466.35e9).epsilon(0.06));
}

TEST_CASE("NVLink SHARP's bus bandwidth grows with the GPUs of the node as NVIDIA measured") {
  // NVIDIA/nccl issue 1455, 4 GB all-reduces on 4, 5, 6 and 8 H100s: about 370, 420, 440 and 480
  // GB/s of bus bandwidth, NVLS no faster than rings on 4. The (n + 1) / n bytes per GPU alone
  // predict it: NVLS's bus bandwidth is .664 x 450 x 2 (n - 1) / (n + 1), 359 GB/s on 4 GPUs
  // (below the rings' 370, so rings run), 399 on 5, 428 on 6, 466 on 8.
  const std::pair<int, double> measured[] = {{4, 370e9}, {5, 420e9}, {6, 440e9}, {8, 480e9}};
  for (const auto& [gpus, busbw] : measured) {
    CAPTURE(gpus);
    const CommChoice choice = choose(GpuArchitecture::hopper, one_node(gpus, 450e9), Collective::all_reduce, 4 * GiB);
    CHECK(choice.algorithm == (gpus == 4 ? CommAlgorithm::ring : CommAlgorithm::nvls));
    CHECK(bus_bandwidth(4 * GiB, choice.seconds, gpus) == doctest::Approx(busbw).epsilon(0.06));
  }
}

TEST_CASE("NVLink SHARP runs only all-reduces inside one node of a generation that has it, unless refused") {
  const RingShape h100 = one_node(8, 450e9);
  CHECK(choose(GpuArchitecture::hopper, h100, Collective::all_gather, GiB).algorithm == CommAlgorithm::ring);
  CHECK(choose(GpuArchitecture::ampere, one_node(8, 300e9), Collective::all_reduce, GiB).algorithm ==
        CommAlgorithm::ring);
  RingShape two_nodes = two_dgx_a100();
  CHECK(choose(GpuArchitecture::hopper, two_nodes, Collective::all_reduce, GiB).algorithm != CommAlgorithm::nvls);
  CommTuning ring;
  ring.algorithm = CommAlgorithm::ring;
  CHECK(choose(GpuArchitecture::hopper, h100, Collective::all_reduce, GiB, ring).algorithm == CommAlgorithm::ring);
  // H100 rings reach 370 of 450 GB/s (NVIDIA's figure for NCCL_ALGO=RING).
  CHECK(choose(GpuArchitecture::hopper, h100, Collective::all_reduce, GiB, ring).efficiency[nvlink] ==
        doctest::Approx(370.0 / 450));
  CommTuning ll;
  ll.protocol = CommProtocol::ll;
  const CommChoice forced = choose(GpuArchitecture::hopper, h100, Collective::all_reduce, GiB, ll);
  CHECK(forced.algorithm == CommAlgorithm::ring);
  CHECK(forced.protocol == CommProtocol::ll);
  // A forced NVLS leaves the calls it cannot run to rings.
  CommTuning nvls;
  nvls.algorithm = CommAlgorithm::nvls;
  CHECK(choose(GpuArchitecture::hopper, h100, Collective::all_reduce, 64, nvls).algorithm == CommAlgorithm::nvls);
  CHECK(choose(GpuArchitecture::hopper, h100, Collective::reduce_scatter, GiB, nvls).algorithm == CommAlgorithm::ring);
}

TEST_CASE("ideal collectives: full bandwidth, one route latency per ring step") {
  CommTuning ideal;
  ideal.ideal = true;
  // 8 GPUs, 2 us routes: 7 steps per phase; 2 phases of 7/8 of 8 GB at 300 GB/s.
  const CommChoice choice = choose(GpuArchitecture::ampere, one_node(8, 300e9), Collective::all_reduce, 8e9, ideal);
  CHECK(choice.phase_latency == doctest::Approx(14 * us));
  CHECK(choice.efficiency[nvlink] == 1);
  CHECK(choice.seconds == doctest::Approx(2 * (7e9 / 300e9 + 14 * us)));
  CHECK(point_to_point_efficiency(nccl_profile(GpuArchitecture::ampere), EdgeKind::network, ideal) == 1);
}

TEST_CASE("sends and all-to-all flows run NCCL's Simple protocol over their links") {
  const NcclProfile& a100 = nccl_profile(GpuArchitecture::ampere);
  CHECK(point_to_point_efficiency(a100, EdgeKind::nvlink, {}) == doctest::Approx(0.734));
  CHECK(point_to_point_efficiency(a100, EdgeKind::network, {}) == doctest::Approx(0.94));
  const CommChoice all_to_all = choose(GpuArchitecture::ampere, two_dgx_a100(), Collective::all_to_all, GiB);
  CHECK(all_to_all.efficiency[network] == doctest::Approx(0.94));
  // No ring latency: each flow pays its route's own.
  CHECK(all_to_all.phase_latency == doctest::Approx(3.5 * us));
}

TEST_CASE("GPUs of a node joined by PCIe: no LL128, and PCIe hops") {
  // Four GPUs on PCIe: LL's hop is NCCL's PCI 1.0 us scaled by the NVLink fit (1.81 / .6):
  // 6.6 + 6 steps x 3.017 = 24.7 us. NCCL runs no LL128 without NVLink: a forced LL128 runs Simple.
  RingShape pcie;
  pcie.members = 4;
  pcie.nodes = 1;
  pcie.seconds_per_byte[network] = 1 / 25e9;
  pcie.pcie_inside = true;
  const CommChoice small = choose(GpuArchitecture::ada, pcie, Collective::all_reduce, 8);
  CHECK(small.protocol == CommProtocol::ll);
  CHECK(small.seconds == doctest::Approx((6.6 + 6 * 1.81 / 0.6) * us).epsilon(1e-3));
  for (const double bytes : {64 * 1024.0, 8 * MiB, GiB}) {
    CAPTURE(bytes);
    CHECK(choose(GpuArchitecture::ada, pcie, Collective::all_reduce, bytes).protocol != CommProtocol::ll128);
  }
  CommTuning ll128;
  ll128.protocol = CommProtocol::ll128;
  CHECK(choose(GpuArchitecture::ada, pcie, Collective::all_reduce, 8 * MiB, ll128).protocol == CommProtocol::simple);
  // Nor with GPUs of two generations, which also rules NVLS out.
  RingShape mixed = one_node(8, 450e9);
  mixed.one_generation = false;
  const CommChoice choice = choose(GpuArchitecture::hopper, mixed, Collective::all_reduce, 16 * MiB);
  CHECK(choice.algorithm == CommAlgorithm::ring);
  CHECK(choice.protocol != CommProtocol::ll128);
}

TEST_CASE("a group of one moves nothing") {
  CHECK(choose(GpuArchitecture::hopper, one_node(1, 450e9), Collective::all_reduce, GiB).seconds == 0);
}
