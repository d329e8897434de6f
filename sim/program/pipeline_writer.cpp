#include "program/pipeline_writer.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "common/error.hpp"
#include "program/offloaded_optimizer.hpp"
#include "program/pipeline_schedule.hpp"
#include "program/program_writer.hpp"

namespace trainsim {
namespace {

// Follows the ops of one pipeline step: the first goes into `started` (later receives are posted
// after it), `last` is the latest.
struct StepOps {
  explicit StepOps(std::vector<OpId>& started) : started_(started) {}
  void operator()(OpId op) {
    if (!any_)
      started_.push_back(op);
    any_ = true;
    last = op;
  }
  OpId last = 0;

private:
  std::vector<OpId>& started_;
  bool any_ = false;
};

class PipelineWriter : private ProgramWriter {
public:
  PipelineWriter(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs, const ModelStatePlan& states,
                 const std::vector<RecomputePlan>& plans, const PipelinePlacement& placement, int rank)
      : s_(scenario), model_(model), costs_(costs), states_(states), experts_plan_(placement.expert_states),
        plans_(plans),
        coords_(placement.layout->coords(rank)), p_(scenario.pp), v_(scenario.vpp),
        copies_group_(placement.copies_group[rank] >= 0 ? copies_slot : -1),
        runtime_(placement.runtime[static_cast<std::size_t>(rank)]),
        ops_(*this, costs,
             model_parallel_groups(scenario, placement.expert_states)),
        stage_layers_(layers_per_virtual_stage(scenario, model)), chunk_first_(first_layer_of_chunks()),
        experts_(*this, scenario, model_parallel_groups(scenario, placement.expert_states), stage_expert_parameters()) {
    turn_.assign(static_cast<std::size_t>(scenario.grad_accum), 0);
  }

