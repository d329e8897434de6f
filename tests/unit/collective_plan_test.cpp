#include <doctest/doctest.h>

#include <algorithm>

#include "program/collective_plan.hpp"

using namespace trainsim;

TEST_CASE("rings keep a node's members adjacent and enter each node at a different member") {
  // Two nodes of eight GPUs; member i is on node i / 8.
  std::vector<int> node_of_member;
  for (int i = 0; i < 16; ++i)
    node_of_member.push_back(i / 8);
  CHECK(default_channels(node_of_member) == 8);
  CHECK(default_channels(std::vector<int>(8, 0)) == 1);  // one node: one ring
  const auto rings = build_rings(node_of_member, 8);
  REQUIRE(rings.size() == 8);
  std::vector<int> exit_members;
  for (std::size_t c = 0; c < rings.size(); ++c) {
    CAPTURE(c);
    std::vector<int> sorted = rings[c];
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < 16; ++i)
      CHECK(sorted[i] == i);  // a permutation of the members
    // Exactly two node crossings per ring: positions 7 -> 8 and 15 -> 0.
    int crossings = 0;
    for (int k = 0; k < 16; ++k)
      crossings += node_of_member[rings[c][k]] != node_of_member[rings[c][(k + 1) % 16]];
    CHECK(crossings == 2);
    CHECK(rings[c][0] == static_cast<int>(c));  // ring c enters node 0 at its c-th GPU
    exit_members.push_back(rings[c][7]);
  }
  // The GPU that leaves node 0 differs per ring, so each rail NIC carries one ring.
  std::sort(exit_members.begin(), exit_members.end());
  CHECK(std::adjacent_find(exit_members.begin(), exit_members.end()) == exit_members.end());
}

TEST_CASE("rings cross between nodes on one rail: local GPU k to local GPU k") {
  // Four nodes of eight: every crossing, the wrap-around included, joins GPUs of equal local index.
  std::vector<int> node_of_member;
  for (int i = 0; i < 32; ++i)
    node_of_member.push_back(i / 8);
  const auto rings = build_rings(node_of_member, 8);
  std::vector<int> crossings_per_rail(8, 0);
  for (const auto& ring : rings) {
    for (std::size_t k = 0; k < ring.size(); ++k) {
      const int from = ring[k], to = ring[(k + 1) % ring.size()];
      if (node_of_member[from] == node_of_member[to])
        continue;
      CHECK(from % 8 == to % 8);
      ++crossings_per_rail[from % 8];
    }
  }
  // 8 rings x 4 crossings, spread evenly: 4 per rail.
  CHECK(std::all_of(crossings_per_rail.begin(), crossings_per_rail.end(), [](int n) { return n == 4; }));
}

TEST_CASE("ring phases and bytes per rank follow the ring algorithms") {
  // Ring all-reduce: each rank sends 2(n-1)/n of the buffer (Patarasuk & Yuan 2009).
  CHECK(bytes_sent_per_rank(Collective::all_reduce, 1600, 16) == doctest::Approx(2 * 1600 * 15.0 / 16));
  CHECK(ring_phases(Collective::all_reduce, 1600, 16).phases == 2);
  CHECK(bytes_sent_per_rank(Collective::reduce_scatter, 800, 8) == doctest::Approx(700));
  CHECK(bytes_sent_per_rank(Collective::all_gather, 800, 8) == doctest::Approx(700));
  CHECK(bytes_sent_per_rank(Collective::all_reduce, 1600, 1) == 0);
}
