#include "model/routing.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <random>

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

// Group-limited routing has no closed form worth trusting (the groups are picked by their best
// experts' scores, so a picked group is nearly always reached): the router is run on tokens
// whose experts' scores are independent standard normals (every expert equally loaded, as
// uniform routing means), from a fixed seed, so the same model gives the same answer. V3 sums
// sigmoids of such logits; a sum of two is not quite ordered as the logits' sum is, which this
// leaves out.
double simulated_units_reached(const RouterChoice& router, long long units) {
  constexpr int tokens = 8192;
  const auto experts = static_cast<std::size_t>(router.experts);
  const std::size_t per_group = experts / static_cast<std::size_t>(router.groups);
  const std::size_t per_unit = experts / static_cast<std::size_t>(units);
  std::mt19937_64 random(20240501);
  const auto uniform = [&] { return (static_cast<double>(random() >> 11) + 0.5) / 9007199254740992.0; };
  std::vector<double> score(experts);
  std::vector<std::pair<double, std::size_t>> groups(static_cast<std::size_t>(router.groups));
  std::vector<std::pair<double, std::size_t>> eligible;
  std::vector<char> reached(static_cast<std::size_t>(units));
  std::vector<double> members(per_group);
  long long total = 0;
  for (int token = 0; token < tokens; ++token) {
    for (std::size_t e = 0; e < experts; e += 2) {  // Box-Muller, two scores a draw
      const double radius = std::sqrt(-2 * std::log(uniform())), angle = 6.283185307179586 * uniform();
      score[e] = radius * std::cos(angle);
      if (e + 1 < experts)
        score[e + 1] = radius * std::sin(angle);
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
      std::copy_n(score.begin() + static_cast<std::ptrdiff_t>(g * per_group), per_group, members.begin());
      // A group smaller than the scores that rank it is ranked by all of them.
      const auto best = static_cast<std::ptrdiff_t>(std::min(router.group_score_experts, static_cast<long long>(per_group)));
      std::partial_sort(members.begin(), members.begin() + best, members.end(), std::greater<>());
      groups[g] = {std::accumulate(members.begin(), members.begin() + best, 0.0), g};
    }
    const auto picked = static_cast<std::ptrdiff_t>(router.groups_per_token);
    std::partial_sort(groups.begin(), groups.begin() + picked, groups.end(), std::greater<>());
    eligible.clear();
    for (std::ptrdiff_t i = 0; i < picked; ++i)
      for (std::size_t e = groups[static_cast<std::size_t>(i)].second * per_group; e < (groups[static_cast<std::size_t>(i)].second + 1) * per_group; ++e)
        eligible.emplace_back(score[e], e);
    std::partial_sort(eligible.begin(), eligible.begin() + router.top_k, eligible.end(), std::greater<>());
    std::fill(reached.begin(), reached.end(), 0);
    for (long long i = 0; i < router.top_k; ++i) {
      char& unit = reached[eligible[static_cast<std::size_t>(i)].second / per_unit];
      total += unit == 0;
      unit = 1;
    }
  }
  return static_cast<double>(total) / tokens;
}

} // namespace

RouterChoice router_of(const ModelSpec& model) {
  return {model.experts, model.experts_per_token, model.expert_groups, model.groups_per_token,
          model.group_score_experts};
}

double expected_units_reached(const RouterChoice& router, long long units) {
  if (router.groups_per_token >= router.groups) {
    // The top-k experts an even draw of all: a unit of E / units experts is missed by all of
    // them with chance C(E - E/units, k) / C(E, k).
    const double experts = static_cast<double>(router.experts);
    return static_cast<double>(units) * (1 - all_missed(experts, experts / static_cast<double>(units), router.top_k));
  }
  static std::mutex lock;
  static std::map<std::array<long long, 6>, double> known;
  const std::array<long long, 6> key = {router.experts, router.top_k, router.groups, router.groups_per_token,
                                        router.group_score_experts, units};
  const std::lock_guard<std::mutex> guard(lock);
  const auto found = known.find(key);
  if (found != known.end())
    return found->second;
  return known[key] = simulated_units_reached(router, units);
}

} // namespace trainsim
