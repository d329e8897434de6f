#include "report/metrics.hpp"

#include <algorithm>
#include <cmath>

#include "program/collective_plan.hpp"

namespace trainsim {

void BusyTime::begin(double time) {
  if (!sorted_)
    intervals();
  if (active_++ > 0)
    return;
  if (!intervals_.empty() && intervals_.back().end >= time)
    return;  // back-to-back spans form one interval: reopen it
  intervals_.push_back({time, time});
}

void BusyTime::end(double time) {
  if (--active_ == 0)
    intervals_.back().end = time;
}

void BusyTime::add(double start, double end) {
  if (end <= start)
    return;
  intervals_.push_back({start, end});
  sorted_ = false;
}

const std::vector<Interval>& BusyTime::intervals() const {
  if (!sorted_) {
    const std::vector<Interval> spans = std::move(intervals_);
    intervals_ = merge_intervals(spans, {});
    sorted_ = true;
  }
  return intervals_;
}

double BusyTime::total() const {
  double sum = 0;
  for (const auto& interval : intervals())
    sum += interval.end - interval.start;
  return sum;
}

double uncovered_time(const std::vector<Interval>& covered, const std::vector<Interval>& cover) {
  double uncovered = 0;
  std::size_t j = 0;
  for (const Interval& span : covered) {
    double cursor = span.start;
    while (j < cover.size() && cover[j].end <= cursor)
      ++j;
    for (std::size_t k = j; k < cover.size() && cover[k].start < span.end; ++k) {
      if (cover[k].start > cursor)
        uncovered += cover[k].start - cursor;
      cursor = std::max(cursor, cover[k].end);
    }
    if (cursor < span.end)
      uncovered += span.end - cursor;
  }
  return uncovered;
}

std::vector<Interval> merge_intervals(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> all;
  all.reserve(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(all),
             [](const Interval& x, const Interval& y) { return x.start < y.start; });
  std::vector<Interval> merged;
  for (const Interval& interval : all) {
    if (!merged.empty() && interval.start <= merged.back().end)
      merged.back().end = std::max(merged.back().end, interval.end);
    else
      merged.push_back(interval);
  }
  return merged;
}

namespace {

// A send or recv names no group: the stream it goes on says whose traffic it carries.
const char* point_to_point_kind(Stream stream) {
  switch (stream) {
  case Stream::pp_comm:
  case Stream::pp_bwd: return "pp";
  case Stream::tp_comm: return "tp";
  case Stream::dp_comm: return "dp";
  case Stream::cp_comm: return "cp";
  case Stream::ep_comm:
  case Stream::ep_rail: return "ep";
  case Stream::compute:
  case Stream::copy:
  case Stream::copy_out:
  case Stream::io_read:
  case Stream::io_write:
  case Stream::cpu: return "p2p";
  }
  return "p2p";
}

} // namespace

std::string comm_kind(const Op& op, const Workload& workload, std::size_t rank) {
  switch (op.kind) {
  case OpKind::collective: return workload.groups[workload.group_of(rank, op.group)].kind;
  case OpKind::send:
  case OpKind::recv: return point_to_point_kind(op.stream);
  case OpKind::copy: return op.inbound ? "h2d" : "d2h";
  case OpKind::read: return "nvme_read";
  case OpKind::write: return "nvme_write";
  case OpKind::compute: return op.target.empty() ? "" : op.phase == Phase::optimizer ? "cpu_optimizer" : "cpu";
  default: return "";
  }
}

bool StepCollector::transfers_are_told(const Op& op) { return op.kind == OpKind::send || op.kind == OpKind::collective; }

int StepCollector::kind_index(const std::string& kind) {
  const auto it = std::find(kinds_.begin(), kinds_.end(), kind);
  if (it != kinds_.end())
    return static_cast<int>(it - kinds_.begin());
  kinds_.push_back(kind);
  return static_cast<int>(kinds_.size() - 1);
}

bool is_offload_kind(const std::string& kind) {
  return kind == "h2d" || kind == "d2h" || kind == "nvme_read" || kind == "nvme_write" || kind == "cpu_optimizer" ||
         kind == "cpu";
}

std::vector<bool> first_rank_of_each_stage(const std::vector<int>& stage_of_rank) {
  std::vector<bool> keep(stage_of_rank.size(), false);
  std::vector<bool> stage_seen;
  for (std::size_t rank = 0; rank < stage_of_rank.size(); ++rank) {
    const auto stage = static_cast<std::size_t>(stage_of_rank[rank]);
    if (stage >= stage_seen.size())
      stage_seen.resize(stage + 1, false);
    if (!stage_seen[stage])
      keep[rank] = stage_seen[stage] = true;
  }
  return keep;
}

std::vector<bool> default_timeline_ranks(const std::vector<int>& stage_of_rank) {
  constexpr std::size_t all_up_to = 64;
  if (stage_of_rank.size() <= all_up_to)
    return std::vector<bool>(stage_of_rank.size(), true);
  return first_rank_of_each_stage(stage_of_rank);
}

StepCollector::StepCollector(const Workload& workload, const std::vector<GpuInfo>& gpus,
                             const std::vector<bool>& timeline_ranks, const AllocatorReserve& reserve)
    : workload_(workload), gpus_(gpus) {
  // Every kind of group in the layout is reported, with zeros when it moved nothing.
  for (const Group& group : workload.groups)
    kind_index(group.kind);
  // Ranks sharing a program bind its slots to groups of the same kinds (validate_workload).
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    const Program* program = workload.programs[rank].get();
    if (facts_.count(program))
      continue;
    ProgramFacts facts;
    facts.kind.reserve(program->ops.size());
    for (const Op& op : program->ops) {
      const std::string kind = comm_kind(op, workload, rank);
      facts.kind.push_back(kind.empty() ? -1 : static_cast<signed char>(kind_index(kind)));
    }
    facts.allocation = pair_allocations(*program);
    facts_.emplace(program, std::move(facts));
  }
  ranks_.reserve(workload.ranks());
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    const bool keep_timeline = timeline_ranks.empty() || timeline_ranks[rank];
    if (keep_timeline)
      node_timelines_.try_emplace(gpus[rank].node);
    ranks_.emplace_back(keep_timeline, gpus[rank].hbm_capacity, reserve);
    RankState& state = ranks_.back();
    state.facts = &facts_.at(workload.programs[rank].get());
    state.comm.resize(kinds_.size());
    state.comm_bytes.assign(kinds_.size(), 0.0);
    state.comm_seen.assign(kinds_.size(), false);
  }
}

