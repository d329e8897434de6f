#include "program/data_parallel_writer.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "common/units.hpp"
#include "model/costs.hpp"
#include "program/offloaded_optimizer.hpp"

namespace trainsim {
namespace {

// Parameters that are gathered (ZeRO-3) and whose gradients become final together.
struct ParamGroup {
  std::string name;
  double parameters = 0;
};

// One use of a group's gathered parameters, in program order: the buffer lives from the
// gather until the last compute op of that use.
struct FetchEvent {
  int group = 0;
  std::string label;
};

constexpr int buckets_in_flight = 2;  // bucket buffers a rank keeps before waiting for the oldest

// Model states reduced, sharded and gathered over one group as one plan says: the dense
// parameters over the gradient group (dp x cp), a mixture's local experts under expert
// parallelism over the expert-data-parallel group (DeepSpeed-MoE's expert param groups,
// torchtitan's experts sharded over the expert-data-parallel mesh), each with its own buckets.
struct StateSet {
  StateSet(const ModelStatePlan& states, int reducing_group, std::string name_prefix)
      : plan(&states), group(reducing_group), prefix(std::move(name_prefix)) {}
  const ModelStatePlan* plan;
  int group;
  std::string prefix;                    // of its tensors and ops: "" (dense) or "expert-"
  std::vector<double> group_parameters;  // per parameter group (embedding, each layer, head)
  double parameters = 0;                 // held by the rank before sharding
  double weight_parameters = 0;          // the weights it keeps (FSDP: the sum of its groups' shards)
  double optimizer_parameters = 0;       // whose optimizer states it keeps
  // the gradient buckets of the current synchronising backward
  BucketFiller buckets;
  long long buckets_reduced = 0;
  long long buffers_opened = 0;
  std::deque<std::string> filling;  // its bucket buffers not yet full
};

// A ZeRO-3 use's gathered parameters: the gathers to wait for and the buffers to free after it.
struct Gathered {
  std::vector<OpId> gathers;
  std::vector<std::string> buffers;
};

class DataParallelWriter : private ProgramWriter {
public:
  // `gradient_group` reduces the gradients (dp x cp ranks, `gradient_ranks` of them);
  // `parallel` names this rank's tensor- and context-parallel groups.
  DataParallelWriter(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs,
                     const ModelStatePlan& states, const RecomputePlan& plan, int gradient_group,
                     const ModelParallelGroups& parallel, const RuntimeMemory& runtime = {})
      : s_(scenario), model_(model), costs_(costs), states_(states), plan_(plan), ops_(*this, costs, parallel),
        runtime_(runtime), layers_(costs.layer_count()) {
    const ParameterCounts counts = count_parameters(model);
    const double t = static_cast<double>(scenario.tp);
    groups_.push_back({"embedding", costs.embedding_parameters});
    for (long long l = 0; l < layers_; ++l)
      groups_.push_back({"L" + std::to_string(l), costs.layer(l).parameters});
    // A tied output layer (or multi-token prediction's lookup) uses the embedding matrix: gathering
    // the head gathers it again.
    groups_.push_back({"head", costs.head_parameters +
                                   (head_reads_embedding(model) ? static_cast<double>(counts.embedding) / t : 0.0)});
    head_gradient_parameters_ = costs.head_parameters;
    for (long long l = layers_ - 1; l >= 0; --l)
      if (costs.layer(l).expert_parameters > 0)
        last_expert_layer_ = l;

    StateSet dense(states, gradient_group, "");
    for (const ParamGroup& group : groups_)
      dense.group_parameters.push_back(group.parameters);
    dense.parameters = costs.embedding_parameters + costs.layer_parameters(0, layers_) + costs.head_parameters;
    // FSDP shards each group separately; the shards of a tied head are the embedding's.
    dense.weight_parameters = dense.parameters;
    if (states.weights.sharded) {
      dense.weight_parameters = states.shard(head_gradient_parameters_);
      for (std::size_t g = 0; g + 1 < groups_.size(); ++g)
        dense.weight_parameters += states.shard(groups_[g].parameters);
    }
    sets_.push_back(std::move(dense));
    if (parallel.experts) {
      StateSet experts(*parallel.experts, parallel.expert_gradient, "expert-");
      experts.group_parameters.push_back(0.0);
      for (long long l = 0; l < layers_; ++l)
        experts.group_parameters.push_back(costs.layer(l).expert_parameters);
      experts.group_parameters.push_back(0.0);
      experts.parameters = costs.layer_expert_parameters(0, layers_);
      experts.weight_parameters = experts.parameters;
      if (parallel.experts->weights.sharded) {
        experts.weight_parameters = 0;
        for (const double parameters : experts.group_parameters)
          experts.weight_parameters += parallel.experts->shard(parameters);
      }
      sets_.push_back(std::move(experts));
    }
  }

