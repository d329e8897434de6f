#include "engine/ring_model.hpp"

#include <algorithm>

namespace trainsim {

AnalyticCollective time_analytically(const RingShape& ring, const CommChoice& choice, double bandwidth_efficiency,
                                     Collective collective, double bytes, int from_phase) {
  const RingPhases phases = ring_phases(collective, bytes, ring.members);
  const int remaining = phases.phases - from_phase;
  // A node's ring has edges of one kind: NVLink, or PCIe (costed as the network).
  const EdgeKind kind = ring.seconds_per_byte[static_cast<int>(EdgeKind::nvlink)] > 0 ? EdgeKind::nvlink : EdgeKind::network;
  const double edge_bytes = phases.bytes_per_phase * choice.byte_scale[static_cast<int>(kind)];
  const double transfer = transfer_seconds(ring, choice, phases.bytes_per_phase) / bandwidth_efficiency;
  return {remaining * (transfer + choice.phase_latency), remaining * edge_bytes};
}

double even_all_to_all_seconds_per_byte(const AllToAllLoad& load, const CommChoice& choice) {
  double seconds = 0;
  for (const AllToAllLoad::Link& link : load.links) {
    double wire = 0;
    for (int kind = 0; kind < edge_kinds; ++kind)
      wire += link.share[kind] / choice.efficiency[kind];
    seconds = std::max(seconds, wire / link.bandwidth);
  }
  return seconds;
}

} // namespace trainsim
