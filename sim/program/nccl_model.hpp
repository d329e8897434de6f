#pragma once
// How NCCL runs a collective, as the replay times it: the algorithm (ring; tree for an all-reduce
// across nodes; NVLink SHARP for an all-reduce inside an NVSwitch node of a generation that has
// it) and the protocol (LL, LL128, Simple) are chosen per call by message size and topology the
// way NCCL's tuner does (the candidate with the least predicted time), and the choice sets two
// things the simulation uses:
// - the latency: NCCL's structure, a fixed cost per protocol plus one hop latency per ring step,
//   network steps costing more than NVLink steps (src/graph/tuning.cc);
// - the bandwidth: the fraction of each link a ring edge reaches with that protocol. The flows
//   stay simulated on the platform, carrying their bytes over that fraction, so contention with
//   other traffic still comes out of the simulation.
// The figures are one calibration per GPU generation, fitted to published nccl-tests curves and
// cited in nccl_model.cpp; end-to-end step times are never used. `ideal` collectives (every link
// at full speed, route latency only) are kept for hand derivations and for comparison.
// Not modelled yet: NVLS-Tree (NVLink SHARP inside nodes, a tree across them: such all-reduces run
// as trees or rings here) and CollNet (in-network reduction).
#include <cstdint>
#include <string>

#include "cluster/gpu.hpp"
#include "config/comm_tuning.hpp"
#include "program/program.hpp"

namespace trainsim {

// What a ring edge crosses, as NCCL's costs tell edges apart: NVLink inside a node, or anything
// else (the network between nodes; PCIe between GPUs without NVLink is costed like it).
enum class EdgeKind : std::uint8_t { nvlink, network };
constexpr int edge_kinds = 2;

constexpr int protocols = 3;  // ll, ll128, simple: index = CommProtocol value - 1

// One GPU generation's calibration (sources in nccl_model.cpp).
struct NcclProfile {
  const char* source = "";                 // which generation's measurements these are
  double base_latency[protocols] = {};     // s per collective
  double step_latency[edge_kinds][protocols] = {};  // s per ring step over an edge of that kind
  double pcie_step_latency[protocols] = {};          // s per step between GPUs of a node without NVLink
  double efficiency[edge_kinds][protocols] = {};    // fraction of the edge's bandwidth a ring reaches
  double nvls_latency = 0;                 // s per all-reduce; 0: the generation has no NVLink SHARP
  double nvls_efficiency = 0;              // fraction of each GPU's NVLink bandwidth NVLS reaches
};
const NcclProfile& nccl_profile(GpuArchitecture architecture);

// A group's rings as the platform binding found them.
struct RingShape {
  int members = 0;
  int nodes = 0;
  // Seconds per byte of a member's phase over the most loaded link its edges of each kind
  // cross, all channels together (0: no edge of that kind): the rings' bottleneck at full speed.
  double seconds_per_byte[edge_kinds] = {0, 0};
  double route_latency = 0;  // the longest edge's route latency, which each simulated flow pays itself
  // Every edge crosses NVSwitch ports inside one node: NVLink SHARP may run.
  bool nvswitch = false;
  // Some GPUs of a node reach each other over PCIe, not NVLink: NCCL turns LL128 off.
  bool pcie_inside = false;
  // Every member's GPU is of one generation (NCCL turns LL128 and NVLS off otherwise).
  bool one_generation = true;
};

// How one collective call runs.
struct CommChoice {
  // automatic for calls NCCL runs without one (ideal collectives, all-to-all's direct flows).
  CommAlgorithm algorithm = CommAlgorithm::automatic;
  CommProtocol protocol = CommProtocol::automatic;
  // Latency per ring phase, s, of which each flow pays route_latency itself.
  double phase_latency = 0;
  double efficiency[edge_kinds] = {1, 1};  // bandwidth fraction per edge kind
  // What the ring's flows over each edge kind carry, in times a ring's bytes, so that each link
  // carries the algorithm's traffic: NVLS moves (n + 1) / n of the data through each GPU's
  // links (its share up to be reduced in the switch, the whole result down, multicast) where a
  // ring moves 2 (n - 1) / n; a tree 2 S through each GPU's links and 2 S (N - 1) / N through
  // each of N nodes' NICs.
  double byte_scale[edge_kinds] = {1, 1};
  double seconds = 0;  // predicted alone on the platform: latency + bytes over the slowest edge
};

// The candidate with the least predicted time (ring with each protocol; tree with each for an
// all-reduce across nodes; NVLS for an all-reduce on an NVSwitch node of a generation that has
// it), within what `tuning` forces; a forced algorithm that cannot run a call leaves it to rings. All-to-all is
// not a ring: its flows go directly, with Simple's efficiency and no ring latency.
CommChoice choose_collective(const NcclProfile& profile, const RingShape& ring, Collective collective, double bytes,
                             const CommTuning& tuning);

// How long `bytes` of each member's ring phases take over the rings' bottleneck, each edge kind
// at the choice's byte scale and efficiency.
double transfer_seconds(const RingShape& ring, const CommChoice& choice, double bytes);

// One line on how collectives run under `tuning`, for the summary.
std::string describe(const CommTuning& tuning);

// The bandwidth fraction a send or an all-to-all flow (NCCL's point-to-point, Simple protocol)
// reaches over an edge of this kind.
double point_to_point_efficiency(const NcclProfile& profile, EdgeKind kind, const CommTuning& tuning);

} // namespace trainsim