  Program build() {
    // Per micro-batch and layer: forward and backward kernels, collectives, allocs and frees.
    expect(static_cast<std::size_t>(s_.grad_accum) * static_cast<std::size_t>(layers_ + 2) * 16 + 64);
    allocate_runtime_memory(*this, runtime_);
    allocate_model_states();
    plan_fetches();
    gather_parameters_during_forward();
    // A delayed update applies the previous step's gradients while this step runs.
    if (s_.delayed_update)
      optimizer_step();
    for (long long mb = 0; mb < s_.grad_accum; ++mb) {
      micro_batch_ = mb;
      const PlacedAt in_micro_batch(*this, place_in_micro_batch());
      sync_now_ = s_.grad_sync == GradSync::every || mb + 1 == s_.grad_accum;
      forward();
      backward();
    }
    if (!s_.delayed_update)
      optimizer_step();
    return take();
  }

private:
  std::string mb_suffix() const { return ".mb" + std::to_string(micro_batch_); }
  OpPlace place_in_micro_batch(long long layer = OpPlace::none) const {
    return {static_cast<std::int32_t>(layer), static_cast<std::int32_t>(micro_batch_)};
  }

  // ---- model states ------------------------------------------------------------------------

  // The model states where the plan keeps them; offloaded parameters leave only the gathered
  // groups on the GPU.
  void allocate_model_states() {
    for (StateSet& set : sets_) {
      allocate_states_on_gpu(*this, *set.plan, set.weight_parameters, set.parameters, set.prefix);
      set.optimizer_parameters = set.plan->held(set.plan->optimizer, set.parameters);
    }
    // One CPU optimizer steps the shards of every set (their plans offload alike).
    if (states_.offloads_optimizer()) {
      offloaded_.emplace(static_cast<ProgramWriter&>(*this), s_, states_, optimizer_parameters());
      offloaded_->allocate_states();
    }
  }

  double optimizer_parameters() const {
    double parameters = 0;
    for (const StateSet& set : sets_)
      parameters += set.optimizer_parameters;
    return parameters;
  }

  // ---- the distributed optimizer's parameter all-gathers -----------------------------------

  // Gradient buckets in parameters: the all-gathers of the updated parameters use the same buckets.
  double bucket_parameters(const StateSet& set) const { return s_.bucket_bytes / set.plan->gradient_element_bytes; }

  // Under overlap_param_gather the previous step's update arrives during the first forward.
  void gather_parameters_during_forward() {
    if (!s_.overlap_param_gather || !states_.gathers_after_step)
      return;
    std::vector<ParameterGathers> gathers;
    for (const StateSet& set : sets_) {
      if (!set.plan->gathers_after_step)
        continue;
      std::vector<double> pieces = set.group_parameters;
      pieces.back() = set.prefix.empty() ? head_gradient_parameters_ : 0.0;  // a tied head updates the embedding's
      gathers.push_back({plan_parameter_gathers(pieces, bucket_parameters(set)), set.group,
                         set.plan->parameter_element_bytes, set.prefix + "param-allgather"});
    }
    updated_parameters_ = parameter_gathers(gathers);
  }

