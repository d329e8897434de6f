#include <doctest/doctest.h>

#include "engine/ring_model.hpp"

using namespace trainsim;

namespace {

// Ideal collectives on `members` GPUs of one node, each port 100 GB/s, 1 us per route.
RingShape ideal_ring(int members) {
  RingShape ring;
  ring.members = members;
  ring.nodes = 1;
  ring.seconds_per_byte[static_cast<int>(EdgeKind::nvlink)] = 1 / 1e11;
  ring.route_latency = 1e-6;
  return ring;
}

AnalyticCollective ideal(const RingShape& ring, Collective collective, double bytes, int from_phase) {
  CommTuning tuning;
  tuning.ideal = true;
  const CommChoice choice = choose_collective(nccl_profile(GpuArchitecture::ampere), ring, collective, bytes, tuning);
  return time_analytically(ring, choice, 1, collective, bytes, from_phase);
}

} // namespace

TEST_CASE("the ring model times each phase from the slowest edge plus a latency step per other member") {
  // 4 members, 100 GB/s, 1 us: an all-reduce of 8 MB is 2 phases of 8 MB * 3/4 = 6 MB each;
  // a phase takes 6e6 / 1e11 = 60 us plus 3 steps of 1 us: 63 us, so 126 us and 12 MB per edge.
  const RingShape ring = ideal_ring(4);
  const AnalyticCollective all_reduce = ideal(ring, Collective::all_reduce, 8e6, 0);
  CHECK(all_reduce.seconds == doctest::Approx(126e-6));
  CHECK(all_reduce.edge_bytes == doctest::Approx(12e6));
  // From the second phase on: only the all-gather half is left.
  const AnalyticCollective second_half = ideal(ring, Collective::all_reduce, 8e6, 1);
  CHECK(second_half.seconds == doctest::Approx(63e-6));
  CHECK(second_half.edge_bytes == doctest::Approx(6e6));
  // A broadcast pipelines all 8 MB along the ring in one phase: 80 us + 3 us.
  CHECK(ideal(ring, Collective::broadcast, 8e6, 0).seconds == doctest::Approx(83e-6));
}

TEST_CASE("the ring model gives a group of one no time and no traffic") {
  const AnalyticCollective alone = ideal(ideal_ring(1), Collective::all_reduce, 8e6, 0);
  CHECK(alone.seconds == 0);
  CHECK(alone.edge_bytes == 0);
}

TEST_CASE("the ring model takes the choice's latency and efficiency and the scenario's bandwidth efficiency") {
  // A chosen Simple ring with .5 of the links and 10 us per phase, at a further .8: each phase
  // of an 8 MB all-reduce on 4 members moves 6 MB at 100 GB/s x .5 x .8 = 40 GB/s: 150 us + 10 us.
  CommChoice choice;
  choice.efficiency[static_cast<int>(EdgeKind::nvlink)] = 0.5;
  choice.phase_latency = 10e-6;
  CHECK(time_analytically(ideal_ring(4), choice, 0.8, Collective::all_reduce, 8e6, 0).seconds ==
        doctest::Approx(2 * 160e-6));
}

TEST_CASE("an even all-to-all is paced by the link its pairs load most, each kind at its own efficiency") {
  // 16 members on two nodes: a member's NVLink port carries its 7 pairs inside the node (7/16 of
  // its bytes) at 450 GB/s and .8 of it: 7/16 / 360e9 = 1.2e-12 s per byte; its 50 GB/s NIC the 8
  // pairs leaving the node (8/16) at .94: 0.5 / 47e9 = 1.064e-11 s per byte, the bottleneck. A
  // link carrying both kinds adds each at its own efficiency: 0.25 / (100e9 x .8) + 0.25 / (100e9
  // x .94) = 5.78e-12, below the NIC.
  AllToAllLoad load;
  load.links.push_back({0, 450e9, {7.0 / 16, 0}, false, 1e-6});
  load.links.push_back({1, 50e9, {0, 0.5}, false, 3e-6});
  load.links.push_back({2, 100e9, {0.25, 0.25}, false, 2e-6});
  load.route_latency = 4e-6;
  CommChoice choice;
  choice.efficiency[static_cast<int>(EdgeKind::nvlink)] = 0.8;
  choice.efficiency[static_cast<int>(EdgeKind::network)] = 0.94;
  AllToAllPace pace = even_all_to_all_pace(load, choice);
  CHECK(pace.seconds_per_byte == doctest::Approx(0.5 / (0.94 * 50e9)));
  // The NIC's flows start arriving after the shortest route across it (3 us); 1 GB at .5 of the
  // bandwidth: 3 us + 1e9 x 0.5 / 47e9 / .5 = 21.28 ms. A small call takes the longest route's 4 us.
  CHECK(pace.bottleneck_latency == 3e-6);
  CHECK(even_all_to_all_seconds(load, pace, 0.5, 1e9) == doctest::Approx(3e-6 + 1e9 * 0.5 / 47e9 / 0.5));
  CHECK(even_all_to_all_seconds(load, pace, 1, 1) == 4e-6);
  // A slower shared link takes over: 0.25 / 80e9 + 0.25 / 94e9 at a tenth of the bandwidth.
  load.links[2].bandwidth = 10e9;
  pace = even_all_to_all_pace(load, choice);
  CHECK(pace.seconds_per_byte == doctest::Approx(0.25 / 8e9 + 0.25 / 9.4e9));
  CHECK(pace.bottleneck_latency == 2e-6);
  // A FATPIPE gives each flow the whole bandwidth: the larger kind's pair, not the sum.
  load.links[2].fatpipe = true;
  CHECK(even_all_to_all_pace(load, choice).seconds_per_byte == doctest::Approx(0.25 / 8e9));
  // No link: nothing to carry (a group of one).
  CHECK(even_all_to_all_pace(AllToAllLoad{}, choice).seconds_per_byte == 0);
}
