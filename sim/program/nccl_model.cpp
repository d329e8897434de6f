#include "program/nccl_model.hpp"

#include <algorithm>
#include <cmath>

#include "program/collective_plan.hpp"

namespace trainsim {
namespace {

constexpr double us = 1e-6;
constexpr int ll = 0, ll128 = 1, simple = 2;
constexpr int nvlink = static_cast<int>(EdgeKind::nvlink), network = static_cast<int>(EdgeKind::network);

// Sources of the figures below.
// [tuning] NCCL src/graph/tuning.cc, v2.18-v2.21: baseLat of Ring LL / LL128 / Simple 6.6 / 14 /
//   8.4 us; hop latencies (hwLat) of Ring over NVLink .6 / 1.9 / 3.4 us, over the network 2.7 /
//   4.0 / 14 us; the Ring LL128 bandwidth is .92 of Simple's and Ring LL a quarter of it (v2.18-
//   v2.20); a ring all-reduce takes 2 (n - 1) steps of which 2 x nodes cross the network.
// [oci-a100] nccl-tests all_reduce_perf on 8 A100-SXM4-40GB (NVSwitch), Oracle's tutorial
//   oracle-japan/ocitutorials, tutorials/_intermediates/spinup-gpu-cluster.md: 32.0 us flat from
//   64 B to 32 KB; 245 us at 16 MB, 590 at 64 MB, 2122 at 256 MB, 8167 at 1 GB, 63929 at 8 GB.
// [azure-a100] nccl-tests all_reduce_perf on ND A100 v4 (8 A100-SXM4-80GB, NCCL 2.18.5),
//   Azure/AI-benchmarking-guide, Azure_Results/ND_A100_v4_results.md: busbw 109 GB/s at 16 MB,
//   167 at 64 MB, 214 at 256 MB, 228 at 1 GB, 232 at 8 GB.
// [meta-a100-2n] nccl-tests all_reduce_perf on 2 x 8 A100-SXM4-80GB over 8 x 200 Gb/s InfiniBand
//   (NCCL 2.12.12), facebookresearch/gcm's sample output: 957 us at 64 MB, 2966 at 256 MB, 11013
//   at 1 GB.
// [nccl-tests-290] NVIDIA/nccl-tests issue 290, a maintainer: 46-48 GB/s per 400 Gb/s NIC.
// [nccl-tests-212] NVIDIA/nccl-tests issue 212, a maintainer: on 8 H100s ~370 GB/s bus bandwidth
//   for rings (450 GB/s NVLink), ~480 GB/s for all-reduce with NVLink SHARP; NVIDIA/nccl issue
//   1455: rings 365-370 GB/s on 2 to 8 H100s.
// [azure-h100] nccl-tests all_reduce_perf with NCCL_ALGO=NVLS on ND H100 v5 (8 H100 80GB, NCCL
//   2.18.5), Azure/AI-benchmarking-guide, "Azure Results/ND_H100_v5_results.md": busbw 172 GB/s
//   at 8 MB, 234 at 16 MB, 362 at 64 MB, 423 at 256 MB, 466 at 1 GB, 479 at 8 GB.

// Ampere: LL's hop over NVLink from [oci-a100]'s flat latency, (32.0 - 6.6) / 14 steps = 1.81 us;
// Simple's latency and efficiency fitted together to [oci-a100] and [azure-a100] from 16 MB to
// 8 GB (least maximum relative error: 124 us and .734 of 300 GB/s, every point within 12 %, the
// two sources being 10-20 % apart in the middle), so its hop is (124 - 8.4) / 14 = 8.26 us;
// LL128's hop is [tuning]'s LL128 / LL ratio (1.9 / .6) times LL's. The network's Simple hop from
// [meta-a100-2n]'s intercept, about 290 us on 16 GPUs: (290 - 8.4 - 26 x 8.26) / 4 = 16.7 us; its
// LL and LL128 hops scaled from Simple's by [tuning]'s network ratios (2.7 and 4.0 to 14); its
// Simple efficiency .94 from [nccl-tests-290] (47 of 50 GB/s; [meta-a100-2n] reaches 183 GB/s of
// 200 at 1 GB). LL128 and LL efficiencies: [tuning]'s .92 and a quarter of Simple's.
constexpr NcclProfile ampere_profile() {
  NcclProfile p;
  p.source = "A100";
  p.base_latency[ll] = 6.6 * us;
  p.base_latency[ll128] = 14 * us;
  p.base_latency[simple] = 8.4 * us;
  p.step_latency[nvlink][ll] = 1.81 * us;
  p.step_latency[nvlink][ll128] = 1.81 * 1.9 / 0.6 * us;
  p.step_latency[nvlink][simple] = 8.26 * us;
  p.step_latency[network][ll] = 16.7 * 2.7 / 14 * us;
  p.step_latency[network][ll128] = 16.7 * 4.0 / 14 * us;
  p.step_latency[network][simple] = 16.7 * us;
  // PCIe between a node's GPUs: [tuning]'s PCI hops (1.0 / 2.5 / 5.7 us) scaled as the NVLink
  // hops were by their fit (LL and LL128 by 1.81 / .6, Simple by 8.26 / 3.4): no published PCIe
  // curve used. (NCCL runs no LL128 there.)
  p.pcie_step_latency[ll] = 1.0 * 1.81 / 0.6 * us;
  p.pcie_step_latency[ll128] = 2.5 * 1.81 / 0.6 * us;
  p.pcie_step_latency[simple] = 5.7 * 8.26 / 3.4 * us;
  const double simple_efficiency[edge_kinds] = {0.734, 0.94};
  for (int kind = 0; kind < edge_kinds; ++kind) {
    p.efficiency[kind][simple] = simple_efficiency[kind];
    p.efficiency[kind][ll128] = 0.92 * simple_efficiency[kind];
    p.efficiency[kind][ll] = 0.25 * simple_efficiency[kind];
  }
  return p;
}

// Hopper: Ampere's latencies (no published H100 ring curve from small sizes with default tuning);
// rings over NVLink at 370 of 450 GB/s [nccl-tests-212]; NVLink SHARP's latency and efficiency
// fitted together to [azure-h100] from 16 MB to 8 GB, where NCCL runs it and tensor-parallel
// all-reduces fall (66 us and .664: each GPU's links carry 9/8 of the data at .664 x 450 GB/s,
// every point within 3.2 %; the same fit from 8 MB on gives 58 us and .648, within 6 %). With
// these, NVLS's byte count (n + 1) / n alone predicts NVIDIA/nccl issue 1455's bus bandwidth on 4
// to 8 H100s within 5 % (359, 399, 428, 466 GB/s on 4, 5, 6, 8 GPUs against 370, 420, 440, 480).
constexpr NcclProfile hopper_profile() {
  NcclProfile p = ampere_profile();
  p.source = "H100";
  const double ring_nvlink = 370.0 / 450.0;
  p.efficiency[nvlink][simple] = ring_nvlink;
  p.efficiency[nvlink][ll128] = 0.92 * ring_nvlink;
  p.efficiency[nvlink][ll] = 0.25 * ring_nvlink;
  p.nvls_latency = 66 * us;
  p.nvls_efficiency = 0.664;
  return p;
}

constexpr NcclProfile ampere = ampere_profile();
constexpr NcclProfile hopper = hopper_profile();

// [tuning]: 2 (n - 1) for an all-reduce, n for a broadcast (pipelined along the ring), n - 1 else.
double ring_steps(Collective collective, int members) {
  return collective == Collective::all_reduce ? 2.0 * (members - 1)
         : collective == Collective::broadcast ? members
                                               : members - 1.0;
}

// Steps whose hop crosses the network ([tuning]: 2 x nodes for an all-reduce, nodes for a
// broadcast, nodes - 1 else).
double network_steps(Collective collective, int nodes, double steps) {
  if (nodes <= 1)
    return 0;
  const double across = collective == Collective::all_reduce ? 2.0 * nodes
                        : collective == Collective::broadcast ? nodes
                                                              : nodes - 1.0;
  return std::min(steps, across);
}

// A hop between two GPUs of a node.
double intra_node_hop(const NcclProfile& profile, const RingShape& ring, int protocol) {
  return ring.pcie_inside ? profile.pcie_step_latency[protocol] : profile.step_latency[nvlink][protocol];
}

// NCCL enables LL128 only where a node's GPUs talk over NVLink, all of one generation.
bool ll128_runs(const RingShape& ring) { return !ring.pcie_inside && ring.one_generation; }

CommChoice ring_choice(const NcclProfile& profile, const RingShape& ring, Collective collective, double bytes,
                       int protocol) {
  CommChoice choice;
  choice.algorithm = CommAlgorithm::ring;
  choice.protocol = static_cast<CommProtocol>(protocol + 1);
  const RingPhases phases = ring_phases(collective, bytes, ring.members);
  const double steps = ring_steps(collective, ring.members);
  const double across = network_steps(collective, ring.nodes, steps);
  const double latency = profile.base_latency[protocol] + (steps - across) * intra_node_hop(profile, ring, protocol) +
                         across * profile.step_latency[network][protocol];
  for (int kind = 0; kind < edge_kinds; ++kind)
    choice.efficiency[kind] = profile.efficiency[kind][protocol];
  choice.phase_latency = latency / phases.phases;
  choice.seconds = latency + transfer_seconds(ring, choice, phases.phases * phases.bytes_per_phase);
  return choice;
}

CommChoice nvls_choice(const NcclProfile& profile, const RingShape& ring, double bytes) {
  CommChoice choice;
  choice.algorithm = CommAlgorithm::nvls;
  choice.protocol = CommProtocol::simple;
  const double n = ring.members;
  const RingPhases phases = ring_phases(Collective::all_reduce, bytes, ring.members);
  choice.byte_scale[nvlink] = (n + 1) / (2 * (n - 1));
  choice.efficiency[nvlink] = profile.nvls_efficiency;
  choice.phase_latency = profile.nvls_latency / phases.phases;
  choice.seconds = profile.nvls_latency +
                   transfer_seconds(ring, choice, phases.phases * phases.bytes_per_phase);
  return choice;
}

// [tuning]'s treeCorrectionFactor: how much of its modelled bandwidth NCCL's tree reaches, by
// protocol and log2(bytes / 64) from 64 B to 256 MB (1 beyond), its own measured correction.
double tree_correction(int protocol, double bytes) {
  static const double factors[protocols][23] = {
      {1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1},
      {1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1, 1},
      {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
  const int index = static_cast<int>(std::floor(std::log2(std::max(bytes / 64, 1.0))));
  return index < 23 ? factors[protocol][index] : 1.0;
}

// NCCL's tree all-reduce across nodes: a chain through each node's GPUs and a double binary tree
// over the nodes, reducing up and broadcasting down. Each GPU's links carry 2 S per direction
// (the whole buffer up the chain, then down), each node's NICs 2 S (N - 1) / N on average (every
// node but a tree's root sends its half up once, and receives it once coming down), against a
// ring's 2 S (n - 1) / n for both: the ring's flows carry the tree's bytes (half a ring's across
// two nodes, why trees shine there). Its latency is logarithmic in the nodes ([tuning]: base + 2 x
// ((GPUs per node - 1) intra-node hops + log2(nodes) network hops), with the ring's calibrated
// hops: NCCL's own tree rows, scaled alike, would put two nodes' 8-byte all-reduce at 44 us against
// Oracle's 36.5), and its bandwidth that of [tuning]'s tree model, times its size correction.
CommChoice tree_choice(const NcclProfile& profile, const RingShape& ring, double bytes, int protocol) {
  static const double base_latency[protocols] = {6.8 * us, 14 * us, 0};
  // Tree busBw: .92 of the links' for every protocol, then 1/3.8 for LL and 120/128 for LL128
  // across nodes; the ring's LL is 1/4 and LL128 .92 of Simple's.
  static const double relative_to_ring[protocols] = {0.92 / 3.8 / 0.25, 0.92 * (120.0 / 128) / 0.92, 0.92};
  CommChoice choice;
  choice.algorithm = CommAlgorithm::tree;
  choice.protocol = static_cast<CommProtocol>(protocol + 1);
  const RingPhases phases = ring_phases(Collective::all_reduce, bytes, ring.members);
  const double per_node = std::ceil(static_cast<double>(ring.members) / ring.nodes);
  const double latency =
      base_latency[protocol] + 2 * ((per_node - 1) * intra_node_hop(profile, ring, protocol) +
                                    std::floor(std::log2(ring.nodes)) * profile.step_latency[network][protocol]);
  const double correction = tree_correction(protocol, bytes);
  for (int kind = 0; kind < edge_kinds; ++kind)
    choice.efficiency[kind] = profile.efficiency[kind][protocol] * relative_to_ring[protocol] * correction;
  const double n = ring.members, nodes = ring.nodes;
  choice.byte_scale[nvlink] = n / (n - 1);
  choice.byte_scale[network] = (nodes - 1) / nodes * n / (n - 1);
  choice.phase_latency = latency / phases.phases;
  choice.seconds = latency + transfer_seconds(ring, choice, phases.phases * phases.bytes_per_phase);
  return choice;
}

bool nvls_runs(const NcclProfile& profile, const RingShape& ring, Collective collective) {
  return profile.nvls_latency > 0 && ring.nvswitch && ring.one_generation && ring.nodes == 1 && ring.members > 1 &&
         collective == Collective::all_reduce;
}

// NCCL's trees run all-reduces; across nodes is where their logarithmic latency matters (inside
// one node a chain is no shorter than a ring).
bool tree_runs(const RingShape& ring, Collective collective) {
  return collective == Collective::all_reduce && ring.nodes > 1;
}

} // namespace

// Volta, Ada, AMD's CDNA3 (RCCL) and GPUs of unknown generation take Ampere's figures, Blackwell
// Hopper's: no published curves of their own are used yet.
const NcclProfile& nccl_profile(GpuArchitecture architecture) {
  switch (architecture) {
  case GpuArchitecture::hopper:
  case GpuArchitecture::blackwell: return hopper;
  default: return ampere;
  }
}

CommChoice choose_collective(const NcclProfile& profile, const RingShape& ring, Collective collective, double bytes,
                             const CommTuning& tuning) {
  CommChoice choice;
  if (ring.members <= 1)
    return choice;
  if (collective == Collective::all_to_all) {
    for (int kind = 0; kind < edge_kinds; ++kind)
      choice.efficiency[kind] = point_to_point_efficiency(profile, static_cast<EdgeKind>(kind), tuning);
    choice.phase_latency = ring.route_latency;
    return choice;
  }
  if (tuning.ideal) {
    const RingPhases phases = ring_phases(collective, bytes, ring.members);
    choice.phase_latency = (ring.members - 1) * ring.route_latency;
    choice.seconds = phases.phases * choice.phase_latency +
                     transfer_seconds(ring, choice, phases.phases * phases.bytes_per_phase);
    return choice;
  }
  bool chosen = false;
  const auto consider = [&](const CommChoice& candidate) {
    if (!chosen || candidate.seconds < choice.seconds)
      choice = candidate;
    chosen = true;
  };
  const auto allowed = [&](int protocol) {
    if (protocol == ll128 && !ll128_runs(ring))
      return false;
    return tuning.protocol == CommProtocol::automatic || static_cast<int>(tuning.protocol) == protocol + 1;
  };
  const auto wanted = [&](CommAlgorithm algorithm) {
    return tuning.algorithm == CommAlgorithm::automatic || tuning.algorithm == algorithm;
  };
  if (nvls_runs(profile, ring, collective) && wanted(CommAlgorithm::nvls) && allowed(simple))
    consider(nvls_choice(profile, ring, bytes));
  if (tree_runs(ring, collective) && wanted(CommAlgorithm::tree))
    for (int protocol = ll; protocol <= simple; ++protocol)
      if (allowed(protocol))
        consider(tree_choice(profile, ring, bytes, protocol));
  // A forced NVLS or tree leaves rings to the calls it cannot run.
  if (!chosen || tuning.algorithm == CommAlgorithm::automatic || tuning.algorithm == CommAlgorithm::ring)
    for (int protocol = ll; protocol <= simple; ++protocol)
      if (allowed(protocol))
        consider(ring_choice(profile, ring, collective, bytes, protocol));
  // A forced LL128 where NCCL turns it off: Simple, as NCCL falls back.
  if (!chosen)
    consider(ring_choice(profile, ring, collective, bytes, simple));
  return choice;
}

double transfer_seconds(const RingShape& ring, const CommChoice& choice, double bytes) {
  double seconds_per_byte = 0;
  for (int kind = 0; kind < edge_kinds; ++kind)
    if (ring.seconds_per_byte[kind] > 0)
      seconds_per_byte =
          std::max(seconds_per_byte, ring.seconds_per_byte[kind] * choice.byte_scale[kind] / choice.efficiency[kind]);
  return bytes * seconds_per_byte;
}

std::string describe(const CommTuning& tuning) {
  if (tuning.ideal)
    return "ideal: every link at full bandwidth, a route latency per ring step";
  const std::string algorithm = tuning.algorithm == CommAlgorithm::automatic ? "algorithm"
                                : tuning.algorithm == CommAlgorithm::ring   ? "rings"
                                : tuning.algorithm == CommAlgorithm::tree   ? "trees where they run, else rings"
                                                                            : "NVLS where it runs, else rings";
  const std::string protocol = tuning.protocol == CommProtocol::automatic ? "protocol" : to_string(tuning.protocol);
  const bool both_chosen = tuning.algorithm == CommAlgorithm::automatic && tuning.protocol == CommProtocol::automatic;
  return "nccl: " + (both_chosen ? "algorithm and protocol chosen per call by size and group"
                                 : algorithm + ", " + protocol +
                                       (tuning.protocol == CommProtocol::automatic ? " chosen per call" : "")) +
         ", at the latency and bandwidth of published nccl-tests curves";
}

double point_to_point_efficiency(const NcclProfile& profile, EdgeKind kind, const CommTuning& tuning) {
  return tuning.ideal ? 1.0 : profile.efficiency[static_cast<int>(kind)][simple];
}

} // namespace trainsim