  // What forward piece `piece` (0: the embedding, then the layers, then the head) waits for besides
  // the ops before it: its bucket's all-gather, in the first micro-batch (set 0: the dense
  // parameters'; set 1: its routed experts', which only their GEMMs wait for).
  std::vector<OpId> updated(std::size_t piece, std::vector<OpId> deps, std::size_t set = 0) const {
    if (micro_batch_ == 0 && set < updated_parameters_.size() && updated_parameters_[set].at(piece) != no_gather)
      deps.push_back(updated_parameters_[set].at(piece));
    return deps;
  }

  // ---- ZeRO-3 parameter gathering ----------------------------------------------------------

  int group_of_layer(long long layer) const { return static_cast<int>(layer + 1); }
  long long layer_of_group(int group) const {
    return group >= 1 && group <= layers_ ? group - 1 : OpPlace::none;
  }
  int head_group() const { return static_cast<int>(groups_.size() - 1); }

  // ZeRO-3: some set gathers its parameter groups before each use.
  bool gathers_per_use() const {
    return std::any_of(sets_.begin(), sets_.end(), [](const StateSet& set) { return set.plan->gathers_per_use; });
  }

  // The order in which one micro-batch uses its parameter groups: forward, then backward
  // (a checkpointed segment is re-run in forward order before its layers' backward).
  void plan_fetches() {
    if (!gathers_per_use())
      return;
    per_micro_batch_.push_back({0, "fwd"});
    for (long long l = 0; l < layers_; ++l)
      per_micro_batch_.push_back({group_of_layer(l), "fwd"});
    per_micro_batch_.push_back({head_group(), "fwd"});
    per_micro_batch_.push_back({head_group(), "bwd"});
    for (auto segment = plan_.segments.rbegin(); segment != plan_.segments.rend(); ++segment) {
      if (segment->policy == LayerPolicy::checkpoint) {
        for (long long l = segment->first; l < segment->first + segment->count; ++l)
          per_micro_batch_.push_back({group_of_layer(l), "bwd"});
      } else {
        for (long long l = segment->first + segment->count - 1; l >= segment->first; --l)
          per_micro_batch_.push_back({group_of_layer(l), "bwd"});
      }
    }
    per_micro_batch_.push_back({0, "bwd"});
  }

  std::string fetch_tensor(long long index) const {
    const long long per = static_cast<long long>(per_micro_batch_.size());
    const FetchEvent& event = per_micro_batch_[index % per];
    return groups_[event.group].name + ".params." + event.label + ".mb" + std::to_string(index / per);
  }

  // Gathers up to `prefetch_depth` uses ahead and returns the gathers the next use waits for.
  std::vector<OpId> acquire() {
    if (!gathers_per_use())
      return {};
    const long long per = static_cast<long long>(per_micro_batch_.size());
    const long long total = per * s_.grad_accum;
    const long long wanted = std::min(total - 1, next_use_ + s_.prefetch_depth);
    while (next_gather_ <= wanted) {
      const FetchEvent& event = per_micro_batch_[next_gather_ % per];
      // A gather belongs to the use it serves, a micro-batch or more ahead of the ops around it.
      const PlacedAt for_use(*this, {static_cast<std::int32_t>(layer_of_group(event.group)),
                                     static_cast<std::int32_t>(next_gather_ / per)});
      Gathered& gathered = gathers_[next_gather_];
      for (const StateSet& set : sets_) {
        const double parameters = set.group_parameters[static_cast<std::size_t>(event.group)];
        if (set.plan->gathers_per_use && parameters > 0)
          gather_group(set, parameters, set.prefix + fetch_tensor(next_gather_), gathered);
      }
      ++next_gather_;
    }
    return gathers_.at(next_use_).gathers;
  }

