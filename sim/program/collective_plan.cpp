#include "program/collective_plan.hpp"

#include <algorithm>
#include <map>

namespace trainsim {

std::vector<std::vector<int>> build_rings(const std::vector<int>& node_of_member, int channels) {
  std::vector<int> node_order;
  std::map<int, std::vector<int>> members_of_node;
  for (int i = 0; i < static_cast<int>(node_of_member.size()); ++i) {
    auto& local = members_of_node[node_of_member[i]];
    if (local.empty())
      node_order.push_back(node_of_member[i]);
    local.push_back(i);
  }
  // Ring c enters the first node at its c-th GPU and walks the node upwards, leaving from the
  // GPU before c; the next node is entered at that same local GPU and walked downwards, so it is
  // left from the c-th; and so on, alternating. A ring thus moves between nodes on one rail
  // (local GPU k to local GPU k, NIC k to NIC k), as NCCL's rings do on rail-optimised networks,
  // and every rail carries one ring each way.
  std::vector<std::vector<int>> rings(static_cast<std::size_t>(std::max(channels, 1)));
  for (std::size_t c = 0; c < rings.size(); ++c)
    for (std::size_t position = 0; position < node_order.size(); ++position) {
      const auto& local = members_of_node[node_order[position]];
      const std::size_t size = local.size();
      for (std::size_t k = 0; k < size; ++k)
        rings[c].push_back(position % 2 == 0 ? local[(c + k) % size] : local[(c + 2 * size - 1 - k) % size]);
    }
  return rings;
}

int default_channels(const std::vector<int>& node_of_member) {
  std::map<int, int> per_node;
  int fullest = 1;
  for (int node : node_of_member)
    fullest = std::max(fullest, ++per_node[node]);
  // Inside one node every GPU has its own switch port, so one ring already runs each port at
  // full speed; more rings would only add simulated flows.
  return per_node.size() == 1 ? 1 : fullest;
}

RingPhases ring_phases(Collective collective, double bytes, int members) {
  if (members <= 1)
    return {0, 0};
  const double n = members;
  switch (collective) {
  case Collective::all_reduce: return {2, bytes * (n - 1) / n};     // reduce-scatter, then all-gather
  case Collective::reduce_scatter:
  case Collective::all_gather: return {1, bytes * (n - 1) / n};
  case Collective::broadcast: return {1, bytes};                     // pipelined along the ring
  case Collective::all_to_all: return {1, bytes * (n - 1) / n};      // direct, not a ring
  }
  return {0, 0};
}

double bytes_sent_per_rank(Collective collective, double bytes, int members) {
  const RingPhases phases = ring_phases(collective, bytes, members);
  return phases.phases * phases.bytes_per_phase;
}

} // namespace trainsim
