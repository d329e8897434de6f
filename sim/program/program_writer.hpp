#pragma once
// Appends ops to one rank's program: the small vocabulary the builders speak.
// Allocations are tracked by name so that freeing a tensor that was never
// allocated (a zero-byte one) is a no-op.
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/scenario.hpp"
#include "model/costs.hpp"
#include "program/program.hpp"

namespace trainsim {

// Megatron-Core's overlap_param_gather. The buckets of a model chunk are cut from its parameters
// in backward order (as gradients fill them), so the forward needs them last bucket first. The
// forward pre-hook of the first piece in a bucket waits for its all-gather and dispatches the
// next bucket's; the host runs ahead of the GPU, so the dispatches follow each other at once and
// the all-gathers run back to back from the step's start, each piece waiting for its own.
struct ParameterGatherPlan {
  std::vector<double> bucket_parameters;  // in the order the forward needs them
  std::vector<std::size_t> waits_for;     // per piece, in forward order: the last bucket it needs (none: no parameters)
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
};
// `piece_parameters`: the chunk's pieces (embedding, layers, head) in forward order; no bucket
// and no wait when they hold no parameters.
ParameterGatherPlan plan_parameter_gathers(const std::vector<double>& piece_parameters, double bucket_parameters);
// One set of buckets gathered during the forward over its group: the dense parameters' over the
// data-parallel group, the local experts' over the expert-data-parallel group.
struct ParameterGathers {
  ParameterGatherPlan plan;
  int group = -1;
  double element_bytes = 0;
  std::string name;
};

class ProgramWriter {
public:
  OpId compute(const std::string& name, const Work& work, Phase phase, std::vector<OpId> deps = {});
  // Nothing is allocated (and nothing returned) for zero bytes.
  std::optional<OpId> alloc(const std::string& tensor, MemCategory category, double bytes, Device device = Device::gpu);
  // Frees a tensor on the compute stream after `deps`; a no-op for a tensor not allocated.
  void release(const std::string& tensor, std::vector<OpId> deps = {});
  OpId collective(Stream stream, Collective kind, int group, double bytes, const std::string& name,
                  std::vector<OpId> deps);
  // `bytes` from this rank to the members of `group`, divided as split `split` of the workload's
  // all_to_all_splits says (-1: evenly).
  OpId all_to_all(Stream stream, int group, double bytes, int split, const std::string& name, std::vector<OpId> deps);
  // One collective per bucket of at most `bucket` bytes (bucket_sizes), all after `deps`; returns them.
  std::vector<OpId> bucketed_collective(Stream stream, Collective kind, int group, double bytes, double bucket,
                                        const std::string& name, const std::vector<OpId>& deps);
  // The all-gathers of `sets` (plans of the same pieces), on the dp-comm stream with no deps (the
  // step's first comm), in the order the pieces need them; returns, per set and piece, the
  // all-gather the piece waits for (none: no_gather).
  std::vector<std::vector<OpId>> parameter_gathers(const std::vector<ParameterGathers>& sets);
  static constexpr OpId no_gather = static_cast<OpId>(-1);
  OpId send(Stream stream, int peer, int tag, double bytes, const std::string& name, std::vector<OpId> deps);
  OpId recv(Stream stream, int peer, int tag, double bytes, const std::string& name, std::vector<OpId> deps);
  // Host memory to this GPU (inbound, on the copy stream) or back (on copy-out).
  OpId copy(const std::string& host, bool inbound, double bytes, const std::string& name, std::vector<OpId> deps);
  // A read or write of a disk, on the io-read or io-write stream.
  OpId disk_io(OpKind kind, const std::string& disk, double bytes, const std::string& name, std::vector<OpId> deps);
  // Work on another host (the node's CPU) instead of the GPU.
  OpId compute_on(const std::string& host, const std::string& name, const Work& work, Phase phase,
                  std::vector<OpId> deps);

  // The ops written from `first` until now are two passes of an overlapped pair, the first
  // written from `first`, the second from `second` (parallel.overlap_pairs). take() puts them in
  // the order Megatron-Core's combined 1F1B issues them (model_chunk_schedule_plan.py,
  // TransformerLayerSchedulePlan.run): each pass cut after each expert-parallel exchange it
  // issues, the pieces interleaved (append_interleaved says in which order), so that one pass's
  // all-to-alls run while the other computes on the one compute stream.
  void interleave(OpId first, OpId second);

