#pragma once
// The planner's search, without simulation: candidate strategies for a model on a cluster,
// the memory check from program order that discards what cannot fit, the cheapest memory
// technique that fits each layout (the order engineers apply them), and the chain of
// decisions that led there. The CLI simulates the survivors and ranks them. Pure: no SimGrid.
// The roofline estimate that orders the simulations ignores offload traffic: offloaded variants
// are only chosen for layouts where nothing else fits, and the simulation ranks them.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "layout/layout.hpp"
#include "model/model.hpp"
#include "sweep/sweep.hpp"

namespace trainsim {

struct Candidate;

// plan --fix KEY=V1,V2 (or --exclude): the candidates whose value of KEY is (or is not) one of
// the values; whole-number keys also take ranges, N..M. A key that means nothing for a candidate
// does not constrain it.
struct SearchConstraint {
  std::string option;  // as given, "--fix parallel.tp=2..8": names it in messages
  std::string key;
  std::vector<std::string> values;
  bool exclude = false;
  bool admits(const Candidate& candidate) const;
};

struct PlanRequest {
  std::string base_ini;            // a scenario: model, platform, training; its layout is replaced
  std::filesystem::path base_file = "plan.ini";  // names it in errors and anchors its relative paths
  // Before each candidate's settings: the planner's keys at their defaults (a base scenario's own
  // layout replaced) and what the plan's options set.
  Settings base_settings;
  ModelSpec model;
  std::vector<int> gpu_counts;     // world sizes to consider
  int gpus_per_node = 8;
  std::vector<int> node_of_gpu;    // a platform file's node of each GPU, in order; empty: GPUs fill nodes of gpus_per_node
  bool described_cluster = false;  // candidates set platform.nodes to fit their GPUs
  double gpu_capacity = 0;         // bytes of HBM per GPU
  double host_capacity = 0;        // bytes of DRAM per node; 0: no CPU host, so no offload
  double gpu_peak = 0;             // dense FLOP/s in the training precision, for the estimate
  double matmul_efficiency = 0.55;
  long long global_batch = 0;
  long long seq_len = 0;
  double tokens = 0;               // to train: for the time to train, GPU-hours and cost
  Settings fixed;                  // plan --set: what every candidate takes beside its own settings
  std::vector<SearchConstraint> constraints;  // plan --fix and --exclude
};

// One strategy: a layout (GPUs, dp/tp/pp/vpp/cp, micro-batch) and memory techniques.
struct Candidate {
  int gpus = 0, dp = 1, tp = 1, pp = 1, vpp = 1, cp = 1;
  long long micro_batch = 1;
  int zero = 0;
  std::string recompute = "none";
  std::string offload = "none";  // none | optimizer (to the CPU) | optimizer+params (ZeRO-3, both to the CPU)
  // With pp > 1, the pipeline schedule (parallel.schedule): interleaved with vpp > 1, else 1f1b,
  // zb-h1 or zb-h2; empty without a pipeline. Part of the layout.
  std::string schedule;
  int ep = 1;  // a mixture's expert parallelism, part of the layout
  // When pp does not divide the layers: the other stages take ceil(layers / pp) each and the last
  // the rest (parallel.last_stage_layers, as DeepSeek-V3's 61 layers on 16 stages); 0: even stages.
  long long last_stage_layers = 0;
  int etp = 0;  // a mixture's expert tensor parallelism with ep > 1; 0: tp (part of the layout)
  // With ep > 1, how tokens reach the experts (moe.dispatcher): alltoall, allgather (without
  // tensor parallelism) or deepep (whole experts); part of the layout.
  std::string dispatcher = "alltoall";