  Program build() {
    allocate_runtime_memory(*this, runtime_);
    allocate_model_states();
    gather_parameters_during_forward();
    // A delayed update applies the previous step's gradients while this step runs.
    if (s_.delayed_update)
      optimizer_step();
    const auto steps = pipeline_schedule(s_.schedule, p_, v_, s_.grad_accum, coords_.pp, s_.microbatch_group);
    // Per step: a chunk's layers with their collectives, allocs and frees, and the transfers.
    expect(steps.size() * static_cast<std::size_t>(stage_layers_.front() + 2) * 12 + 64);
    // Per chunk: the passes left that end a micro-batch's backward (DualPipe: half in each).
    std::vector<long long> backwards_left(static_cast<std::size_t>(v_), 0);
    for (const PipelineStep& step : steps)
      if (step.pass == Pass::backward || step.pass == Pass::backward_weight)
        ++backwards_left[step.chunk];
    // Receives are posted two steps ahead, so that a sender rarely waits for its receiver. (Posting
    // them further ahead keeps more communication unfinished, which the replay cannot settle ahead
    // of the clock: GPT-3 on 1,024 GPUs took five times as long with a whole warm-up's worth. Under
    // ZB-V chunk-1 senders do wait, and a waiting send counts as communication beside the kernels.)
    const std::size_t ahead = 2;
    std::vector<std::vector<OpId>> step_start(steps.size());
    std::vector<int> finished_chunks;  // in the order their last backward ended
    OpId last = 0;
    OpId pair_first = 0;  // the first op of an overlapped pair's forward
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const PipelineStep& step = steps[i];
      const std::vector<OpId> post_after = i >= ahead ? step_start[i - ahead] : std::vector<OpId>{};
      if (step.pass == Pass::forward) {
        std::vector<OpId> input = forward_input(step, post_after);
        // A pair starts once both its inputs are in, as DualPipe receives them before computing
        // either (deepseek-ai/DualPipe, _forward_backward_chunk): the forward waits for the
        // gradient its backward receives; overlapped, everything the pair runs on the compute
        // stream (allocations included) waits for both.
        if (i + 1 < steps.size() && steps[i + 1].beside_previous) {
          early_gradient_ = receive_gradient(steps[i + 1], i + 1 >= ahead ? step_start[i + 1 - ahead] : std::vector<OpId>{});
          std::vector<OpId> both = input;
          if (early_gradient_)
            both.push_back(*early_gradient_);
          if (s_.overlap_pairs) {
            const PlacedAt in_step(*this, place_in_step(step));
            compute("pair-wait" + suffix(step), Work{}, Phase::forward, both);
            pair_first = static_cast<OpId>(size());
          } else {
            input = both;
          }
        }
        last = forward(step, step_start[i], input);
      } else if (step.pass == Pass::backward_weight) {
        last = weight_gradients(step, last, step_start[i]);
      } else {
        const OpId backward_first = static_cast<OpId>(size());
        last = backward(step, post_after, step_start[i]);
        if (s_.overlap_pairs && step.beside_previous)
          interleave(pair_first, backward_first);
      }
      const bool gradients_done = step.pass == Pass::backward || step.pass == Pass::backward_weight;
      if (gradients_done && --backwards_left[step.chunk] == 0) {
        if (s_.overlap_grad_reduce)
          synchronize_gradients(step.chunk, last);
        else
          finished_chunks.push_back(step.chunk);
      }
    }
    // Without overlap_grad_reduce every chunk's gradients are reduced once the schedule is over
    // (Megatron-Core's finalize_model_grads, DeepSpeed's pipeline engine).
    for (const int chunk : finished_chunks)
      synchronize_gradients(chunk, last);
    if (!s_.delayed_update)
      optimizer_step();
    return take();
  }

private:
  int virtual_stage(int chunk) const { return trainsim::virtual_stage(s_.schedule, p_, chunk, coords_.pp); }
  std::vector<long long> first_layer_of_chunks() const {
    const std::vector<long long> of_stage = first_layer_of_virtual_stages(s_, stage_layers_);
    std::vector<long long> firsts;
    for (int c = 0; c < v_; ++c)
      firsts.push_back(of_stage[static_cast<std::size_t>(virtual_stage(c))]);
    return firsts;
  }
  // The slots of the ranks holding the virtual stages before and after a chunk's: the previous
  // and the next pipeline rank (around the ring for interleaved chunks), or -1 where ZB-V's V
  // turns on the last rank and the chunk's neighbour is this rank's other chunk.
  int upstream_slot(int chunk) const {
    if (!v_placement(s_.schedule) || chunk == 0)
      return previous_stage_slot;
    return coords_.pp == p_ - 1 ? -1 : next_stage_slot;
  }
  int downstream_slot(int chunk) const {
    if (!v_placement(s_.schedule))
      return next_stage_slot;
    if (chunk == 1)
      return previous_stage_slot;
    return coords_.pp == p_ - 1 ? -1 : next_stage_slot;
  }
  bool first_virtual_stage(int chunk) const {
    return trainsim::first_virtual_stage(s_.schedule, p_, virtual_stage(chunk));
  }
  bool last_virtual_stage(int chunk) const {
    return trainsim::last_virtual_stage(s_.schedule, p_, v_, virtual_stage(chunk));
  }
  long long chunk_layers(int chunk) const { return stage_layers_[virtual_stage(chunk)]; }

  int tag(long long micro_batch, int stage, int direction) const {
    return static_cast<int>((micro_batch * p_ * v_ + stage) * 2 + direction);
  }

  // Each tp rank sends 1/tp of the boundary tensor: under SP it holds only that share; with
  // scatter/gather it sends a slice and the receiving stage gathers the whole over tp.
  bool scatters_boundary() const { return s_.pp_scatter_gather && s_.tp > 1 && !s_.sp; }
  double boundary_bytes() const {
    // The hidden states of this rank's share of the sequence.
    return costs_.tp_collective_bytes / (s_.sp || scatters_boundary() ? static_cast<double>(s_.tp) : 1.0);
  }

  // A received slice becomes the whole boundary tensor again by an all-gather over tp.
  OpId gather_boundary(OpId received, const std::string& name) {
    if (!scatters_boundary())
      return received;
    return collective(Stream::tp_comm, Collective::all_gather, tp_slot, costs_.tp_collective_bytes,
                      name + ".pp-allgather", {received});
  }

  std::string suffix(const PipelineStep& step) const {
    return ".mb" + std::to_string(step.micro_batch) + (v_ > 1 ? ".c" + std::to_string(step.chunk) : "");
  }
  // The place of a step's ops, in the chunk's layer `layer_in_chunk` or outside the layers; the
  // chunk is given only when the stage has several, as the names give it.
  OpPlace place_in_step(const PipelineStep& step, long long layer_in_chunk = OpPlace::none) const {
    const long long layer = layer_in_chunk == OpPlace::none ? OpPlace::none : chunk_first_[step.chunk] + layer_in_chunk;
    return {static_cast<std::int32_t>(layer), static_cast<std::int32_t>(step.micro_batch),
            static_cast<std::int16_t>(v_ > 1 ? step.chunk : OpPlace::none)};
  }

