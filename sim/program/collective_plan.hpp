#pragma once
// How a collective is decomposed into flows, independent of the simulator:
// ring orders that spread over the nodes' NICs (one ring per channel, as NCCL
// does), and the bytes each rank sends. The replay turns each phase into one
// concurrent flow per ring edge: O(channels x group size) activities per phase.
#include <limits>
#include <utility>
#include <vector>

#include "program/nccl_model.hpp"
#include "program/program.hpp"

namespace trainsim {

// `node_of_member[i]` is the node of the group's i-th member. Returns, per channel,
// a ring over member indices: members of a node stay adjacent, and ring c enters
// each node at its c-th local member, so successive rings cross nodes through
// different GPUs (and so different rail NICs).
std::vector<std::vector<int>> build_rings(const std::vector<int>& node_of_member, int channels);

// Rings per collective when the scenario says "auto": GPUs of the group on its fullest node, or
// one ring for a group inside a single node.
int default_channels(const std::vector<int>& node_of_member);

// Number of sequential ring phases and the bytes each rank sends per phase (all channels together).
struct RingPhases {
  int phases = 0;
  double bytes_per_phase = 0;
};
RingPhases ring_phases(Collective collective, double bytes, int members);

// What an even all-to-all asks of the links its pairs cross: each member sends 1/n of its bytes
// to each other member, every pair's flow at once over its route (NCCL's all-to-all is one
// grouped send and receive per peer).
struct AllToAllLoad {
  struct Link {
    int index = -1;  // into the platform's links (PlatformResources::links)
    double bandwidth = 0;
    // Of one member's bytes, what the pairs crossing the link carry over it, by their route's
    // kind (their flows' efficiency differs): the sum over those pairs, or on a FATPIPE link,
    // where flows do not share the bandwidth, the largest pair's.
    double share[edge_kinds] = {0, 0};
    bool fatpipe = false;
    // The shortest route latency of the pairs crossing it: its flows' first bytes arrive then.
    double latency = std::numeric_limits<double>::infinity();
  };
  std::vector<Link> links;   // every link some pair crosses
  double route_latency = 0;  // the longest pair route's
  // Per member, the links its own flows cross, grouped by the share of its bytes each carries
  // (what the reports count as carried).
  std::vector<std::vector<std::pair<std::vector<int>, double>>> carried;
};

// Bytes one member sends for the whole collective.
double bytes_sent_per_rank(Collective collective, double bytes, int members);

} // namespace trainsim
