#pragma once
// Ranks and their coordinates in the parallel layout, and the process groups
// they form. Rank order puts tp innermost, then cp, then dp, then pp (Megatron's
// default), so that a tensor-parallel group stays inside a node.
#include <vector>

#include "program/program.hpp"

namespace trainsim {

struct RankCoords {
  int dp = 0;
  int tp = 0;
  int pp = 0;
  int cp = 0;
};

struct Layout {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int cp = 1;

  int world() const { return dp * tp * pp * cp; }
  RankCoords coords(int rank) const;
  int rank_of(const RankCoords& coords) const;
  // One data-parallel group per (tp, cp, pp) position, ranks in dp order.
  std::vector<Group> dp_groups() const;
};

Layout layout_of(const Scenario& scenario);

} // namespace trainsim
