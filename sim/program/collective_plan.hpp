#pragma once
// How a collective is decomposed into flows, independent of the simulator:
// ring orders that spread over the nodes' NICs (one ring per channel, as NCCL
// does), and the bytes each rank sends. The replay turns each phase into one
// concurrent flow per ring edge: O(channels x group size) activities per phase.
#include <vector>

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

// Bytes one member sends for the whole collective.
double bytes_sent_per_rank(Collective collective, double bytes, int members);

} // namespace trainsim