  double stage_parameters() const {
    double parameters = 0;
    for (int c = 0; c < v_; ++c) {
      parameters += costs_.layer_parameters(chunk_first_[c], chunk_layers(c));
      if (first_virtual_stage(c))
        parameters += costs_.embedding_parameters;
      if (last_virtual_stage(c))
        parameters += costs_.head_parameters + tied_embedding_parameters();
    }
    return parameters;
  }

  double stage_expert_parameters() const {
    double parameters = 0;
    for (int c = 0; c < v_; ++c)
      parameters += costs_.layer_expert_parameters(chunk_first_[c], chunk_layers(c));
    return parameters;
  }

  // The parameters of a chunk's pieces in forward order: the embedding on the first virtual
  // stage, the layers, the head (with the tied embedding's copy) on the last.
  std::vector<double> chunk_pieces(int chunk) const {
    std::vector<double> pieces;
    if (first_virtual_stage(chunk))
      pieces.push_back(costs_.embedding_parameters);
    for (long long l = 0; l < chunk_layers(chunk); ++l)
      pieces.push_back(layer_costs(chunk, l).parameters);
    if (last_virtual_stage(chunk))
      pieces.push_back(costs_.head_parameters + tied_embedding_parameters());
    return pieces;
  }
  // The local experts' parameters of the same pieces.
  std::vector<double> chunk_expert_pieces(int chunk) const {
    std::vector<double> pieces;
    if (first_virtual_stage(chunk))
      pieces.push_back(0.0);
    for (long long l = 0; l < chunk_layers(chunk); ++l)
      pieces.push_back(layer_costs(chunk, l).expert_parameters);
    if (last_virtual_stage(chunk))
      pieces.push_back(0.0);
    return pieces;
  }
  // The head's copy of the embedding, tied or read by multi-token prediction, unless the
  // embedding is on this rank too (ZB-V's V).
  double tied_embedding_parameters() const {
    if (!head_reads_embedding(model_) || stage_of_virtual_stage(s_.schedule, p_, p_ * v_ - 1) == 0)
      return 0.0;
    return static_cast<double>(count_parameters(model_).embedding) / s_.tp;
  }

  // Gradient buckets in parameters: the all-gathers of the updated parameters use the same buckets.
  double bucket_parameters() const { return s_.bucket_bytes / states_.gradient_element_bytes; }

  // Under overlap_param_gather the previous step's update arrives during each chunk's first
  // forward; each model chunk has its own buckets (Megatron-Core wraps each in its own DDP),
  // gathered in the order the rank first runs its chunks (DualPipe's second half: chunk 1 first).
  void gather_parameters_during_forward() {
    if (!s_.overlap_param_gather || !states_.gathers_after_step)
      return;
    updated_parameters_.resize(static_cast<std::size_t>(v_));
    const bool up_first = two_directions(s_.schedule) && coords_.pp >= p_ / 2;
    for (int i = 0; i < v_; ++i) {
      const int c = up_first ? v_ - 1 - i : i;
      const PlacedAt in_chunk(*this, {OpPlace::none, OpPlace::none, static_cast<std::int16_t>(v_ > 1 ? c : OpPlace::none)});
      std::vector<ParameterGathers> sets = {{plan_parameter_gathers(chunk_pieces(c), bucket_parameters()),
                                             gradient_slot, states_.parameter_element_bytes,
                                             "param-allgather.c" + std::to_string(c)}};
      if (auto experts = experts_.gathers_during_forward(chunk_expert_pieces(c))) {
        experts->name += ".c" + std::to_string(c);
        sets.push_back(std::move(*experts));
      }
      updated_parameters_[static_cast<std::size_t>(c)] = parameter_gathers(sets);
    }
  }

  // What piece `piece` of a step's chunk (in forward order) waits for besides `deps`: its bucket's
  // all-gather, in the chunk's first micro-batch (set 0: the dense parameters'; set 1: its routed
  // experts', which only their GEMMs wait for).
  std::vector<OpId> updated(const PipelineStep& step, std::size_t piece, std::vector<OpId> deps,
                            std::size_t set = 0) const {
    if (step.micro_batch == first_micro_batch(s_.schedule, step.chunk, s_.grad_accum) && !updated_parameters_.empty()) {
      const std::vector<std::vector<OpId>>& chunk = updated_parameters_.at(static_cast<std::size_t>(step.chunk));
      if (set < chunk.size() && chunk[set].at(piece) != no_gather)
        deps.push_back(chunk[set].at(piece));
    }
    return deps;
  }