  // Gathers `parameters` of `set`'s group into a fresh buffer `tensor`.
  void gather_group(const StateSet& set, double parameters, const std::string& tensor, Gathered& gathered) {
    const ModelStatePlan& plan = *set.plan;
    const double bytes = parameters * plan.parameter_element_bytes;
    const auto buffer = alloc(tensor, MemCategory::buffers, bytes);
    gathered.buffers.push_back(tensor);
    std::vector<OpId> ready = buffer ? std::vector<OpId>{*buffer} : std::vector<OpId>{};
    if (plan.offloads_weights()) {
      // ZeRO-Infinity: this rank's shard comes up from the host (read from NVMe first),
      // then the ranks gather the whole group on the GPUs.
      const double shard_bytes = plan.shard(parameters) * plan.parameter_element_bytes;
      if (plan.weights.device == Device::nvme)
        ready.push_back(disk_io(OpKind::read, node_nvme, shard_bytes, "nvme-read." + tensor, {}));
      ready = {copy(node_cpu, true, shard_bytes, "h2d." + tensor, ready)};
    }
    gathered.gathers.push_back(
        plan.ranks > 1 ? collective(Stream::dp_comm, Collective::all_gather, set.group, bytes, "gather." + tensor, ready)
                       : ready.back());
  }

  // The current use is over once `last` (already emitted) is done.
  void release_use() {
    if (!gathers_per_use())
      return;
    release_gathered(next_use_);
    ++next_use_;
  }

  void release_gathered(long long use) {
    for (const std::string& buffer : gathers_.at(use).buffers)
      release(buffer);
    gathers_.erase(use);
  }

  // ---- gradient reduction ------------------------------------------------------------------

  // A synchronising backward starts filling each set's buckets (and accumulating its unsharded
  // gradients, on the first micro-batch).
  void start_reducing() {
    for (StateSet& set : sets_) {
      const double bytes = set.parameters * set.plan->gradient_element_bytes;
      if (set.plan->accumulates_unsharded && micro_batch_ == 0)
        alloc(set.prefix + "gradient-accumulator", MemCategory::gradients, bytes);
      if (sync_now_ && set.plan->reduces_gradients())
        set.buckets = BucketFiller(s_.bucket_bytes, bytes);
    }
  }

  // The gradients of `parameters` of `set` are final once `producer` is done: they fill buckets,
  // and each full bucket is reduced. ZeRO-2/3 copy them into bucket buffers first (each the size
  // of its bucket), at most `buckets_in_flight` of them of all sets (DeepSpeed's overlap_comm
  // double buffer, which holds dense and expert gradients alike): a further bucket waits on the
  // compute stream until the oldest is reduced, as DeepSpeed's gradient hooks wait for its
  // reduction stream.
  void gradients_ready(StateSet& set, double parameters, OpId producer, bool last_of_backward) {
    const ModelStatePlan& plan = *set.plan;
    if (!sync_now_ || !plan.reduces_gradients() || parameters <= 0)
      return;
    const double gradient_bytes = parameters * plan.gradient_element_bytes;
    if (s_.bucket_per_layer)  // FSDP2: each sharded module's (layer's) gradients are one reduction
      set.buckets = BucketFiller(gradient_bytes, gradient_bytes);
    // Bucket by bucket, so that a buffer is freed before the next of the same op is needed.
    for (double left = gradient_bytes; left > 0;) {
      const double room = set.buckets.room();
      const double part = room > 0 ? std::min(left, room) : left;  // past the planned total: rounding
      left -= part;
      std::optional<OpId> buffer;
      if (plan.reduces_from_bucket_buffers && !set.buckets.opened_by(part).empty()) {
        if (static_cast<int>(buffers_held()) >= buckets_in_flight && !in_flight_.empty()) {
          release(in_flight_.front().first, {in_flight_.front().second});
          in_flight_.pop_front();
        }
        set.filling.push_back(set.prefix + "grad-bucket" + std::to_string(set.buffers_opened++) + mb_suffix());
        buffer = alloc(set.filling.back(), MemCategory::buffers, set.buckets.opened_by(part).front());
      }
      for (const double size : set.buckets.add(part, (last_of_backward || s_.bucket_per_layer) && left <= 0))
        reduce_bucket(set, size, producer, buffer);
    }
  }

