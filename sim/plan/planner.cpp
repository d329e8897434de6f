#include "plan/planner.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "config/scenario.hpp"
#include "memory/memory_tracker.hpp"
#include "program/model_states.hpp"
#include "program/runtime_memory.hpp"
#include "program/workload_builder.hpp"
#include "run/memory_estimate.hpp"

namespace trainsim {
namespace {

// Expected cost of the memory techniques, for trying them in order: ZeRO-1 is free (the same
// volume as DDP), ZeRO-2 nearly so, selective recompute costs the attention core, ZeRO-3 half
// again the gradient traffic, full recompute a forward pass; offload, after all of them, the
// CPU's Adam step and PCIe traffic every step, parameters offloaded twice the model over PCIe per
// micro-batch.
double technique_cost(const Candidate& c) {
  const double recompute_cost = c.recompute == "none" ? 0.0 : c.recompute == "selective" ? 1.0 : 3.0;
  const double zero_cost = c.zero <= 1 ? 0.0 : c.zero == 2 ? 0.5 : 2.0;
  const double offload_cost = c.offload == "none" ? 0.0 : c.offload == "optimizer" ? 6.0 : 8.0;
  return recompute_cost + zero_cost + offload_cost;
}

// Under expert parallelism the framework a ZeRO stage implies (auto: ZeRO-2 DeepSpeed, ZeRO-3
// FSDP2) has the dispatcher: DeepSpeed-MoE all-to-all only, torchtitan all-to-all or DeepEP.
bool expert_framework_has(int ep, int zero, const std::string& dispatcher) {
  if (ep == 1 || zero <= 1)
    return true;
  return dispatcher == "alltoall" || (zero == 3 && dispatcher == "deepep");
}

// A candidate's schedule, by name, splits the backward (Qi et al. 2024's zero-bubble schedules).
bool zero_bubble(const std::string& name) {
  for (const auto& [named, schedule] : schedule_names())
    if (named == name)
      return splits_backward(schedule);
  return false;
}

using LayoutKey = std::tuple<int, int, int, int, int, int, int, int, long long, std::string, std::string>;
LayoutKey layout_key(const Candidate& c) {
  return {c.gpus, c.dp, c.tp, c.pp, c.vpp, c.cp, c.ep, c.expert_tp(), c.micro_batch, c.schedule, c.dispatcher};
}

// The schedules a pipeline layout may run: with two chunks per rank (where the layers split into
// 2 pp stages) interleaved (m a multiple of pp), ZB-V and, with m >= 2p, DualPipeV, with more
// interleaved; with two chunks DualPipe too (its two copies of the pp stages; pp and m even, m >=
// 2p); otherwise 1F1B, ZB-H1 and, with the 2p - 1 micro-batches its warm-up fills (Qi et al.
// 2024), ZB-H2 (with fewer it holds more than ZB-H1 for no shorter step). The zero-bubble
// schedules split the backward, which is not simulated with context parallelism.
std::vector<std::string> schedules_for(int pp, int vpp, int cp, long long micro_batches, bool layers_in_2pp) {
  if (pp == 1)
    return {""};
  std::vector<std::string> schedules;
  if (vpp == 1)
    schedules = {"1f1b", "zb-h1"};
  else if (micro_batches % pp == 0 && layers_in_2pp)
    schedules = {"interleaved"};
  if (vpp == 1 && micro_batches >= 2LL * pp - 1)
    schedules.push_back("zb-h2");
  if (vpp == 2 && layers_in_2pp)
    schedules.push_back("zb-v");
  if (vpp == 2 && layers_in_2pp && micro_batches >= 2LL * pp)
    schedules.push_back("dualpipev");
  if (vpp == 2 && pp % 2 == 0 && micro_batches >= 2LL * pp && micro_batches % 2 == 0)
    schedules.push_back("dualpipe");
  if (cp > 1)
    schedules.erase(std::remove_if(schedules.begin(), schedules.end(), zero_bubble), schedules.end());
  return schedules;
}

// The bubble over the ideal compute time, for ordering: Narayanan et al.'s (p-1)/(v m); the
// zero-bubble schedules a third of that with T_F = T_B = T_W (Qi et al. 2024: ZB-H1
// (p-1)(T_F + T_B - T_W), ZB-H2 the pipeline's fill (p-1) T_F in a synchronous step, ZB-V the
// fill of (p-1) chunk forwards).
double bubble_estimate(const Candidate& c, long long micro_batches) {
  if (c.pp == 1)
    return 0.0;
  const double one_f_one_b = (c.pp - 1.0) / (c.vpp * static_cast<double>(micro_batches));
  return zero_bubble(c.schedule) ? one_f_one_b / 3 : one_f_one_b;
}

std::string overflow(const MemoryCheck& check, const PlanRequest& request) {
  const double capacity = request.gpu_capacity;
  if (!check.valid)
    return "refused: " + check.reason;
  const std::string host = check.host_bytes > 0 ? ", host memory " + format_bytes(check.host_bytes) + " of " +
                                                      format_bytes(request.host_capacity) + " per node"
                                                : "";
  const std::string usage =
      format_bytes(check.peak_bytes) + " + " + format_bytes(check.reserve_bytes) + " reserve of " + format_bytes(capacity);
  if (check.fits)
    return "fits, " + usage + host;
  if (check.required_bytes() <= capacity)
    return "overflows host memory" + host;
  return "overflows rank " + std::to_string(check.peak_rank) + " by " +
         format_bytes(check.required_bytes() - capacity) + " (" + usage + ")";
}

// The FLOPs of the program that computes most; replicas share a program, counted once.
double busiest_program_flops(const Workload& workload) {
  std::set<const Program*> counted;
  double flops = 0;
  for (const auto& program : workload.programs) {
    if (!counted.insert(program.get()).second)
      continue;
    double program_flops = 0;
    for (const Op& op : program->ops)
      program_flops += op.flops;
    flops = std::max(flops, program_flops);
  }
  return flops;
}

// What a constrainable key's values are: whole numbers (ranges allowed), or one of some names.
std::vector<std::string> names_of(const std::string& key) {
  if (key == "parallel.schedule") {
    std::vector<std::string> names;
    for (const auto& [name, schedule] : schedule_names())
      names.push_back(name);
    return names;
  }
  if (key == "memory.recompute")
    return {"none", "selective", "full"};  // what the planner tries
  if (key == "moe.dispatcher")
    return {"alltoall", "allgather", "deepep"};
  if (key == "memory.offload_optimizer" || key == "memory.offload_params")
    return {"none", "cpu"};
  return {};  // a whole number
}

// "4..16": 4 and 16; a plain number: itself twice; false when neither.
bool integer_range(const std::string& text, long long& low, long long& high) {
  const auto dots = text.find("..");
  if (dots == std::string::npos)
    return parse_integer(text, low) && (high = low, true);
  return parse_integer(text.substr(0, dots), low) && parse_integer(text.substr(dots + 2), high) && low <= high;
}

} // namespace

const std::vector<std::string>& planner_keys() {
  static const std::vector<std::string> keys = {
      "parallel.dp", "parallel.tp", "parallel.pp", "parallel.vpp", "parallel.cp", "parallel.sp", "parallel.ep",
      "parallel.etp", "parallel.schedule", "parallel.layers_per_stage", "parallel.first_stage_layers",
      "parallel.last_stage_layers", "memory.zero", "memory.recompute", "memory.offload_optimizer",
      "memory.offload_params", "training.micro_batch", "moe.dispatcher"};
  return keys;
}

const std::vector<std::string>& constrainable_keys() {
  static const std::vector<std::string> keys = {
      "parallel.dp", "parallel.tp", "parallel.pp", "parallel.vpp", "parallel.cp", "parallel.ep", "parallel.etp",
      "parallel.schedule", "memory.zero", "memory.recompute", "memory.offload_optimizer", "memory.offload_params",
      "training.micro_batch", "moe.dispatcher"};
  return keys;
}

std::string Candidate::value_of(const std::string& key) const {
  if (key == "parallel.dp") return std::to_string(dp);
  if (key == "parallel.tp") return std::to_string(tp);
  if (key == "parallel.pp") return std::to_string(pp);
  if (key == "parallel.vpp") return std::to_string(vpp);
  if (key == "parallel.cp") return std::to_string(cp);
  if (key == "parallel.ep") return std::to_string(ep);
  if (key == "parallel.etp") return ep > 1 ? std::to_string(expert_tp()) : "";
  if (key == "parallel.schedule") return schedule;
  if (key == "memory.zero") return std::to_string(zero);
  if (key == "memory.recompute") return recompute;
  if (key == "memory.offload_optimizer") return offload == "none" ? "none" : "cpu";
  if (key == "memory.offload_params") return offload == "optimizer+params" ? "cpu" : "none";
  if (key == "training.micro_batch") return std::to_string(micro_batch);
  if (key == "moe.dispatcher") return ep > 1 ? dispatcher : "";
  throw std::logic_error("Candidate::value_of: " + key + " is not a constrainable key");
}

bool SearchConstraint::admits(const Candidate& candidate) const {
  const std::string value = candidate.value_of(key);
  if (value.empty())
    return true;
  const bool named = !names_of(key).empty();
  bool listed = false;
  for (const std::string& allowed : values) {
    long long low = 0, high = 0, number = 0;
    if (named ? allowed == value
              : integer_range(allowed, low, high) && parse_integer(value, number) && low <= number && number <= high)
      listed = true;
  }
  return listed != exclude;
}

SearchConstraint parse_constraint(const std::string& assignment, bool exclude) {
  SearchConstraint constraint;
  constraint.option = std::string(exclude ? "--exclude " : "--fix ") + assignment;
  constraint.exclude = exclude;
  const auto equals = assignment.find('=');
  constraint.key = trim(assignment.substr(0, equals));
  const std::vector<std::string>& keys = constrainable_keys();
  if (std::find(keys.begin(), keys.end(), constraint.key) == keys.end())
    throw InputError(constraint.option + ": accepted keys: " + join(keys, ", ") + " (KEY=V1,V2,...)");
  const std::vector<std::string> names = names_of(constraint.key);
  for (const std::string& part : split(equals == std::string::npos ? "" : assignment.substr(equals + 1), ',')) {
    const std::string value = trim(part);
    long long low = 0, high = 0;
    if (names.empty() ? !integer_range(value, low, high) || low < 0
                      : std::find(names.begin(), names.end(), value) == names.end())
      throw InputError(constraint.option + ": '" + value + "' is not a value of " + constraint.key + "; accepted: " +
                       (names.empty() ? std::string("whole numbers and ranges N..M, e.g. 2,4 or 2..8") : join(names, ", ")) +
                       ", separated by commas");
    constraint.values.push_back(value);
  }
  return constraint;
}

std::vector<Candidate> constrained(std::vector<Candidate> candidates, const std::vector<SearchConstraint>& constraints) {
  for (std::size_t c = 0; c < constraints.size(); ++c) {
    const SearchConstraint& constraint = constraints[c];
    std::set<long long> numbers;
    std::set<std::string> names;
    for (const Candidate& candidate : candidates) {
      const std::string value = candidate.value_of(constraint.key);
      long long number = 0;
      if (parse_integer(value, number))
        numbers.insert(number);
      else if (!value.empty())
        names.insert(value);
    }
    std::vector<Candidate> kept;
    bool valued = false;  // a kept candidate for which the key means something
    for (Candidate& candidate : candidates)
      if (constraint.admits(candidate)) {
        valued = valued || !candidate.value_of(constraint.key).empty();
        kept.push_back(std::move(candidate));
      }
    // --fix parallel.schedule=zb-v would otherwise keep only the layouts without a pipeline.
    if (kept.empty() || (!constraint.exclude && !valued)) {
      std::vector<std::string> seen(names.begin(), names.end());
      for (long long number : numbers)
        seen.push_back(std::to_string(number));
      throw InputError(constraint.option + ": " +
                       (kept.empty() ? std::string("no candidate is left")
                                     : "no candidate it applies to is left (a schedule applies to pipelines, etp to "
                                       "expert parallelism)") +
                       "; the candidates" +
                       (c > 0 ? std::string(" the options before it left") : std::string("")) + " take " +
                       constraint.key + " " + (seen.empty() ? std::string("no value") : join(seen, ", ")));
    }
    candidates = std::move(kept);
  }
  return candidates;
}

Settings Candidate::settings(const PlanRequest& request) const {
  Settings out = {{"parallel.dp", std::to_string(dp)},      {"parallel.tp", std::to_string(tp)},
                  {"parallel.pp", std::to_string(pp)},      {"parallel.vpp", std::to_string(vpp)},
                  {"parallel.cp", std::to_string(cp)},      {"parallel.sp", tp > 1 ? "true" : "false"},
                  {"training.micro_batch", std::to_string(micro_batch)},
                  {"memory.zero", std::to_string(zero)},    {"memory.recompute", recompute}};
  if (ep > 1)
    out.emplace_back("parallel.ep", std::to_string(ep));
  if (expert_tp() != tp)
    out.emplace_back("parallel.etp", std::to_string(etp));
  if (ep > 1)
    out.emplace_back("moe.dispatcher", dispatcher);
  if (last_stage_layers > 0)
    out.emplace_back("parallel.last_stage_layers", std::to_string(last_stage_layers));
  if (!schedule.empty())
    out.emplace_back("parallel.schedule", schedule);
  if (offload != "none")
    out.emplace_back("memory.offload_optimizer", "cpu");
  if (offload == "optimizer+params")
    out.emplace_back("memory.offload_params", "cpu");
  if (request.described_cluster)
    out.emplace_back("platform.nodes", std::to_string((gpus + request.gpus_per_node - 1) / request.gpus_per_node));
  out.insert(out.end(), request.fixed.begin(), request.fixed.end());
  return out;
}

ParallelSizes Candidate::sizes() const { return {dp, tp, pp, vpp, cp, tp > 1, ep, expert_tp()}; }

// Virtual stages show in the sizes (pp=4x2); the zero-bubble schedules are named.
std::string Candidate::sizes_label() const {
  return sizes().label() + (ep > 1 && dispatcher != "alltoall" ? " " + dispatcher : "") +
         (zero_bubble(schedule) ? " " + schedule : "") +
         (last_stage_layers > 0 ? " (last stage: " + std::to_string(last_stage_layers) +
                                      (last_stage_layers == 1 ? " layer)" : " layers)")
                                : "");
}

std::string Candidate::layout_label() const {
  return std::to_string(gpus) + " GPUs: " + sizes_label() + ", micro-batch " + std::to_string(micro_batch);
}

std::string Candidate::techniques_label() const {
  return "recompute " + recompute + ", " + zero_stage_label(zero) +
         (offload == "none" ? "" : offload == "optimizer" ? ", optimizer offloaded to the CPU"
                                                          : ", optimizer and parameters offloaded to the CPU");
}

std::vector<Candidate> enumerate_candidates(const PlanRequest& request) {
  const ModelSpec& model = request.model;
  std::vector<Candidate> out;
  for (int gpus : request.gpu_counts) {
    for (int tp : {1, 2, 4, 8}) {
      // A mixture's experts split over tp unless they are whole (etp = 1, below).
      if (tp > request.gpus_per_node || model.heads % tp || model.kv_heads % tp || (!model.moe() && model.ffn % tp) ||
          (model.shared_expert_ffn > 0 && model.shared_expert_ffn % tp) ||
          (!model.dense_layers.empty() && model.ffn % tp) || (model.mla() && tp > 1))
        continue;
      for (int pp : {1, 2, 4, 8, 16}) {
        const long long per_stage = (model.layers + pp - 1) / pp;
        const long long last_stage_layers = model.layers % pp ? model.layers - (pp - 1) * per_stage : 0;
        if (model.layers % pp && last_stage_layers < 1)
          continue;
        for (int cp : {1, 2, 4}) {
          // Context parallelism pays off for long sequences only; with latent attention, or a
          // sliding window shorter than the sequence, it is not simulated.
          const bool windowed = model.attention_window > 0 && model.attention_window < request.seq_len;
          if (cp > 1 && (request.seq_len < 16384 || model.mla() || windowed))
            continue;
          if (request.seq_len % cp || gpus % (tp * pp * cp))
            continue;
          const int dp = gpus / (tp * pp * cp);
          for (int vpp : {1, 2}) {
            // Two chunks: two copies of the pp stages under DualPipe, which takes an uneven split too.
            if (vpp > 1 && pp == 1)
              continue;
            for (long long micro_batch : {1LL, 2LL, 4LL}) {
              if (request.global_batch % (micro_batch * dp))
                continue;
              const long long accumulation = request.global_batch / (micro_batch * dp);
              if (pp > 1 && accumulation < pp)
                continue;  // fewer micro-batches than stages is mostly bubble
              // Experts split over tp (etp = tp, ep blocks of dp ranks) or, under tensor
              // parallelism, whole (etp = 1, ep blocks of tp x dp ranks).
              std::vector<std::pair<int, int>> expert_layouts;  // (ep, etp)
              for (int ep = 1; ep <= (model.moe() ? std::min<long long>(static_cast<long long>(dp) * tp, model.experts) : 1);
                   ep *= 2) {
                if ((model.moe() && model.experts % ep) || (model.shared_expert_ffn > 0 && tp > 1 && ep == 1))
                  continue;
                if (dp % ep == 0 && model.expert_ffn % tp == 0)
                  expert_layouts.emplace_back(ep, tp);
                if (ep > 1 && tp > 1 && (dp * tp) % ep == 0)
                  expert_layouts.emplace_back(ep, 1);
              }
              // Each with Megatron-Core's token dispatchers that trainsim simulates on it.
              std::vector<std::tuple<int, int, std::string>> dispatched;  // (ep, etp, dispatcher)
              for (const auto& [ep, etp] : expert_layouts) {
                dispatched.emplace_back(ep, etp, "alltoall");
                if (ep > 1 && tp == 1)
                  dispatched.emplace_back(ep, etp, "allgather");
                if (ep > 1 && etp == 1 && deepep_buffer_bytes(ep, 0))  // a group size DeepEP is configured for
                  dispatched.emplace_back(ep, etp, "deepep");
              }
              for (const auto& [ep, etp, dispatcher] : dispatched) {
                // The stages that differ on this layout (each a distinct plan of model states).
                std::vector<int> zeros;
                for (int zero = 0; zero <= 3; ++zero)
                  if ((pp == 1 || zero <= max_pipeline_zero_stage) && effective_zero_stage(zero, dp * cp, false) == zero &&
                      expert_framework_has(ep, zero, dispatcher))
                    zeros.push_back(zero);
                for (const std::string& schedule :
                     schedules_for(pp, vpp, cp, accumulation, model.layers % (2 * pp) == 0)) {
                  std::vector<Candidate> variants;
                  for (const char* recompute : {"none", "selective", "full"}) {
                    for (int zero : zeros)
                      variants.push_back({gpus, dp, tp, pp, vpp, cp, micro_batch, zero, recompute, "none", schedule, ep,
                                          last_stage_layers, etp, dispatcher});
                    // Offload needs a CPU host, and is DeepSpeed's, whose pipelines run 1F1B (and whose
                    // experts' offload trainsim simulates without pipelines).
                    if (request.host_capacity <= 0 || zero_bubble(schedule) || (ep > 1 && (pp > 1 || dispatcher != "alltoall")))
                      continue;
                    for (int zero : zeros)
                      if (zero < 3 || ep == 1)
                        variants.push_back({gpus, dp, tp, pp, vpp, cp, micro_batch, zero, recompute, "optimizer", schedule,
                                            ep, last_stage_layers, etp});
                    if (pp == 1 && ep == 1)  // parameters are streamed by ZeRO-3, which pipelines (and DeepSpeed-MoE) do not combine with
                      variants.push_back(
                          {gpus, dp, tp, pp, vpp, cp, micro_batch, 3, recompute, "optimizer+params", schedule, ep});
                  }
                  std::stable_sort(variants.begin(), variants.end(), [](const Candidate& a, const Candidate& b) {
                    return technique_cost(a) < technique_cost(b);
                  });
                  out.insert(out.end(), variants.begin(), variants.end());
                }
              }
            }
          }
        }
      }
    }
  }
  return constrained(std::move(out), request.constraints);
}

MemoryCheck check_memory(const PlanRequest& request, const Candidate& candidate) {
  MemoryCheck check;
  try {
    std::vector<std::string> overrides;
    for (const Settings& settings : {request.base_settings, candidate.settings(request)})
      for (const auto& [key, value] : settings)
        overrides.push_back(key + "=" + value);
    const long long accumulation = request.global_batch / (candidate.micro_batch * candidate.dp);
    const long long kept = candidate.pp > 1 ? std::min(accumulation, 4LL * candidate.pp) : std::min(accumulation, 2LL);
    overrides.push_back("training.global_batch=" + std::to_string(kept * candidate.micro_batch * candidate.dp));
    Scenario scenario = parse_scenario(request.base_ini, request.base_file, overrides);
    // Rank r runs on the platform's GPU r: a described cluster's fill nodes in order.
    std::vector<int> node_of_rank(static_cast<std::size_t>(layout_of(scenario).world()));
    for (std::size_t rank = 0; rank < node_of_rank.size(); ++rank)
      node_of_rank[rank] = rank < request.node_of_gpu.size() ? request.node_of_gpu[rank]
                                                             : static_cast<int>(rank) / request.gpus_per_node;
    const WorkloadBuild build = build_workload(scenario, request.model, request.gpu_capacity, node_of_rank);
    const Workload& workload = build.workload;
    const std::vector<RankMemory> memory =
        estimate_memory(workload, std::vector<double>(workload.ranks(), request.gpu_capacity), scenario.reserve);
    for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
      if (rank == 0 || memory[rank].required() > check.required_bytes()) {
        check.peak_bytes = memory[rank].gpu().peak;
        check.reserve_bytes = memory[rank].reserve;
        check.peak_rank = static_cast<int>(rank);
      }
      check.host_bytes = std::max(check.host_bytes, memory[rank].devices[static_cast<int>(Device::host)].peak);
    }
    const double flops = busiest_program_flops(workload);
    // Every GPU of a node offloads the same share.
    check.host_bytes *= std::min(candidate.gpus, request.gpus_per_node);
    check.valid = true;
    check.fits = check.required_bytes() <= request.gpu_capacity && check.host_bytes <= request.host_capacity;
    // The busiest rank's kernels for the whole batch, plus the pipeline bubble.
    const double bubble = bubble_estimate(candidate, accumulation);
    check.estimate_s = flops * static_cast<double>(accumulation) / static_cast<double>(kept) /
                       (request.gpu_peak * request.matmul_efficiency) * (1.0 + bubble);
  } catch (const InputError& error) {
    check.valid = false;
    check.reason = error.what();
  }
  return check;
}