  // Pipelines keep their stage's weights and gradients whole (ZeRO-2/3 are refused with them).
  void allocate_model_states() {
    parameters_ = stage_parameters();
    optimizer_parameters_ = trainsim::allocate_model_states(static_cast<ProgramWriter&>(*this), s_, states_,
                                                            states_.held(states_.weights, parameters_), parameters_,
                                                            offloaded_);
    expert_optimizer_parameters_ = experts_.allocate();
  }

  // What a chunk's forward starts from when another stage computed it: the activations received
  // (gathered over tp after a scattered transfer), or this rank's other chunk's output at ZB-V's turn.
  std::vector<OpId> forward_input(const PipelineStep& step, const std::vector<OpId>& post_after) {
    if (first_virtual_stage(step.chunk))
      return {};
    if (upstream_slot(step.chunk) < 0)
      return {turn_.at(static_cast<std::size_t>(step.micro_batch))};
    const std::string sfx = suffix(step);
    const PlacedAt in_step(*this, place_in_step(step));
    return {gather_boundary(recv(Stream::pp_comm, upstream_slot(step.chunk), tag(step.micro_batch, virtual_stage(step.chunk), 0),
                                 boundary_bytes(), "recv.act" + sfx, post_after),
                            "recv.act" + sfx)};
  }

  // Runs the chunk's forward for one micro-batch from `input`; returns its last op.
  OpId forward(const PipelineStep& step, std::vector<OpId>& started, std::vector<OpId> input) {
    const std::string sfx = suffix(step);
    const PlacedAt in_step(*this, place_in_step(step));
    const int vs = virtual_stage(step.chunk);
    std::vector<OpId> deps = std::move(input);
    StepOps track(started);
    OpId& last = track.last;
    std::size_t piece = 0;
    if (first_virtual_stage(step.chunk)) {
      alloc("embedding.act" + sfx, MemCategory::activations, costs_.embedding_activations);
      track(ops_.embedding_forward("embedding.fwd" + sfx, updated(step, piece++, deps)));
      deps = {last};
    }
    const RecomputePlan& plan = plans_[step.chunk];
    for (const RecomputeSegment& segment : plan.segments) {
      if (segment.policy == LayerPolicy::checkpoint)
        alloc("S" + std::to_string(segment.first) + ".input" + sfx, MemCategory::activations,
              layer_costs(step.chunk, segment.first).activations.input);
      for (long long l = segment.first; l < segment.first + segment.count; ++l) {
        const PlacedAt in_layer(*this, place_in_step(step, l));
        if (segment.policy != LayerPolicy::checkpoint)
          alloc(layer_name(step.chunk, l) + ".act" + sfx, MemCategory::activations,
                layer_recompute(layer_costs(step.chunk, l), segment.policy).kept);
        track(ops_.forward(layer_index(step.chunk, l), layer_name(step.chunk, l) + ".fwd" + sfx,
                           updated(step, piece, deps), Phase::forward, updated(step, piece, {}, 1)));
        ++piece;
        deps = {last};
      }
    }
    if (last_virtual_stage(step.chunk)) {
      alloc("head.act" + sfx, MemCategory::activations, costs_.head_activations);
      track(ops_.head_forward("head.fwd" + sfx, updated(step, piece, deps)));
    } else if (downstream_slot(step.chunk) >= 0) {
      send(Stream::pp_comm, downstream_slot(step.chunk), tag(step.micro_batch, vs + 1, 0), boundary_bytes(),
           "send.act" + sfx, {last});
    } else {
      turn_.at(static_cast<std::size_t>(step.micro_batch)) = last;
    }
    return last;
  }

  long long layer_index(int chunk, long long layer_in_chunk) const { return chunk_first_[chunk] + layer_in_chunk; }
  std::string layer_name(int chunk, long long layer_in_chunk) const {
    return "L" + std::to_string(layer_index(chunk, layer_in_chunk));
  }
  const LayerCosts& layer_costs(int chunk, long long layer_in_chunk) const {
    return costs_.layer(layer_index(chunk, layer_in_chunk));
  }

