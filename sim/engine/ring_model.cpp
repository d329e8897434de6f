#include "engine/ring_model.hpp"

#include "program/collective_plan.hpp"

namespace trainsim {

AnalyticCollective time_analytically(const AnalyticRing& ring, Collective collective, double bytes, int from_phase) {
  const RingPhases phases = ring_phases(collective, bytes, ring.members);
  const int remaining = phases.phases - from_phase;
  return {remaining * (phases.bytes_per_phase / ring.edge_bandwidth + (ring.members - 1) * ring.step_latency),
          remaining * phases.bytes_per_phase};
}

} // namespace trainsim
