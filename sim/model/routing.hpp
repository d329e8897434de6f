#pragma once
// Where a mixture's router sends the token copies (tokens x top-k): the share of an expert-
// parallel group's copies each expert computes, from the scenario's routing (uniform, a Zipf
// law over the experts in order, or a routing file's counts per expert layer) and its capacity (copies beyond it are dropped, as Megatron-Core's
// token dropping does before the dispatch). Every sender is routed alike, so a rank receives
// its experts' shares of every other rank's copies.
#include <vector>

#include "config/scenario.hpp"

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

// Where a token's `top_k` copies land under uniform routing: the expected number of distinct
// `units` (equal runs of the experts in order: the ranks or the nodes of an ep group) they reach,
// the copies going to top_k different experts drawn evenly from the `groups_per_token` of
// `groups` equal runs of experts the router picks, themselves drawn evenly (group-limited routing;
// 1 of 1: from all experts). Units and groups nest: `units` a multiple of `groups` or a divisor.
double expected_units_reached(long long experts, long long top_k, long long groups, long long groups_per_token,
                              long long units);
// Whether `units` nest with `groups` as expected_units_reached needs.
bool units_nest_with_groups(long long units, long long groups);

} // namespace trainsim
