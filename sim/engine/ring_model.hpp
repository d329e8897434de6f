#pragma once
// The fast fidelity's model of a collective on a group inside one node: no flows are simulated;
// the ring's slowest edge times it. Each phase moves its bytes over that edge and adds a step of
// route latency for each of the ring's other members, the way a ring's phase is paced by its
// narrowest link. Pure arithmetic, no simulator.
#include <limits>

#include "program/program.hpp"

namespace trainsim {

// A group's ring as the model sees it.
struct AnalyticRing {
  int members = 0;
  double edge_bandwidth = std::numeric_limits<double>::infinity();  // the narrowest link of any ring edge, bytes/s
  double step_latency = 0;                                          // the longest ring edge's route latency, s
};

struct AnalyticCollective {
  double seconds = 0;     // from the start of `from_phase` to the end of the collective
  double edge_bytes = 0;  // what those phases carry over each member's ring edge
};

// A collective of `bytes` (all-to-all excluded: it is always simulated as flows) from phase
// `from_phase` on.
AnalyticCollective time_analytically(const AnalyticRing& ring, Collective collective, double bytes, int from_phase);

} // namespace trainsim