  // Where the ops written next sit in the step: every op but alloc and free gets this place.
  void move_to(const OpPlace& place) { place_ = place; }
  const OpPlace& place() const { return place_; }

  // Room for about this many ops, so that building a long program does not move its ops around.
  void expect(std::size_t ops) { program_.ops.reserve(ops); }
  Program take();
  std::size_t size() const { return program_.ops.size(); }

private:
  // An op with the fields every transfer has; the caller sets the rest.
  OpId add_op(OpKind kind, Stream stream, double bytes, const std::string& name, std::vector<OpId> deps);
  OpId point_to_point(OpKind kind, Stream stream, int peer, int tag, double bytes, const std::string& name,
                      std::vector<OpId> deps);
  struct Pair {
    OpId first, second, end;
  };
  Program program_;
  std::set<std::string> live_;
  OpPlace place_;
  std::vector<Pair> pairs_;  // to interleave, in program order
};

// Moves a writer to a place for the lifetime of this object, then back to where it was.
class PlacedAt {
public:
  PlacedAt(ProgramWriter& writer, const OpPlace& place) : writer_(writer), before_(writer.place()) {
    writer.move_to(place);
  }
  ~PlacedAt() { writer_.move_to(before_); }
  PlacedAt(const PlacedAt&) = delete;
  PlacedAt& operator=(const PlacedAt&) = delete;

private:
  ProgramWriter& writer_;
  const OpPlace before_;
};

// `bytes` cut into buckets of at most `bucket` bytes, in order.
std::vector<double> bucket_sizes(double bytes, double bucket);

// Gradients filling the buckets of one backward pass as they become final: the buckets are the
// backward's gradient bytes cut as bucket_sizes cuts them, so a large layer spans several and
// small layers share one. (Frameworks close a bucket at the parameter boundary once it is full,
// so theirs are up to one parameter larger.)
class BucketFiller {
public:
  BucketFiller() = default;
  BucketFiller(double bucket_bytes, double total_bytes) : bucket_(bucket_bytes), total_(total_bytes) {}
  // The sizes of the buckets that the next `bytes` of gradients start filling.
  std::vector<double> opened_by(double bytes) const;
  // Adds `bytes` of gradients; returns the sizes of the buckets they complete, in order.
  // `last`: the backward's last gradients, which complete the last bucket.
  std::vector<double> add(double bytes, bool last);
  // Bytes until the bucket being filled is full.
  double room() const { return std::min(static_cast<double>(completed_ + 1) * bucket_, total_) - filled_; }

private:
  double size_of(long long bucket) const;
  long long count() const;
  long long buckets_up_to(double bytes) const;  // buckets that end at or before `bytes`
  double bucket_ = 0;
  double total_ = 0;
  double filled_ = 0;
  long long completed_ = 0;
};

struct ModelStatePlan;

// Group slots of one rank's model-parallel groups (-1: not split that way).
struct ModelParallelGroups {
  int tp = -1;
  int cp = -1;
  int cp_size = 1;
  bool sp = false;
  int tp_size = 1;
  bool tp_comm_overlap = false;  // Transformer Engine's userbuffers (comm.tp_comm_overlap)
  // Expert parallelism: the group exchanging tokens, the one reducing the experts' gradients,
  // and how the local experts' states are kept (sharded over that group); null without it.
  int ep = -1;
  int expert_gradient = -1;
  int expert_tp = -1;  // the group splitting the experts' GEMMs (etp > 1; tp's slot when etp = tp), gathering the tokens they receive
  // DeepEP's dispatch: the ep group's members on this rank's node, and those of its index on the
  // other nodes (the legs are issued where their costs carry bytes).
  int ep_node = -1;
  int ep_rail = -1;
  const ModelStatePlan* experts = nullptr;
};

// The slots of the programs trainsim builds: each rank binds them to its own groups and pipeline
// neighbours (Workload::bindings), so that ranks doing the same work share one program.
enum GroupSlot : int {
  gradient_slot, tp_slot, cp_slot, copies_slot, ep_slot, expert_gradient_slot, expert_tp_slot, ep_node_slot, ep_rail_slot
};

// The slots of a rank's model-parallel groups (the same on every rank); `experts`: the expert
// states' plan under expert parallelism.
ModelParallelGroups model_parallel_groups(const Scenario& scenario, const ModelStatePlan* experts);
// The tensor-parallel ring's neighbours are bound only under comm.tp_comm_overlap.
enum PeerSlot : int { previous_stage_slot, next_stage_slot, tp_previous_slot, tp_next_slot };

// The local experts' model states under expert parallelism (ModelParallelGroups::experts), as
// Megatron-Core keeps them: beside the dense ones, in their own gradient buckets reduced over the
// expert-data-parallel group (its expert-parallel gradient buffers), updated with the rest, and
// under ZeRO-1 all-gathered over that group after the step. Without expert parallelism every
// call does nothing.
class ExpertStates {
public:
  // `parameters`: the local experts' parameters of all the rank's layers.
  ExpertStates(ProgramWriter& writer, const Scenario& scenario, const ModelParallelGroups& groups, double parameters)
      : w_(writer), s_(scenario), plan_(groups.experts), group_(groups.expert_gradient), parameters_(parameters) {}
  // Allocates the states; returns the parameters whose optimizer states the rank keeps.
  double allocate();
  // A reduction of `parameters` experts' gradients starts (a backward's, or a pipeline chunk's).
  void start_reducing(double parameters);
  // `parameters` of them have final gradients once `producer` is done: full buckets are reduced,
  // their reductions added to `reductions` (what the optimizer waits for); `last`: the backward's last.
  void gradients_ready(double parameters, OpId producer, bool last, std::vector<OpId>& reductions);
  // After the update, the ranks that each updated a shard all-gather the new parameters (unless
  // they are gathered during the next forward: gathers_during_forward).
  void gather_updated(OpId updated);
  // Under comm.overlap_param_gather with the distributed optimizer, the updated experts' buckets
  // gathered during the first forward, `pieces` being each forward piece's expert parameters
  // (Megatron-Core's expert-parallel bucket groups, dispatched by the same forward pre-hooks);
  // nothing otherwise.
  std::optional<ParameterGathers> gathers_during_forward(const std::vector<double>& pieces) const;

private:
  bool reduces() const;
  bool gathers_during_forward() const;
  ProgramWriter& w_;
  const Scenario& s_;
  const ModelStatePlan* plan_;
  const int group_;
  const double parameters_;
  BucketFiller buckets_;
  long long reduced_ = 0;
};

// The ops of a layer, the embedding and the head on one rank, with the tensor-parallel
// collectives between their parts, the expert-parallel all-to-alls around a mixture's experts (all-reduce, or all-gather and reduce-scatter under sequence
// parallelism) and the context-parallel exchange of K and V overlapping the attention.
// Each returns the op that completes the piece; `deps` gate its first op.
// A tensor-parallel sub-block's backward runs as Megatron's column-parallel linear runs it
// (LinearWithGradAccumulationAndAsyncCommunication, Transformer Engine's Linear): the input
// gradient of its column-parallel GEMM is reduced (all-reduce, or reduce-scatter under SP)
// beside the weight-gradient GEMM, and under SP the GEMM's input, which forward kept
// sequence-split, is all-gathered again beside the input-gradient GEMM.
// Under comm.tp_comm_overlap the sub-blocks run as Transformer Engine's userbuffers run them
// (initialize_ub's default methods): the all-gather before a column-parallel GEMM (QKV, FC1 in
// forward; the output projection's and FC2's input gradients in backward) is a ring exchange
// with the tp neighbours, each of tp chunks of tokens computed once it has arrived while the next
// travels; the reduce-scatter after a row-parallel GEMM is pipelined over its chunks; the
// backward's overlaps above are its "bulk" ones.
class LayerOps {
public:
  LayerOps(ProgramWriter& writer, const ModelCosts& costs, const ModelParallelGroups& groups)
      : w_(writer), costs_(costs), groups_(groups) {}