  // Reduces a full bucket over the set's group and, when the optimizer runs on the CPU, copies
  // this rank's share of it to host memory.
  void reduce_bucket(StateSet& set, double bytes, OpId producer, std::optional<OpId> buffer) {
    const ModelStatePlan& plan = *set.plan;
    const PlacedAt in_micro_batch(*this, place_in_micro_batch());  // a bucket spans layers
    const std::string bucket = ".bucket" + std::to_string(set.buckets_reduced++) + mb_suffix();
    OpId done = producer;
    if (plan.ranks > 1) {
      const Collective kind = plan.gradient_reduction;
      done = collective(Stream::dp_comm, kind, set.group, bytes,
                        set.prefix + (kind == Collective::all_reduce ? "grad-allreduce" : "grad-reducescatter") + bucket,
                        buffer ? std::vector<OpId>{producer, *buffer} : std::vector<OpId>{producer});
    }
    OpId copied = done;
    if (offloaded_) {
      const auto arrival =
          offloaded_->gradients(plan.optimizer.sharded ? bytes / plan.ranks : bytes, "." + set.prefix + bucket.substr(1), done);
      copied = arrival.copied;
      done = arrival.done;
    }
    sync_ops_.push_back(done);
    if (!s_.overlap_grad_reduce)
      blocking_.push_back(done);
    if (!set.filling.empty()) {
      in_flight_.emplace_back(set.filling.front(), copied);  // the GPU buffer is free once copied out
      set.filling.pop_front();
    }
  }

  StateSet& dense() { return sets_.front(); }
  // A layer's local experts (under expert parallelism): the set after the dense one.
  void expert_gradients_ready(long long layer, OpId producer) {
    if (sets_.size() > 1)
      gradients_ready(sets_.back(), costs_.layer(layer).expert_parameters, producer, layer == last_expert_layer_);
  }

  // The end of a synchronising backward waits for the bucket buffers' reductions.
  void drain_buckets() {
    for (const auto& [tensor, reduce] : in_flight_)
      release(tensor, {reduce});
    in_flight_.clear();
  }

  std::size_t buffers_held() const {
    std::size_t held = in_flight_.size();
    for (const StateSet& set : sets_)
      held += set.filling.size();
    return held;
  }

  // ---- forward and backward ----------------------------------------------------------------

  std::string layer_tensor(long long layer, const char* what) const {
    return "L" + std::to_string(layer) + "." + what + mb_suffix();
  }

  void forward() {
    const std::string mb = mb_suffix();
    auto gathered = acquire();
    alloc("embedding.act" + mb, MemCategory::activations, costs_.embedding_activations);
    chain_ = ops_.embedding_forward("embedding.fwd" + mb, updated(0, gathered));
    release_use();
    for (const RecomputeSegment& segment : plan_.segments) {
      std::optional<OpId> saved;
      if (segment.policy == LayerPolicy::checkpoint) {
        alloc(checkpoint_tensor(segment.first), MemCategory::activations, costs_.layer(segment.first).activations.input);
        saved = offload_checkpoint(segment.first);
      }
      for (long long l = segment.first; l < segment.first + segment.count; ++l) {
        const PlacedAt in_layer(*this, place_in_micro_batch(l));
        gathered = acquire();
        if (segment.policy != LayerPolicy::checkpoint)
          alloc(layer_tensor(l, "act"), MemCategory::activations, layer_recompute(costs_.layer(l), segment.policy).kept);
        chain_ = ops_.forward(l, layer_tensor(l, "fwd"), updated(static_cast<std::size_t>(l + 1), after_chain(gathered)),
                              Phase::forward, updated(static_cast<std::size_t>(l + 1), {}, 1));
        // The GPU copy of the input goes once it is in host memory; freeing it after the segment
        // leaves the copy a segment's forward to finish before the compute stream waits for it.
        if (saved && l + 1 == segment.first + segment.count)
          release(checkpoint_tensor(segment.first), {*saved});
        release_use();
      }
    }
    gathered = acquire();
    alloc("head.act" + mb, MemCategory::activations, costs_.head_activations);
    chain_ = ops_.head_forward("head.fwd" + mb,
                               updated(static_cast<std::size_t>(layers_ + 1), after_chain(gathered)));
    release_use();
  }

