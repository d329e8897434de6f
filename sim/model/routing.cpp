#include "model/routing.hpp"

#include <algorithm>
#include <cmath>

namespace trainsim {

bool routing_per_layer(const ExpertRouting& routing) { return routing.layer_loads.size() > 1; }

std::vector<double> expert_shares(const ExpertRouting& routing, long long experts, long long top_k,
                                  long long expert_layer) {
  const auto count = static_cast<std::size_t>(experts);
  std::vector<double> shares(count, 1.0 / static_cast<double>(experts));
  if (!routing.uniform()) {
    // The law's weights (or the file's counts); experts at the 1/top_k ceiling are fixed there
    // and the others share the rest in proportion to their weights, until none exceeds it (each
    // pass fixes at least one more).
    const double ceiling = 1.0 / static_cast<double>(top_k);
    std::vector<double> weight(count);
    std::vector<bool> capped(count, false);
    const std::vector<double>* counts =
        routing.layer_loads.empty()
            ? nullptr
            : &routing.layer_loads[static_cast<std::size_t>(routing_per_layer(routing) ? expert_layer : 0)];
    for (std::size_t e = 0; e < count; ++e)
      weight[e] = counts ? counts->at(e) : std::pow(static_cast<double>(e + 1), -routing.zipf);
    for (bool changed = true; changed;) {
      changed = false;
      double free_weight = 0, free_share = 1;
      for (std::size_t e = 0; e < count; ++e)
        capped[e] ? free_share -= ceiling : free_weight += weight[e];
      for (std::size_t e = 0; e < count; ++e) {
        if (capped[e])
          continue;
        shares[e] = free_share * weight[e] / free_weight;
        if (shares[e] > ceiling * (1 + 1e-12)) {
          capped[e] = changed = true;
          shares[e] = ceiling;
        }
      }
    }
  }
  if (routing.capacity_factor > 0)
    for (double& share : shares)
      share = std::min(share, routing.capacity_factor / static_cast<double>(experts));
  return shares;
}

std::vector<double> place_shares(const std::vector<double>& shares, long long places) {
  std::vector<double> per_place(static_cast<std::size_t>(places), 0.0);
  const std::size_t local = shares.size() / static_cast<std::size_t>(places);
  for (std::size_t e = 0; e < shares.size(); ++e)
    per_place[e / local] += shares[e];
  return per_place;
}

namespace {

// The chance that `top_k` experts drawn without replacement from `eligible` miss `held` of them:
// C(eligible - held, top_k) / C(eligible, top_k).
double all_missed(double eligible, double held, long long top_k) {
  double chance = 1;
  for (long long i = 0; i < top_k; ++i)
    chance *= std::max(0.0, (eligible - held - static_cast<double>(i)) / (eligible - static_cast<double>(i)));
  return chance;
}

double binomial(long long n, long long k) {
  if (k < 0 || k > n)
    return 0;
  double value = 1;
  for (long long i = 1; i <= k; ++i)
    value *= static_cast<double>(n - k + i) / static_cast<double>(i);
  return value;
}

} // namespace

bool units_nest_with_groups(long long units, long long groups) { return units % groups == 0 || groups % units == 0; }

double expected_units_reached(long long experts, long long top_k, long long groups, long long groups_per_token,
                              long long units) {
  const double per_group = static_cast<double>(experts / groups);
  const double eligible = static_cast<double>(groups_per_token) * per_group;
  if (units % groups == 0) {
    // A unit lies in one group, picked with chance groups_per_token / groups.
    const double held = static_cast<double>(experts / units);
    return static_cast<double>(units) * static_cast<double>(groups_per_token) / static_cast<double>(groups) *
           (1 - all_missed(eligible, held, top_k));
  }
  // A unit holds g groups, j of them picked with the hypergeometric chance C(g, j) C(G - g, M - j) / C(G, M).
  const long long g = groups / units;
  double reached = 0;
  for (long long j = 1; j <= std::min(g, groups_per_token); ++j)
    reached += binomial(g, j) * binomial(groups - g, groups_per_token - j) / binomial(groups, groups_per_token) *
               (1 - all_missed(eligible, static_cast<double>(j) * per_group, top_k));
  return static_cast<double>(units) * reached;
}

} // namespace trainsim