  int expert_tp() const { return etp > 0 ? etp : tp; }
  Settings settings(const PlanRequest& request) const;   // the --set overrides that make it
  ParallelSizes sizes() const;                            // sequence parallelism with every tp > 1
  std::string sizes_label() const;                        // sizes, and a schedule other than 1F1B's: "... cp=1 zb-h1"
  std::string layout_label() const;                       // "64 GPUs: dp=8 tp=8+sp pp=1 cp=1, micro-batch 1"
  std::string techniques_label() const;                   // "recompute selective, ZeRO-1, optimizer offloaded to the CPU"
  // Its value of a key plan --fix takes, as the scenario writes it; empty where the key means
  // nothing for it (the schedule without a pipeline, etp without expert parallelism).
  std::string value_of(const std::string& key) const;
};

// The scenario keys a candidate sets: its layout and memory techniques.
const std::vector<std::string>& planner_keys();
// Those plan --fix and --exclude take (the rest follow from them: sp from tp, the stages' layers from pp).
const std::vector<std::string>& constrainable_keys();

// InputError for a key the planner does not search or a value it cannot take.
SearchConstraint parse_constraint(const std::string& assignment, bool exclude);
// The candidates every constraint admits; InputError naming the first that leaves none, with the
// values the candidates before it had.
std::vector<Candidate> constrained(std::vector<Candidate> candidates, const std::vector<SearchConstraint>& constraints);

// The search space, as data: every layout the model and batch allow, each with its memory
// variants in order of expected cost (cheapest first). Offload to the CPU comes last, on
// platforms with a CPU host (the optimizer; without pipelines, with ZeRO-3, the parameters too).
// A mixture of experts adds expert parallelism (ep from 1 up to the experts, dividing dp) to the
// layout, and under tensor parallelism experts unsplit (etp = 1, ep dividing tp x dp) beside
// experts split as the attention (etp = tp), with what trainsim simulates beside it (with ep > 1
// ZeRO-2 as DeepSpeed-MoE's, all-to-all only, ZeRO-3 as torchtitan's, all-to-all or DeepEP, the
// optimizer offloaded without pipelines by DeepSpeed; no tensor parallelism with a shared expert
// unless ep > 1), each with the token dispatchers it can run (alltoall; allgather without tensor
// parallelism; deepep with whole experts over a group size DeepEP is configured for).
std::vector<Candidate> enumerate_candidates(const PlanRequest& request);

struct MemoryCheck {
  bool valid = false;              // false: the scenario refused it (reason says why)
  std::string reason;
  double peak_bytes = 0;
  double reserve_bytes = 0;        // the caching allocator's reserve on that rank: kept free
  int peak_rank = 0;
  double host_bytes = 0;           // a node's host memory: its GPUs' offloaded shares added
  bool fits = false;               // peak and reserve on the GPUs, and in host memory
  double required_bytes() const { return peak_bytes + reserve_bytes; }
  double estimate_s = 0;           // roofline compute time with the pipeline bubble, for ordering
};

// Peak memory per rank from program order. Pipelines keep at most 4 x pp micro-batches and data
// parallelism 2 for the check: the peak repeats after the warm-up (a test holds them equal).
MemoryCheck check_memory(const PlanRequest& request, const Candidate& candidate);

// Checks each candidate in order, skipping the variants of a layout after the first that fits
// (they are never chosen): those are left invalid with the reason "skipped".
// `on_checked` hears, after each, how many are checked and how many of those fit.
std::vector<MemoryCheck> check_candidates(const PlanRequest& request, const std::vector<Candidate>& candidates,
                                          const std::function<void(std::size_t, std::size_t)>& on_checked = {});

struct LayoutChoice {
  Candidate chosen;
  MemoryCheck memory;
  std::vector<std::pair<Candidate, MemoryCheck>> tried;   // variants before it, in order
};

// Per layout, the first variant that fits; layouts where nothing fits are left out.
std::vector<LayoutChoice> choose_per_layout(const std::vector<Candidate>& candidates,
                                            const std::vector<MemoryCheck>& checks);

// "micro-batch 2 on 64 GPUs (dp 8, tp 8): recompute none, ZeRO 0 overflows rank 0 by 12.3 GiB ->
// selective recompute: fits, 71.2 GiB of 80 GiB".
std::string decision_chain(const LayoutChoice& choice, const PlanRequest& request);

// When nothing fits: the closest candidate and what would be needed.
std::string nothing_fits(const std::vector<Candidate>& candidates, const std::vector<MemoryCheck>& checks,
                         const PlanRequest& request);

} // namespace trainsim
