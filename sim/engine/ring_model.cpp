#include "engine/ring_model.hpp"

#include <algorithm>

#include "platform/resources.hpp"

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

AllToAllPace even_all_to_all_pace(const AllToAllLoad& load, const CommChoice& choice) {
  AllToAllPace pace;
  for (const AllToAllLoad::Link& link : load.links) {
    double wire = 0;  // per byte of a member's data, at the flows' efficiencies
    for (int kind = 0; kind < edge_kinds; ++kind) {
      const double kind_wire = link.share[kind] / choice.efficiency[kind];
      wire = with_flow(wire, kind_wire, link.fatpipe);
    }
    const double seconds_per_byte = wire / link.bandwidth;
    if (seconds_per_byte > pace.seconds_per_byte) {
      pace.seconds_per_byte = seconds_per_byte;
      pace.bottleneck_latency = link.latency;
    }
  }
  return pace;
}

double even_all_to_all_seconds(const AllToAllLoad& load, const AllToAllPace& pace, double bandwidth_efficiency,
                               double bytes) {
  return std::max(load.route_latency,
                  pace.bottleneck_latency + bytes * pace.seconds_per_byte / bandwidth_efficiency);
}

} // namespace trainsim