std::vector<MemoryCheck> check_candidates(const PlanRequest& request, const std::vector<Candidate>& candidates,
                                          const std::function<void(std::size_t, std::size_t)>& on_checked) {
  std::vector<MemoryCheck> checks;
  std::map<LayoutKey, bool> fitted;
  std::size_t fitting = 0;
  for (const Candidate& candidate : candidates) {
    bool& done = fitted[layout_key(candidate)];
    if (done) {
      checks.push_back({false, "skipped: a cheaper variant of this layout fits"});
    } else {
      checks.push_back(check_memory(request, candidate));
      done = checks.back().valid && checks.back().fits;
      fitting += done;
    }
    if (on_checked)
      on_checked(checks.size(), fitting);
  }
  return checks;
}

std::vector<LayoutChoice> choose_per_layout(const std::vector<Candidate>& candidates,
                                            const std::vector<MemoryCheck>& checks) {
  std::vector<LayoutChoice> choices;
  std::map<LayoutKey, std::vector<std::pair<Candidate, MemoryCheck>>> tried;
  std::map<LayoutKey, bool> settled;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const auto key = layout_key(candidates[i]);
    if (settled[key])
      continue;
    if (checks[i].valid && checks[i].fits) {
      choices.push_back({candidates[i], checks[i], tried[key]});
      settled[key] = true;
    } else {
      tried[key].emplace_back(candidates[i], checks[i]);
    }
  }
  return choices;
}