  // A backward, or under a split backward its input-gradient pass: then each piece keeps, in
  // place of its activations, what its weight-gradient pass will need (weight_gradients frees it).
  OpId backward(const PipelineStep& step, const std::vector<OpId>& post_after, std::vector<OpId>& started) {
    const std::string sfx = suffix(step);
    const PlacedAt in_step(*this, place_in_step(step));
    const int vs = virtual_stage(step.chunk);
    const bool split = step.pass == Pass::backward_input;
    const std::string pass = split ? ".bwd-input" : ".bwd";
    std::vector<OpId> deps;
    alloc("act-grad" + sfx, MemCategory::buffers, costs_.activation_gradient_buffer);
    StepOps track(started);
    OpId& last = track.last;
    const auto hold_for_weight_gradients = [&](const std::string& piece, double bytes) {
      if (split)
        alloc(piece + ".wgrad-held" + sfx, MemCategory::activations, bytes);
    };
    if (last_virtual_stage(step.chunk)) {
      track(split ? ops_.head_backward_input("head" + pass + sfx, deps) : ops_.head_backward("head.bwd" + sfx, deps));
      release("head.act" + sfx);
      hold_for_weight_gradients("head", costs_.head_weight_gradient_inputs);
    } else if (downstream_slot(step.chunk) >= 0) {
      track(early_gradient_ ? *std::exchange(early_gradient_, std::nullopt) : *receive_gradient(step, post_after));
      if (scatters_boundary())
        track(gather_boundary(last, "recv.grad" + sfx));
    }
    deps = {last_virtual_stage(step.chunk) || downstream_slot(step.chunk) >= 0
                ? last
                : turn_.at(static_cast<std::size_t>(step.micro_batch))};
    const RecomputePlan& plan = plans_[step.chunk];
    for (auto segment = plan.segments.rbegin(); segment != plan.segments.rend(); ++segment) {
      const long long first = segment->first, final_layer = segment->first + segment->count - 1;
      if (segment->policy == LayerPolicy::checkpoint) {
        for (long long l = first; l <= final_layer; ++l) {
          const PlacedAt in_layer(*this, place_in_step(step, l));
          alloc(layer_name(step.chunk, l) + ".act" + sfx, MemCategory::activations,
                layer_costs(step.chunk, l).activations.total);
          track(ops_.forward(layer_index(step.chunk, l), layer_name(step.chunk, l) + ".recompute" + sfx, deps,
                             Phase::recompute));
          deps = {last};
        }
        release("S" + std::to_string(first) + ".input" + sfx);
      }
      for (long long l = final_layer; l >= first; --l) {
        const PlacedAt in_layer(*this, place_in_step(step, l));
        const std::string layer = layer_name(step.chunk, l);
        const LayerRecompute recompute = layer_recompute(layer_costs(step.chunk, l), segment->policy);
        const std::string rematerialized = layer + "." + recompute.what + sfx;
        if (recompute.work) {
          alloc(rematerialized, MemCategory::activations, recompute.rematerialized);
          track(compute(layer + ".recompute-" + recompute.what + sfx, *recompute.work, Phase::recompute, deps));
          deps = {last};
        }
        const long long index = layer_index(step.chunk, l);
        track(split ? ops_.backward_input(index, layer + pass + sfx, deps) : ops_.backward(index, layer + pass + sfx, deps));
        deps = {last};
        release(rematerialized);
        release(layer + ".act" + sfx);
        hold_for_weight_gradients(layer, layer_costs(step.chunk, l).activations.weight_gradient_inputs);
      }
    }
    if (first_virtual_stage(step.chunk)) {
      // Whole in B: the zero-bubble schedules run the first stage's backwards whole anyway.
      track(ops_.embedding_backward("embedding.bwd" + sfx, deps));
      release("embedding.act" + sfx);
    } else if (upstream_slot(step.chunk) >= 0) {
      send(Stream::pp_bwd, upstream_slot(step.chunk), tag(step.micro_batch, vs - 1, 1), boundary_bytes(),
           "send.grad" + sfx, {last});
    } else {
      turn_.at(static_cast<std::size_t>(step.micro_batch)) = last;
    }
    release("act-grad" + sfx);
    return last;
  }

  // The receive of the gradient a backward step starts from, when it comes from another rank.
  std::optional<OpId> receive_gradient(const PipelineStep& step, const std::vector<OpId>& post_after) {
    if (last_virtual_stage(step.chunk) || downstream_slot(step.chunk) < 0)
      return std::nullopt;
    const PlacedAt in_step(*this, place_in_step(step));
    return recv(Stream::pp_bwd, downstream_slot(step.chunk), tag(step.micro_batch, virtual_stage(step.chunk), 1),
                boundary_bytes(), "recv.grad" + suffix(step), post_after);
  }

