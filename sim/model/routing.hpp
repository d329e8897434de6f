#pragma once
// Where a mixture's router sends the token copies (tokens x top-k): the share of an expert-
// parallel group's copies each expert computes, from the scenario's routing (uniform, a Zipf
// law over the experts in order, or a routing file's counts per expert layer) and its capacity (copies beyond it are dropped, as Megatron-Core's
// token dropping does before the dispatch). Every sender is routed alike, so a rank receives
// its experts' shares of every other rank's copies.
#include <vector>

#include "config/scenario.hpp"
#include "model/model.hpp"

namespace trainsim {

// Per expert, in order: the fraction of the copies it computes (summing to 1 less the dropped) in
// expert layer `expert_layer` (counted among the layers with routed experts).
// A token's `top_k` copies go to different experts, so no expert gets more than 1/top_k of them:
// a Zipf law (or a file's counts) steeper than that is capped there, the excess spread over the
// others in proportion.
std::vector<double> expert_shares(const ExpertRouting& routing, long long experts, long long top_k,
                                  long long expert_layer = 0);
// Whether the shares differ between expert layers (a routing file of a row per layer).
bool routing_per_layer(const ExpertRouting& routing);

// The experts' `shares` summed per place of an ep group of `places` ranks (each holding an equal
// run of experts, in order): what each place's experts compute.
std::vector<double> place_shares(const std::vector<double>& shares, long long places);

// How a router picks a token's experts: its top_k of `experts` by score, within the
// groups_per_token of `groups` equal runs of experts whose best group_score_experts scores sum
// highest (DeepSeek's group-limited routing: V3 ranks groups by their top two, V2 by their top
// one; 1 of 1 group: from all experts).
struct RouterChoice {
  long long experts = 0, top_k = 0;
  long long groups = 1, groups_per_token = 1, group_score_experts = 1;
};
RouterChoice router_of(const ModelSpec& model);

// Under uniform routing (every expert's scores alike), the expected number of distinct `units`
// (equal runs of the experts in order: the ranks or the nodes of an ep group) a token's copies
// reach: exact without group limits, else from the router run on simulated tokens.
double expected_units_reached(const RouterChoice& router, long long units);

} // namespace trainsim
