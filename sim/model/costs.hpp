#pragma once
// Per-layer costs of one micro-batch on one rank: FLOPs, HBM traffic and the activation bytes
// kept for backward (Korthikanti et al. 2022, generalised to GQA, SwiGLU and models without
// dropout), sharded by tensor, sequence and context parallelism; the roofline that turns work
// into seconds (compute.model = roofline); and, per piece, the kernels it launches (costs.cpp
// lists them; model/kernel_timing times them one by one).
// The Works' FLOPs are model FLOPs: QKV, attention core, output and MLP matmuls, backward = 2 x
// forward (Narayanan et al.'s 72 B s L h^2 (1 + s / 6h + V / 12 L h); attention counts the full
// s x s product, the Megatron convention). The kernels' FLOPs are what the hardware executes:
// causal attention skips the masked half, FlashAttention's backward recomputes the scores.
// Activations term by term after Korthikanti et al. Table 2 with K and V at KV width, SwiGLU's
// gate and up both kept, no masks without dropout, FlashAttention dropping the s^2 terms; the
// head keeps fp32 logits for the loss. Sharding: matmul FLOPs and weights over tp (norms and
// row-parallel biases replicated), the sequence over cp (queries local, keys and values over
// the whole sequence).
#include <vector>

#include "common/precision.hpp"
#include "config/scenario.hpp"
#include "model/kernels.hpp"
#include "model/model.hpp"
#include "cluster/gpu.hpp"