  void backward() {
    const std::string mb = mb_suffix();
    returning_.clear();
    start_reducing();
    alloc("act-grad" + mb, MemCategory::buffers, costs_.activation_gradient_buffer);
    auto gathered = acquire();
    const OpId head = ops_.head_backward("head.bwd" + mb, after_chain(gathered));
    chain_ = head;
    release("head.act" + mb);
    release_use();
    gradients_ready(dense(), head_gradient_parameters_, head, false);

    for (auto segment = plan_.segments.rbegin(); segment != plan_.segments.rend(); ++segment) {
      const long long first = segment->first, last = segment->first + segment->count - 1;
      std::map<long long, std::vector<OpId>> gathered_for;
      if (segment->policy == LayerPolicy::checkpoint) {
        std::vector<OpId> input = bring_back_checkpoint(first);
        // The next checkpoint to come back starts its copy while this segment runs.
        for (auto next = segment + 1; next != plan_.segments.rend(); ++next)
          if (next->policy == LayerPolicy::checkpoint) {
            bring_back_checkpoint(next->first);
            break;
          }
        for (long long l = first; l <= last; ++l) {
          const PlacedAt in_layer(*this, place_in_micro_batch(l));
          gathered_for[l] = acquire_and_keep();
          alloc(layer_tensor(l, "act"), MemCategory::activations, costs_.layer(l).activations.total);
          std::vector<OpId> deps = gathered_for[l];
          if (l == first)
            deps.insert(deps.end(), input.begin(), input.end());
          chain_ = ops_.forward(l, layer_tensor(l, "recompute"), after_chain(deps), Phase::recompute);
        }
        release(checkpoint_tensor(first));
      }
      for (long long l = last; l >= first; --l) {
        const PlacedAt in_layer(*this, place_in_micro_batch(l));
        std::vector<OpId> deps = segment->policy == LayerPolicy::checkpoint ? gathered_for[l] : acquire_and_keep();
        const LayerRecompute recompute = layer_recompute(costs_.layer(l), segment->policy);
        const std::string rematerialized = layer_tensor(l, recompute.what);
        if (recompute.work) {
          alloc(rematerialized, MemCategory::activations, recompute.rematerialized);
          compute(layer_tensor(l, ("recompute-" + std::string(recompute.what)).c_str()), *recompute.work,
                  Phase::recompute, deps);
        }
        const OpId backward_op = ops_.backward(l, layer_tensor(l, "bwd"), after_chain(deps));
        chain_ = backward_op;
        release(rematerialized);
        release(layer_tensor(l, "act"));
        release_kept(l);
        gradients_ready(dense(), costs_.layer(l).parameters, backward_op, false);
        expert_gradients_ready(l, backward_op);
      }
    }
    gathered = acquire();
    const OpId embedding = ops_.embedding_backward("embedding.bwd" + mb, after_chain(gathered));
    chain_ = embedding;
    release("embedding.act" + mb);
    release("act-grad" + mb);
    release_use();
    gradients_ready(dense(), costs_.embedding_parameters, embedding, true);
    if (sync_now_) {
      if (offloaded_)
        offloaded_->micro_batch_done();
      drain_buckets();
      for (const StateSet& set : sets_)
        if (set.plan->accumulates_unsharded)
          release(set.prefix + "gradient-accumulator", sync_ops_);
    }
  }

  // ---- activation checkpoints offloaded to host memory ---------------------------------------

  std::string checkpoint_tensor(long long first_layer) const {
    return "S" + std::to_string(first_layer) + ".input" + mb_suffix();
  }

