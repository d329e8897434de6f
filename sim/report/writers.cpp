#include "report/writers.hpp"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <sstream>

#include "common/text.hpp"
#include "common/units.hpp"
#include "program/compute_time.hpp"

namespace trainsim {
namespace {

// A kind of communication or offload traffic as the summary names it.
std::string comm_label(const std::string& kind) {
  if (!is_offload_kind(kind))
    return "comm " + kind;
  return kind == "cpu_optimizer" ? "cpu optimizer"
         : kind == "cpu"         ? "cpu work"
         : kind == "nvme_read"   ? "nvme reads"
         : kind == "nvme_write"  ? "nvme writes"
                                 : "offload " + kind;
}

using nlohmann::json;

json categories_json(const CategoryBytes& bytes) {
  json out = json::object();
  for (int c = 0; c < category_count; ++c)
    out[to_string(static_cast<MemCategory>(c))] = bytes[c];
  return out;
}

CategoryBytes model_states_only(const CategoryBytes& bytes) {
  CategoryBytes states{};
  for (MemCategory c : {MemCategory::weights, MemCategory::gradients, MemCategory::optimizer})
    states[static_cast<int>(c)] = bytes[static_cast<int>(c)];
  return states;
}

json model_states_json(const CategoryBytes& persistent) {
  return {{"weights", persistent[static_cast<int>(MemCategory::weights)]},
          {"gradients", persistent[static_cast<int>(MemCategory::gradients)]},
          {"optimizer", persistent[static_cast<int>(MemCategory::optimizer)]}};
}

json rank_memory_json(int rank, const RankMemory& memory, const GpuInfo& gpu) {
  const DeviceMemory& peak = memory.gpu();
  json out = {{"rank", rank},
              {"host", gpu.host},
              {"capacity_bytes", gpu.hbm_capacity},
              {"peak_bytes", peak.peak},
              {"at_peak", categories_json(peak.at_peak)},
              {"model_states", model_states_json(memory.persistent_gpu)},
              {"reserve_bytes", memory.reserve},
              {"headroom_bytes", gpu.hbm_capacity - memory.required()},
              {"fits", memory.required() <= gpu.hbm_capacity},
              {"overflow_bytes", std::max(0.0, memory.required() - gpu.hbm_capacity)}};
  if (memory.over_capacity_at >= 0)
    out["over_capacity_at"] = memory.over_capacity_at;
  return out;
}

json tier_json(const NodeTier& tier) {
  return {{"used", tier.used},
          {"peak_bytes", tier.peak_bytes},
          {"node", tier.node},
          {"capacity_bytes", tier.capacity_bytes},
          {"fits", tier.fits}};
}

json memory_section(const MemorySummary& summary, const std::vector<RankMemory>& ranks, const std::vector<GpuInfo>& gpus,
                    bool timed) {
  json out = {{"capacity_bytes", summary.capacity_bytes},
              {"peak_bytes", summary.peak_bytes},
              {"reserve_bytes", summary.reserve_bytes},
              {"headroom_bytes", summary.capacity_bytes - summary.peak_bytes - summary.reserve_bytes},
              {"peak_rank", summary.peak_rank},
              {"gpu_fits", summary.gpu_fits},
              {"host", tier_json(summary.host)},
              {"nvme", tier_json(summary.nvme)},
              {"fits", summary.fits}};
  json list = json::array();
  for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
    json entry = rank_memory_json(static_cast<int>(rank), ranks[rank], gpus[rank]);
    entry[timed ? "peak_time_s" : "peak_op"] = ranks[rank].gpu().peak_time;
    entry["host_peak_bytes"] = ranks[rank].devices[static_cast<int>(Device::host)].peak;
    entry["nvme_peak_bytes"] = ranks[rank].devices[static_cast<int>(Device::nvme)].peak;
    list.push_back(std::move(entry));
  }
  out["ranks"] = std::move(list);
  return out;
}

// Idle time waiting for a later member of a collective, by that member (rank numbers as keys).
json waiting_json(const StepBreakdown& breakdown) {
  json waiting = json::object();
  for (const auto& [rank, seconds] : breakdown.waiting_s)
    waiting[std::to_string(rank)] = seconds;
  return waiting;
}

json breakdown_json(const StepBreakdown& breakdown) {
  json comm = json::object();
  for (const auto& [kind, seconds] : breakdown.exposed_comm_s)
    comm[kind] = seconds;
  return {{"compute_s", breakdown.compute_s},
          {"recompute_s", breakdown.recompute_s},
          {"optimizer_s", breakdown.optimizer_s},
          {"exposed_comm_s", comm},
          {"waiting_s", waiting_json(breakdown)},
          {"bubble_s", breakdown.bubble_s}};
}

// Per pipeline stage: the highest peak among its ranks, and which rank has it.
json stages_json(const std::vector<RankMemory>& ranks, const RunInfo& run) {
  std::map<int, std::pair<double, int>> worst;
  for (std::size_t rank = 0; rank < ranks.size() && rank < run.coords.size(); ++rank) {
    auto& entry = worst.try_emplace(run.coords[rank].pp, -1.0, 0).first->second;
    if (ranks[rank].gpu().peak > entry.first)
      entry = {ranks[rank].gpu().peak, static_cast<int>(rank)};
  }
  json stages = json::array();
  for (const auto& [stage, entry] : worst)
    stages.push_back({{"stage", stage}, {"peak_bytes", entry.first}, {"rank", entry.second}});
  return stages;
}

json run_json(const Workload& workload, const std::vector<GpuInfo>& gpus, const RunInfo& run) {
  json settings = json::object();
  for (const auto& [key, value] : run.settings)
    settings[key] = value;
  json placement = json::array();
  for (std::size_t rank = 0; rank < run.coords.size() && rank < gpus.size(); ++rank) {
    const RankCoords& c = run.coords[rank];
    placement.push_back(
        {{"rank", rank}, {"host", gpus[rank].host}, {"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}, {"cp", c.cp}});
  }
  json out = {{"name", run.name},
          {"settings", settings},
          {"model", {{"name", workload.step.model}, {"parameters", workload.step.parameters}}},
          {"platform", {{"file", run.platform}, {"gpus_used", workload.ranks()}, {"gpu", gpus.front().model}}},
          {"layout", run.layout},
          {"fidelity", run.fidelity},
          {"collectives", run.collectives},
          {"compute_model", compute_model_description(workload, gpus)},
          {"placement", placement},
          {"tokens_per_step", workload.step.tokens_per_step},
          {"precision", to_string(workload.step.precision)}};
  if (run.recompute) {
    const RecomputePlan& plan = *run.recompute;
    json segments = json::array();
    for (const RecomputeSegment& segment : plan.segments)
      segments.push_back({{"first_layer", segment.first}, {"layers", segment.count}, {"policy", to_string(segment.policy)}});
    out["recompute"] = {{"strategy", plan.strategy},
                        {"layers_checkpointed", plan.checkpointed_layers},
                        {"layers_selective", plan.selective_layers},
                        {"kept_bytes_per_micro_batch", plan.kept_bytes},
                        {"transient_bytes", plan.transient_bytes},
                        {"extra_flops_per_micro_batch", plan.extra_flops},
                        {"extra_flops_per_step", run.recompute_flops_per_step},
                        {"plan", segments}};
    if (plan.strategy == "optimal") {
      out["recompute"]["budget_bytes"] = plan.budget;
      out["recompute"]["fits_budget"] = plan.fits_budget;
    }
  }
  return out;
}

std::string line(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string line(const char* format, ...) {
  char buffer[512];
  va_list arguments;
  va_start(arguments, format);
  std::vsnprintf(buffer, sizeof buffer, format, arguments);
  va_end(arguments);
  return buffer;
}

std::string breakdown(const CategoryBytes& bytes) {
  std::string text;
  for (int c = 0; c < category_count; ++c) {
    if (bytes[c] <= 0)
      continue;
    text += (text.empty() ? "" : ", ") + std::string(to_string(static_cast<MemCategory>(c))) + " " +
            format_bytes(bytes[c]);
  }
  return text.empty() ? "nothing" : text;
}

// "16 x A100-SXM4-80GB", or each kind in the order the ranks first use it: "8 x A100 + 8 x H100".
std::string gpu_counts(const std::vector<GpuInfo>& gpus, std::size_t ranks) {
  std::vector<std::pair<std::string, std::size_t>> counts;
  for (std::size_t rank = 0; rank < ranks && rank < gpus.size(); ++rank) {
    auto found = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == gpus[rank].model; });
    if (found == counts.end())
      counts.emplace_back(gpus[rank].model, 1);
    else
      ++found->second;
  }
  std::string text;
  for (const auto& [model, count] : counts)
    text += (text.empty() ? "" : " + ") + std::to_string(count) + " x " + model;
  return text;
}

void print_header(std::ostream& out, const Workload& workload, const std::vector<GpuInfo>& gpus, const RunInfo& run) {
  out << "trainsim: " << run.name << " — ";
  if (!workload.step.model.empty())
    out << workload.step.model << " (" << format_count(workload.step.parameters) << " parameters) ";
  out << "on " << run.platform << ", " << gpu_counts(gpus, workload.ranks()) << '\n';
  out << line("  %-16s %s\n", "layout", run.layout.c_str());
  if (!run.fidelity.empty())
    out << line("  %-16s %s\n", "fidelity",
                run.fidelity == "fast" ? "fast: collectives' NVLink edges timed from their ring (a node's collectives wholly), even all-to-alls from their links' load, the rest simulated as flows"
                                       : "flows: every collective simulated as flows");
  if (!run.collectives.empty())
    out << line("  %-16s %s\n", "collectives", run.collectives.c_str());
  out << line("  %-16s %s\n", "compute model", compute_model_description(workload, gpus).c_str());
  if (!run.calibration.empty())
    out << line("  %-16s %s\n", "calibration", run.calibration.c_str());
  if (!run.framework.empty())
    out << line("  %-16s %s\n", "framework", run.framework.c_str());
  if (!run.routing.empty())
    out << line("  %-16s %s\n", "routing", run.routing.c_str());
  if (run.recompute && run.recompute->strategy != "none" && run.recompute->extra_flops == 0) {
    out << line("  %-16s %s: nothing to recompute (FlashAttention keeps no attention scores, or the budget keeps all)\n",
                "recompute", run.recompute->strategy.c_str());
  } else if (run.recompute && run.recompute->strategy != "none") {
    const RecomputePlan& plan = *run.recompute;
    // The plan shown is rank 0's (its first chunk's under a pipeline); the step's total adds every rank's.
    out << line("  %-16s %s: %lld layers checkpointed, %lld selective, +%s FLOPs per micro-batch on rank 0, +%s per "
                "step on all ranks%s\n",
                "recompute", plan.strategy.c_str(), plan.checkpointed_layers, plan.selective_layers,
                format_count(plan.extra_flops).c_str(), format_count(run.recompute_flops_per_step).c_str(),
                plan.strategy == "optimal" ? (", budget " + format_bytes(plan.budget) +
                                              (plan.fits_budget ? "" : " (not met even by full recompute)"))
                                                 .c_str()
                                           : "");
  }
  if (run.micro_batch > 0)
    out << line("  %-16s micro-batch %lld x %lld accumulation steps x dp = global batch %lld x %lld tokens\n", "batch",
                run.micro_batch, run.grad_accum, run.global_batch, run.seq_len);
}

void print_memory_lines(std::ostream& out, const MemorySummary& summary, const std::vector<RankMemory>& ranks,
                        const std::vector<GpuInfo>& gpus, const char* when_unit, const RunInfo& run) {
  const RankMemory& worst = ranks[summary.peak_rank];
  out << line("  %-16s %s of %s on rank %d (%s %s) — %s\n", "peak memory", format_bytes(summary.peak_bytes).c_str(),
              format_bytes(summary.capacity_bytes).c_str(), summary.peak_rank, when_unit,
              std::string(*when_unit == 'o' ? std::to_string(static_cast<long long>(worst.gpu().peak_time))
                                            : format_seconds(worst.gpu().peak_time))
                  .c_str(),
              summary.gpu_fits ? "fits" : "DOES NOT FIT");
  out << line("  %-16s %s\n", "at peak", breakdown(worst.gpu().at_peak).c_str());
  out << line("  %-16s %s reserved by the caching allocator beyond its tensors; %s %s\n", "reserve",
              format_bytes(summary.reserve_bytes).c_str(),
              format_bytes(std::abs(summary.capacity_bytes - summary.peak_bytes - summary.reserve_bytes)).c_str(),
              summary.gpu_fits ? "left free" : "short");
  out << line("  %-16s %s\n", "model states", breakdown(model_states_only(worst.persistent_gpu)).c_str());
  if (!run.experts.empty())
    out << line("  %-16s %s\n", "experts", run.experts.c_str());
  for (const auto& [tier, name] : node_tiers(summary))
    if (tier->used)
      out << line("  %-16s %s of %s on %s (shared by its GPUs) — %s\n", name == "NVMe" ? "nvme" : name.c_str(),
                  format_bytes(tier->peak_bytes).c_str(),
                  tier->capacity_bytes > 0 ? format_bytes(tier->capacity_bytes).c_str() : "an unknown capacity",
                  tier->node.c_str(), tier->fits ? "fits" : "DOES NOT FIT");
  if (!summary.gpu_fits) {
    int over = 0;
    for (std::size_t rank = 0; rank < ranks.size(); ++rank)
      over += ranks[rank].required() > gpus[rank].hbm_capacity;
    out << line("  %-16s %d of %zu ranks exceed HBM with the reserve; rank %d by %s\n", "out of memory", over,
                ranks.size(), summary.peak_rank,
                format_bytes(ranks[summary.peak_rank].required() - gpus[summary.peak_rank].hbm_capacity).c_str());
  }
}

// What a rank waits for when an offload kind is exposed.
std::string offload_wait_name(const std::string& kind) {
  if (kind == "h2d")
    return "PCIe host-to-device copies";
  if (kind == "d2h")
    return "PCIe device-to-host copies";
  if (kind == "nvme_read")
    return "NVMe reads";
  if (kind == "nvme_write")
    return "NVMe writes";
  if (kind == "cpu_optimizer")
    return "the CPU optimizer step";
  return "work on the CPU";
}

// The busiest class of the resources an offload kind goes through, or nullptr.
const ResourceUse* busiest_behind(const std::vector<ResourceUse>& resources, const std::string& kind) {
  const std::vector<std::string> classes = kind == "h2d" || kind == "d2h" ? std::vector<std::string>{"pcie-gpu", "pcie-uplink"}
                                           : kind.rfind("nvme", 0) == 0   ? std::vector<std::string>{"nvme"}
                                                                          : std::vector<std::string>{"cpu"};
  const ResourceUse* busiest = nullptr;
  for (const ResourceUse& use : resources)
    if (std::find(classes.begin(), classes.end(), use.kind) != classes.end() && (!busiest || use.busy_s > busiest->busy_s))
      busiest = &use;
  return busiest;
}

// A rank's largest part of the step that is not computing: the thing to attack first.
struct Overhead {
  std::string kind;     // of communication or offload; empty: idle
  double seconds = 0;
  int straggler = -1;   // the rank waited for, when waiting at collectives is the largest
  bool waiting = false;
};
Overhead largest_overhead(const StepBreakdown& parts) {
  Overhead overhead{"", parts.bubble_s};
  const auto [straggler, waited_s] = parts.longest_wait();
  if (waited_s > overhead.seconds)
    overhead.seconds = waited_s;
  for (const auto& [comm, seconds] : parts.exposed_comm_s)
    if (seconds > overhead.seconds) {
      overhead.kind = comm;
      overhead.seconds = seconds;
    }
  overhead.waiting = overhead.kind.empty() && straggler >= 0 && overhead.seconds == waited_s;
  overhead.straggler = straggler;
  return overhead;
}

// In a pipeline whose stages take unequal time, the rank that finishes last may mostly idle in
// its bubble while a busier stage sets the pace: the rank that idles least, when it idles less
// than half as long, is the one whose step says what limits it; nullptr otherwise.
const RankMetrics* pacing_rank(const StepMetrics& metrics, const RankMetrics& critical) {
  const RankMetrics* busiest = &critical;
  for (const RankMetrics& rank : metrics.ranks)
    if (rank.breakdown.bubble_s < busiest->breakdown.bubble_s)
      busiest = &rank;
  return busiest->breakdown.bubble_s < 0.5 * critical.breakdown.bubble_s ? busiest : nullptr;
}

} // namespace

std::string bottleneck_line(const StepMetrics& metrics) {
  const RankMetrics& critical = metrics.ranks[metrics.critical_rank];
  const double step = metrics.step_time_s;
  const auto share = [&](double seconds) { return line("%.1f%%", step > 0 ? 100.0 * seconds / step : 0.0); };
  std::string prefix;
  if (!metrics.memory.gpu_fits) {
    const RankMetrics& peak = metrics.ranks[metrics.memory.peak_rank];
    prefix = "does not fit: rank " + std::to_string(peak.rank) + " needs " + format_bytes(peak.memory.gpu().peak) +
             " of " + format_bytes(metrics.memory.capacity_bytes) + "; ";
  }
  for (const auto& [tier, name] : node_tiers(metrics.memory))
    if (!tier->fits)
      prefix += "does not fit: " + tier->node + " " + name + " needs " + format_bytes(tier->peak_bytes) + " of " +
                format_bytes(tier->capacity_bytes) + "; ";
  const RankMetrics* described = &critical;
  Overhead largest = largest_overhead(critical.breakdown);
  std::string paced;
  if (largest.kind.empty() && !largest.waiting)
    if (const RankMetrics* pacing = pacing_rank(metrics, critical)) {
      described = pacing;
      largest = largest_overhead(pacing->breakdown);
      paced = "; rank " + std::to_string(critical.rank) + " idles " + share(critical.breakdown.bubble_s) +
              " of the step waiting for that rank's stage";
    }
  const StepBreakdown& parts = described->breakdown;
  const std::string& kind = largest.kind;
  const double overhead_s = largest.seconds;
  const bool waiting = largest.waiting;
  const bool offload = is_offload_kind(kind);
  const std::string overhead = waiting        ? "idle waiting for rank " + std::to_string(largest.straggler) +
                                                    " at collectives (it computes " +
                                                    share(metrics.ranks[largest.straggler].compute_s) + " of the step)"
                               : kind.empty() ? "idle (pipeline bubble or waiting for peers)"
                               : offload      ? "waiting on " + offload_wait_name(kind)
                                              : "exposed " + kind + " communication";
  const double computing = parts.compute_s + parts.recompute_s + parts.optimizer_s;
  const std::string on_rank = " (rank " + std::to_string(described->rank) + ")";
  if (step <= 0)
    return prefix + "nothing ran";
  if (offload && computing < 0.7 * step) {
    std::string busiest;
    if (const ResourceUse* use = busiest_behind(metrics.resources, kind))
      busiest = "; " + use->kind + " " + share(use->busy_s) + " busy (" + use->busiest + ")";
    return prefix + "offload-bound: " + share(overhead_s) + " of the step waits on " + offload_wait_name(kind) +
           ", computing " + share(computing) + on_rank + busiest + paced;
  }
  if (computing >= 0.7 * step)
    return prefix + "compute-bound: " + share(computing) + " of the step computes" +
           (parts.recompute_s > 0 ? " (recompute " + share(parts.recompute_s) + ")" : "") + "; the largest overhead is " +
           overhead + ", " + share(overhead_s) + on_rank + paced;
  return prefix + (waiting ? "straggler" : kind.empty() ? "idle" : kind + "-communication") + "-bound: " + share(overhead_s) +
         " of the step is " + overhead + ", computing " + share(computing) + on_rank + paced;
}

json summary_json(const StepMetrics& metrics, const Workload& workload, const std::vector<GpuInfo>& gpus,
                  const RunInfo& run) {
  json out = run_json(workload, gpus, run);
  out["step_time_s"] = metrics.step_time_s;
  if (run.uniform_routing_step_s > 0)
    out["imbalance"] = {{"uniform_routing_step_time_s", run.uniform_routing_step_s},
                        {"cost_s", metrics.step_time_s - run.uniform_routing_step_s}};
  out["bottleneck"] = bottleneck_line(metrics);
  out["tokens_per_s"] = metrics.tokens_per_s;
  out["mfu"] = metrics.mfu;
  out["hfu"] = metrics.hfu;
  out["time_to_train_s"] = metrics.time_to_train_s;
  out["training_tokens"] = run.training_tokens;

  std::vector<RankMemory> memories;
  for (const auto& rank : metrics.ranks)
    memories.push_back(rank.memory);
  out["memory"] = memory_section(metrics.memory, memories, gpus, true);
  if (!run.coords.empty())
    out["memory"]["stages"] = stages_json(memories, run);

  const RankMetrics& critical = metrics.ranks[metrics.critical_rank];
  // Transfers between GPUs under comm, offload traffic and CPU work under offload.
  const auto comm_json = [](const std::map<std::string, CommMetrics>& comm, bool offload) {
    json out = json::object();
    for (const auto& [kind, values] : comm)
      if (is_offload_kind(kind) == offload)
        out[kind] = {{"total_s", values.total_s}, {"exposed_s", values.exposed_s}, {"bytes", values.bytes}};
    return out;
  };
  const auto offload_json = [&](const std::map<std::string, CommMetrics>& comm) {
    json out = comm_json(comm, true);
    if (!out.empty())
      for (const char* kind : {"h2d", "d2h", "nvme_read", "nvme_write", "cpu_optimizer"})
        if (!out.contains(kind))
          out[kind] = {{"total_s", 0.0}, {"exposed_s", 0.0}, {"bytes", 0.0}};
    return out;
  };
  json ranks = json::array();
  for (const auto& rank : metrics.ranks)
    ranks.push_back({{"rank", rank.rank},
                     {"host", rank.host},
                     {"finish_s", rank.finish_s},
                     {"compute_s", rank.compute_s},
                     {"recompute_s", rank.recompute_s},
                     {"bubble_s", rank.breakdown.bubble_s},
                     {"bubble_fraction", metrics.step_time_s > 0 ? rank.breakdown.bubble_s / metrics.step_time_s : 0.0},
                     {"waiting_s", waiting_json(rank.breakdown)},
                     {"comm", comm_json(rank.comm, false)},
                     {"offload", offload_json(rank.comm)}});
  out["time"] = {{"critical_rank", metrics.critical_rank},
                 {"compute_s", critical.compute_s},
                 {"recompute_s", critical.recompute_s},
                 {"optimizer_s", critical.optimizer_s},
                 {"bubble_s", critical.breakdown.bubble_s},
                 {"bubble_fraction", metrics.step_time_s > 0 ? critical.breakdown.bubble_s / metrics.step_time_s : 0.0},
                 {"breakdown", breakdown_json(critical.breakdown)},
                 {"comm", comm_json(critical.comm, false)},
                 {"offload", offload_json(critical.comm)},
                 {"ranks", ranks}};
  json resources = json::object();
  for (const ResourceUse& use : metrics.resources)
    resources[use.kind] = {{"count", use.count},
                           {"busiest", use.busiest},
                           {"busy_s", use.busy_s},
                           {"utilisation", metrics.step_time_s > 0 ? use.busy_s / metrics.step_time_s : 0.0},
                           {"bytes", use.bytes}};
  out["resources"] = resources;
  return out;
}

void print_summary(std::ostream& out, const StepMetrics& metrics, const Workload& workload,
                   const std::vector<GpuInfo>& gpus, const RunInfo& run) {
  print_header(out, workload, gpus, run);
  out << line("  %-16s %s\n", "bottleneck", bottleneck_line(metrics).c_str());
  out << line("  %-16s %s\n", "step time", format_seconds(metrics.step_time_s).c_str());
  if (run.uniform_routing_step_s > 0) {
    const double cost = metrics.step_time_s - run.uniform_routing_step_s;
    out << line("  %-16s %s%s (%+.1f %%) against %s with uniform, dropless routing\n", "imbalance", cost < 0 ? "-" : "+",
                format_seconds(std::abs(cost)).c_str(), 100 * cost / run.uniform_routing_step_s,
                format_seconds(run.uniform_routing_step_s).c_str());
  }
  if (metrics.tokens_per_s > 0) {
    out << line("  %-16s %.0f tokens/s (%.0f per GPU)\n", "throughput", metrics.tokens_per_s,
                metrics.tokens_per_s / static_cast<double>(workload.ranks()));
    out << line("  %-16s %s for %s tokens\n", "time to train", format_seconds(metrics.time_to_train_s).c_str(),
                format_count(run.training_tokens).c_str());
  }
  if (metrics.mfu > 0)
    out << line("  %-16s %.1f %% (hardware FLOPs, recompute included: HFU %.1f %%)\n", "MFU", 100.0 * metrics.mfu,
                100.0 * metrics.hfu);
  std::vector<RankMemory> memories;
  for (const auto& rank : metrics.ranks)
    memories.push_back(rank.memory);
  print_memory_lines(out, metrics.memory, memories, gpus, "at", run);
  const RankMetrics& critical = metrics.ranks[metrics.critical_rank];
  out << line("  %-16s %s on rank %d", "compute", format_seconds(critical.compute_s).c_str(), critical.rank);
  if (critical.recompute_s > 0)
    out << line(", of which recompute %s", format_seconds(critical.recompute_s).c_str());
  out << '\n';
  for (const auto& [kind, comm] : critical.comm)
    if (!is_offload_kind(kind))
      out << line("  %-16s total %s, exposed %s, %s sent per rank\n", ("comm " + kind).c_str(),
                  format_seconds(comm.total_s).c_str(), format_seconds(comm.exposed_s).c_str(),
                  format_bytes(comm.bytes).c_str());
  for (const auto& [kind, comm] : critical.comm) {
    if (!is_offload_kind(kind))
      continue;
    const bool on_cpu = kind == "cpu_optimizer" || kind == "cpu";
    const std::string label = comm_label(kind);
    out << line("  %-16s total %s, exposed %s%s\n", label.c_str(),
                format_seconds(comm.total_s).c_str(), format_seconds(comm.exposed_s).c_str(),
                on_cpu ? "" : (", " + format_bytes(comm.bytes) + " moved per rank").c_str());
  }
  if (!metrics.resources.empty() && metrics.step_time_s > 0) {
    std::string busy;
    for (const ResourceUse& use : metrics.resources)
      busy += (busy.empty() ? "" : ", ") + use.kind + " " + line("%.0f%%", 100.0 * use.busy_s / metrics.step_time_s);
    out << line("  %-16s %s (the busiest of each class, busy time over the step)\n", "busy", busy.c_str());
  }
  const StepBreakdown& parts = critical.breakdown;
  std::string step_parts = "compute " + format_seconds(parts.compute_s);
  if (parts.recompute_s > 0)
    step_parts += " + recompute " + format_seconds(parts.recompute_s);
  step_parts += " + optimizer " + format_seconds(parts.optimizer_s);
  for (const auto& [kind, seconds] : parts.exposed_comm_s)
    if (seconds > 0)
      step_parts += " + exposed " + kind + " " + format_seconds(seconds);
  for (const auto& [rank, seconds] : parts.waiting_s)
    step_parts += " + waiting for rank " + std::to_string(rank) + " " + format_seconds(seconds);
  step_parts += " + bubble " + format_seconds(parts.bubble_s);
  out << line("  %-16s %s (rank %d)\n", "step breakdown", step_parts.c_str(), critical.rank);
  if (!run.coords.empty() && run.coords.size() == memories.size()) {
    const json stages = stages_json(memories, run);
    if (stages.size() > 1) {
      std::string text;
      for (const json& stage : stages)
        text += (text.empty() ? "" : ", ") + std::to_string(stage["stage"].get<int>()) + ": " +
                format_bytes(stage["peak_bytes"].get<double>());
      out << line("  %-16s %s\n", "stage peaks", text.c_str());
    }
  }
}

std::vector<ReportTable> report_tables(const StepMetrics& metrics, const RunInfo& run) {
  std::vector<ReportTable> tables;
  const RankMetrics& critical = metrics.ranks[metrics.critical_rank];
  ReportTable comm{"communication", "Communication and offload by kind", {"kind", "total", "exposed", "of the step", "moved per rank"},
                   {}, "On rank " + std::to_string(critical.rank) + ", the last to finish; exposed: what the step waited for."};
  for (const auto& [kind, use] : critical.comm) {
    const bool on_cpu = kind == "cpu_optimizer" || kind == "cpu";
    comm.rows.push_back({comm_label(kind), format_seconds(use.total_s), format_seconds(use.exposed_s),
                         metrics.step_time_s > 0 ? line("%.1f %%", 100.0 * use.exposed_s / metrics.step_time_s) : "", on_cpu ? "" : format_bytes(use.bytes)});
  }
  if (!comm.rows.empty())
    tables.push_back(comm);
  std::vector<RankMemory> memories;
  for (const auto& rank : metrics.ranks)
    memories.push_back(rank.memory);
  if (!run.coords.empty() && run.coords.size() == memories.size()) {
    const json stages = stages_json(memories, run);
    ReportTable peaks{"stages", "Memory peak of each pipeline stage", {"stage", "peak", "on rank"}, {}, ""};
    for (const json& stage : stages)
      peaks.rows.push_back({std::to_string(stage["stage"].get<int>()), format_bytes(stage["peak_bytes"].get<double>()),
                            std::to_string(stage["rank"].get<int>())});
    if (peaks.rows.size() > 1)
      tables.push_back(peaks);
  }
  if (!run.settings.empty()) {
    ReportTable settings{"settings", "Settings", {"key", "value"}, {}, "Every scenario key as the run used it."};
    for (const auto& [key, value] : run.settings)
      settings.rows.push_back({key, value});
    tables.push_back(settings);
  }
  return tables;
}

std::vector<std::pair<std::string, std::string>> report_facts(const StepMetrics& metrics, const Workload& workload,
                                                              const std::vector<GpuInfo>& gpus, const RunInfo& run) {
  std::vector<std::pair<std::string, std::string>> facts = {
      {"model", workload.step.model.empty() ? "(trace)" : workload.step.model + " (" +
                                                             format_count(workload.step.parameters) + " parameters)"},
      {"platform", run.platform + ", " + gpu_counts(gpus, workload.ranks())},
      {"layout", run.layout},
      {"fidelity", run.fidelity},
      {"step time", format_seconds(metrics.step_time_s)}};
  if (metrics.tokens_per_s > 0)
    facts.emplace_back("throughput", format_count(metrics.tokens_per_s) + " tokens/s");
  if (metrics.mfu > 0)
    facts.emplace_back("MFU / HFU", format_double(std::round(metrics.mfu * 1000) / 10) + " % / " +
                                        format_double(std::round(metrics.hfu * 1000) / 10) + " %");
  facts.emplace_back("peak memory", format_bytes(metrics.memory.peak_bytes) + " of " +
                                        format_bytes(metrics.memory.capacity_bytes) + " on rank " +
                                        std::to_string(metrics.memory.peak_rank) +
                                        (metrics.memory.gpu_fits ? " (fits)" : " (does not fit)"));
  for (const auto& [tier, name] : node_tiers(metrics.memory))
    if (tier->used)
      facts.emplace_back(name, format_bytes(tier->peak_bytes) + " of " + format_bytes(tier->capacity_bytes) + " on " +
                                   tier->node + (tier->fits ? " (fits)" : " (does not fit)"));
  return facts;
}

std::string memory_csv(const StepMetrics& metrics) {
  std::ostringstream out;
  out << "rank,time_s";
  for (int c = 0; c < category_count; ++c)
    out << ',' << to_string(static_cast<MemCategory>(c));
  out << ",host,nvme\n";
  for (const auto& rank : metrics.ranks)
    for (const auto& point : rank.timeline) {
      out << rank.rank << ',' << format_double(point.time);
      for (double bytes : point.gpu)
        out << ',' << format_double(bytes);
      out << ',' << format_double(point.host) << ',' << format_double(point.nvme) << '\n';
    }
  return out.str();
}

json memory_json(const std::vector<RankMemory>& ranks, const Workload& workload, const std::vector<GpuInfo>& gpus,
                 const RunInfo& run) {
  json out = run_json(workload, gpus, run);
  out["memory"] = memory_section(summarize_memory(ranks, gpus), ranks, gpus, false);
  return out;
}

void print_memory(std::ostream& out, const std::vector<RankMemory>& ranks, const Workload& workload,
                  const std::vector<GpuInfo>& gpus, const RunInfo& run) {
  print_header(out, workload, gpus, run);
  print_memory_lines(out, summarize_memory(ranks, gpus), ranks, gpus, "op", run);
}

void print_memory_comparison_table(std::ostream& out, const std::string& key, const std::vector<ComparisonRow>& rows) {
  std::vector<MemorySummary> summaries;
  bool host = false, nvme = false;  // columns for the tiers some row uses
  for (const ComparisonRow& row : rows) {
    summaries.push_back(summarize_memory(row.ranks, row.gpus));
    host = host || summaries.back().host.used;
    nvme = nvme || summaries.back().nvme.used;
  }
  out << "| " << key;
  for (int c = 0; c < category_count; ++c)
    out << " | " << to_string(static_cast<MemCategory>(c));
  out << " | peak | reserve" << (host ? " | host per node" : "") << (nvme ? " | nvme per node" : "") << " | fits |\n|---";
  for (int c = 0; c <= category_count + 2 + host + nvme; ++c)
    out << "|---";
  out << "|\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const MemorySummary& summary = summaries[i];
    const DeviceMemory& peak = rows[i].ranks[summary.peak_rank].gpu();
    out << "| " << rows[i].value;
    for (double bytes : peak.at_peak)
      out << " | " << format_bytes(bytes);
    out << " | " << format_bytes(summary.peak_bytes) << " | " << format_bytes(summary.reserve_bytes);
    if (host)
      out << " | " << format_bytes(summary.host.peak_bytes);
    if (nvme)
      out << " | " << format_bytes(summary.nvme.peak_bytes);
    out << " | " << (summary.fits ? "yes" : "no") << " |\n";
  }
}

std::string plan_csv(const std::vector<PlanEntry>& entries) {
  std::string csv = "rank,gpus,dp,tp,pp,vpp,schedule,cp,ep,etp,dispatcher,micro_batch,zero,recompute,offload,tokens_per_s,step_time_s,mfu,"
                    "peak_bytes,"
                    "headroom_bytes,time_to_train_s,gpu_hours,cost,within_deadline,bottleneck,settings\n";
  for (std::size_t place = 0; place < entries.size(); ++place) {
    const PlanEntry& e = entries[place];
    const SweepRow& row = e.simulated;
    csv += std::to_string(place + 1) + "," + std::to_string(e.gpus) + "," + std::to_string(e.dp) + "," +
           std::to_string(e.tp) + "," + std::to_string(e.pp) + "," + std::to_string(e.vpp) + "," + e.schedule + "," + std::to_string(e.cp) +
           "," + std::to_string(e.ep) + "," + std::to_string(e.etp) + "," + e.dispatcher + "," + std::to_string(e.micro_batch) + "," + std::to_string(e.zero) + "," + e.recompute + "," + e.offload + "," +
           format_double(row.tokens_per_s) + "," + format_double(row.step_time_s) + "," + format_double(row.mfu) + "," +
           csv_byte_count(row.peak_bytes) + "," + csv_byte_count(row.headroom_bytes()) + "," +
           format_double(e.time_to_train_s) + "," + format_double(e.gpu_hours) + "," +
           (e.cost >= 0 ? format_double(e.cost) : std::string()) + "," + (e.within_deadline ? "true" : "false") + "," +
           csv_field(row.bottleneck) + "," +
           csv_field(e.fixed) + "\n";
  }
  return csv;
}

json plan_json(const std::vector<PlanEntry>& entries) {
  json plan = json::array();
  for (std::size_t place = 0; place < entries.size(); ++place) {
    const PlanEntry& e = entries[place];
    const SweepRow& row = e.simulated;
    plan.push_back({{"rank", place + 1}, {"gpus", e.gpus}, {"dp", e.dp}, {"tp", e.tp}, {"pp", e.pp}, {"vpp", e.vpp},
                    {"schedule", e.schedule}, {"cp", e.cp}, {"ep", e.ep}, {"etp", e.etp}, {"dispatcher", e.dispatcher}, {"micro_batch", e.micro_batch}, {"zero", e.zero}, {"recompute", e.recompute},
                    {"offload", e.offload}, {"tokens_per_s", row.tokens_per_s}, {"step_time_s", row.step_time_s},
                    {"mfu", row.mfu}, {"peak_bytes", row.peak_bytes}, {"reserve_bytes", row.reserve_bytes},
                    {"headroom_bytes", row.headroom_bytes()}, {"capacity_bytes", row.capacity_bytes},
                    {"time_to_train_s", e.time_to_train_s}, {"gpu_hours", e.gpu_hours}, {"bottleneck", row.bottleneck},
                    {"decisions", e.decisions}, {"settings", e.fixed}, {"within_deadline", e.within_deadline}});
    if (e.cost >= 0)
      plan.back()["cost"] = e.cost;
  }
  return plan;
}

} // namespace trainsim