void StepCollector::op_started(int rank, OpId id, double time) {
  const Op& op = workload_.program(rank).ops[id];
  RankState& state = ranks_[rank];
  if (op.kind == OpKind::compute && op.target.empty()) {
    state.compute.begin(time);
    state.phases.advance(time);
    ++state.phases.running;
    state.phases.recompute += op.phase == Phase::recompute;
    state.phases.optimizer += op.phase == Phase::optimizer;
    state.flops += op.flops;
    return;
  }
  const int kind = state.facts->kind[id];
  if (kind < 0 || op.kind == OpKind::recv)
    return;
  state.comm_seen[kind] = true;
  if (op.kind == OpKind::collective)
    state.comm_bytes[kind] += workload_.bytes_sent(static_cast<std::size_t>(rank), op);
  else if (op.kind != OpKind::compute)  // work on the CPU moves nothing over a link
    state.comm_bytes[kind] += op.bytes;
  // Sends and collectives span the wait for their peers; their transfer is told by op_transferred.
  if (transfers_are_told(op))
    return;
  state.comm[kind].begin(time);
}

void StepCollector::op_finished(int rank, OpId id, double time) {
  const Op& op = workload_.program(rank).ops[id];
  RankState& state = ranks_[rank];
  state.finish = std::max(state.finish, time);
  if (op.kind == OpKind::compute && op.target.empty()) {
    state.compute.end(time);
    state.phases.advance(time);
    --state.phases.running;
    state.phases.recompute -= op.phase == Phase::recompute;
    state.phases.optimizer -= op.phase == Phase::optimizer;
  } else if (op.kind == OpKind::alloc || op.kind == OpKind::free) {
    state.memory.apply(op, state.facts->allocation[id], time);
    apply_to_node(rank, id, time);
  } else if (op.kind != OpKind::recv && !transfers_are_told(op)) {
    const int kind = state.facts->kind[id];
    if (kind >= 0)
      state.comm[kind].end(time);
  }
}

void StepCollector::apply_to_node(int rank, OpId id, double time) {
  const Program& program = workload_.program(rank);
  const Op& allocation = program.ops[ranks_[rank].facts->allocation[id]];  // a free's device and size are its alloc's
  if (allocation.device == Device::gpu)
    return;
  const std::string& node = gpus_[rank].node;
  const auto device = static_cast<std::size_t>(allocation.device);
  double& in_use = node_in_use_[node][device];
  in_use += program.ops[id].kind == OpKind::alloc ? allocation.bytes : -allocation.bytes;
  double& peak = node_peaks_[node][device];
  peak = std::max(peak, in_use);
  const auto timeline = node_timelines_.find(node);
  if (timeline == node_timelines_.end())
    return;
  // Allocations at one instant are one point: what is in use once they are all done.
  std::vector<NodeMemoryPoint>& points = timeline->second;
  if (points.empty() || points.back().time != time)
    points.push_back({time, points.empty() ? 0.0 : points.back().host, points.empty() ? 0.0 : points.back().nvme});
  points.back().host = node_in_use_[node][static_cast<std::size_t>(Device::host)];
  points.back().nvme = node_in_use_[node][static_cast<std::size_t>(Device::nvme)];
}