  // Copies a segment's input to host memory once it is produced; the op to wait for before the
  // GPU copy may go.
  std::optional<OpId> offload_checkpoint(long long first_layer) {
    if (!s_.offload_activations)
      return std::nullopt;
    const double bytes = costs_.layer(first_layer).activations.input;
    alloc(checkpoint_tensor(first_layer) + ".host", MemCategory::activations, bytes, Device::host);
    std::vector<OpId> deps;
    if (chain_)
      deps.push_back(*chain_);
    return copy(node_cpu, false, bytes, "d2h." + checkpoint_tensor(first_layer), deps);
  }

  // Brings an offloaded segment input back to the GPU (once) and returns the copy to wait for.
  std::vector<OpId> bring_back_checkpoint(long long first_layer) {
    if (!s_.offload_activations)
      return {};
    const auto known = returning_.find(first_layer);
    if (known != returning_.end())
      return {known->second};
    const std::string tensor = checkpoint_tensor(first_layer);
    const double bytes = costs_.layer(first_layer).activations.input;
    const auto buffer = alloc(tensor, MemCategory::activations, bytes);
    const OpId back = copy(node_cpu, true, bytes, "h2d." + tensor, buffer ? std::vector<OpId>{*buffer} : std::vector<OpId>{});
    release(tensor + ".host", {back});
    returning_[first_layer] = back;
    return {back};
  }

  // A layer needs the output of the one before: with tensor parallelism that is the collective
  // ending the previous piece, which the compute stream alone would not wait for. Without
  // overlap_grad_reduce the compute stream also waits for the gradient reductions launched since.
  std::vector<OpId> after_chain(std::vector<OpId> deps) {
    if (chain_)
      deps.push_back(*chain_);
    deps.insert(deps.end(), blocking_.begin(), blocking_.end());
    blocking_.clear();
    return deps;
  }

  // In backward a layer's gathered parameters stay until its own backward is done, even when a
  // checkpointed segment gathered several layers for its recompute.
  std::vector<OpId> acquire_and_keep() {
    if (!gathers_per_use())
      return {};
    const std::vector<OpId> gathered = acquire();
    kept_uses_.push_back(next_use_);
    ++next_use_;
    return gathered;
  }

  void release_kept(long long layer) {
    if (!gathers_per_use())
      return;
    // Uses are kept in gather order; the one of this layer is found by its group.
    const long long per = static_cast<long long>(per_micro_batch_.size());
    for (auto it = kept_uses_.begin(); it != kept_uses_.end(); ++it) {
      if (per_micro_batch_[*it % per].group == group_of_layer(layer)) {
        release_gathered(*it);
        kept_uses_.erase(it);
        return;
      }
    }
  }

  // ---- optimizer ---------------------------------------------------------------------------

  void optimizer_step() {
    if (states_.offloads_optimizer())
      return cpu_optimizer_step();
    const Work work = optimizer_step_work(optimizer_parameters(), s_.precision, s_.grad_precision);
    gather_updated_parameters(compute("optimizer.step", work, Phase::optimizer, sync_ops_));
  }

  // Adam on the node's CPU, then the updated 16-bit parameters go where the GPU reads them: up
  // to the GPU (and ZeRO-1/2 all-gather them), or back to NVMe when parameters live there.
  void cpu_optimizer_step() {
    const std::vector<OpId> updated = offloaded_->step(sync_ops_);
    const double param_bytes = optimizer_parameters() * states_.parameter_element_bytes;
    if (states_.weights.device == Device::nvme) {
      disk_io(OpKind::write, node_nvme, param_bytes, "nvme-write.params", updated);
      return;
    }
    if (states_.offloads_weights())
      return;  // updated in host memory, where the next gathers read them
    gather_updated_parameters(copy(node_cpu, true, param_bytes, "h2d.params", updated));
  }