  // The weight-gradient pass of a split backward, after `after` (the previous step's last op):
  // the head's, then the layers' in backward order.
  OpId weight_gradients(const PipelineStep& step, OpId after, std::vector<OpId>& started) {
    const std::string sfx = suffix(step);
    const PlacedAt in_step(*this, place_in_step(step));
    StepOps track(started);
    track.last = after;
    const auto run = [&](OpId op, const std::string& piece) {
      track(op);
      release(piece + ".wgrad-held" + sfx);
    };
    if (last_virtual_stage(step.chunk))
      run(ops_.head_backward_weight("head.bwd-weight" + sfx, track.last), "head");
    for (long long l = chunk_layers(step.chunk) - 1; l >= 0; --l) {
      const PlacedAt in_layer(*this, place_in_step(step, l));
      const std::string layer = layer_name(step.chunk, l);
      run(ops_.backward_weight(layer_index(step.chunk, l), layer + ".bwd-weight" + sfx, track.last), layer);
    }
    return track.last;
  }

  // A chunk's gradients are final after its last backward: reduce them over the data-parallel
  // (x context-parallel) ranks while the other chunks' backwards go on (overlap_grad_reduce).
  void synchronize_gradients(int chunk, OpId producer) {
    double parameters = costs_.layer_parameters(chunk_first_[chunk], chunk_layers(chunk));
    if (first_virtual_stage(chunk))
      parameters += costs_.embedding_parameters;
    if (last_virtual_stage(chunk))
      parameters += costs_.head_parameters;
    if (!two_directions(s_.schedule) && copies_group_ >= 0 && (first_virtual_stage(chunk) || last_virtual_stage(chunk))) {
      // The first and last stages hold the tied embedding: their gradients are summed first.
      const double embedding = static_cast<double>(count_parameters(model_).embedding) / s_.tp;
      producer = collective(Stream::dp_comm, Collective::all_reduce, copies_group_,
                            embedding * states_.gradient_element_bytes, "embedding-grad-allreduce", {producer});
      sync_ops_.push_back(producer);
      if (last_virtual_stage(chunk))
        parameters += embedding;
    }
    const double bytes = parameters * states_.gradient_element_bytes;
    const std::string name = ".c" + std::to_string(chunk);
    const PlacedAt in_chunk(*this, {OpPlace::none, OpPlace::none, static_cast<std::int16_t>(chunk)});
    const double expert_parameters = costs_.layer_expert_parameters(chunk_first_[chunk], chunk_layers(chunk));
    experts_.start_reducing(expert_parameters);
    const std::size_t expert_reductions = sync_ops_.size();
    experts_.gradients_ready(expert_parameters, producer, true, sync_ops_);
    if (two_directions(s_.schedule) && experts_plan_ && expert_parameters > 0) {
      // The mirror's copies of the local experts, summed once the chunk's expert buckets are.
      std::vector<OpId> reduced(sync_ops_.begin() + static_cast<std::ptrdiff_t>(expert_reductions), sync_ops_.end());
      sync_ops_.resize(expert_reductions);
      if (reduced.empty())
        reduced = {producer};
      const double expert_bytes = expert_parameters * experts_plan_->gradient_element_bytes;
      sync_ops_.push_back(sum_with_mirror(held_share(expert_bytes, *experts_plan_), ".expert" + name, reduced));
    }
    // Each bucket, once reduced, summed with the mirror's copy (DualPipe) and its share sent to
    // the host (offloaded optimizer).
    const auto finish = [&](double share, const std::string& bucket, OpId reduced) {
      if (two_directions(s_.schedule))
        reduced = sum_with_mirror(share, bucket, {reduced});
      sync_ops_.push_back(offloaded_ ? offloaded_->gradients(share, bucket, reduced).done : reduced);
    };
    if (states_.ranks <= 1) {
      if (two_directions(s_.schedule)) {
        const std::vector<double> buckets = bucket_sizes(bytes, s_.bucket_bytes);
        for (std::size_t b = 0; b < buckets.size(); ++b)
          finish(buckets[b], name + ".bucket" + std::to_string(b), producer);
      } else if (offloaded_) {
        finish(bytes, name, producer);
      }
      return;
    }
    const Collective kind = states_.gradient_reduction;
    const auto reductions = bucketed_collective(
        Stream::dp_comm, kind, gradient_slot, bytes, s_.bucket_bytes,
        std::string(kind == Collective::all_reduce ? "grad-allreduce" : "grad-reducescatter") + name, {producer});
    if (!offloaded_ && !two_directions(s_.schedule)) {
      sync_ops_.insert(sync_ops_.end(), reductions.begin(), reductions.end());
      return;
    }
    const std::vector<double> buckets = bucket_sizes(bytes, s_.bucket_bytes);
    for (std::size_t b = 0; b < reductions.size(); ++b)
      finish(held_share(buckets[b], states_), name + ".bucket" + std::to_string(b), reductions[b]);
  }

