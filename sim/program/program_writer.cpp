#include "program/program_writer.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "program/model_states.hpp"
#include "program/offloaded_optimizer.hpp"

namespace trainsim {

OpId ProgramWriter::compute(const std::string& name, const Work& work, Phase phase, std::vector<OpId> deps) {
  Op op;
  op.kind = OpKind::compute;
  op.stream = Stream::compute;
  op.name = name;
  op.flops = work.flops;
  op.bytes = work.bytes;
  op.kernel_set = work.kernel_set;
  op.phase = phase;
  op.place = place_;
  op.deps = std::move(deps);
  return program_.add(std::move(op));
}

OpId ProgramWriter::compute_on(const std::string& host, const std::string& name, const Work& work, Phase phase,
                               std::vector<OpId> deps) {
  // Host CPUs run no GPU kernels: the work is timed at the CPU's speed.
  const OpId id = compute(name, Work{work.flops, work.bytes}, phase, std::move(deps));
  program_.ops[id].target = host;
  program_.ops[id].stream = Stream::cpu;
  return id;
}

OpId ProgramWriter::copy(const std::string& host, bool inbound, double bytes, const std::string& name,
                         std::vector<OpId> deps) {
  const OpId id = add_op(OpKind::copy, inbound ? Stream::copy : Stream::copy_out, bytes, name, std::move(deps));
  program_.ops[id].target = host;
  program_.ops[id].inbound = inbound;
  return id;
}

OpId ProgramWriter::disk_io(OpKind kind, const std::string& disk, double bytes, const std::string& name,
                            std::vector<OpId> deps) {
  const OpId id = add_op(kind, kind == OpKind::read ? Stream::io_read : Stream::io_write, bytes, name, std::move(deps));
  program_.ops[id].target = disk;
  return id;
}

std::optional<OpId> ProgramWriter::alloc(const std::string& tensor, MemCategory category, double bytes, Device device) {
  if (bytes <= 0)
    return std::nullopt;
  Op op;
  op.kind = OpKind::alloc;
  op.stream = Stream::compute;
  op.tensor = tensor;
  op.category = category;
  op.device = device;
  op.bytes = bytes;
  live_.insert(tensor);
  return program_.add(std::move(op));
}

void ProgramWriter::release(const std::string& tensor, std::vector<OpId> deps) {
  if (!live_.erase(tensor))
    return;
  Op op;
  op.kind = OpKind::free;
  op.stream = Stream::compute;
  op.tensor = tensor;
  op.deps = std::move(deps);
  program_.add(std::move(op));
}

void ProgramWriter::interleave(OpId first, OpId second) {
  if (!pairs_.empty() && first < pairs_.back().end)
    throw std::logic_error("interleaved pairs overlap");
  pairs_.push_back({first, second, static_cast<OpId>(program_.ops.size())});
}

namespace {

// An expert-parallel exchange: a pass's piece of an overlapped pair ends after one (or after
// DeepEP's two legs).
bool exchanges_tokens(const Op& op) {
  return op.kind == OpKind::collective && (op.stream == Stream::ep_comm || op.stream == Stream::ep_rail);
}

// Where a pass's piece starting at `op` ends (past its last op): after the first exchange (DeepEP's
// two legs together), or at `stop`.
OpId piece_end(const std::vector<Op>& ops, OpId op, OpId stop) {
  while (op < stop && !exchanges_tokens(ops[op]))
    ++op;
  while (op < stop && exchanges_tokens(ops[op]))
    ++op;
  return op;
}

// The pieces of a pass [from, to): where each ends.
std::vector<OpId> piece_ends(const std::vector<Op>& ops, OpId from, OpId to) {
  std::vector<OpId> ends;
  while (from < to)
    ends.push_back(from = piece_end(ops, from, to));
  return ends;
}

// Appends a pair's ops to `order`: the pieces of the passes [first, second) and [second, end)
// interleaved, each next piece from the pass that has run the smaller share of its pieces, so
// that equal counts alternate and a pass with more (a backward that recomputes its forward
// issues twice the exchanges) has them spread evenly. The backward starts where its first piece
// ends in an exchange (its combine, or under recompute a dispatch), which the forward's compute
// then hides, as Megatron-Core issues the backward's combine first; else (nothing to hide) the
// forward runs first, its output wanted downstream.
void append_interleaved(const std::vector<Op>& ops, OpId first, OpId second, OpId end, std::vector<OpId>& order) {
  const std::vector<OpId> ends[2] = {piece_ends(ops, first, second), piece_ends(ops, second, end)};
  const int leader = !ends[1].empty() && exchanges_tokens(ops[ends[1].front() - 1]) ? 1 : 0;
  std::size_t taken[2] = {0, 0};
  OpId next[2] = {first, second};
  while (taken[0] < ends[0].size() || taken[1] < ends[1].size()) {
    // Compare taken[0] / size[0] with taken[1] / size[1] without dividing; ties go to the leader.
    const auto share = [&](int pass) { return taken[pass] * ends[1 - pass].size(); };
    int pass = leader;
    if (taken[pass] == ends[pass].size() || share(1 - pass) < share(pass))
      pass = 1 - pass;
    for (; next[pass] < ends[pass][taken[pass]]; ++next[pass])
      order.push_back(next[pass]);
    ++taken[pass];
  }
}

} // namespace

Program ProgramWriter::take() {
  if (pairs_.empty())
    return std::move(program_);
  std::vector<Op>& ops = program_.ops;
  std::vector<OpId> order;
  order.reserve(ops.size());
  OpId next = 0;
  for (const Pair& pair : pairs_) {
    for (; next < pair.first; ++next)
      order.push_back(next);
    append_interleaved(ops, pair.first, pair.second, pair.end, order);
    next = pair.end;
  }
  for (; next < ops.size(); ++next)
    order.push_back(next);
  std::vector<OpId> position(ops.size());
  for (OpId at = 0; at < order.size(); ++at)
    position[order[at]] = at;
  Program reordered;
  reordered.ops.reserve(ops.size());
  // The backward of a pair waits for nothing of its forward (the forward, written first, cannot
  // wait for the backward): either order of their pieces keeps every dep pointing backwards.
  for (const Pair& pair : pairs_)
    for (OpId id = pair.second; id < pair.end; ++id)
      for (const OpId dep : ops[id].deps)
        if (dep >= pair.first && dep < pair.second)
          throw std::logic_error("an overlapped pair's backward waits for its forward: " + ops[id].name);
  for (const OpId old : order) {
    Op& op = reordered.ops.emplace_back(std::move(ops[old]));
    for (OpId& dep : op.deps)
      dep = position[dep];
  }
  pairs_.clear();
  program_ = Program{};
  return reordered;
}

OpId ProgramWriter::add_op(OpKind kind, Stream stream, double bytes, const std::string& name, std::vector<OpId> deps) {
  Op op;
  op.kind = kind;
  op.stream = stream;
  op.bytes = bytes;
  op.name = name;
  op.place = place_;
  op.deps = std::move(deps);
  return program_.add(std::move(op));
}

OpId ProgramWriter::collective(Stream stream, Collective kind, int group, double bytes, const std::string& name,
                               std::vector<OpId> deps) {
  const OpId id = add_op(OpKind::collective, stream, bytes, name, std::move(deps));
  program_.ops[id].collective = kind;
  program_.ops[id].group = group;
  return id;
}

OpId ProgramWriter::all_to_all(Stream stream, int group, double bytes, int split, const std::string& name,
                               std::vector<OpId> deps) {
  const OpId id = collective(stream, Collective::all_to_all, group, bytes, name, std::move(deps));
  program_.ops[id].peer = split;
  return id;
}

std::vector<OpId> ProgramWriter::bucketed_collective(Stream stream, Collective kind, int group, double bytes,
                                                     double bucket, const std::string& name,
                                                     const std::vector<OpId>& deps) {
  std::vector<OpId> issued;
  for (const double size : bucket_sizes(bytes, bucket))
    issued.push_back(collective(stream, kind, group, size, name + ".bucket" + std::to_string(issued.size()), deps));
  return issued;
}

std::vector<std::vector<OpId>> ProgramWriter::parameter_gathers(const std::vector<ParameterGathers>& sets) {
  std::size_t pieces = 0;
  for (const ParameterGathers& set : sets)
    pieces = std::max(pieces, set.plan.waits_for.size());
  std::vector<std::vector<OpId>> gathers(sets.size()), waits(sets.size(), std::vector<OpId>(pieces, no_gather));
  for (std::size_t piece = 0; piece < pieces; ++piece)
    for (std::size_t s = 0; s < sets.size(); ++s) {
      const ParameterGathers& set = sets[s];
      if (set.plan.waits_for.empty() || set.plan.waits_for.at(piece) == ParameterGatherPlan::none)
        continue;  // nothing to gather, or nothing this piece needs
      while (gathers[s].size() <= set.plan.waits_for.at(piece))
        gathers[s].push_back(collective(Stream::dp_comm, Collective::all_gather, set.group,
                                        set.plan.bucket_parameters.at(gathers[s].size()) * set.element_bytes,
                                        set.name + ".bucket" + std::to_string(gathers[s].size()), {}));
      waits[s][piece] = gathers[s].at(set.plan.waits_for.at(piece));
    }
  return waits;
}

// Byte counts are sums of parameter counts times element sizes: compared with a relative tolerance.
constexpr double bucket_tolerance = 1e-12;

std::vector<double> bucket_sizes(double bytes, double bucket) {
  std::vector<double> sizes;
  const double total = bytes;
  for (; bytes > total * bucket_tolerance; bytes -= sizes.back())
    sizes.push_back(std::min(bytes, bucket));
  if (!sizes.empty())
    sizes.back() += bytes;  // a rounding residue is no bucket of its own
  return sizes;
}

ParameterGatherPlan plan_parameter_gathers(const std::vector<double>& piece_parameters, double bucket_parameters) {
  ParameterGatherPlan plan;
  double total = 0;
  for (const double parameters : piece_parameters)
    total += parameters;
  std::vector<double> backward_order = bucket_sizes(total, bucket_parameters);
  plan.bucket_parameters.assign(backward_order.rbegin(), backward_order.rend());
  const auto buckets = static_cast<long long>(backward_order.size());
  if (buckets == 0)
    return plan;  // nothing to gather
  // A piece ending `end` parameters into the forward starts total - end into the backward, in
  // backward bucket floor((total - end) / bucket): the furthest forward bucket it needs.
  double end = 0;
  for (const double parameters : piece_parameters) {
    if (parameters <= 0) {  // it needs none of them
      plan.waits_for.push_back(ParameterGatherPlan::none);
      continue;
    }
    end += parameters;
    const double into_backward = std::max(0.0, total - end) * (1 + bucket_tolerance);
    const auto backward_bucket = std::min(buckets - 1, static_cast<long long>(std::floor(into_backward / bucket_parameters)));
    plan.waits_for.push_back(static_cast<std::size_t>(buckets - 1 - backward_bucket));
  }
  return plan;
}

double BucketFiller::size_of(long long bucket) const {
  return std::min(bucket_, total_ - static_cast<double>(bucket) * bucket_);
}

long long BucketFiller::count() const {
  return static_cast<long long>(std::ceil(total_ / bucket_ * (1 - bucket_tolerance)));
}

long long BucketFiller::buckets_up_to(double bytes) const {
  if (bytes >= total_ * (1 - bucket_tolerance))
    return count();
  return std::min(count(), static_cast<long long>(std::floor(bytes / bucket_ * (1 + bucket_tolerance))));
}

std::vector<double> BucketFiller::opened_by(double bytes) const {
  std::vector<double> opened;
  if (bytes <= 0)
    return opened;
  // Bucket k opens at byte k x bucket: the first not yet open up to the one holding the last byte.
  const auto first = static_cast<long long>(std::ceil(filled_ / bucket_ * (1 - bucket_tolerance)));
  const auto last = std::min(count(), static_cast<long long>(std::ceil((filled_ + bytes) / bucket_ * (1 - bucket_tolerance)))) - 1;
  for (long long k = first; k <= last; ++k)
    opened.push_back(size_of(k));
  return opened;
}

std::vector<double> BucketFiller::add(double bytes, bool last) {
  filled_ += bytes;
  const long long complete = last ? count() : buckets_up_to(filled_);
  std::vector<double> sizes;
  for (; completed_ < complete; ++completed_)
    sizes.push_back(size_of(completed_));
  return sizes;
}

OpId ProgramWriter::point_to_point(OpKind kind, Stream stream, int peer, int tag, double bytes,
                                   const std::string& name, std::vector<OpId> deps) {
  const OpId id = add_op(kind, stream, bytes, name, std::move(deps));
  program_.ops[id].peer = peer;
  program_.ops[id].tag = tag;
  return id;
}

OpId ProgramWriter::send(Stream stream, int peer, int tag, double bytes, const std::string& name,
                         std::vector<OpId> deps) {
  return point_to_point(OpKind::send, stream, peer, tag, bytes, name, std::move(deps));
}

OpId ProgramWriter::recv(Stream stream, int peer, int tag, double bytes, const std::string& name,
                         std::vector<OpId> deps) {
  return point_to_point(OpKind::recv, stream, peer, tag, bytes, name, std::move(deps));
}


bool ExpertStates::reduces() const { return plan_ && plan_->reduces_gradients(); }

double ExpertStates::allocate() {
  if (!plan_)
    return 0;
  allocate_states_on_gpu(w_, *plan_, plan_->held(plan_->weights, parameters_), parameters_, "expert-");
  return plan_->held(plan_->optimizer, parameters_);
}

void ExpertStates::start_reducing(double parameters) {
  if (reduces())
    buckets_ = BucketFiller(s_.bucket_bytes, parameters * plan_->gradient_element_bytes);
}

void ExpertStates::gradients_ready(double parameters, OpId producer, bool last, std::vector<OpId>& reductions) {
  if (!reduces() || parameters <= 0)
    return;
  const Collective kind = plan_->gradient_reduction;
  for (const double bytes : buckets_.add(parameters * plan_->gradient_element_bytes, last))
    reductions.push_back(w_.collective(Stream::dp_comm, kind, group_, bytes,
                                       std::string(kind == Collective::all_reduce ? "expert-grad-allreduce"
                                                                                  : "expert-grad-reducescatter") +
                                           ".bucket" + std::to_string(reduced_++),
                                       {producer}));
}

bool ExpertStates::gathers_during_forward() const {
  return plan_ && plan_->gathers_after_step && s_.overlap_param_gather;
}

std::optional<ParameterGathers> ExpertStates::gathers_during_forward(const std::vector<double>& pieces) const {
  if (!gathers_during_forward())
    return std::nullopt;
  return ParameterGathers{plan_parameter_gathers(pieces, s_.bucket_bytes / plan_->gradient_element_bytes), group_,
                          plan_->parameter_element_bytes, "expert-param-allgather"};
}

void ExpertStates::gather_updated(OpId updated) {
  if (!plan_ || !plan_->gathers_after_step || gathers_during_forward())
    return;
  w_.bucketed_collective(Stream::dp_comm, Collective::all_gather, group_, parameters_ * plan_->parameter_element_bytes,
                         s_.bucket_bytes / plan_->gradient_element_bytes * plan_->parameter_element_bytes,
                         "expert-param-allgather", {updated});
}

ModelParallelGroups model_parallel_groups(const Scenario& scenario, const ModelStatePlan* experts) {
  ModelParallelGroups groups{scenario.tp > 1 ? tp_slot : -1, scenario.cp > 1 ? cp_slot : -1, scenario.cp, scenario.sp,
                             scenario.tp, scenario.tp_comm_overlap};
  if (scenario.ep > 1) {
    groups.ep = ep_slot;
    groups.expert_gradient = expert_gradient_slot;
    groups.expert_tp = scenario.etp == 1 ? -1 : scenario.etp == scenario.tp ? tp_slot : expert_tp_slot;
    groups.experts = experts;
    if (scenario.routing.dispatcher == TokenDispatcher::deepep) {
      groups.ep_node = ep_node_slot;
      groups.ep_rail = ep_rail_slot;
    }
  }
  return groups;
}

std::vector<OpId> LayerOps::gather_input(const std::string& name, std::vector<OpId> deps) {
  if (groups_.tp < 0 || !groups_.sp)
    return deps;
  return {w_.collective(Stream::tp_comm, Collective::all_gather, groups_.tp, costs_.tp_collective_bytes,
                        name + ".sp-allgather", std::move(deps))};
}

OpId LayerOps::reduce_output(const std::string& name, OpId producer) {
  if (groups_.tp < 0)
    return producer;
  return w_.collective(Stream::tp_comm, groups_.sp ? Collective::reduce_scatter : Collective::all_reduce, groups_.tp,
                       costs_.tp_collective_bytes, name + (groups_.sp ? ".sp-reducescatter" : ".tp-allreduce"),
                       {producer});
}

OpId LayerOps::attention(const std::string& name, std::vector<OpId> deps, Phase phase, bool backward) {
  const LayerCosts& layer = *layer_;
  if (groups_.cp < 0)
    return w_.compute(name, backward ? layer.attention_backward : layer.attention_forward, phase, std::move(deps));
  // Ring attention (Liu et al. 2023): this rank's own K/V block is computed while the other
  // blocks travel around the CP ring; the rest of the attention core waits for them. Forward
  // keeps only the local block, so backward circulates K/V again and, behind them, the dK/dV
  // accumulators, each going back to the block's owner: Transformer Engine's p2p context
  // parallelism (AttnFuncWithCPAndKVP2P.backward, dot_product_attention/context_parallel.py)
  // sends K/V in cp - 1 steps and dK/dV, of the same size and type, in cp - 1 steps.
  const OpId local = w_.compute(name + ".local", backward ? layer.attention_backward_local : layer.attention_forward_local,
                                phase, deps);
  const OpId exchange = w_.collective(Stream::cp_comm, Collective::all_gather, groups_.cp, layer.cp_kv_bytes,
                                      name + ".cp-kv-allgather", std::move(deps));
  const OpId ring = w_.compute(name + ".ring", backward ? layer.attention_backward_ring : layer.attention_forward_ring,
                               phase, {local, exchange});
  if (!backward)
    return ring;
  return w_.collective(Stream::cp_comm, Collective::reduce_scatter, groups_.cp, layer.cp_kv_bytes,
                       name + ".cp-dkv-reducescatter", {ring});
}

OpId LayerOps::ring_exchange(const std::string& name, const Work& chunk, OpId ready, Phase phase) {
  const double bytes = costs_.tp_collective_bytes / groups_.tp_size;
  OpId computed = w_.compute(name + ".chunk0", chunk, phase, {ready});
  OpId held = ready;  // the chunk this rank passes on next: its own first
  for (int step = 1; step < groups_.tp_size; ++step) {
    const int tag = next_ring_tag_++;
    const std::string suffix = std::to_string(step);
    w_.send(Stream::tp_comm, tp_next_slot, tag, bytes, name + ".ring-send" + suffix, {held});
    held = w_.recv(Stream::tp_comm, tp_previous_slot, tag, bytes, name + ".ring-recv" + suffix, {ready});
    computed = w_.compute(name + ".chunk" + suffix, chunk, phase, {held, computed});
  }
  return computed;
}

OpId LayerOps::pipelined_reduce_scatter(const std::string& name, const Work& chunk, OpId ready, Phase phase) {
  const double bytes = costs_.tp_collective_bytes / tp_overlap_pipeline_splits;
  OpId computed = ready, reduced = ready;
  for (int split = 0; split < tp_overlap_pipeline_splits; ++split) {
    const std::string suffix = std::to_string(split);
    computed = w_.compute(name + ".chunk" + suffix, chunk, phase, {computed});
    reduced = w_.collective(Stream::tp_comm, Collective::reduce_scatter, groups_.tp, bytes,
                            name + ".sp-reducescatter" + suffix, {computed});
  }
  return reduced;
}

OpId LayerOps::overlapped_forward(const std::string& name, const BlockParts& parts, std::vector<OpId> deps,
                                  Phase phase) {
  const OpId normed = w_.compute(name + ".before", parts.before, phase, std::move(deps));
  const OpId column = ring_exchange(name + ".column", parts.column_chunk, normed, phase);
  const OpId between = w_.compute(name + ".between", parts.between, phase, {column});
  const OpId reduced = pipelined_reduce_scatter(name + ".row", parts.row_chunk, between, phase);
  return w_.compute(name + ".after", parts.after, phase, {reduced});
}

OpId LayerOps::block_backward(const std::string& name, const BlockParts& parts, std::vector<OpId> deps) {
  const Phase phase = Phase::backward;
  OpId between = 0;  // the work before the column GEMM's dgrad done
  if (groups_.tp_comm_overlap) {
    const OpId after = w_.compute(name + ".after", parts.after_back, phase, std::move(deps));
    const OpId row_dgrad = ring_exchange(name + ".row-dgrad", parts.row_dgrad_chunk, after, phase);
    const OpId row_wgrad = w_.compute(name + ".row-wgrad", parts.row_wgrad, phase, {row_dgrad});
    between = w_.compute(name + ".between", parts.between_back, phase, {row_wgrad});
  } else {
    // One op from the part after the row GEMM to the column GEMM's dgrad: that part runs before
    // the output gradient's gather in Megatron, here after it, the same time on the compute stream.
    between = w_.compute(name + ".to-column", parts.to_column_back, phase, gather_input(name, std::move(deps)));
  }
  std::vector<OpId> wgrad_deps;
  if (groups_.sp)
    wgrad_deps.push_back(w_.collective(Stream::tp_comm, Collective::all_gather, groups_.tp,
                                       costs_.tp_collective_bytes, name + ".input-allgather", {between}));
  const OpId column_dgrad = w_.compute(name + ".column-dgrad", parts.column_dgrad, phase, {between});
  const OpId reduced = reduce_output(name + ".column-dgrad", column_dgrad);
  wgrad_deps.insert(wgrad_deps.begin(), column_dgrad);
  const OpId column_wgrad = w_.compute(name + ".column-wgrad", parts.column_wgrad, phase, std::move(wgrad_deps));
  return w_.compute(name + ".before", parts.before_back, phase, {column_wgrad, reduced});
}

OpId LayerOps::block_backward_input(const std::string& name, const BlockParts& parts, std::vector<OpId> deps) {
  const Phase phase = Phase::backward;
  const OpId to_column = w_.compute(name + ".to-column", parts.to_column_input, phase, gather_input(name, std::move(deps)));
  std::vector<OpId> gathered;
  if (groups_.sp)  // gathered beside the dgrad and kept for the weight gradient: B ends once it is here
    gathered.push_back(w_.collective(Stream::tp_comm, Collective::all_gather, groups_.tp,
                                     costs_.tp_collective_bytes, name + ".input-allgather", {to_column}));
  const OpId column_dgrad = w_.compute(name + ".column-dgrad", parts.column_dgrad, phase, {to_column});
  gathered.insert(gathered.begin(), reduce_output(name + ".column-dgrad", column_dgrad));
  return w_.compute(name + ".before", parts.before_back, phase, std::move(gathered));
}

OpId LayerOps::block_backward_weight(const std::string& name, const BlockParts& parts, OpId after) {
  const Phase phase = Phase::weight_gradient;
  const OpId row_wgrad = w_.compute(name + ".row-wgrad", parts.row_wgrad, phase, {after});
  return w_.compute(name + ".column-wgrad", parts.column_wgrad, phase, {row_wgrad});
}

OpId LayerOps::backward_input(long long index, const std::string& name, std::vector<OpId> deps) {
  const LayerCosts& layer = at(index);
  if (expert_parallel()) {
    const OpId moe_done = moe_backward(name + ".moe", std::move(deps), true);
    if (groups_.tp < 0)
      return w_.compute(name + ".attn", layer.attention_backward_input, Phase::backward, {moe_done});
    return block_backward_input(name + ".attn", layer.attention_parts, {moe_done});
  }
  if (groups_.tp < 0)
    return w_.compute(name, layer.backward_input, Phase::backward, std::move(deps));
  const OpId mlp_done = block_backward_input(name + ".mlp", layer.mlp_parts, std::move(deps));
  return block_backward_input(name + ".attn", layer.attention_parts, {mlp_done});
}

OpId LayerOps::backward_weight(long long index, const std::string& name, OpId after) {
  const LayerCosts& layer = at(index);
  if (expert_parallel()) {
    const OpId moe_done = w_.compute(name + ".moe", layer.moe.backward_weight, Phase::weight_gradient, {after});
    if (groups_.tp < 0)
      return w_.compute(name + ".attn", layer.attention_backward_weight, Phase::weight_gradient, {moe_done});
    return block_backward_weight(name + ".attn", layer.attention_parts, moe_done);
  }
  if (groups_.tp < 0)
    return w_.compute(name, layer.backward_weight, Phase::weight_gradient, {after});
  const OpId mlp_done = block_backward_weight(name + ".mlp", layer.mlp_parts, after);
  return block_backward_weight(name + ".attn", layer.attention_parts, mlp_done);
}

OpId LayerOps::attention_block_forward(const std::string& name, std::vector<OpId> deps, Phase phase) {
  if (groups_.tp_comm_overlap)
    return overlapped_forward(name, layer_->attention_parts, std::move(deps), phase);
  return reduce_output(name, attention(name, gather_input(name, std::move(deps)), phase, false));
}

OpId LayerOps::attention_block_backward(const std::string& name, std::vector<OpId> deps) {
  if (groups_.tp >= 0 && groups_.cp < 0)
    return block_backward(name, layer_->attention_parts, std::move(deps));
  return reduce_output(name, attention(name, gather_input(name, std::move(deps)), Phase::backward, true));
}

OpId LayerOps::experts_round_trip(const std::string& name, const char* first, const Work& before, const Work& experts,
                                  const char* last, const Work& after, Phase phase, std::vector<OpId> deps,
                                  std::vector<OpId> experts_deps) {
  const MoeParts& moe = layer_->moe;
  // Forward dispatches the tokens (in fp8 with moe.dispatch_precision = fp8); backward sends the
  // outputs' gradients the same way, in the activations' precision.
  const double ratio = phase == Phase::backward ? 1.0 : moe.forward_dispatch_ratio;
  const OpId sent = w_.compute(name + "." + first, before, phase, std::move(deps));
  if (moe.ep_gathered_bytes > 0) {
    // Megatron-Core's allgather dispatcher: the group's tokens (or their gradients) gathered,
    // this rank's experts run on their copies, the outputs summed back over the group; the
    // gathered tokens are held until then.
    const std::string buffer = name + ".ep-gathered";
    w_.alloc(buffer, MemCategory::buffers, moe.ep_gathered_bytes);
    const OpId gathered = w_.collective(Stream::ep_comm, Collective::all_gather, groups_.ep, moe.ep_gathered_bytes,
                                        name + "." + first + "-allgather", {sent});
    experts_deps.push_back(gathered);
    const OpId computed = w_.compute(name + ".experts", experts, phase, std::move(experts_deps));
    const OpId scattered = w_.collective(Stream::ep_comm, Collective::reduce_scatter, groups_.ep,
                                         moe.ep_gathered_bytes, name + "." + last + "-reducescatter", {computed});
    const OpId done = w_.compute(name + "." + last, after, phase, {scattered});
    w_.release(buffer);
    return done;
  }
  std::vector<OpId> arrived = exchange(name + "." + first, moe.to_experts_bytes, ratio, moe.to_experts_split, {sent});
  // The ranks splitting the same experts' GEMMs (etp) gather the copies each received.
  if (groups_.expert_tp >= 0)
    arrived = {w_.collective(Stream::tp_comm, Collective::all_gather, groups_.expert_tp, moe.gathered_bytes * ratio,
                             name + ".experts-allgather", arrived)};
  experts_deps.insert(experts_deps.begin(), arrived.begin(), arrived.end());
  OpId computed = w_.compute(name + ".experts", experts, phase, std::move(experts_deps));
  if (groups_.expert_tp >= 0)
    computed = w_.collective(Stream::tp_comm, Collective::reduce_scatter, groups_.expert_tp, moe.gathered_bytes,
                             name + ".experts-reducescatter", {computed});
  return w_.compute(name + "." + last, after, phase, exchange(name + "." + last, moe.from_experts_bytes, 1, -1, {computed}));
}

std::vector<OpId> LayerOps::exchange(const std::string& name, double bytes, double scale, int split,
                                     const std::vector<OpId>& deps) {
  if (groups_.ep_node < 0)
    return {w_.all_to_all(Stream::ep_comm, groups_.ep, bytes * scale, split, name + "-alltoall", deps)};
  // DeepEP: the inter-node leg and the NVLink leg at once, as its forwarders pipeline them
  // (tokens forwarded as they arrive).
  const MoeParts& moe = layer_->moe;
  std::vector<OpId> legs;
  if (moe.rail_bytes > 0)
    legs.push_back(w_.all_to_all(Stream::ep_rail, groups_.ep_rail, moe.rail_bytes * scale, -1, name + "-rail", deps));
  if (moe.node_bytes > 0)
    legs.push_back(w_.all_to_all(Stream::ep_comm, groups_.ep_node, moe.node_bytes * scale, -1, name + "-node", deps));
  return legs;
}

OpId LayerOps::shared_expert(const std::string& name, const Work& work, std::vector<OpId> deps, Phase phase) {
  deps = gather_input(name, std::move(deps));
  // Backward re-gathers the first linear's input, which forward kept split, for its weight
  // gradient (as block_backward does).
  if (phase == Phase::backward && groups_.sp)
    deps.push_back(w_.collective(Stream::tp_comm, Collective::all_gather, groups_.tp, costs_.tp_collective_bytes,
                                 name + ".input-allgather", deps));
  return reduce_output(name, w_.compute(name, work, phase, std::move(deps)));
}

OpId LayerOps::moe_forward(const std::string& name, std::vector<OpId> deps, Phase phase, std::vector<OpId> experts_deps) {
  const MoeParts& moe = layer_->moe;
  const OpId combined = experts_round_trip(name, "dispatch", moe.dispatch, moe.experts, "combine", moe.combine, phase,
                                           std::move(deps), std::move(experts_deps));
  return moe.shared.kernel_set < 0 ? combined : shared_expert(name + ".shared", moe.shared, {combined}, phase);
}

OpId LayerOps::moe_backward(const std::string& name, std::vector<OpId> deps, bool input_only) {
  const MoeParts& moe = layer_->moe;
  // Computed last in forward, the shared expert's backward comes first.
  if (moe.shared_back.kernel_set >= 0)
    deps.push_back(shared_expert(name + ".shared", input_only ? moe.shared_back_input : moe.shared_back, deps,
                                 Phase::backward));
  return experts_round_trip(name, "combine", input_only ? moe.combine_back_input : moe.combine_back,
                            input_only ? moe.experts_back_input : moe.experts_back, "dispatch",
                            input_only ? moe.dispatch_back_input : moe.dispatch_back, Phase::backward, std::move(deps));
}

OpId LayerOps::forward(long long index, const std::string& name, std::vector<OpId> deps, Phase phase,
                       std::vector<OpId> experts_deps) {
  const LayerCosts& layer = at(index);
  if (expert_parallel())
    return moe_forward(name + ".moe", {attention_block_forward(name + ".attn", std::move(deps), phase)}, phase,
                       std::move(experts_deps));
  deps.insert(deps.end(), experts_deps.begin(), experts_deps.end());  // none: no expert states here
  if (groups_.tp < 0 && groups_.cp < 0)
    return w_.compute(name, layer.forward, phase, std::move(deps));
  if (groups_.tp_comm_overlap) {
    const OpId attention_done = overlapped_forward(name + ".attn", layer.attention_parts, std::move(deps), phase);
    return overlapped_forward(name + ".mlp", layer.mlp_parts, {attention_done}, phase);
  }
  const OpId attention_done = attention(name + ".attn", gather_input(name + ".attn", std::move(deps)), phase, false);
  const OpId attention_out = reduce_output(name + ".attn", attention_done);
  const OpId mlp_done = w_.compute(name + ".mlp", layer.mlp_forward, phase, gather_input(name + ".mlp", {attention_out}));
  return reduce_output(name + ".mlp", mlp_done);
}

OpId LayerOps::backward(long long index, const std::string& name, std::vector<OpId> deps) {
  const LayerCosts& layer = at(index);
  if (expert_parallel())
    return attention_block_backward(name + ".attn", {moe_backward(name + ".moe", std::move(deps), false)});
  if (groups_.tp < 0 && groups_.cp < 0)
    return w_.compute(name, layer.backward, Phase::backward, std::move(deps));
  if (groups_.cp < 0) {
    const OpId mlp_done = block_backward(name + ".mlp", layer.mlp_parts, std::move(deps));
    return block_backward(name + ".attn", layer.attention_parts, {mlp_done});
  }
  // Backward runs the MLP first; each part's input gradient is reduced over tp.
  const OpId mlp_done =
      w_.compute(name + ".mlp", layer.mlp_backward, Phase::backward, gather_input(name + ".mlp", std::move(deps)));
  const OpId mlp_grad = reduce_output(name + ".mlp", mlp_done);
  const OpId attention_done =
      attention(name + ".attn", gather_input(name + ".attn", {mlp_grad}), Phase::backward, true);
  return reduce_output(name + ".attn", attention_done);
}

const LayerCosts& LayerOps::at(long long index) {
  layer_ = &costs_.layer(index);
  return *layer_;
}

bool LayerOps::expert_parallel() const { return groups_.ep >= 0 && layer_->routed; }

OpId LayerOps::embedding_forward(const std::string& name, std::vector<OpId> deps) {
  // A vocabulary-parallel embedding: each rank looks up its part of the vocabulary, then the
  // partial embeddings are summed over tp.
  return reduce_output(name, w_.compute(name, costs_.embedding_forward, Phase::forward, std::move(deps)));
}

OpId LayerOps::embedding_backward(const std::string& name, std::vector<OpId> deps) {
  return w_.compute(name, costs_.embedding_backward, Phase::backward, gather_input(name, std::move(deps)));
}

OpId LayerOps::head_forward(const std::string& name, std::vector<OpId> deps) {
  return w_.compute(name, costs_.head_forward, Phase::forward, gather_input(name, std::move(deps)));
}

OpId LayerOps::head_backward(const std::string& name, std::vector<OpId> deps) {
  return reduce_output(name, w_.compute(name, costs_.head_backward, Phase::backward, std::move(deps)));
}

OpId LayerOps::head_backward_input(const std::string& name, std::vector<OpId> deps) {
  return reduce_output(name, w_.compute(name, costs_.head_backward_input, Phase::backward, std::move(deps)));
}

OpId LayerOps::head_backward_weight(const std::string& name, OpId after) {
  return w_.compute(name, costs_.head_backward_weight, Phase::weight_gradient, {after});
}

} // namespace trainsim