  // Each rank updated its shards: the sets gather the updated parameters over their groups (unless
  // the next forward gathers them, overlap_param_gather).
  void gather_updated_parameters(OpId updated) {
    if (!updated_parameters_.empty())
      return;
    for (const StateSet& set : sets_)
      if (set.plan->gathers_after_step)
        bucketed_collective(Stream::dp_comm, Collective::all_gather, set.group,
                            set.parameters * set.plan->parameter_element_bytes,
                            bucket_parameters(set) * set.plan->parameter_element_bytes, set.prefix + "param-allgather",
                            {updated});
  }

  const Scenario& s_;
  const ModelSpec& model_;
  const ModelCosts& costs_;
  const ModelStatePlan& states_;
  const RecomputePlan& plan_;
  LayerOps ops_;
  const RuntimeMemory runtime_;
  const long long layers_;  // the model's and its multi-token-prediction modules' (ModelCosts::layer_count)
  std::vector<ParamGroup> groups_;
  double head_gradient_parameters_ = 0;
  long long last_expert_layer_ = -1;  // in backward order: the first layer with experts (DeepSeek's come after dense ones)
  std::vector<StateSet> sets_;  // the dense parameters' states, then (under expert parallelism) the experts'
  long long micro_batch_ = 0;
  bool sync_now_ = false;
  std::optional<OpId> chain_;  // the op that ends the previous piece of the model
  std::vector<std::vector<OpId>> updated_parameters_;  // overlap_param_gather: per set, per forward piece, its all-gather
  // ZeRO-3 gathering
  std::vector<FetchEvent> per_micro_batch_;
  long long next_gather_ = 0;
  long long next_use_ = 0;
  std::map<long long, Gathered> gathers_;
  std::vector<long long> kept_uses_;
  std::map<long long, OpId> returning_;  // offloaded checkpoints on their way back, by first layer
  std::deque<std::pair<std::string, OpId>> in_flight_;  // full bucket buffers, with the op that empties them
  std::vector<OpId> sync_ops_;
  std::vector<OpId> blocking_;  // reductions the next compute waits for (no overlap_grad_reduce)
  std::optional<OffloadedOptimizer> offloaded_;  // when the optimizer runs on the CPU
};

// What a rank holds besides layer activations: model states, the non-layer activations and
// buffers; the default activation budget of the optimal plan is what remains of the GPU.
double default_activation_budget(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs,
                                 const ModelStatePlan& states, const ModelStatePlan* expert_states,
                                 double gpu_capacity) {
  if (gpu_capacity <= 0)
    return std::numeric_limits<double>::infinity();
  Scenario keep_nothing = scenario;
  keep_nothing.recompute = Recompute::full;
  RecomputePlan empty;
  empty.strategy = "budget";
  empty.segments.push_back({0, costs.layer_count(), LayerPolicy::keep});
  ModelCosts without_layers = costs;
  for (LayerCosts& layer : without_layers.layer_kinds)
    layer.activations = LayerActivations{};
  const Program program =
      DataParallelWriter(keep_nothing, model, without_layers, states, empty, 0,
                         model_parallel_groups(scenario, expert_states))
          .build();
  double peak = 0, used = 0;
  std::map<std::string, double> sizes;
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::alloc && op.device == Device::gpu) {
      sizes[op.tensor] = op.bytes;
      used += op.bytes;
    } else if (op.kind == OpKind::free) {
      used -= sizes[op.tensor];  // 0 for a tensor off the GPU
    }
    peak = std::max(peak, used);
  }
  return gpu_capacity - peak;
}

} // namespace

Program build_data_parallel_program(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs,
                                    const ModelStatePlan& states, const RecomputePlan& plan, int gradient_group,
                                    const ModelParallelGroups& parallel, const RuntimeMemory& runtime) {
  return DataParallelWriter(scenario, model, costs, states, plan, gradient_group, parallel, runtime).build();
}

double data_parallel_activation_budget(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs,
                                       const ModelStatePlan& states, const ModelStatePlan* expert_states,
                                       double gpu_capacity) {
  return default_activation_budget(scenario, model, costs, states, expert_states, gpu_capacity);
}

} // namespace trainsim
