#pragma once
// The fast fidelity's model of a collective on a group inside one node: no flows are simulated.
// Each remaining phase takes the chosen algorithm's latency share and moves its bytes over the
// ring's slowest edge at the choice's efficiency, the way a ring's phase is paced by its
// narrowest link. Pure arithmetic, no simulator.
#include "program/nccl_model.hpp"
#include "program/program.hpp"

namespace trainsim {

struct AnalyticCollective {
  double seconds = 0;     // from the start of `from_phase` to the end of the collective
  double edge_bytes = 0;  // what those phases carry over each member's ring edge
};

// A collective of `bytes` (all-to-all excluded: it is always simulated as flows) from phase
// `from_phase` on, run as `choice` says, its flows reaching `bandwidth_efficiency` of the rate
// the choice gives them (comm.bandwidth_efficiency).
AnalyticCollective time_analytically(const RingShape& ring, const CommChoice& choice, double bandwidth_efficiency,
                                     Collective collective, double bytes, int from_phase);

} // namespace trainsim
