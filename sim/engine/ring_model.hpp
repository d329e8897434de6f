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

// An even all-to-all whose flows all start together, each at the choice's efficiency for its
// route's kind (comm.bandwidth_efficiency aside), is paced by its most loaded link: max-min
// sharing gives every flow across that link an equal rate, and they all carry the same bytes, so
// they finish together when it has carried its load; the flows elsewhere, on less loaded links,
// are done by then. The first of them arrive after the shortest route latency among them.
struct AllToAllPace {
  double seconds_per_byte = 0;    // of each member's data, over the most loaded link
  double bottleneck_latency = 0;  // the shortest route latency of the pairs crossing it
};
AllToAllPace even_all_to_all_pace(const AllToAllLoad& load, const CommChoice& choice);

// A call of `bytes` per member at that pace, its flows at `bandwidth_efficiency` of it: the
// bottleneck's latency and load, or, for small calls, the longest route's latency.
double even_all_to_all_seconds(const AllToAllLoad& load, const AllToAllPace& pace, double bandwidth_efficiency,
                               double bytes);

} // namespace trainsim