  // What a rank holds of `bytes` of gradients once they are reduced over its data-parallel
  // group: its shard under a sharded optimizer, else all.
  static double held_share(double bytes, const ModelStatePlan& plan) {
    return plan.optimizer.sharded && plan.ranks > 1 ? bytes / plan.ranks : bytes;
  }

  // DualPipe: this rank's copy of a stage and its mirror rank's sum their gradients.
  OpId sum_with_mirror(double bytes, const std::string& name, const std::vector<OpId>& after) {
    return collective(Stream::dp_comm, Collective::all_reduce, copies_group_, bytes, "mirror-grad-allreduce" + name,
                      after);
  }

  // The update on the GPU, or on the CPU with the new 16-bit parameters copied up; each rank
  // updated its shard under ZeRO-1: the ranks all-gather the new parameters.
  void optimizer_step() {
    OpId updated = 0;
    if (offloaded_) {
      updated = copy(node_cpu, true, optimizer_parameters_ * states_.parameter_element_bytes, "h2d.params",
                     offloaded_->step(sync_ops_));
    } else {
      const Work work = optimizer_step_work(optimizer_parameters_ + expert_optimizer_parameters_, s_.precision,
                                            s_.grad_precision);
      updated = compute("optimizer.step", work, Phase::optimizer, sync_ops_);
    }
    if (states_.gathers_after_step && updated_parameters_.empty())
      bucketed_collective(Stream::dp_comm, Collective::all_gather, gradient_slot,
                          parameters_ * states_.parameter_element_bytes,
                          bucket_parameters() * states_.parameter_element_bytes, "param-allgather", {updated});
    experts_.gather_updated(updated);
  }