namespace trainsim {

// Activation bytes a transformer layer keeps for its backward, by part.
struct LayerActivations {
  double input = 0;           // the layer's input (what full recompute keeps)
  double attention_core = 0;  // scores, softmax, attention dropout: what selective recompute drops
  double total = 0;           // everything kept without recompute
  // torchtitan's op-level selective checkpointing (memory.recompute = op): what it keeps, and
  // what of `total` its backward re-materialises first.
  double op_saved = 0;
  double op_rematerialized = 0;
  // A backward split in two (the zero-bubble schedules): what the weight-gradient pass needs once
  // the input-gradient pass is done, each linear layer's input and output gradient.
  double weight_gradient_inputs = 0;
};

// Transformer Engine's default for the pipelined GEMM + reduce-scatter overlap (initialize_ub's
// num_splits for the "pipeline" method; the ring exchange splits into tp chunks).
constexpr int tp_overlap_pipeline_splits = 4;

// A sub-block (attention or MLP) under tensor parallelism cut around its collectives: in forward,
// what precedes the column-parallel GEMM (the norm), that GEMM (QKV, FC1) as one of tp chunks of
// the tokens (comm.tp_comm_overlap's ring exchange), what lies between, the row-parallel GEMM
// (output projection, FC2) as one of tp_overlap_pipeline_splits chunks, what follows; in
// backward the reverse, each GEMM as its input-gradient (dgrad) and weight-gradient (wgrad)
// GEMMs, the row dgrad as one of tp chunks, and everything before the column GEMM's dgrad as one
// part (`to_column_back`: the part after, the row GEMM's dgrad and wgrad, what lies between),
// for a backward without the ring exchange. Timed as a roofline the parts add up to
// the sub-block; timed by kernels each part is its kernels (a chunk re-reads the GEMM's weight,
// memory-bound parts add their own time).
struct BlockParts {
  Work before, column_chunk, between, row_chunk, after;
  Work after_back, row_dgrad_chunk, row_wgrad, between_back, column_dgrad, column_wgrad, before_back;
  Work to_column_back;  // after_back + the whole row dgrad + row_wgrad + between_back
  Work to_column_input;  // the same without row_wgrad, for a backward split in two
};

// A mixture-of-experts MLP under expert parallelism, cut around its all-to-alls (Megatron-Core's
// MoEAlltoAllTokenDispatcher): in forward the norm, router and permutation of this rank's
// tokens (`dispatch`), the local experts' grouped GEMMs (`experts`), the unpermutation weighted by
// the router's probabilities, the shared experts and the residual add (`combine`); in backward
// the reverse. Tokens cross the ep group twice each way; with tensor parallelism (sequence
// parallel, as Megatron-Core requires with experts) the dispatched tokens are also all-gathered
// over tp before the experts (tp-split like a dense MLP) and reduce-scattered after.
// A shared expert runs after the combine in forward (Megatron-Core without
// moe_shared_expert_overlap) and first in backward, gathered over tp and reduce-scattered like a
// dense MLP. Under uneven routing the ranks of an ep group differ: each sends its copies to the experts'
// ranks in proportion to their experts' shares (`to_experts_split`), and sends back what its own
// experts computed, evenly to every sender.
struct MoeParts {
  Work dispatch, experts, combine;
  Work combine_back, experts_back, dispatch_back;
  Work shared, shared_back;  // a shared expert on every token (gathered over tp), when the model has one
  // A backward split in two (the zero-bubble schedules): each part's input gradients, and the
  // weight gradients of the experts, router and shared expert as one pass.
  Work combine_back_input, experts_back_input, dispatch_back_input, shared_back_input;
  Work backward_weight;
  double to_experts_bytes = 0;    // what one rank sends towards the experts: its kept copies x hidden
  double forward_dispatch_ratio = 1;  // the forward dispatch's (and its tp gather's) share of those bytes: fp8 dispatch
  int to_experts_split = -1;      // how they divide over the ep group (ModelCosts::all_to_all_splits; -1: evenly)
  double from_experts_bytes = 0;  // what it sends back: the copies its experts computed x hidden
  double gathered_bytes = 0;      // the tp all-gather's output: the copies this rank's experts compute x hidden
  // Under the allgather dispatcher: the ep group's tokens x hidden, gathered by each rank (and
  // its experts' outputs, reduce-scattered back); 0 under the all-to-alls.
  double ep_gathered_bytes = 0;
  // Under DeepEP's dispatcher, what one rank's all-to-alls carry each way in the activations'
  // precision (as an all-to-all's bytes: an even share to each member, its own kept): over the ep
  // members of other nodes with its index in the node (the rail: its tokens x the nodes they
  // reach), and over those of its node (the tokens forwarded to the GPUs they reach); 0 where
  // the group has one member.
  double rail_bytes = 0;
  double node_bytes = 0;
};

// Each Work also names its kernels in ModelCosts::kernel_sets.
struct LayerCosts {
  Work forward;                // attention_forward + mlp_forward
  Work backward;               // mlp_backward + attention_backward
  Work attention_forward;      // norm, QKV projection, rotary, attention core, output projection, residual
  Work mlp_forward;            // norm, the MLP, residual
  Work attention_backward;
  Work mlp_backward;
  // The backward split in two, as the zero-bubble schedules run it (Qi et al. 2024): the input
  // gradients (B: all but the linear layers' weight-gradient GEMMs) and the weight gradients (W).
  Work backward_input, backward_weight;
  Work attention_backward_input, attention_backward_weight;  // the attention's, for a mixture's split backward
  Work attention_core;         // forward of the attention core: recomputed under selective
  Work op_recompute;           // what op-level selective checkpointing re-runs before the backward
  // Context parallelism: the attention's pieces before and after the other ranks' K and V arrive.
  Work attention_forward_local, attention_forward_ring;
  Work attention_backward_local, attention_backward_ring;
  BlockParts attention_parts, mlp_parts;  // with tensor parallelism only
  MoeParts moe;                // with expert parallelism only
  LayerActivations activations;
  double parameters = 0;       // held by one rank (matmuls split over tp, norms replicated), reduced over dp x cp
  double expert_parameters = 0;  // under expert parallelism: the local experts, reduced over the expert-data-parallel group
  bool routed = false;         // a mixture's layer with the experts (not one of its dense layers)
  double cp_kv_bytes = 0;      // K and V of the whole sequence, gathered around the CP ring
};

// Layers in order, e.g. those of a pipeline chunk (ModelCosts::layers_from).
using LayerList = std::vector<const LayerCosts*>;

// How a layer is split over ranks: tensor parallelism (Megatron), sequence parallelism on top
// of it (norms and dropout split along the sequence), context parallelism (the sequence split,
// attention over the whole of it).
struct Sharding {
  long long tp = 1;
  bool sp = false;
  long long cp = 1;
  long long ep = 1;  // expert parallelism: a mixture's experts divided over ep ranks
  long long ep_rank = 0;               // this rank's place in its ep group: which experts it holds
  std::vector<double> expert_shares;   // the copies each expert computes (model/routing); empty: uniform
  bool fp8_dispatch = false;           // the forward dispatch carries fp8 tokens (moe.dispatch_precision)
  TokenDispatcher dispatcher = TokenDispatcher::all_to_all;  // moe.dispatcher
  long long ep_nodes = 1;              // under deepep: the nodes an ep group spans, as many members on each
  long long etp = 0;  // expert tensor parallelism: each expert's GEMMs split over etp ranks; 0: tp
  // Per expert layer (the layers with routed experts, in order), its experts' shares when they
  // differ between layers (a routing file's rows): each such layer is a kind of its own.
  std::vector<std::vector<double>> layer_expert_shares;
  long long expert_tp() const { return etp > 0 ? etp : tp; }
};

struct ModelCosts {
  std::vector<KernelSet> kernel_sets;  // what the Works below are made of
  std::vector<std::vector<double>> all_to_all_splits;  // per split: each ep group member's share, in group order
  // The layers' costs by kind: one kind for most models; a mixture with dense layers among its
  // expert layers (ModelSpec::dense_layers) has a second, those layers with their dense MLP.
  std::vector<LayerCosts> layer_kinds;
  // Per layer, in order: its index in layer_kinds; after the model's layers, its
  // multi-token-prediction modules' (ModelSpec::mtp_layers), each of the last layer's kind.
  std::vector<int> kind_of_layer;
  long long layer_count() const { return static_cast<long long>(kind_of_layer.size()); }
  const LayerCosts& layer(long long index) const {
    return layer_kinds[static_cast<std::size_t>(kind_of_layer[static_cast<std::size_t>(index)])];
  }
  // Of the layers [first, first + count): the parameters one rank holds (reduced over dp x cp),
  // and its local experts' (reduced over the expert-data-parallel group).
  double layer_parameters(long long first, long long count) const;
  double layer_expert_parameters(long long first, long long count) const;
  LayerList layers_from(long long first, long long count) const;
  Work embedding_forward;
  Work embedding_backward;
  // Final norm, output projection, cross-entropy; with multi-token prediction also each module's
  // next-token embedding, two norms and projection, and its norm, output projection and loss.
  Work head_forward;
  Work head_backward;
  Work head_backward_input, head_backward_weight;  // split as the layers'
  double head_weight_gradient_inputs = 0;         // what the head's W needs: its input and the logits' gradient
  double embedding_activations = 0;   // bytes kept for backward
  double head_activations = 0;
  double activation_gradient_buffer = 0;  // working gradient tensors during backward
  double tp_collective_bytes = 0;  // a layer's output, what a TP all-reduce (or SP all-gather) carries
  double embedding_parameters = 0;        // held by one rank (vocabulary split over tp)
  double head_parameters = 0;             // final norm and, if untied, the output layer (split over tp)
  double model_flops_per_micro_batch = 0; // forward + backward of the whole model, no recompute: MFU
};

// `prior`: costs of another place in the layout (another expert-parallel rank) whose kernel sets
// and splits these continue, so that both index one list.
ModelCosts compute_costs(const ModelSpec& model, long long micro_batch, long long seq_len, Precision precision,
                         Precision grad_precision, bool flash_attention, const Sharding& sharding = {},
                         const ModelCosts* prior = nullptr);

// Parameters of one layer held by one rank under tensor parallelism: matmuls and their
// column-parallel biases are split; norms, the router and row-parallel biases are replicated.
// Under expert parallelism (ep > 1) the routed experts are left out: expert_parameters_per_rank.
double layer_parameters_per_rank(const ModelSpec& model, long long tp, long long ep = 1);
// The routed experts one rank holds under expert parallelism (each expert split over etp); 0 when ep = 1.
double expert_parameters_per_rank(const ModelSpec& model, long long etp, long long ep);

// Adam step over `parameters` parameters: memory-bound traffic per parameter.
Work optimizer_step_work(double parameters, Precision precision, Precision grad_precision);

// Roofline: the slower of the math at efficiency x peak and the traffic at efficiency x HBM bandwidth.
double kernel_seconds(const Work& work, const GpuInfo& gpu, Precision precision, const ComputeEfficiency& efficiency);

} // namespace trainsim
