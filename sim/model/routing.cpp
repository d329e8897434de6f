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

} // namespace trainsim
