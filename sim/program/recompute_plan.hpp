#pragma once
// Which layers keep their activations for backward and which recompute them.
// Segments cover the layers in order; a checkpointed segment keeps only its input
// and re-runs its forward at the start of its backward (torch checkpoint), a
// selective layer drops only its attention core (Korthikanti et al.), an op layer keeps what
// torchtitan's op-level selective checkpointing keeps (`op`, every layer). The optimal
// plan is chosen by dynamic programming over the layer graph (Boost.Graph): least
// recompute FLOPs whose kept and transient activations fit a memory budget.
// `full` is a checkpoint segment per layer; `every:N` segments of N layers, all checkpointed but
// the last, which keeps its activations (torch checkpoint_sequential; per pipeline chunk); `nth:N`
// checkpoints layers N, 2N, ... of a pipeline chunk (counted from 1) and keeps the others (torchtitan).
// `optimal` runs the dynamic program in topological order over per-layer keep / selective /
// checkpoint, with kept bytes within the budget less the largest transient a recompute
// re-materialises (tried for each family of allowed choices; memory is rounded up to the
// program's units, so the plan never exceeds the budget). The default budget is what the GPU has
// left at the program's peak when no layer activation is kept; when even full recompute does not
// fit, the plan is full recompute and says so. The plan assumes the peak is at the end of a
// micro-batch's forward, which holds without pipeline parallelism.
#include <string>
#include <vector>

#include "config/scenario.hpp"
#include "model/costs.hpp"

namespace trainsim {

// op: torchtitan's op-level selective checkpointing (model/costs.cpp says what it keeps).
enum class LayerPolicy { keep, selective, op, checkpoint };
const char* to_string(LayerPolicy policy);

// A layer that is not checkpointed (keep, selective or op): what it keeps from its forward for
// its backward, and what its backward re-materialises first with which work (nothing for keep).
struct LayerRecompute {
  double kept = 0;
  double rematerialized = 0;
  const Work* work = nullptr;
  const char* what = "";  // names the re-materialised tensor and its recompute: "core", "ops"
};
LayerRecompute layer_recompute(const LayerCosts& layer, LayerPolicy policy);

struct RecomputeSegment {
  long long first = 0;
  long long count = 0;
  LayerPolicy policy = LayerPolicy::keep;
};

struct RecomputePlan {
  std::string strategy;                  // none, selective, op, full, every:N, uniform:N, block:N, nth:N, optimal
  std::vector<RecomputeSegment> segments;
  long long checkpointed_layers = 0;
  long long selective_layers = 0;       // selective or op
  double kept_bytes = 0;                 // layer activations held after one micro-batch's forward
  double transient_bytes = 0;            // the most a recompute re-materialises at once
  double extra_flops = 0;                // recompute FLOPs per micro-batch
  double budget = 0;                     // optimal: the budget it had to fit; 0 otherwise
  bool fits_budget = true;               // optimal: false when even full recompute does not fit
};

// A plan for one micro-batch of `layers` (their costs in order; segments count from the first).
// `budget` (bytes for kept plus transient layer activations) is used by the optimal strategy only.
RecomputePlan plan_recompute(const Scenario& scenario, const LayerList& layers, double budget);

// What `plan` recomputes per micro-batch on `layers` (another rank's costs: the same plan on
// another place of an ep group computes its own experts' copies).
double recompute_flops(const RecomputePlan& plan, const LayerList& layers);

} // namespace trainsim
