#include "program/data_parallel_builder.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "common/error.hpp"
#include "common/units.hpp"
#include "model/costs.hpp"

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

class DataParallelWriter : private ProgramWriter {
public:
  // `gradient_group` reduces the gradients (dp x cp ranks, `gradient_ranks` of them);
  // `parallel` names this rank's tensor- and context-parallel groups.
  DataParallelWriter(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs,
                     const RecomputePlan& plan, int gradient_group, int gradient_ranks,
                     const ModelParallelGroups& parallel)
      : s_(scenario), model_(model), costs_(costs), plan_(plan), ops_(*this, costs, parallel),
        gradient_group_(gradient_group), ranks_(static_cast<double>(gradient_ranks)),
        stage_(gradient_ranks > 1 ? scenario.zero : 0) {
    const ParameterCounts counts = count_parameters(model);
    const double t = static_cast<double>(scenario.tp);
    groups_.push_back({"embedding", costs.embedding_parameters});
    for (long long l = 0; l < model.layers; ++l)
      groups_.push_back({"L" + std::to_string(l), costs.layer.parameters});
    // A tied output layer uses the embedding matrix: gathering the head gathers it again.
    groups_.push_back({"head", costs.head_parameters +
                                   (model.tied_embeddings ? static_cast<double>(counts.embedding) / t : 0.0)});
    head_gradient_parameters_ = costs.head_parameters;
    parameters_ = costs.embedding_parameters + static_cast<double>(model.layers) * costs.layer.parameters +
                  costs.head_parameters;
  }

  Program build() {
    // Per micro-batch and layer: forward and backward kernels, collectives, allocs and frees.
    expect(static_cast<std::size_t>(s_.grad_accum) * static_cast<std::size_t>(model_.layers + 2) * 16 + 64);
    allocate_model_states();
    plan_fetches();
    for (long long mb = 0; mb < s_.grad_accum; ++mb) {
      micro_batch_ = mb;
      sync_now_ = s_.grad_sync == GradSync::every || mb + 1 == s_.grad_accum;
      forward();
      backward();
    }
    optimizer_step();
    return take();
  }

private:
  std::string mb_suffix() const { return ".mb" + std::to_string(micro_batch_); }

  // ---- model states ------------------------------------------------------------------------

  double shard(double parameters) const { return std::ceil(parameters / ranks_); }

  void allocate_model_states() {
    const double params = parameters_;
    double weight_params = params;
    if (stage_ >= 3) {
      // FSDP shards each group separately; the shards of a tied head are the embedding's.
      weight_params = 0;
      for (std::size_t g = 0; g + 1 < groups_.size(); ++g)
        weight_params += shard(groups_[g].parameters);
      weight_params += shard(head_gradient_parameters_);
    }
    const double gradient_params = stage_ >= 2 ? shard(params) : params;
    optimizer_params_ = stage_ >= 1 ? shard(params) : params;
    const double master_copy = s_.precision == Precision::fp32 ? 0.0 : 4.0;  // fp32 master weights
    const double gradient_copy = s_.fp32_grad_copy ? 4.0 : 0.0;
    alloc("weights", MemCategory::weights, weight_params * (s_.precision == Precision::fp8 ? 3.0 : bytes_per_element(s_.precision)));
    alloc("gradients", MemCategory::gradients, gradient_params * bytes_per_element(s_.grad_precision));
    alloc("optimizer", MemCategory::optimizer,
          optimizer_params_ * (master_copy + gradient_copy + 8.0));  // + momentum, variance
  }

  // ---- ZeRO-3 parameter gathering ----------------------------------------------------------

  int group_of_layer(long long layer) const { return static_cast<int>(layer + 1); }
  int head_group() const { return static_cast<int>(groups_.size() - 1); }