void StepCollector::op_transferred(int rank, OpId id, const Transfer& transfer) {
  RankState& state = ranks_[rank];
  const int kind = state.facts->kind[id];
  if (kind >= 0)
    state.comm[kind].add(transfer.start, transfer.end);
  if (transfer.waited_for >= 0)
    state.waits[transfer.waited_for].add(transfer.wait_start, transfer.start);
}

namespace {

NodeTier summarize_tier(const std::vector<RankMemory>& ranks, const std::vector<GpuInfo>& gpus, Device device,
                        double GpuInfo::*capacity, const NodePeaks* over_time) {
  std::map<std::string, std::pair<double, double>> held;  // node -> bytes, capacity
  NodeTier tier;
  for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
    const double peak = ranks[rank].devices[static_cast<int>(device)].peak;
    auto& [bytes, node_capacity] = held[gpus[rank].node];
    bytes += peak;
    node_capacity = gpus[rank].*capacity;
    tier.used = tier.used || peak > 0;
  }
  if (over_time)
    for (auto& [node, entry] : held)
      entry.first = over_time->at(node)[static_cast<int>(device)];
  for (const auto& [node, entry] : held) {
    if (tier.node.empty() || entry.first > tier.peak_bytes) {
      tier.peak_bytes = entry.first;
      tier.node = node;
      tier.capacity_bytes = entry.second;
    }
    if (entry.second > 0 && entry.first > entry.second)
      tier.fits = false;
  }
  return tier;
}

} // namespace

MemorySummary summarize_memory(const std::vector<RankMemory>& ranks, const std::vector<GpuInfo>& gpus,
                               const NodePeaks* node_peaks) {
  MemorySummary summary;
  // On GPUs of different sizes the rank that matters is the one with the least headroom, not
  // the one with the highest peak.
  double least_headroom = 0;
  for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
    const double capacity = gpus[rank].hbm_capacity;
    const double required = ranks[rank].required();
    if (rank == 0 || capacity - required < least_headroom) {
      least_headroom = capacity - required;
      summary.peak_bytes = ranks[rank].gpu().peak;
      summary.reserve_bytes = ranks[rank].reserve;
      summary.capacity_bytes = capacity;
      summary.peak_rank = static_cast<int>(rank);
    }
    if (required > capacity)
      summary.gpu_fits = false;
  }
  summary.host = summarize_tier(ranks, gpus, Device::host, &GpuInfo::host_memory_capacity, node_peaks);
  summary.nvme = summarize_tier(ranks, gpus, Device::nvme, &GpuInfo::nvme_capacity, node_peaks);
  summary.fits = summary.gpu_fits && summary.host.fits && summary.nvme.fits;
  return summary;
}

double time_to_train(double tokens, double tokens_per_step, double step_time_s) {
  // Relative slack: a token count given as a multiple of the batch still is that many steps.
  return std::ceil(tokens / tokens_per_step * (1 - 1e-12)) * step_time_s;
}

double StepBreakdown::idle_s() const {
  double idle = bubble_s;
  for (const auto& [rank, seconds] : waiting_s)
    idle += seconds;
  return idle;
}

std::pair<int, double> StepBreakdown::longest_wait() const {
  std::pair<int, double> longest{-1, 0.0};
  for (const auto& [rank, seconds] : waiting_s)
    if (seconds > longest.second)
      longest = {rank, seconds};
  return longest;
}

StepBreakdown StepCollector::breakdown_of(const RankState& state, const RankMetrics& rank, double step_time) const {
  StepBreakdown breakdown;
  breakdown.recompute_s = rank.recompute_s;
  breakdown.optimizer_s = rank.optimizer_s;
  breakdown.compute_s = rank.compute_s - rank.recompute_s - rank.optimizer_s;
  // Communication kinds in a fixed priority: the ones inside a layer first, then the gradient
  // reductions, then the pipeline transfers, then any other.
  static const std::vector<std::string> priority = {"tp", "cp", "ep", "dp", "emb", "mirror", "pp"};
  std::vector<std::size_t> order;
  for (const std::string& kind : priority)
    for (std::size_t k = 0; k < kinds_.size(); ++k)
      if (kinds_[k] == kind)
        order.push_back(k);
  for (std::size_t k = 0; k < kinds_.size(); ++k)
    if (std::find(order.begin(), order.end(), k) == order.end())
      order.push_back(k);
  std::vector<Interval> covered = state.compute.intervals();
  double accounted = rank.compute_s;
  for (std::size_t k : order) {
    if (!rank.comm.count(kinds_[k]))
      continue;
    const auto& intervals = state.comm[k].intervals();
    const double exposed = uncovered_time(intervals, covered);
    breakdown.exposed_comm_s[kinds_[k]] = exposed;
    accounted += exposed;
    covered = merge_intervals(covered, intervals);
  }
  // Waiting for a later member counts where nothing above ran (and once, when two collectives
  // waited at the same time).
  for (const auto& [waited_for, waits] : state.waits) {
    const auto& intervals = waits.intervals();
    const double waited = uncovered_time(intervals, covered);
    if (waited <= 0)
      continue;
    breakdown.waiting_s[waited_for] = waited;
    accounted += waited;
    covered = merge_intervals(covered, intervals);
  }
  breakdown.bubble_s = std::max(0.0, step_time - accounted);
  return breakdown;
}

