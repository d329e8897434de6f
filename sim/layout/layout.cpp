#include "layout/layout.hpp"

#include <string>

namespace trainsim {

RankCoords Layout::coords(int rank) const {
  RankCoords c;
  c.tp = rank % tp;
  rank /= tp;
  c.cp = rank % cp;
  rank /= cp;
  c.dp = rank % dp;
  c.pp = rank / dp;
  return c;
}

int Layout::rank_of(const RankCoords& c) const { return c.tp + tp * (c.cp + cp * (c.dp + dp * c.pp)); }

std::vector<Group> Layout::dp_groups() const {
  std::vector<Group> groups;
  for (int p = 0; p < pp; ++p)
    for (int c = 0; c < cp; ++c)
      for (int t = 0; t < tp; ++t) {
        Group group;
        group.name = "dp" + std::to_string(groups.size());
        group.kind = "dp";
        for (int d = 0; d < dp; ++d)
          group.ranks.push_back(rank_of({d, t, p, c}));
        groups.push_back(std::move(group));
      }
  return groups;
}

Layout layout_of(const Scenario& scenario) {
  Layout layout;
  layout.dp = scenario.dp;
  return layout;
}

} // namespace trainsim
