#include <doctest/doctest.h>

#include "engine/ring_model.hpp"

using namespace trainsim;

TEST_CASE("the ring model times each phase from the slowest edge plus a latency step per other member") {
  // 4 members, 100 GB/s, 1 us: an all-reduce of 8 MB is 2 phases of 8 MB * 3/4 = 6 MB each;
  // a phase takes 6e6 / 1e11 = 60 us plus 3 steps of 1 us: 63 us, so 126 us and 12 MB per edge.
  const AnalyticRing ring{4, 1e11, 1e-6};
  const AnalyticCollective all_reduce = time_analytically(ring, Collective::all_reduce, 8e6, 0);
  CHECK(all_reduce.seconds == doctest::Approx(126e-6));
  CHECK(all_reduce.edge_bytes == doctest::Approx(12e6));
  // From the second phase on: only the all-gather half is left.
  const AnalyticCollective second_half = time_analytically(ring, Collective::all_reduce, 8e6, 1);
  CHECK(second_half.seconds == doctest::Approx(63e-6));
  CHECK(second_half.edge_bytes == doctest::Approx(6e6));
  // A broadcast pipelines all 8 MB along the ring in one phase: 80 us + 3 us.
  CHECK(time_analytically(ring, Collective::broadcast, 8e6, 0).seconds == doctest::Approx(83e-6));
}

TEST_CASE("the ring model gives a group of one no time and no traffic") {
  const AnalyticCollective alone = time_analytically(AnalyticRing{1, 1e11, 1e-6}, Collective::all_reduce, 8e6, 0);
  CHECK(alone.seconds == 0);
  CHECK(alone.edge_bytes == 0);
}