  // The order in which one micro-batch uses its parameter groups: forward, then backward
  // (a checkpointed segment is re-run in forward order before its layers' backward).
  void plan_fetches() {
    if (stage_ < 3)
      return;
    per_micro_batch_.push_back({0, "fwd"});
    for (long long l = 0; l < model_.layers; ++l)
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

  // Gathers up to `prefetch_depth` uses ahead and returns the gather the next use waits for.
  std::vector<OpId> acquire() {
    if (stage_ < 3)
      return {};
    const long long per = static_cast<long long>(per_micro_batch_.size());
    const long long total = per * s_.grad_accum;
    const long long wanted = std::min(total - 1, next_use_ + s_.prefetch_depth);
    while (next_gather_ <= wanted) {
      const FetchEvent& event = per_micro_batch_[next_gather_ % per];
      const double bytes = groups_[event.group].parameters * bytes_per_element(s_.precision);
      const auto buffer = alloc(fetch_tensor(next_gather_), MemCategory::buffers, bytes);
      gathers_[next_gather_] =
          collective(Stream::dp_comm, Collective::all_gather, gradient_group_, bytes, "gather." + fetch_tensor(next_gather_),
                     buffer ? std::vector<OpId>{*buffer} : std::vector<OpId>{});
      ++next_gather_;
    }
    return {gathers_.at(next_use_)};
  }

  // The current use is over once `last` (already emitted) is done.
  void release_use() {
    if (stage_ < 3)
      return;
    release(fetch_tensor(next_use_));
    gathers_.erase(next_use_);
    ++next_use_;
  }

  // ---- gradient reduction ------------------------------------------------------------------

  bool reduces_into_bucket_buffers() const { return stage_ >= 2 && !accumulates_unsharded(); }
  // ZeRO-2/3 that reduce only after the last micro-batch must accumulate full gradients first.
  bool accumulates_unsharded() const { return stage_ >= 2 && s_.grad_sync == GradSync::last && s_.grad_accum > 1; }
  double gradient_bytes(double parameters) const { return parameters * bytes_per_element(s_.grad_precision); }

  // Called before a backward op that produces gradients: opens a bucket buffer if needed.
  void prepare_gradients() {
    if (!sync_now_ || !reduces_into_bucket_buffers() || bucket_open_)
      return;
    if (static_cast<int>(in_flight_.size()) >= buckets_in_flight) {
      release(in_flight_.front().first, {in_flight_.front().second});
      in_flight_.pop_front();
    }
    const double total = gradient_bytes(parameters_);
    bucket_tensor_ = "grad-bucket" + std::to_string(buckets_) + mb_suffix();
    alloc(bucket_tensor_, MemCategory::buffers, std::min(s_.bucket_bytes, total));
    bucket_open_ = true;
  }

  void gradients_ready(double parameters, OpId producer, bool last_of_backward) {
    if (!sync_now_)
      return;
    pending_bytes_ += gradient_bytes(parameters);
    if (pending_bytes_ >= s_.bucket_bytes || last_of_backward)
      flush_bucket(producer);
  }

  void flush_bucket(OpId producer) {
    if (pending_bytes_ <= 0 || ranks_ == 1)
      return;
    const Collective kind = stage_ == 0 ? Collective::all_reduce : Collective::reduce_scatter;
    const OpId reduce = collective(Stream::dp_comm, kind, gradient_group_, pending_bytes_,
                                   std::string(stage_ == 0 ? "grad-allreduce" : "grad-reducescatter") + ".bucket" +
                                       std::to_string(buckets_) + mb_suffix(),
                                   {producer});
    sync_ops_.push_back(reduce);
    if (bucket_open_) {
      in_flight_.emplace_back(bucket_tensor_, reduce);
      bucket_open_ = false;
    }
    pending_bytes_ = 0;
    ++buckets_;
  }

  // The end of a synchronising backward waits for the bucket buffers' reductions.
  void drain_buckets() {
    for (const auto& [tensor, reduce] : in_flight_)
      release(tensor, {reduce});
    in_flight_.clear();
  }

  // ---- forward and backward ----------------------------------------------------------------

  std::string layer_tensor(long long layer, const char* what) const {
    return "L" + std::to_string(layer) + "." + what + mb_suffix();
  }

  void forward() {
    const std::string mb = mb_suffix();
    auto gathered = acquire();
    alloc("embedding.act" + mb, MemCategory::activations, costs_.embedding_activations);
    chain_ = ops_.embedding_forward("embedding.fwd" + mb, gathered);
    release_use();
    const LayerActivations& act = costs_.layer.activations;
    for (const RecomputeSegment& segment : plan_.segments) {
      if (segment.policy == LayerPolicy::checkpoint)
        alloc("S" + std::to_string(segment.first) + ".input" + mb, MemCategory::activations, act.input);
      for (long long l = segment.first; l < segment.first + segment.count; ++l) {
        gathered = acquire();
        if (segment.policy != LayerPolicy::checkpoint)
          alloc(layer_tensor(l, "act"), MemCategory::activations,
                segment.policy == LayerPolicy::keep ? act.total : act.total - act.attention_core);
        chain_ = ops_.forward(layer_tensor(l, "fwd"), after_chain(gathered), Phase::forward);
        release_use();
      }
    }
    gathered = acquire();
    alloc("head.act" + mb, MemCategory::activations, costs_.head_activations);
    chain_ = ops_.head_forward("head.fwd" + mb, after_chain(gathered));
    release_use();
  }

  void backward() {
    const std::string mb = mb_suffix();
    if (accumulates_unsharded() && micro_batch_ == 0)
      alloc("gradient-accumulator", MemCategory::gradients, gradient_bytes(parameters_));
    alloc("act-grad" + mb, MemCategory::buffers, costs_.activation_gradient_buffer);
    auto gathered = acquire();
    prepare_gradients();
    const OpId head = ops_.head_backward("head.bwd" + mb, after_chain(gathered));
    chain_ = head;
    release("head.act" + mb);
    release_use();
    gradients_ready(head_gradient_parameters_, head, false);

    const LayerActivations& act = costs_.layer.activations;
    for (auto segment = plan_.segments.rbegin(); segment != plan_.segments.rend(); ++segment) {
      const long long first = segment->first, last = segment->first + segment->count - 1;
      std::map<long long, std::vector<OpId>> gathered_for;
      if (segment->policy == LayerPolicy::checkpoint) {
        for (long long l = first; l <= last; ++l) {
          gathered_for[l] = acquire_and_keep();
          alloc(layer_tensor(l, "act"), MemCategory::activations, act.total);
          chain_ = ops_.forward(layer_tensor(l, "recompute"), after_chain(gathered_for[l]), Phase::recompute);
        }
        release("S" + std::to_string(first) + ".input" + mb);
      }
      for (long long l = last; l >= first; --l) {
        std::vector<OpId> deps = segment->policy == LayerPolicy::checkpoint ? gathered_for[l] : acquire_and_keep();
        if (segment->policy == LayerPolicy::selective) {
          alloc(layer_tensor(l, "core"), MemCategory::activations, act.attention_core);
          compute(layer_tensor(l, "recompute-core"), costs_.layer.attention_core, Phase::recompute, deps);
        }
        prepare_gradients();
        const OpId backward_op = ops_.backward(layer_tensor(l, "bwd"), after_chain(deps));
        chain_ = backward_op;
        release(layer_tensor(l, "core"));
        release(layer_tensor(l, "act"));
        release_kept(l);
        gradients_ready(costs_.layer.parameters, backward_op, false);
      }
    }
    gathered = acquire();
    prepare_gradients();
    const OpId embedding = ops_.embedding_backward("embedding.bwd" + mb, after_chain(gathered));
    chain_ = embedding;
    release("embedding.act" + mb);
    release("act-grad" + mb);
    release_use();
    gradients_ready(costs_.embedding_parameters, embedding, true);
    if (sync_now_) {
      drain_buckets();
      if (accumulates_unsharded())
        release("gradient-accumulator", sync_ops_);
    }
  }

  // A layer needs the output of the one before: with tensor parallelism that is the collective
  // ending the previous piece, which the compute stream alone would not wait for.
  std::vector<OpId> after_chain(std::vector<OpId> deps) const {
    if (chain_)
      deps.push_back(*chain_);
    return deps;
  }

  // In backward a layer's gathered parameters stay until its own backward is done, even when a
  // checkpointed segment gathered several layers for its recompute.
  std::vector<OpId> acquire_and_keep() {
    if (stage_ < 3)
      return {};
    const std::vector<OpId> gathered = acquire();
    kept_uses_.push_back(next_use_);
    ++next_use_;
    return gathered;
  }

  void release_kept(long long layer) {
    if (stage_ < 3)
      return;
    // Uses are kept in gather order; the one of this layer is found by its tensor name.
    for (auto it = kept_uses_.begin(); it != kept_uses_.end(); ++it) {
      const std::string tensor = fetch_tensor(*it);
      if (tensor.rfind("L" + std::to_string(layer) + ".params.", 0) == 0) {
        release(tensor);
        gathers_.erase(*it);
        kept_uses_.erase(it);
        return;
      }
    }
  }

  // ---- optimizer ---------------------------------------------------------------------------

  void optimizer_step() {
    const Work work = optimizer_step_work(optimizer_params_, s_.precision, s_.grad_precision);
    const OpId step = compute("optimizer.step", work, Phase::optimizer, sync_ops_);
    if (stage_ == 1 || stage_ == 2)  // each rank updated its shard: all-gather the new parameters
      bucketed_collective(Stream::dp_comm, Collective::all_gather, gradient_group_,
                          parameters_ * bytes_per_element(s_.precision), s_.bucket_bytes, "param-allgather", {step});
  }

  const Scenario& s_;
  const ModelSpec& model_;
  const ModelCosts& costs_;
  const RecomputePlan& plan_;
  LayerOps ops_;
  const int gradient_group_;
  const double ranks_;
  const int stage_;
  std::vector<ParamGroup> groups_;
  double parameters_ = 0;          // held by this rank before ZeRO sharding
  double head_gradient_parameters_ = 0;
  double optimizer_params_ = 0;
  long long micro_batch_ = 0;
  bool sync_now_ = false;
  std::optional<OpId> chain_;  // the op that ends the previous piece of the model
  // ZeRO-3 gathering
  std::vector<FetchEvent> per_micro_batch_;
  long long next_gather_ = 0;
  long long next_use_ = 0;
  std::map<long long, OpId> gathers_;
  std::vector<long long> kept_uses_;
  // gradient buckets
  double pending_bytes_ = 0;
  int buckets_ = 0;
  bool bucket_open_ = false;
  std::string bucket_tensor_;
  std::deque<std::pair<std::string, OpId>> in_flight_;
  std::vector<OpId> sync_ops_;
};

// What a rank holds besides layer activations: model states, the non-layer activations and
// buffers; the default activation budget of the optimal plan is what remains of the GPU.
double default_activation_budget(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs,
                                 double gpu_capacity, int gradient_ranks) {
  if (gpu_capacity <= 0)
    return std::numeric_limits<double>::infinity();
  Scenario keep_nothing = scenario;
  keep_nothing.recompute = Recompute::full;
  RecomputePlan empty;
  empty.strategy = "budget";
  empty.segments.push_back({0, model.layers, LayerPolicy::keep});
  ModelCosts without_layers = costs;
  without_layers.layer.activations = LayerActivations{};
  const Program program =
      DataParallelWriter(keep_nothing, model, without_layers, empty, 0, gradient_ranks, ModelParallelGroups{}).build();
  double peak = 0, used = 0;
  std::map<std::string, double> sizes;
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::alloc) {
      sizes[op.tensor] = op.bytes;
      used += op.bytes;
    } else if (op.kind == OpKind::free) {
      used -= sizes[op.tensor];
    }
    peak = std::max(peak, used);
  }
  return gpu_capacity - peak;
}

} // namespace

Program build_data_parallel_program(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs,
                                    const RecomputePlan& plan, int gradient_group, int gradient_ranks,
                                    const ModelParallelGroups& parallel) {
  return DataParallelWriter(scenario, model, costs, plan, gradient_group, gradient_ranks, parallel).build();
}

double data_parallel_activation_budget(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs,
                                       double gpu_capacity, int gradient_ranks) {
  return default_activation_budget(scenario, model, costs, gpu_capacity, gradient_ranks);
}

} // namespace trainsim
