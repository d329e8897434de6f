#include "layout/layout.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>

#include "common/error.hpp"
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

// Adds the group of `members` (among them `rank`) once, and records its index for `rank`; its name
// is `prefix` and a count of the groups so named.
void add_members(int rank, std::vector<int> members, const std::string& kind, const std::string& prefix,
                 std::vector<Group>& groups, std::map<GroupKey, int>& known, std::vector<int>& index_of_rank) {
  GroupKey key{kind, std::move(members)};
  auto found = known.find(key);
  if (found == known.end()) {
    int count = 0;
    for (const Group& group : groups)
      count += group.name.compare(0, prefix.size(), prefix) == 0 && group.name.size() > prefix.size() &&
               std::isdigit(static_cast<unsigned char>(group.name[prefix.size()]));
    groups.push_back({prefix + std::to_string(count), kind, key.second});
    found = known.emplace(std::move(key), static_cast<int>(groups.size()) - 1).first;
  }
  index_of_rank[rank] = found->second;
}

// Adds the group of `rank` along `dims` once, and records its index for each member.
void add_group(const Layout& layout, int rank, const std::vector<Dim>& dims, const std::string& kind,
               std::vector<Group>& groups, std::map<GroupKey, int>& known, std::vector<int>& index_of_rank) {
  add_members(rank, layout.group_of(rank, dims), kind, kind, groups, known, index_of_rank);
}

// The ranks of `rank`'s stage whose places (Layout::stage_place) `same` calls alike, ordered by
// place (a group's order is its members' places: which experts an ep member holds), whatever the
// rank order.
template <typename Same>
std::vector<int> stage_members(const Layout& layout, int rank, Same same) {
  const int mine = layout.stage_place(rank);
  std::vector<int> members;
  for (const int member : layout.group_of(rank, {Dim::tp, Dim::dp, Dim::cp}))
    if (same(layout.stage_place(member), mine))
      members.push_back(member);
  std::sort(members.begin(), members.end(),
            [&](int a, int b) { return layout.stage_place(a) < layout.stage_place(b); });
  return members;
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

int Layout::stage_place(int rank) const {
  const RankCoords c = coords(rank);
  return c.tp + tp * (c.cp + cp * c.dp);
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
         (vpp > 1 ? "x" + std::to_string(vpp) : "") + " cp=" + std::to_string(cp) +
         (ep > 1 ? " ep=" + std::to_string(ep) : "") + (ep > 1 && etp > 0 && etp != tp ? " etp=" + std::to_string(etp) : "");
}

Layout layout_of(const Scenario& scenario) {
  Layout layout;
  layout.dp = scenario.dp;
  layout.tp = scenario.tp;
  layout.pp = scenario.pp;
  layout.cp = scenario.cp;
  layout.ep = scenario.ep;
  layout.etp = scenario.etp;
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
  result.ep.assign(world, -1);
  result.expert_gradient.assign(world, -1);
  result.expert_tp.assign(world, -1);
  if (layout.ep > 1) {
    const int etp = layout.expert_tp(), block = etp * layout.ep;
    for (int rank = 0; rank < world; ++rank)
      add_members(rank, stage_members(layout, rank, [&](int a, int b) { return a / block == b / block && a % etp == b % etp; }),
                  "ep", "ep", result.groups, known, result.ep);
    // The experts' gradients are data-parallel traffic over the other blocks.
    for (int rank = 0; rank < world; ++rank)
      add_members(rank, stage_members(layout, rank, [&](int a, int b) { return a % block == b % block; }), "dp",
                  "edp", result.groups, known, result.expert_gradient);
    // With etp == tp these are the tp groups, found again.
    if (etp > 1)
      for (int rank = 0; rank < world; ++rank)
        add_members(rank, stage_members(layout, rank, [&](int a, int b) { return a / etp == b / etp; }), "tp", "etp",
                    result.groups, known, result.expert_tp);
  }
  return result;
}

int add_expert_node_groups(LayoutGroups& groups, const std::vector<int>& node_of_rank) {
  const std::size_t world = groups.ep.size();
  groups.ep_node.assign(world, -1);
  groups.ep_rail.assign(world, -1);
  std::map<GroupKey, int> known;
  int spanned = 0;
  for (std::size_t rank = 0; rank < world; ++rank) {
    if (groups.ep[rank] < 0)
      continue;
    const std::vector<int> members = groups.groups[static_cast<std::size_t>(groups.ep[rank])].ranks;
    const auto node_of = [&](std::size_t i) { return node_of_rank.at(static_cast<std::size_t>(members[i])); };
    // Runs of members on one node, in group order.
    std::size_t per_node = 1;
    while (per_node < members.size() && node_of(per_node) == node_of(0))
      ++per_node;
    const auto refuse = [&](const std::string& why) {
      throw InputError("expert-parallel group " + groups.groups[static_cast<std::size_t>(groups.ep[rank])].name +
                       " (ranks " + format_rank_list(members) + ") " + why +
                       "; accepted: ep groups with as many consecutive members on each of their nodes, or "
                       "moe.dispatcher = alltoall");
    };
    std::set<int> nodes;
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (node_of(i) != node_of(i - i % per_node) || (i % per_node == 0 && !nodes.insert(node_of(i)).second))
        refuse("does not hold " + std::to_string(per_node) + " consecutive members on each of its nodes");
    }
    if (members.size() % per_node != 0)
      refuse("holds a part of " + std::to_string(per_node) + " members on a node");
    const int span = static_cast<int>(members.size() / per_node);
    if (spanned > 0 && span != spanned)
      refuse("spans " + std::to_string(span) + " nodes where another spans " + std::to_string(spanned));
    spanned = span;
    const auto place = static_cast<std::size_t>(std::find(members.begin(), members.end(), static_cast<int>(rank)) -
                                                members.begin());
    std::vector<int> node, rail;
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (i / per_node == place / per_node)
        node.push_back(members[i]);
      if (i % per_node == place % per_node)
        rail.push_back(members[i]);
    }
    const int r = static_cast<int>(rank);
    if (node.size() > 1)
      node.size() == members.size() ? void(groups.ep_node[rank] = groups.ep[rank])
                                    : add_members(r, node, "ep", "epn", groups.groups, known, groups.ep_node);
    if (rail.size() > 1)
      rail.size() == members.size() ? void(groups.ep_rail[rank] = groups.ep[rank])
                                    : add_members(r, rail, "ep", "epr", groups.groups, known, groups.ep_rail);
  }
  return std::max(spanned, 1);
}

} // namespace trainsim