  const Scenario& s_;
  const ModelSpec& model_;
  const ModelCosts& costs_;
  const ModelStatePlan& states_;
  const ModelStatePlan* experts_plan_;  // under expert parallelism
  const std::vector<RecomputePlan>& plans_;
  const RankCoords coords_;
  const int p_, v_;
  // The pair of ranks summing copies' gradients: the ends tying the embedding, or DualPipe's mirror.
  const int copies_group_;
  const RuntimeMemory runtime_;
  LayerOps ops_;
  const std::vector<long long> stage_layers_;
  const std::vector<long long> chunk_first_;  // each chunk's first layer in the model
  ExpertStates experts_;
  double parameters_ = 0;
  double optimizer_parameters_ = 0;
  double expert_optimizer_parameters_ = 0;
  std::vector<OpId> sync_ops_;
  std::vector<std::vector<std::vector<OpId>>> updated_parameters_;  // overlap_param_gather: per chunk, set, forward piece
  // Where ZB-V's V turns on the last rank, per micro-batch: the op that ended the pass of the
  // chunk before the turn (chunk 0's forward, then chunk 1's input gradients) on this rank.
  std::vector<OpId> turn_;
  std::optional<OffloadedOptimizer> offloaded_;  // when the optimizer runs on the CPU
  std::optional<OpId> early_gradient_;  // received for the next step, a pair's backward
};

// Megatron-Core's first and last pipeline ranks with their own layer counts (to balance the
// embedding and the output layer), the others sharing the rest evenly, each rank's layers
// shared evenly by its vpp chunks (get_num_layers_to_build).
std::vector<long long> uneven_virtual_stages(const Scenario& scenario, const ModelSpec& model) {
  const std::string where = scenario.file.string() + ": ";
  std::vector<long long> per_rank(static_cast<std::size_t>(scenario.pp), 0);
  long long rest = model.layers, others = scenario.pp;
  for (const auto& [layers, rank] : {std::pair{scenario.first_stage_layers, 0}, {scenario.last_stage_layers, scenario.pp - 1}}) {
    if (layers == 0)
      continue;
    per_rank[static_cast<std::size_t>(rank)] = layers;
    rest -= layers;
    --others;
  }
  const std::string keys = "parallel.first_stage_layers and parallel.last_stage_layers";
  if (rest < 0 || (others == 0 && rest != 0) || (others > 0 && (rest == 0 || rest % others != 0)))
    throw InputError(where + keys + " leave " + std::to_string(rest) + " of model " + model.name + "'s " +
                     std::to_string(model.layers) + " layers to " + std::to_string(others) +
                     " other pipeline ranks; accepted: counts that leave each of them the same positive number");
  for (long long& layers : per_rank)
    if (layers == 0)
      layers = rest / others;
  if (two_directions(scenario.schedule))  // the pp stages of the model, each direction's
    return per_rank;
  std::vector<long long> stages(static_cast<std::size_t>(scenario.pp) * scenario.vpp);
  for (int rank = 0; rank < scenario.pp; ++rank) {
    if (per_rank[rank] % scenario.vpp != 0)
      throw InputError(where + "pipeline rank " + std::to_string(rank) + " has " + std::to_string(per_rank[rank]) +
                       " layers, not divisible by vpp = " + std::to_string(scenario.vpp) + " (set by " + keys + ")");
    for (int chunk = 0; chunk < scenario.vpp; ++chunk)
      stages[virtual_stage(scenario.schedule, scenario.pp, chunk, rank)] = per_rank[rank] / scenario.vpp;
  }
  return stages;
}

// The layers of each stage a micro-batch passes (pp x vpp of them, DualPipe's pp).
std::vector<long long> layers_per_stage_of_a_pass(const Scenario& scenario, const ModelSpec& model) {
  const long long stages = stages_of_a_pass(scenario);
  if (!scenario.layers_per_stage.empty()) {
    long long sum = 0;
    for (long long layers : scenario.layers_per_stage)
      sum += layers;
    if (sum != model.layers)
      throw InputError(scenario.file.string() + ": parallel.layers_per_stage adds up to " + std::to_string(sum) +
                       " layers but model " + model.name + " has " + std::to_string(model.layers));
    return scenario.layers_per_stage;
  }
  if (scenario.first_stage_layers > 0 || scenario.last_stage_layers > 0)
    return uneven_virtual_stages(scenario, model);
  if (model.layers % stages != 0)
    throw InputError(scenario.file.string() + ": model " + model.name + " has " + std::to_string(model.layers) +
                     " layers, not divisible by " +
                     (two_directions(scenario.schedule)
                          ? "pp = " + std::to_string(scenario.pp) + " (dualpipe's stages in each direction)"
                          : "pp x vpp = " + std::to_string(scenario.pp) + " x " + std::to_string(scenario.vpp)) +
                     "; accepted: a divisor, or parallel.layers_per_stage");
  return std::vector<long long>(static_cast<std::size_t>(stages), model.layers / stages);
}

} // namespace

long long stages_of_a_pass(const Scenario& scenario) {
  return two_directions(scenario.schedule) ? scenario.pp : static_cast<long long>(scenario.pp) * scenario.vpp;
}

std::vector<long long> first_layer_of_virtual_stages(const Scenario& scenario, const std::vector<long long>& stage_layers) {
  const auto per_pass = static_cast<std::size_t>(stages_of_a_pass(scenario));
  std::vector<long long> firsts(stage_layers.size(), 0);
  for (std::size_t vs = 1; vs < stage_layers.size(); ++vs)
    firsts[vs] = vs % per_pass == 0 ? 0 : firsts[vs - 1] + stage_layers[vs - 1];
  return firsts;
}

std::vector<long long> layers_per_virtual_stage(const Scenario& scenario, const ModelSpec& model) {
  std::vector<long long> stages = layers_per_stage_of_a_pass(scenario, model);
  // The multi-token-prediction modules run after the last layer, on the stage with the output
  // layer (Megatron-Core's default placement; layer counts per stage name the model's layers).
  stages.back() += model.mtp_layers;
  if (two_directions(scenario.schedule))  // going up, the same stages again
    stages.insert(stages.end(), stages.begin(), stages.end());
  return stages;
}

Program build_pipeline_program(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs,
                               const ModelStatePlan& states, const std::vector<RecomputePlan>& plans,
                               const PipelinePlacement& placement, int rank) {
  return PipelineWriter(scenario, model, costs, states, plans, placement, rank).build();
}

} // namespace trainsim
