#pragma once
// Ranks and their coordinates in the parallel layout, and the process groups they
// form. The rank order is configurable; Megatron's default puts tp innermost, then
// cp, then dp, then pp, so that a tensor-parallel group stays inside a node.
#include <array>
#include <string>
#include <vector>

#include "config/scenario.hpp"
#include "layout/group.hpp"

namespace trainsim {

struct RankCoords {
  int dp = 0;
  int tp = 0;
  int pp = 0;
  int cp = 0;
};

enum class Dim { tp, cp, dp, pp };

struct Layout {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int cp = 1;
  // The expert layers fold etp x ep x expert-dp (etp innermost) over a stage's places (tp x cp x
  // dp, tp then cp innermost), as Megatron-Core does: ranks whose places share a block of etp
  // split the same experts' GEMMs, the blocks of a block of etp x ep hold different experts, and
  // the experts' data parallelism runs over those. With etp = tp the ep blocks are blocks of
  // data-parallel places.
  int ep = 1;
  int etp = 0;  // 0: tp
  int expert_tp() const { return etp > 0 ? etp : tp; }
  std::array<Dim, 4> order = {Dim::tp, Dim::cp, Dim::dp, Dim::pp};  // innermost first

  int world() const { return dp * tp * pp * cp; }
  int size(Dim dim) const;
  RankCoords coords(int rank) const;
  int rank_of(const RankCoords& coords) const;
  // A rank's place among the tp x cp x dp ranks of its stage: tp + tp_size x (cp + cp_size x dp).
  int stage_place(int rank) const;
  // The ranks that differ from `rank` only along `dims`, in rank order along them.
  std::vector<int> group_of(int rank, const std::vector<Dim>& dims) const;
};

// Every process group of a layout, indexed for the programs.
struct LayoutGroups {
  std::vector<Group> groups;
  std::vector<int> tp;        // per rank: its tensor-parallel group, -1 when tp == 1
  std::vector<int> cp;        // per rank: its context-parallel group, -1 when cp == 1
  std::vector<int> gradient;  // per rank: the group its gradients are reduced over (dp x cp)
  std::vector<int> ep;        // per rank: its expert-parallel group (tokens are exchanged), -1 when ep == 1
  std::vector<int> expert_gradient;  // per rank: the group its experts' gradients are reduced over, -1 when ep == 1
  std::vector<int> expert_tp;  // per rank: the group splitting its experts' GEMMs (the tp group when etp == tp), -1 when etp == 1 or ep == 1
  // Under DeepEP's dispatch (add_expert_node_groups): per rank, the members of its ep group on its
  // node, and those with its index on the group's other nodes; -1 where that is the rank alone.
  std::vector<int> ep_node;
  std::vector<int> ep_rail;
};

// The parallel sizes as every report names them: "dp=8 tp=8+sp pp=2x2 cp=1".
struct ParallelSizes {
  int dp = 1, tp = 1, pp = 1, vpp = 1, cp = 1;
  bool sp = false;
  int ep = 1;  // named only when > 1
  int etp = 0;  // named only when set and not tp (and ep > 1)
  std::string label() const;
};

Layout layout_of(const Scenario& scenario);
LayoutGroups groups_of(const Layout& layout);
// Splits each ep group of `groups` by the node of each rank (`node_of_rank`) into the members on
// one node and the members with the same index on the others (LayoutGroups::ep_node, ep_rail);
// returns how many nodes a group spans. Refuses (InputError, naming a group) groups that hold
// different numbers of members on their nodes, or whose members on a node are not consecutive in
// the group's order (the experts' order), or that span different numbers of nodes.
int add_expert_node_groups(LayoutGroups& groups, const std::vector<int>& node_of_rank);

} // namespace trainsim
