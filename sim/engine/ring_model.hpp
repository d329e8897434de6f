#pragma once
// The fast fidelity's model of a collective on a group inside one node: no flows are simulated.
// Each remaining phase takes the chosen algorithm's latency share and moves its bytes over the
// ring's slowest edge at the choice's efficiency, the way a ring's phase is paced by its
// narrowest link. An even all-to-all (anywhere) is paced by the link its pairs load most.
// Pure arithmetic, no simulator.
#include "program/collective_plan.hpp"
#include "program/nccl_model.hpp"
#include "program/program.hpp"

namespace trainsim {

struct AnalyticCollective {
  double seconds = 0;     // from the start of `from_phase` to the end of the collective
  double edge_bytes = 0;  // what those phases carry over each member's ring edge
};

// A collective of `bytes` (all-to-all excluded: see below) from phase `from_phase` on, run as
// `choice` says, its flows reaching `bandwidth_efficiency` of the rate the choice gives them
// (comm.bandwidth_efficiency).
AnalyticCollective time_analytically(const RingShape& ring, const CommChoice& choice, double bandwidth_efficiency,
                                     Collective collective, double bytes, int from_phase);

// Seconds per byte of each member's data in an even all-to-all whose flows all start together,
// each at the choice's efficiency for its route's kind (comm.bandwidth_efficiency aside): what
// its most loaded link needs. Max-min sharing gives every flow across that link an equal rate,
// and they all carry the same bytes, so they finish together when it has carried its load; the
// flows elsewhere, on less loaded links, are done by then. Add the longest route's latency.
double even_all_to_all_seconds_per_byte(const AllToAllLoad& load, const CommChoice& choice);

} // namespace trainsim
