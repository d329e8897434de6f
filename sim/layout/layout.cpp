#include "layout/layout.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "common/text.hpp"

namespace trainsim {
namespace {

int& coordinate(RankCoords& c, Dim dim) {
  switch (dim) {
  case Dim::tp: return c.tp;
  case Dim::cp: return c.cp;
  case Dim::dp: return c.dp;
  case Dim::pp: return c.pp;
  }
  return c.tp;
}

Dim dim_from(const std::string& name) {
  if (name == "cp")
    return Dim::cp;
  if (name == "dp")
    return Dim::dp;
  if (name == "pp")
    return Dim::pp;
  return Dim::tp;
}

// A group is its kind and its members: with dp = 1 the gradient group has the members of the
// context-parallel group, yet its traffic is dp's.
using GroupKey = std::pair<std::string, std::vector<int>>;

// Adds the group of `rank` along `dims` once, and records its index for each member.
void add_group(const Layout& layout, int rank, const std::vector<Dim>& dims, const std::string& kind,
               std::vector<Group>& groups, std::map<GroupKey, int>& known, std::vector<int>& index_of_rank) {
  GroupKey key{kind, layout.group_of(rank, dims)};
  auto found = known.find(key);
  if (found == known.end()) {
    int count = 0;
    for (const Group& group : groups)
      count += group.kind == kind;
    groups.push_back({kind + std::to_string(count), kind, key.second});
    found = known.emplace(std::move(key), static_cast<int>(groups.size()) - 1).first;
  }
  index_of_rank[rank] = found->second;
}

} // namespace

int Layout::size(Dim dim) const {
  switch (dim) {
  case Dim::tp: return tp;
  case Dim::cp: return cp;
  case Dim::dp: return dp;
  case Dim::pp: return pp;
  }
  return 1;
}

RankCoords Layout::coords(int rank) const {
  RankCoords c;
  for (Dim dim : order) {
    coordinate(c, dim) = rank % size(dim);
    rank /= size(dim);
  }
  return c;
}

int Layout::rank_of(const RankCoords& coords) const {
  RankCoords c = coords;
  int rank = 0, stride = 1;
  for (Dim dim : order) {
    rank += coordinate(c, dim) * stride;
    stride *= size(dim);
  }
  return rank;
}

std::vector<int> Layout::group_of(int rank, const std::vector<Dim>& dims) const {
  std::vector<int> members = {rank};
  // Vary the dimensions innermost first so members come in rank order.
  for (Dim dim : order) {
    if (std::find(dims.begin(), dims.end(), dim) == dims.end())
      continue;
    std::vector<int> grown;
    for (int member : members)
      for (int k = 0; k < size(dim); ++k) {
        RankCoords c = coords(member);
        coordinate(c, dim) = k;
        grown.push_back(rank_of(c));
      }
    members = grown;
  }
  std::sort(members.begin(), members.end());
  return members;
}

std::string ParallelSizes::label() const {
  return "dp=" + std::to_string(dp) + " tp=" + std::to_string(tp) + (sp ? "+sp" : "") + " pp=" + std::to_string(pp) +
         (vpp > 1 ? "x" + std::to_string(vpp) : "") + " cp=" + std::to_string(cp);
}

Layout layout_of(const Scenario& scenario) {
  Layout layout;
  layout.dp = scenario.dp;
  layout.tp = scenario.tp;
  layout.pp = scenario.pp;
  layout.cp = scenario.cp;
  const auto names = split(scenario.order, '-');
  for (std::size_t i = 0; i < 4 && i < names.size(); ++i)
    layout.order[i] = dim_from(names[i]);
  return layout;
}

LayoutGroups groups_of(const Layout& layout) {
  LayoutGroups result;
  const int world = layout.world();
  result.tp.assign(world, -1);
  result.cp.assign(world, -1);
  result.gradient.assign(world, -1);
  std::map<GroupKey, int> known;
  // Gradient groups first: with a single data-parallel layout, group 0 is the dp group.
  for (int rank = 0; rank < world; ++rank)
    add_group(layout, rank, {Dim::dp, Dim::cp}, "dp", result.groups, known, result.gradient);
  if (layout.tp > 1)
    for (int rank = 0; rank < world; ++rank)
      add_group(layout, rank, {Dim::tp}, "tp", result.groups, known, result.tp);
  if (layout.cp > 1)
    for (int rank = 0; rank < world; ++rank)
      add_group(layout, rank, {Dim::cp}, "cp", result.groups, known, result.cp);
  return result;
}

} // namespace trainsim