std::string decision_chain(const LayoutChoice& choice, const PlanRequest& request) {
  std::string chain = choice.chosen.layout_label() + ": ";
  // Steps that did not lower the peak (selective recompute under FlashAttention, say) are left out.
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [candidate, check] : choice.tried) {
    if (check.valid && check.peak_bytes >= best)
      continue;
    if (check.valid)
      best = check.peak_bytes;
    chain += candidate.techniques_label() + " " + overflow(check, request) + " -> ";
  }
  chain += choice.chosen.techniques_label() + " " + overflow(choice.memory, request);
  return chain;
}

std::string nothing_fits(const std::vector<Candidate>& candidates, const std::vector<MemoryCheck>& checks,
                         const PlanRequest& request) {
  const double capacity = request.gpu_capacity;
  std::size_t best = candidates.size();
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (checks[i].valid && (best == candidates.size() || checks[i].required_bytes() < checks[best].required_bytes()))
      best = i;
  if (best == candidates.size())
    return "no candidate layout is possible for this model, batch and cluster (every one was refused; the first: " +
           (checks.empty() ? std::string("none") : checks.front().reason) + ")";
  const Candidate& c = candidates[best];
  const double required = checks[best].required_bytes();
  if (required <= capacity)
    return "nothing fits: the closest, " + c.layout_label() + " with " + c.techniques_label() +
           ", fits the GPUs but needs " + format_bytes(checks[best].host_bytes) + " of host memory per node, " +
           format_bytes(checks[best].host_bytes - request.host_capacity) + " more than the " +
           format_bytes(request.host_capacity) + " there are; it would need more host memory or more GPUs";
  return "nothing fits: the closest, " + c.layout_label() + " with " + c.techniques_label() + ", needs " +
         format_bytes(required) + " per GPU with the allocator's reserve, " + format_bytes(required - capacity) +
         " more than the " + format_bytes(capacity) + " there are; it would need GPUs with at least " +
         format_bytes(required) + ", or more GPUs (a larger --gpus)" +
         (request.host_capacity > 0 ? std::string(", or more host memory for offload")
                                    : std::string(", or a platform with a CPU host to offload to"));
}

} // namespace trainsim
