#include "program/recompute_plan.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>

namespace trainsim {
namespace {

struct Choice {
  LayerPolicy policy;
  double kept;       // bytes held from forward to backward
  double transient;  // bytes re-materialised during this layer's backward
  double flops;      // recompute FLOPs
};

Choice choice_of(const LayerCosts& layer, LayerPolicy policy) {
  const LayerRecompute recompute = layer_recompute(layer, policy);
  return {policy, recompute.kept, recompute.rematerialized, recompute.work ? recompute.work->flops : 0.0};
}

std::vector<Choice> choices_of(const LayerCosts& layer, bool allow_selective, bool allow_checkpoint) {
  const LayerActivations& act = layer.activations;
  std::vector<Choice> choices = {choice_of(layer, LayerPolicy::keep)};
  if (allow_selective && act.attention_core > 0)
    choices.push_back(choice_of(layer, LayerPolicy::selective));
  if (allow_checkpoint)
    choices.push_back({LayerPolicy::checkpoint, act.input, act.total - act.input, layer.forward.flops});
  return choices;
}

void summarize(RecomputePlan& plan, const LayerList& layers) {
  plan.checkpointed_layers = plan.selective_layers = 0;
  plan.kept_bytes = plan.transient_bytes = plan.extra_flops = 0;
  for (const RecomputeSegment& segment : plan.segments) {
    const auto layer = [&](long long l) -> const LayerCosts& { return *layers[static_cast<std::size_t>(l)]; };
    switch (segment.policy) {
    case LayerPolicy::keep:
    case LayerPolicy::selective:
    case LayerPolicy::op:
      if (segment.policy != LayerPolicy::keep)
        plan.selective_layers += segment.count;
      for (long long l = segment.first; l < segment.first + segment.count; ++l) {
        const Choice choice = choice_of(layer(l), segment.policy);
        plan.kept_bytes += choice.kept;
        plan.transient_bytes = std::max(plan.transient_bytes, choice.transient);
        plan.extra_flops += choice.flops;
      }
      break;
    case LayerPolicy::checkpoint: {
      // The segment's input is kept; its backward re-runs the whole segment and holds all of it.
      plan.checkpointed_layers += segment.count;
      const double input = layer(segment.first).activations.input;
      double total = 0;
      for (long long l = segment.first; l < segment.first + segment.count; ++l) {
        total += layer(l).activations.total;
        plan.extra_flops += layer(l).forward.flops;
      }
      plan.kept_bytes += input;
      plan.transient_bytes = std::max(plan.transient_bytes, total - input);
      break;
    }
    }
  }
}

// Appends a layer with a policy, merging runs of keep or selective layers into one segment.
void append(std::vector<RecomputeSegment>& segments, long long layer, LayerPolicy policy) {
  if (!segments.empty() && segments.back().policy == policy && policy != LayerPolicy::checkpoint) {
    ++segments.back().count;
    return;
  }
  segments.push_back({layer, 1, policy});
}

struct LayerVertex {
  long long index = 0;
};
using LayerGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, LayerVertex>;

// Least recompute FLOPs with kept bytes <= capacity, by dynamic programming over the layers in
// topological order of the layer graph (a chain for a decoder stack). Memory is counted in units
// rounded up, so the plan never exceeds the capacity. Empty when nothing fits.
std::vector<LayerPolicy> cheapest_plan(const std::vector<std::vector<Choice>>& choices_of_layer, double capacity) {
  if (capacity < 0)
    return {};
  const long long layers = static_cast<long long>(choices_of_layer.size());
  LayerGraph graph(static_cast<std::size_t>(layers));
  for (long long l = 0; l < layers; ++l) {
    graph[static_cast<std::size_t>(l)].index = l;
    if (l > 0)
      boost::add_edge(static_cast<std::size_t>(l - 1), static_cast<std::size_t>(l), graph);
  }
  std::vector<std::size_t> reversed;
  boost::topological_sort(graph, std::back_inserter(reversed));
  const std::vector<std::size_t> order(reversed.rbegin(), reversed.rend());

  // At most about 5e7 table cells, and at most 65536 memory units.
  const long long units = std::max(1LL, std::min(65536LL, 50'000'000LL / std::max(1LL, layers)));
  const double unit = capacity > 0 ? capacity / static_cast<double>(units) : 1.0;
  const auto cost_in_units = [&](double bytes) { return static_cast<long long>(std::ceil(bytes / unit - 1e-9)); };
  constexpr double unreachable = std::numeric_limits<double>::infinity();
  // best[m]: least FLOPs for the layers so far using m units; choice[layer][m] to rebuild the plan.
  std::vector<double> best(static_cast<std::size_t>(units + 1), unreachable);
  best[0] = 0;
  std::vector<std::vector<signed char>> picked(static_cast<std::size_t>(layers),
                                               std::vector<signed char>(static_cast<std::size_t>(units + 1), -1));
  for (std::size_t vertex : order) {
    const long long l = graph[vertex].index;
    const std::vector<Choice>& choices = choices_of_layer[static_cast<std::size_t>(l)];
    std::vector<double> next(best.size(), unreachable);
    for (long long used = 0; used <= units; ++used) {
      if (best[used] == unreachable)
        continue;
      for (std::size_t c = 0; c < choices.size(); ++c) {
        const long long total = used + cost_in_units(choices[c].kept);
        if (total > units)
          continue;
        const double flops = best[used] + choices[c].flops;
        if (flops < next[total]) {
          next[total] = flops;
          picked[l][total] = static_cast<signed char>(c);
        }
      }
    }
    best.swap(next);
  }
  long long end = -1;
  for (long long used = 0; used <= units; ++used)
    if (best[used] != unreachable && (end < 0 || best[used] < best[end]))
      end = used;
  if (end < 0)
    return {};
  std::vector<LayerPolicy> policies(static_cast<std::size_t>(layers));
  for (std::size_t k = order.size(); k-- > 0;) {
    const long long l = graph[order[k]].index;
    const Choice& choice = choices_of_layer[static_cast<std::size_t>(l)][static_cast<std::size_t>(picked[l][end])];
    policies[l] = choice.policy;
    end -= cost_in_units(choice.kept);
  }
  return policies;
}

RecomputePlan optimal_plan(const LayerList& layers, double budget) {
  const long long count = static_cast<long long>(layers.size());
  RecomputePlan best;
  best.fits_budget = false;
  double best_flops = std::numeric_limits<double>::infinity();
  // The transient of a recompute depends on which kinds of recompute the plan uses, so the
  // budget is reduced by it for each family of plans and the cheapest feasible plan wins.
  const std::vector<std::pair<bool, bool>> families = {{false, false}, {true, false}, {true, true}};
  for (const auto& [selective, checkpoint] : families) {
    std::vector<std::vector<Choice>> choices;
    double transient = 0;
    for (const LayerCosts* layer : layers) {
      choices.push_back(choices_of(*layer, selective, checkpoint));
      for (const Choice& choice : choices.back())
        transient = std::max(transient, choice.transient);
    }
    const auto policies = cheapest_plan(choices, budget - transient);
    if (policies.empty())
      continue;
    RecomputePlan plan;
    for (long long l = 0; l < count; ++l)
      append(plan.segments, l, policies[l]);
    summarize(plan, layers);
    if (plan.extra_flops < best_flops) {
      best_flops = plan.extra_flops;
      best = plan;
      best.fits_budget = true;
    }
  }
  if (!best.fits_budget) {
    // Nothing fits: fall back to full recompute, the least memory, and say so.
    for (long long l = 0; l < count; ++l)
      append(best.segments, l, LayerPolicy::checkpoint);
    summarize(best, layers);
  }
  return best;
}

} // namespace

LayerRecompute layer_recompute(const LayerCosts& layer, LayerPolicy policy) {
  const LayerActivations& act = layer.activations;
  switch (policy) {
  case LayerPolicy::selective: return {act.total - act.attention_core, act.attention_core, &layer.attention_core, "core"};
  case LayerPolicy::op: return {act.op_saved, act.op_rematerialized, &layer.op_recompute, "ops"};
  case LayerPolicy::keep:
  case LayerPolicy::checkpoint: break;  // a checkpointed segment is planned as a whole
  }
  return {act.total, 0, nullptr};
}

double recompute_flops(const RecomputePlan& plan, const LayerList& layers) {
  RecomputePlan summarized = plan;
  summarize(summarized, layers);
  return summarized.extra_flops;
}

const char* to_string(LayerPolicy policy) {
  switch (policy) {
  case LayerPolicy::keep: return "keep";
  case LayerPolicy::selective: return "selective";
  case LayerPolicy::op: return "op";
  case LayerPolicy::checkpoint: return "checkpoint";
  }
  return "?";
}

RecomputePlan plan_recompute(const Scenario& scenario, const LayerList& layer_list, double budget) {
  const long long layers = static_cast<long long>(layer_list.size());
  RecomputePlan plan;
  switch (scenario.recompute) {
  case Recompute::none:
    plan.strategy = "none";
    plan.segments.push_back({0, layers, LayerPolicy::keep});
    break;
  case Recompute::selective:
    plan.strategy = "selective";
    plan.segments.push_back(
        {0, layers,
         !layer_list.empty() && layer_list.front()->activations.attention_core > 0 ? LayerPolicy::selective
                                                                                  : LayerPolicy::keep});
    break;
  case Recompute::op:
    plan.strategy = "op";
    plan.segments.push_back({0, layers, LayerPolicy::op});
    break;
  case Recompute::full:
    plan.strategy = "full";
    for (long long l = 0; l < layers; ++l)
      plan.segments.push_back({l, 1, LayerPolicy::checkpoint});
    break;
  case Recompute::every: {
    plan.strategy = "every:" + std::to_string(scenario.recompute_every);
    // As torch.utils.checkpoint.checkpoint_sequential: every segment but the last is
    // checkpointed; the last runs normally and keeps its activations ("the last chunk has to be
    // non-volatile", torch/utils/checkpoint.py), its backward following at once.
    long long first = 0;
    for (; first + scenario.recompute_every < layers; first += scenario.recompute_every)
      plan.segments.push_back({first, scenario.recompute_every, LayerPolicy::checkpoint});
    plan.segments.push_back({first, layers - first, LayerPolicy::keep});
    break;
  }
  case Recompute::uniform: {
    plan.strategy = "uniform:" + std::to_string(scenario.recompute_every);
    // Megatron's uniform method: each chunk of N layers checkpointed at its input, the last
    // (shorter, when N does not divide the rank's layers) too.
    for (long long first = 0; first < layers; first += scenario.recompute_every)
      plan.segments.push_back({first, std::min<long long>(scenario.recompute_every, layers - first), LayerPolicy::checkpoint});
    break;
  }
  case Recompute::block:
    plan.strategy = "block:" + std::to_string(scenario.recompute_every);
    // Megatron's block method: the rank's first N layers checkpointed one by one, the rest kept.
    for (long long l = 0; l < layers; ++l)
      plan.segments.push_back({l, 1, l < scenario.recompute_every ? LayerPolicy::checkpoint : LayerPolicy::keep});
    break;
  case Recompute::nth:
    plan.strategy = "nth:" + std::to_string(scenario.recompute_every);
    // torchtitan wraps the blocks it counts 1, 2, ... and checkpoints those whose count is a
    // multiple of N (apply_ac's selective layer option); the others keep their activations.
    for (long long l = 0; l < layers; ++l)
      plan.segments.push_back(
          {l, 1, (l + 1) % scenario.recompute_every == 0 ? LayerPolicy::checkpoint : LayerPolicy::keep});
    break;
  case Recompute::optimal:
    plan = optimal_plan(layer_list, budget);
    plan.strategy = "optimal";
    plan.budget = budget;
    return plan;
  }
  summarize(plan, layer_list);
  return plan;
}

} // namespace trainsim