  // Layer `index` of the model (its kind's costs); its routed experts' GEMMs also wait for
  // `experts_deps` (their parameters' all-gathers under comm.overlap_param_gather).
  OpId forward(long long index, const std::string& name, std::vector<OpId> deps, Phase phase,
               std::vector<OpId> experts_deps = {});
  OpId backward(long long index, const std::string& name, std::vector<OpId> deps);
  OpId embedding_forward(const std::string& name, std::vector<OpId> deps);
  OpId embedding_backward(const std::string& name, std::vector<OpId> deps);
  OpId head_forward(const std::string& name, std::vector<OpId> deps);
  OpId head_backward(const std::string& name, std::vector<OpId> deps);
  // A backward split in two (the zero-bubble schedules; not with context parallelism or
  // comm.tp_comm_overlap) as Transformer Engine's delay_wgrad_compute runs it: the input-gradient
  // pass with its tensor-parallel collectives, keeping the weight-gradient GEMMs' operands as
  // they used them (gathered under SP), and the weight-gradient pass after `after`, without
  // communication.
  OpId backward_input(long long index, const std::string& name, std::vector<OpId> deps);
  OpId backward_weight(long long index, const std::string& name, OpId after);
  OpId head_backward_input(const std::string& name, std::vector<OpId> deps);
  OpId head_backward_weight(const std::string& name, OpId after);

private:
  // The costs of layer `index`, for the layer's ops written next.
  const LayerCosts& at(long long index);
  // The layer is a mixture's expert layer whose experts are divided over the ep group.
  bool expert_parallel() const;
  // Before a part whose input is sequence-split under SP: all-gather it.
  std::vector<OpId> gather_input(const std::string& name, std::vector<OpId> deps);
  // After a part whose output is a partial sum over tp: all-reduce it (reduce-scatter under SP).
  OpId reduce_output(const std::string& name, OpId producer);
  OpId attention(const std::string& name, std::vector<OpId> deps, Phase phase, bool backward);
  // The attention sub-block with its tensor-parallel collectives (under comm.tp_comm_overlap
  // overlapped as a dense layer's).
  OpId attention_block_forward(const std::string& name, std::vector<OpId> deps, Phase phase);
  OpId attention_block_backward(const std::string& name, std::vector<OpId> deps);
  // A mixture's MLP under expert parallelism: its tokens to the experts' ranks and back by
  // all-to-all over the ep group (under tensor parallelism gathered over tp for the experts and
  // reduce-scattered after them), in forward and, reversed, in backward.
  OpId moe_forward(const std::string& name, std::vector<OpId> deps, Phase phase, std::vector<OpId> experts_deps);
  // `input_only`: a backward split in two, its weight gradients left for backward_weight.
  OpId moe_backward(const std::string& name, std::vector<OpId> deps, bool input_only);
  // A mixture's shared expert after `deps`: its tokens gathered over tp, reduce-scattered after.
  OpId shared_expert(const std::string& name, const Work& work, std::vector<OpId> deps, Phase phase);
  // The tokens' way to or from the experts over the ep group: an all-to-all of `bytes` (divided
  // as `split`), or DeepEP's two legs at once (their bytes from the layer's MoeParts); `scale`:
  // the forward dispatch's fp8 share of the bytes. What comes after waits for all the returned ops.
  std::vector<OpId> exchange(const std::string& name, double bytes, double scale, int split,
                             const std::vector<OpId>& deps);
  // `before` (named `first`), the all-to-all to the experts' ranks, `experts` (also after
  // `experts_deps`), the all-to-all back, `after` (named `last`).
  OpId experts_round_trip(const std::string& name, const char* first, const Work& before, const Work& experts,
                          const char* last, const Work& after, Phase phase, std::vector<OpId> deps,
                          std::vector<OpId> experts_deps = {});
  // comm.tp_comm_overlap: a sub-block's forward from its BlockParts.
  OpId overlapped_forward(const std::string& name, const BlockParts& parts, std::vector<OpId> deps, Phase phase);
  // A tensor-parallel sub-block's backward from its BlockParts (without context parallelism).
  OpId block_backward(const std::string& name, const BlockParts& parts, std::vector<OpId> deps);
  OpId block_backward_input(const std::string& name, const BlockParts& parts, std::vector<OpId> deps);
  OpId block_backward_weight(const std::string& name, const BlockParts& parts, OpId after);
  // The gathered input's tp chunks arriving around the ring, each `chunk` of work computed on one
  // once it is here; returns the last chunk's op.
  OpId ring_exchange(const std::string& name, const Work& chunk, OpId ready, Phase phase);
  // `chunk` of work tp_overlap_pipeline_splits times, each chunk's output reduce-scattered while
  // the next computes; returns the last reduce-scatter.
  OpId pipelined_reduce_scatter(const std::string& name, const Work& chunk, OpId ready, Phase phase);

  ProgramWriter& w_;
  const ModelCosts& costs_;
  const ModelParallelGroups groups_;
  const LayerCosts* layer_ = nullptr;  // the layer being written
  int next_ring_tag_ = 0;  // ranks sharing the program number their ring messages alike
};

} // namespace trainsim