StepMetrics StepCollector::finish(double training_tokens) const {
  const std::vector<GpuInfo>& gpus = gpus_;
  StepMetrics metrics;
  double peak_flops = 0;
  std::vector<RankMemory> memories;
  for (std::size_t rank = 0; rank < ranks_.size(); ++rank) {
    const RankState& state = ranks_[rank];
    RankMetrics out;
    out.rank = static_cast<int>(rank);
    out.host = gpus[rank].host;
    out.finish_s = state.finish;
    out.compute_s = state.compute.total();
    out.recompute_s = state.phases.recompute_s;
    out.optimizer_s = state.phases.optimizer_s;
    out.hardware_flops = state.flops;
    for (std::size_t k = 0; k < kinds_.size(); ++k) {
      // Kinds of the layout's groups always, others (p2p, copy, io) when they happened.
      const bool of_a_group = std::any_of(workload_.groups.begin(), workload_.groups.end(),
                                          [&](const Group& group) { return group.kind == kinds_[k]; });
      if (!of_a_group && !state.comm_seen[k])
        continue;
      CommMetrics& comm = out.comm[kinds_[k]];
      comm.total_s = state.comm[k].total();
      comm.exposed_s = uncovered_time(state.comm[k].intervals(), state.compute.intervals());
      comm.bytes = state.comm_bytes[k];
    }
    out.memory = state.memory.result();
    out.timeline = state.memory.timeline();
    memories.push_back(out.memory);
    if (state.finish > metrics.step_time_s) {
      metrics.step_time_s = state.finish;
      metrics.critical_rank = out.rank;
    }
    peak_flops += matmul_peak(gpus[rank], workload_.step.precision, workload_.step.efficiency.allow_tf32);
    metrics.ranks.push_back(std::move(out));
  }
  NodePeaks node_peaks = node_peaks_;
  for (const GpuInfo& gpu : gpus)
    node_peaks.try_emplace(gpu.node);  // nodes that offload nothing
  metrics.memory = summarize_memory(memories, gpus, &node_peaks);
  for (const auto& [node, points] : node_timelines_)
    if (!points.empty())
      metrics.node_timelines.emplace(node, points);
  // The GPUs are a resource too: the busiest one's compute time.
  ResourceUse gpu_compute{"gpu", static_cast<int>(metrics.ranks.size()), "", 0, 0};
  for (const RankMetrics& rank : metrics.ranks)
    if (gpu_compute.busiest.empty() || rank.compute_s > gpu_compute.busy_s) {
      gpu_compute.busy_s = rank.compute_s;
      gpu_compute.busiest = rank.host;
    }
  metrics.resources = resources_.uses();
  metrics.resources.push_back(gpu_compute);
  std::sort(metrics.resources.begin(), metrics.resources.end(),
            [](const ResourceUse& a, const ResourceUse& b) { return a.kind < b.kind; });
  double hardware_flops = 0;
  for (std::size_t rank = 0; rank < ranks_.size(); ++rank) {
    metrics.ranks[rank].breakdown = breakdown_of(ranks_[rank], metrics.ranks[rank], metrics.step_time_s);
    hardware_flops += metrics.ranks[rank].hardware_flops;
  }
  if (metrics.step_time_s > 0) {
    metrics.tokens_per_s = workload_.step.tokens_per_step / metrics.step_time_s;
    metrics.mfu = workload_.step.model_flops_per_step / (metrics.step_time_s * peak_flops);
    metrics.hfu = hardware_flops / (metrics.step_time_s * peak_flops);
    if (metrics.tokens_per_s > 0)
      metrics.time_to_train_s = time_to_train(training_tokens, workload_.step.tokens_per_step, metrics.step_time_s);
  }
  return metrics;
}

} // namespace trainsim
