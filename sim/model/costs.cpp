#include "model/costs.hpp"

#include <algorithm>
#include <numeric>
#include <string>
#include <tuple>

#include "model/routing.hpp"

namespace trainsim {

double expert_parameters_per_rank(const ModelSpec& m, long long etp, long long ep) {
  if (!m.moe() || ep <= 1)
    return 0;
  const double local_experts = static_cast<double>(m.experts / ep);
  return local_experts * 3 * static_cast<double>(m.hidden) * static_cast<double>(m.expert_ffn) / static_cast<double>(etp);
}

double layer_parameters_per_rank(const ModelSpec& m, long long tp, long long ep) {
  const double t = static_cast<double>(tp);
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn);
  const double q_width = static_cast<double>(m.heads * m.head_dim);
  const double kv_width = static_cast<double>(m.kv_heads * m.head_dim);
  // Latent attention runs under tp = 1 only: its weights are all held.
  double split = m.mla() ? static_cast<double>(latent_attention_parameters(m)) : h * (q_width + 2 * kv_width) + q_width * h;
  double replicated = (m.rms_norm ? 2 : 4) * h;  // two norms
  if (m.moe()) {
    split += 3 * h * static_cast<double>(m.shared_expert_ffn);
    if (ep <= 1)
      split += static_cast<double>(m.experts) * 3 * h * static_cast<double>(m.expert_ffn);
    replicated += (h + (m.router_bias ? 1 : 0)) * static_cast<double>(m.experts) +
                  (m.shared_expert_gate ? h : 0.0);  // router (and its bias), shared gate
  } else {
    split += (m.gated_mlp ? 3 : 2) * h * f;
  }
  if (m.qk_norm && m.qk_norm_weights)
    replicated += 2 * static_cast<double>(m.head_dim);
  if (m.qkv_bias)
    split += q_width + 2 * kv_width;
  if (m.out_bias)
    replicated += h;
  if (m.mlp_bias && !m.moe()) {  // experts have no biases (count_parameters)
    split += (m.gated_mlp ? 2 : 1) * f;
    replicated += h;
  }
  return split / t + replicated;
}

namespace {

// Latent attention's widths per token (DeepSeek-V2/V3, under tp = cp = 1): what its projections
// produce, what forward keeps for backward, what a weight-gradient pass reads.
struct LatentShape {
  double q_latent = 0, kv_latent = 0, rope = 0, queries = 0, keys = 0, values = 0, up_keys_values = 0;
  double projected_per_token = 0;       // multiply-adds of the down- and up-projections
  double kept_per_token = 0;            // latents (norm and up-projection inputs), the rotary key, Q, K, V
  double weight_gradient_per_token = 0; // the projections' inputs and output gradients
  explicit LatentShape(const ModelSpec& m) {
    if (!m.mla())
      return;
    const double h = static_cast<double>(m.hidden), heads = static_cast<double>(m.heads);
    q_latent = static_cast<double>(m.q_lora_rank), kv_latent = static_cast<double>(m.kv_lora_rank);
    rope = static_cast<double>(m.qk_rope_head_dim);
    queries = keys = heads * static_cast<double>(m.head_dim);
    values = heads * static_cast<double>(m.v_head_dim);
    up_keys_values = heads * static_cast<double>(m.head_dim - m.qk_rope_head_dim + m.v_head_dim);
    const double query_projection = q_latent > 0 ? h * q_latent + q_latent * queries : h * queries;
    projected_per_token = query_projection + h * (kv_latent + rope) + kv_latent * up_keys_values;
    kept_per_token = 2 * q_latent + 2 * kv_latent + rope + queries + keys + values;
    // Inputs: the hidden state (both down-projections), the normed latents; output gradients: the
    // latents', the rotary key's, the queries' and the up-projected keys' and values'.
    weight_gradient_per_token = h + q_latent + kv_latent + q_latent + kv_latent + rope + queries + up_keys_values;
  }
};

// What decides the kernels' shapes on one rank.
struct KernelShapes {
  const ModelSpec& model;
  double b, s, t, cp, ep;
  bool sp;
  double e, g;  // bytes of an activation and of a gradient element
  bool flash_attention;
  const Sharding& sharding;
  bool fp8_gemms = false;  // memory.precision = fp8: GEMMs read fp8 operands
};

// A mixture's token copies on one rank (tokens x top-k, less the dropped): those it routes (its
// own tokens, split over tp under SP) and those its experts compute, the ep group's copies for
// them gathered over etp (the ranks splitting the same experts route different tokens).
struct ExpertTraffic {
  double kept = 1;        // of the copies, the share not dropped
  double rank_share = 1;  // of the ep group's copies, the share this rank's experts compute
  double routed = 0;
  double received = 0;
};

ExpertTraffic expert_traffic(const ModelSpec& m, double normed, const Sharding& sharding) {
  ExpertTraffic traffic;
  const double top_k = static_cast<double>(m.experts_per_token);
  const double ep = static_cast<double>(sharding.ep);
  traffic.rank_share = 1 / ep;
  if (!sharding.expert_shares.empty()) {
    traffic.kept = std::accumulate(sharding.expert_shares.begin(), sharding.expert_shares.end(), 0.0);
    traffic.rank_share = place_shares(sharding.expert_shares, sharding.ep)[static_cast<std::size_t>(sharding.ep_rank)];
  }
  traffic.routed = normed * top_k * traffic.kept;
  traffic.received = normed * static_cast<double>(sharding.expert_tp()) * top_k * ep * traffic.rank_share;
  return traffic;
}

// Appends kernels to a list; GEMMs from their shapes, the rest from the bytes they move.
class KernelList {
public:
  explicit KernelList(double element_bytes, double gradient_bytes) : e_(element_bytes), g_(gradient_bytes) {}

  // Y (m x n) = X (m x k) W (k x n): reads both operands, writes the result.
  void gemm(const std::string& name, double m, double n, double k, double batch = 1) {
    add({name, KernelKind::gemm, m, n, k, batch, 2 * m * n * k * batch, e_ * (m * k + k * n + m * n) * batch});
  }
  // A linear layer of `in` to `out` features over `tokens`: forward, or in backward the input
  // gradient (dgrad) and the weight gradient (wgrad, accumulated into the gradient buffer:
  // read and written in the gradient precision).
  // `batch` linear layers of the same shape in one launch: a mixture's local experts as one grouped
  // GEMM, `tokens` each.
  void linear(const std::string& name, double tokens, double in, double out, double batch = 1) {
    gemm(name, tokens, out, in, batch);
  }
  void linear_backward(const std::string& name, double tokens, double in, double out, double batch = 1) {
    gemm(name + ".dgrad", tokens, in, out, batch);
    add({name + ".wgrad", KernelKind::gemm, in, out, tokens, batch, 2 * in * out * tokens * batch,
         (e_ * (in * tokens + tokens * out) + 2 * g_ * in * out) * batch, 1, true});
  }
  void memory(const std::string& name, double bytes) { add({name, KernelKind::memory, 0, 0, 0, 1, 0, bytes}); }
  void add(Kernel kernel) { kernels_.push_back(std::move(kernel)); }
  void append(const std::vector<Kernel>& kernels, double share = 1) {
    for (Kernel kernel : kernels) {
      kernel.count *= share;
      kernels_.push_back(std::move(kernel));
    }
  }
  std::vector<Kernel> take() { return std::move(kernels_); }

private:
  double e_, g_;
  std::vector<Kernel> kernels_;
};

// Adds a piece's kernels to the costs' kernel sets and names them in its Work.
void attach(ModelCosts& costs, Work& work, const std::string& name, std::vector<Kernel> kernels) {
  work.kernel_set = static_cast<int>(costs.kernel_sets.size());
  costs.kernel_sets.push_back({name, std::move(kernels)});
}

// A Work of exactly its kernels' FLOPs and bytes (under the roofline too).
void work_of(ModelCosts& costs, Work& work, const std::string& name, std::vector<Kernel> kernels) {
  const KernelSet set{name, kernels};
  work = {set.flops(), set.bytes()};
  attach(costs, work, name, std::move(kernels));
}

// `kernels` cut at the named ones, in order: the run before the first name, that kernel, the run
// up to the next name, ..., the run after the last.
std::vector<std::vector<Kernel>> cut_at(const std::vector<Kernel>& kernels, const std::vector<std::string>& names) {
  std::vector<std::vector<Kernel>> parts(1);
  std::size_t next = 0;
  for (const Kernel& kernel : kernels) {
    if (next < names.size() && kernel.name == names[next]) {
      parts.push_back({kernel});
      parts.emplace_back();
      ++next;
    } else {
      parts.back().push_back(kernel);
    }
  }
  return parts;
}

// One of `chunks` slices of a GEMM along M (the tokens): each chunk reads the whole weight.
Kernel gemm_chunk(Kernel gemm, double chunks, double element_bytes) {
  gemm.name += ".chunk";
  gemm.m /= chunks;
  gemm.flops /= chunks;
  gemm.bytes = element_bytes * (gemm.m * gemm.k + gemm.k * gemm.n + gemm.m * gemm.n) * gemm.batch;
  return gemm;
}

template <typename... Parts>
std::vector<Kernel> joined(const Parts&... parts) {
  std::vector<Kernel> all;
  (all.insert(all.end(), parts.begin(), parts.end()), ...);
  return all;
}

// The parts of a sub-block whose kernels are `forward` and `backward` (in launch order) and whose
// roofline works are `whole_forward` and `whole_backward`: `column` and `row` name its
// column- and row-parallel GEMMs. Timed by kernels, a part is its kernels (a chunk re-reads
// the GEMM's weight). Timed as a roofline, the piece is one kernel of model FLOPs: a GEMM part
// takes its GEMM's FLOPs (the same in both), what lies between the rest (the attention core,
// counted whole as the roofline counts it), the memory-bound parts none, and each part the
// piece's bytes in its share of the FLOPs, so that the parts add up to the piece.
BlockParts block_parts(ModelCosts& costs, const std::string& name, const std::vector<Kernel>& forward,
                       const std::vector<Kernel>& backward, const Work& whole_forward, const Work& whole_backward,
                       const std::string& column, const std::string& row, double tp, double element_bytes) {
  const auto part = [&](const Work& whole, double flops, const std::string& part_name, std::vector<Kernel> kernels) {
    flops = std::max(0.0, flops);  // what lies between the GEMMs of an MLP is 0 up to rounding
    Work work{flops, whole.flops > 0 ? whole.bytes * flops / whole.flops : 0.0};
    attach(costs, work, name + part_name, std::move(kernels));
    return work;
  };
  const auto gemm = [&](const Work& whole, const Kernel& kernel, double chunks = 1) {
    const Kernel piece = chunks > 1 ? gemm_chunk(kernel, chunks, element_bytes) : kernel;
    return part(whole, piece.flops, "." + piece.name, {piece});
  };
  const auto f = cut_at(forward, {column, row});
  const auto b = cut_at(backward, {row + ".dgrad", row + ".wgrad", column + ".dgrad", column + ".wgrad"});
  const Kernel &column_gemm = f[1].at(0), &row_gemm = f[3].at(0);
  const Kernel &row_dgrad = b[1].at(0), &row_wgrad = b[3].at(0), &column_dgrad = b[5].at(0), &column_wgrad = b[7].at(0);
  BlockParts parts;
  parts.before = part(whole_forward, 0, ".fwd.before", f[0]);
  parts.column_chunk = gemm(whole_forward, column_gemm, tp);
  parts.between = part(whole_forward, whole_forward.flops - column_gemm.flops - row_gemm.flops, ".fwd.between", f[2]);
  parts.row_chunk = gemm(whole_forward, row_gemm, tp_overlap_pipeline_splits);
  parts.after = part(whole_forward, 0, ".fwd.after", f[4]);
  const double between_back = whole_backward.flops - row_dgrad.flops - row_wgrad.flops - column_dgrad.flops -
                              column_wgrad.flops;
  parts.after_back = part(whole_backward, 0, ".bwd.after", b[0]);
  parts.row_dgrad_chunk = gemm(whole_backward, row_dgrad, tp);
  parts.row_wgrad = gemm(whole_backward, row_wgrad);
  parts.between_back = part(whole_backward, between_back, ".bwd.between", b[4]);
  parts.to_column_back = part(whole_backward, row_dgrad.flops + row_wgrad.flops + std::max(0.0, between_back),
                              ".bwd.to-column", joined(b[0], b[1], b[3], b[4]));
  parts.to_column_input = part(whole_backward, row_dgrad.flops + std::max(0.0, between_back), ".bwd.to-column-input",
                               joined(b[0], b[1], b[4]));
  parts.column_dgrad = gemm(whole_backward, column_dgrad);
  parts.column_wgrad = gemm(whole_backward, column_wgrad);
  parts.before_back = part(whole_backward, 0, ".bwd.before", b[8]);
  return parts;
}

// A backward's kernels as its input-gradient pass and its weight-gradient pass, each in order.
std::pair<std::vector<Kernel>, std::vector<Kernel>> split_weight_gradients(const std::vector<Kernel>& backward) {
  std::pair<std::vector<Kernel>, std::vector<Kernel>> passes;
  for (const Kernel& kernel : backward)
    (kernel.weight_gradient ? passes.second : passes.first).push_back(kernel);
  return passes;
}

// A mixture-of-experts MLP's kernels after Megatron-Core's MoELayer with the all-to-all dispatcher
// and grouped GEMMs, with uniform routing: the norm; the router (a GEMM to the experts' logits,
// softmax and top-k in fp32); the permutation copying each token once per chosen expert; the
// local experts' SwiGLU as grouped GEMMs (each local expert gets the ep group's tokens x top-k /
// experts, the columns split over etp); the unpermutation summing each token's expert outputs
// weighted by its probabilities; a shared expert (a dense SwiGLU over every token, its sigmoid
// gate a GEMM to one output); the residual add. Backward reverses them, the router's backward
// included. Returns the forward and backward kernels; with ep > 1 also attaches the parts
// around the all-to-alls (MoeParts).
std::pair<std::vector<Kernel>, std::vector<Kernel>> moe_kernels(ModelCosts& costs, LayerCosts& layer, const KernelShapes& k,
                                                                const std::string& prefix) {
  const ModelSpec& m = k.model;
  const double e = k.e, t = k.t;
  const double h = static_cast<double>(m.hidden), fe = static_cast<double>(m.expert_ffn);
  const double fs = static_cast<double>(m.shared_expert_ffn);
  const double experts = static_cast<double>(m.experts);
  const double tokens = k.b * k.s / k.cp;
  const double normed = k.sp ? tokens / t : tokens;
  const ExpertTraffic traffic = expert_traffic(m, normed, k.sharding);
  const double routed = traffic.routed;      // copies this rank sends to the experts
  const double assigned = traffic.received;  // copies this rank's experts compute (after the etp gather)
  const double et = static_cast<double>(k.sharding.expert_tp());
  const double local_experts = experts / k.ep;
  const double per_expert = assigned / local_experts;  // a grouped GEMM's tokens per expert, on average
  const auto list = [&] { return KernelList(e, k.g); };

  KernelList dispatch = list(), compute = list(), combine = list();
  dispatch.memory("norm", 2 * e * normed * h);
  dispatch.linear("router", normed, h, experts);
  dispatch.memory("router.softmax-topk", 2 * 4 * normed * experts);
  // fp8 dispatch (DeepSeek-V3): each token quantized in 1 x 128 tiles (a byte per element, an
  // fp32 scale per tile) before its copies are sent, the copies turned back into the activations'
  // precision for the experts' GEMMs unless those run in fp8.
  const double fp8_bytes = 1 + 4.0 / 128;
  const double dispatched = k.sharding.fp8_dispatch ? fp8_bytes : e;  // bytes per element of a copy sent
  if (k.sharding.fp8_dispatch)
    dispatch.memory("dispatch-quantize", (e + fp8_bytes) * normed * h);
  dispatch.memory("permute", dispatched * h * (normed + routed));
  if (k.sharding.fp8_dispatch && !k.fp8_gemms)
    compute.memory("dispatch-dequantize", (fp8_bytes + e) * assigned * h);
  compute.linear("fc1", per_expert, h, 2 * fe / et, local_experts);
  compute.memory("swiglu", 3 * e * assigned * fe / et);
  compute.linear("fc2", per_expert, fe / et, h, local_experts);
  combine.memory("unpermute", e * h * (routed + normed));
  // The shared expert sees every token (gathered over tp, its columns split like a dense MLP's).
  KernelList shared = list(), shared_back = list();
  if (fs > 0) {
    shared.linear("shared.fc1", tokens, h, 2 * fs / t);
    shared.memory("shared.swiglu", 3 * e * tokens * fs / t);
    shared.linear("shared.fc2", tokens, fs / t, h);
    if (m.shared_expert_gate) {  // on the rank's own tokens: the output is reduce-scattered first
      shared.linear("shared.gate", normed, h, 1);
      shared.memory("shared.sigmoid-mul", 3 * e * normed * h);
      shared_back.memory("shared.sigmoid-mul.bwd", 4 * e * normed * h);
      shared_back.linear_backward("shared.gate", normed, h, 1);
    }
    shared_back.linear_backward("shared.fc2", tokens, fs / t, h);
    shared_back.memory("shared.swiglu.bwd", 5 * e * tokens * fs / t);
    shared_back.linear_backward("shared.fc1", tokens, h, 2 * fs / t);
  }
  KernelList residual = list(), residual_back = list();
  residual.memory("bias-dropout-add", 3 * e * normed * h);
  residual_back.memory("bias-dropout-add.bwd", 2 * e * normed * h);

  KernelList combine_back = list(), compute_back = list(), dispatch_back = list();
  // Reads the output gradient and the experts' outputs (for the probabilities' gradient), writes
  // each copy's gradient.
  combine_back.memory("unpermute.bwd", e * h * (normed + 2 * routed));
  compute_back.linear_backward("fc2", per_expert, fe / et, h, local_experts);
  compute_back.memory("swiglu.bwd", 5 * e * assigned * fe / et);
  compute_back.linear_backward("fc1", per_expert, h, 2 * fe / et, local_experts);
  dispatch_back.memory("permute.bwd", e * h * (routed + normed));
  dispatch_back.memory("router.softmax-topk.bwd", 3 * 4 * normed * experts);
  dispatch_back.linear_backward("router", normed, h, experts);
  dispatch_back.memory("norm.bwd", 4 * e * normed * h);

  const std::vector<Kernel> dispatch_k = dispatch.take(), compute_k = compute.take(), unpermute_k = combine.take();
  const std::vector<Kernel> unpermute_back_k = combine_back.take(), compute_back_k = compute_back.take(),
                            dispatch_back_k = dispatch_back.take();
  const std::vector<Kernel> shared_k = shared.take(), shared_back_k = shared_back.take();
  const std::vector<Kernel> residual_k = residual.take(), residual_back_k = residual_back.take();
  const std::vector<Kernel> combine_k = joined(unpermute_k, residual_k);
  const std::vector<Kernel> combine_back_k = joined(residual_back_k, unpermute_back_k);
  if (k.ep > 1) {
    MoeParts& parts = layer.moe;
    const auto piece = [&](Work& work, const std::string& name, const std::vector<Kernel>& kernels) {
      work_of(costs, work, name, kernels);
    };
    // Under uneven routing each place in the ep group has its own: named with the place.
    const std::string place =
        k.sharding.expert_shares.empty() ? "" : "@ep" + std::to_string(k.sharding.ep_rank);
    piece(parts.dispatch, prefix + ".moe.dispatch" + place, dispatch_k);
    piece(parts.experts, prefix + ".moe.experts" + place, compute_k);
    piece(parts.combine, prefix + ".moe.combine" + place, combine_k);
    piece(parts.combine_back, prefix + ".moe.combine.bwd" + place, combine_back_k);
    piece(parts.experts_back, prefix + ".moe.experts.bwd" + place, compute_back_k);
    piece(parts.dispatch_back, prefix + ".moe.dispatch.bwd" + place, dispatch_back_k);
    if (!shared_k.empty()) {
      piece(parts.shared, prefix + ".moe.shared", shared_k);
      piece(parts.shared_back, prefix + ".moe.shared.bwd", shared_back_k);
    }
    // A backward split in two: each part's input gradients, and all their weight gradients as one pass.
    const auto input_of = [&](Work& work, const std::string& name, const std::vector<Kernel>& kernels) {
      piece(work, name + ".input", split_weight_gradients(kernels).first);
    };
    input_of(parts.combine_back_input, prefix + ".moe.combine.bwd" + place, combine_back_k);
    input_of(parts.experts_back_input, prefix + ".moe.experts.bwd" + place, compute_back_k);
    input_of(parts.dispatch_back_input, prefix + ".moe.dispatch.bwd" + place, dispatch_back_k);
    if (!shared_k.empty())
      input_of(parts.shared_back_input, prefix + ".moe.shared.bwd", shared_back_k);
    piece(parts.backward_weight, prefix + ".moe.bwd.weight" + place,
          split_weight_gradients(joined(shared_back_k, combine_back_k, compute_back_k, dispatch_back_k)).second);
    parts.to_experts_bytes = e * routed * h;
    parts.forward_dispatch_ratio = k.sharding.fp8_dispatch ? fp8_bytes / e : 1.0;
    parts.from_experts_bytes = e * assigned / et * h;
    parts.gathered_bytes = e * assigned * h;
    if (k.sharding.dispatcher == TokenDispatcher::all_gather)
      parts.ep_gathered_bytes = e * normed * h * static_cast<double>(k.sharding.ep);
    if (k.sharding.dispatcher == TokenDispatcher::deepep) {
      // Each token goes once to each node its copies reach (over the rail, to the GPU of this
      // rank's index there) and from there once to each GPU they reach: every node's rail rank
      // forwards the tokens of the group's nodes to each GPU of its node, its own included.
      const long long nodes = k.sharding.ep_nodes, per_node = k.sharding.ep / nodes;
      const auto reached = [&](long long units) { return expected_units_reached(router_of(m), units); };
      if (nodes > 1)
        parts.rail_bytes = e * normed * h * reached(nodes);
      if (per_node > 1)
        parts.node_bytes = e * normed * h * reached(k.sharding.ep);
    }
    if (!k.sharding.expert_shares.empty()) {
      // Every sender's copies divide over the ep group as the ranks' experts' shares.
      std::vector<double> split = place_shares(k.sharding.expert_shares, k.sharding.ep);
      for (double& share : split)
        share /= traffic.kept;
      parts.to_experts_split = static_cast<int>(costs.all_to_all_splits.size());
      costs.all_to_all_splits.push_back(std::move(split));
    }
  }
  // As one MLP (without expert parallelism): the shared expert between the unpermutation and the
  // residual add.
  return {joined(dispatch_k, compute_k, unpermute_k, shared_k, residual_k),
          joined(residual_back_k, shared_back_k, unpermute_back_k, compute_back_k, dispatch_back_k)};
}

// The kernels of one layer on one rank, in launch order, named under `prefix`, after
// Megatron-Core's transformer layer: fused norms, bias-dropout-add and activation kernels, one
// kernel per GEMM (bias in its epilogue), and in backward an input-gradient and a weight-gradient
// GEMM per linear layer. Elementwise kernels read their inputs and write their outputs once
// (masks one byte per element); backward ones also read what they saved.
void describe_layer_kernels(ModelCosts& costs, LayerCosts& layer, const KernelShapes& k, const std::string& prefix) {
  const ModelSpec& m = k.model;
  const double e = k.e, t = k.t, cp = k.cp;
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn);
  const double q = static_cast<double>(m.heads * m.head_dim), kv = static_cast<double>(m.kv_heads * m.head_dim);
  const double d = static_cast<double>(m.head_dim), local_heads = static_cast<double>(m.heads) / t;
  const double tokens = k.b * k.s / cp;
  const double normed = k.sp ? tokens / t : tokens;  // norms, dropout and residual adds: split over tp only with SP
  const double up = f * (m.gated_mlp ? 2 : 1) / t;   // first MLP linear's outputs (gate and up)
  const double mask = m.hidden_dropout ? normed * h : 0;
  const double queries = k.s / cp;
  const double queries_and_keys = tokens * (q + kv) / t;  // this rank's elements of Q and K (the norm's and rotary's)
  const double window = m.attention_window > 0 && m.attention_window < k.s ? static_cast<double>(m.attention_window) : k.s;
  const auto list = [&] { return KernelList(e, k.g); };

  // Attention: input norm, QKV projection, rotary embedding of Q and K, the core, output
  // projection, bias-dropout-add onto the residual.
  KernelList pre = list(), core = list(), post = list();
  KernelList post_back = list(), pre_back = list();
  pre.memory("norm", 2 * e * normed * h);
  const LatentShape latent(m);
  const double dv = m.mla() ? static_cast<double>(m.v_head_dim) : d;  // a value's width
  const double values = m.mla() ? latent.values : q;
  if (m.mla()) {
    // Latent attention (tp = 1): the queries' down-projection, norm and up-projection (or one
    // projection), the keys' and values' down-projection (with the rotary key), norm and
    // up-projection, then the rotary embedding of the queries' and the shared key's rotary parts
    // and each head's key assembled from its own part and the shared one.
    if (latent.q_latent > 0) {
      pre.linear("q-down", tokens, h, latent.q_latent);
      pre.memory("q-norm", 2 * e * tokens * latent.q_latent);
      pre.linear("q-up", tokens, latent.q_latent, latent.queries);
    } else {
      pre.linear("q", tokens, h, latent.queries);
    }
    pre.linear("kv-down", tokens, h, latent.kv_latent + latent.rope);
    pre.memory("kv-norm", 2 * e * tokens * latent.kv_latent);
    pre.linear("kv-up", tokens, latent.kv_latent, latent.up_keys_values);
    const double rotated = static_cast<double>(m.heads) * latent.rope + latent.rope;
    pre.memory("rotary", 2 * e * tokens * rotated);
    pre.memory("key-assemble", 2 * e * tokens * latent.keys);
    pre_back.memory("key-assemble.bwd", 2 * e * tokens * latent.keys);
    pre_back.memory("rotary.bwd", 2 * e * tokens * rotated);
    pre_back.linear_backward("kv-up", tokens, latent.kv_latent, latent.up_keys_values);
    pre_back.memory("kv-norm.bwd", 4 * e * tokens * latent.kv_latent);
    pre_back.linear_backward("kv-down", tokens, h, latent.kv_latent + latent.rope);
    if (latent.q_latent > 0) {
      pre_back.linear_backward("q-up", tokens, latent.q_latent, latent.queries);
      pre_back.memory("q-norm.bwd", 4 * e * tokens * latent.q_latent);
      pre_back.linear_backward("q-down", tokens, h, latent.q_latent);
    } else {
      pre_back.linear_backward("q", tokens, h, latent.queries);
    }
  } else {
    pre.linear("qkv", tokens, h, (q + 2 * kv) / t);
    // Qwen3's RMSNorm of each head's queries and keys (Llama 4's weightless L2 norm), before the
    // rotary embedding; its backward as the other norms' (q-norm.bwd, kv-norm.bwd).
    if (m.qk_norm)
      pre.memory("qk-norm", 2 * e * queries_and_keys);
    if (!m.learned_positions) {
      pre.memory("rotary", 2 * e * queries_and_keys);
      pre_back.memory("rotary.bwd", 2 * e * queries_and_keys);
    }
    if (m.qk_norm)
      pre_back.memory("qk-norm.bwd", 4 * e * queries_and_keys);
    pre_back.linear_backward("qkv", tokens, h, (q + 2 * kv) / t);
  }
  // The norm's backward reads its input and the output gradient, adds the residual's gradient
  // and writes the input gradient.
  pre_back.memory("norm.bwd", 4 * e * normed * h);
  KernelList core_back = list();
  if (k.flash_attention) {
    // Causal attention over `window` keys: a query sees half of them on average (the first
    // window's worth of a sliding window, all of them afterwards); FlashAttention's backward
    // recomputes the scores: 2.5 times the forward's FLOPs (FlashAttention-2, section 3.1.2).
    const double seen = window < k.s ? window * (1 - window / (2 * k.s)) : k.s / 2;
    const double flops = 2 * k.b * local_heads * queries * seen * (d + dv);
    // Reads Q, K and V, writes the output (latent attention: K as wide as Q, V narrower).
    const double moved = m.mla() ? e * tokens * (latent.queries + latent.keys + 2 * values) : e * tokens * (2 * q + 2 * kv) / t;
    core.add({"flash-attention", KernelKind::attention_forward, queries, window, d, k.b * local_heads, flops, moved});
    core_back.add({"flash-attention.bwd", KernelKind::attention_backward, queries, window, d, k.b * local_heads,
                   2.5 * flops, 2 * moved});
  } else {
    // Eager attention computes every score, masked or not.
    const double scores = k.b * local_heads * queries * k.s;
    const double batch = k.b * local_heads;
    core.gemm("scores", queries, k.s, d, batch);
    if (m.score_softcap)
      core.memory("score-softcap", 2 * e * scores);
    core.memory("scale-mask-softmax", 2 * e * scores);
    if (m.attention_dropout)
      core.memory("attention-dropout", (2 * e + 1) * scores);
    core.gemm("context", queries, dv, k.s, batch);
    core_back.gemm("context.dgrad", queries, k.s, dv, batch);
    core_back.gemm("context.wgrad", k.s, dv, queries, batch);
    if (m.attention_dropout)
      core_back.memory("attention-dropout.bwd", (2 * e + 1) * scores);
    core_back.memory("softmax.bwd", 3 * e * scores);
    if (m.score_softcap)
      core_back.memory("score-softcap.bwd", 3 * e * scores);
    core_back.gemm("scores.dgrad", queries, d, k.s, batch);
    core_back.gemm("scores.wgrad", k.s, d, queries, batch);
  }
  post.linear("out", tokens, values / t, h);
  if (m.sandwich_norms)
    post.memory("post-norm", 2 * e * normed * h);
  post.memory("bias-dropout-add", 3 * e * normed * h + mask);

  post_back.memory("bias-dropout-add.bwd", 2 * e * normed * h + mask);
  if (m.sandwich_norms)
    post_back.memory("post-norm.bwd", 4 * e * normed * h);
  post_back.linear_backward("out", tokens, values / t, h);

  // MLP: norm, first linear (gate and up), activation, second linear, bias-dropout-add.
  KernelList mlp = list(), mlp_back = list();
  std::vector<Kernel> mlp_k, mlp_back_k;
  if (m.moe()) {
    std::tie(mlp_k, mlp_back_k) = moe_kernels(costs, layer, k, prefix);
  } else {
    mlp.memory("norm", 2 * e * normed * h);
    mlp.linear("fc1", tokens, h, up);
    mlp.memory(m.gated_mlp ? "swiglu" : "gelu", (m.gated_mlp ? 3 : 2) * e * tokens * f / t);
    mlp.linear("fc2", tokens, f / t, h);
    if (m.sandwich_norms)
      mlp.memory("post-norm", 2 * e * normed * h);
    mlp.memory("bias-dropout-add", 3 * e * normed * h + mask);
    mlp_back.memory("bias-dropout-add.bwd", 2 * e * normed * h + mask);
    if (m.sandwich_norms)
      mlp_back.memory("post-norm.bwd", 4 * e * normed * h);
    mlp_back.linear_backward("fc2", tokens, f / t, h);
    mlp_back.memory(m.gated_mlp ? "swiglu.bwd" : "gelu.bwd", (m.gated_mlp ? 5 : 3) * e * tokens * f / t);
    mlp_back.linear_backward("fc1", tokens, h, up);
    mlp_back.memory("norm.bwd", 4 * e * normed * h);
    mlp_k = mlp.take();
    mlp_back_k = mlp_back.take();
  }

  const std::vector<Kernel> pre_k = pre.take(), core_k = core.take(), post_k = post.take();
  const std::vector<Kernel> core_back_k = core_back.take(), post_back_k = post_back.take(), pre_back_k = pre_back.take();
  attach(costs, layer.attention_forward, prefix + ".attention.fwd", joined(pre_k, core_k, post_k));
  attach(costs, layer.mlp_forward, prefix + ".mlp.fwd", mlp_k);
  attach(costs, layer.forward, prefix + ".fwd", joined(pre_k, core_k, post_k, mlp_k));
  attach(costs, layer.mlp_backward, prefix + ".mlp.bwd", mlp_back_k);
  attach(costs, layer.attention_backward, prefix + ".attention.bwd", joined(post_back_k, core_back_k, pre_back_k));
  if (m.moe() && k.ep > 1) {  // a mixture's split backward: the attention's passes apart from the MLP's
    auto [attention_input_k, attention_weight_k] = split_weight_gradients(joined(post_back_k, core_back_k, pre_back_k));
    attach(costs, layer.attention_backward_input, prefix + ".attention.bwd.input", std::move(attention_input_k));
    attach(costs, layer.attention_backward_weight, prefix + ".attention.bwd.weight", std::move(attention_weight_k));
  }
  const std::vector<Kernel> layer_back_k = joined(mlp_back_k, post_back_k, core_back_k, pre_back_k);
  attach(costs, layer.backward, prefix + ".bwd", layer_back_k);
  auto [layer_input_k, layer_weight_k] = split_weight_gradients(layer_back_k);
  attach(costs, layer.backward_input, prefix + ".bwd.input", std::move(layer_input_k));
  attach(costs, layer.backward_weight, prefix + ".bwd.weight", std::move(layer_weight_k));
  attach(costs, layer.attention_core, prefix + ".attention-core.fwd", core_k);
  // Op-level selective checkpointing re-runs K's share of the QKV projection, the output and
  // up projections and the elementwise kernels up to the last tensor backward needs (with
  // FlashAttention the core is saved, without it re-run); the roofline takes their bytes.
  KernelList op_recompute = list();
  op_recompute.memory("norm", 2 * e * normed * h);
  op_recompute.linear("k", tokens, h, kv / t);
  if (m.qk_norm)
    op_recompute.memory("qk-norm", 2 * e * queries_and_keys);
  if (!m.learned_positions)
    op_recompute.memory("rotary", 2 * e * queries_and_keys);
  if (!k.flash_attention)
    op_recompute.append(core_k);
  op_recompute.append(post_k);
  op_recompute.memory("norm", 2 * e * normed * h);
  if (m.gated_mlp) {
    op_recompute.linear("up", tokens, h, f / t);
    op_recompute.memory("swiglu", 3 * e * tokens * f / t);
  } else {
    op_recompute.memory("gelu", 2 * e * tokens * f / t);
  }
  const std::vector<Kernel> op_recompute_k = op_recompute.take();
  layer.op_recompute.bytes = KernelSet{"", op_recompute_k}.bytes();
  attach(costs, layer.op_recompute, prefix + ".op-recompute", op_recompute_k);
  if (t > 1) {
    layer.attention_parts = block_parts(costs, prefix + ".attention", joined(pre_k, core_k, post_k),
                                        joined(post_back_k, core_back_k, pre_back_k), layer.attention_forward,
                                        layer.attention_backward, "qkv", "out", t, e);
    layer.mlp_parts = block_parts(costs, prefix + ".mlp", mlp_k, mlp_back_k, layer.mlp_forward, layer.mlp_backward, "fc1",
                                  "fc2", t, e);
  }
  if (cp > 1) {
    // Ring attention: the local block of the core runs before K and V arrive; the other cp - 1
    // blocks and what follows the core run after.
    const auto split = [&](const std::string& name, const std::vector<Kernel>& before, const std::vector<Kernel>& core,
                           const std::vector<Kernel>& after, Work& local, Work& ring) {
      KernelList local_kernels = list(), ring_kernels = list();
      local_kernels.append(before);
      local_kernels.append(core, 1 / cp);
      ring_kernels.append(core, (cp - 1) / cp);
      ring_kernels.append(after);
      attach(costs, local, name + ".local", local_kernels.take());
      attach(costs, ring, name + ".ring", ring_kernels.take());
    };
    split(prefix + ".attention.fwd", pre_k, core_k, post_k, layer.attention_forward_local, layer.attention_forward_ring);
    split(prefix + ".attention.bwd", post_back_k, core_back_k, pre_back_k, layer.attention_backward_local,
          layer.attention_backward_ring);
  }
}

// The embedding's and the head's kernels on one rank, in launch order.
void describe_edge_kernels(ModelCosts& costs, const KernelShapes& k) {
  const ModelSpec& m = k.model;
  const double e = k.e, t = k.t, cp = k.cp;
  const double h = static_cast<double>(m.hidden);
  const double tokens = k.b * k.s / cp;
  const double normed = k.sp ? tokens / t : tokens;
  const auto list = [&] { return KernelList(e, k.g); };

  // Embedding: a vocabulary-parallel lookup writes each token's row (and adds learned
  // positions); backward scatters the rows' gradients into the embedding's gradient.
  const double rows = tokens * h * (m.learned_positions ? 2 : 1);
  KernelList embedding = list(), embedding_back = list();
  embedding.memory("embedding", 2 * e * rows);
  embedding_back.memory("embedding.bwd", (e + 2 * k.g) * rows);
  attach(costs, costs.embedding_forward, "embedding.fwd", embedding.take());
  attach(costs, costs.embedding_backward, "embedding.bwd", embedding_back.take());

  // Head: final norm, the output layer split over the vocabulary, and Megatron's
  // vocabulary-parallel cross-entropy: logits cast to fp32, a pass for their maximum and sum of
  // exponentials, the fp32 softmax kept for backward; backward writes softmax - one-hot.
  const double vocab = static_cast<double>(m.padded_vocab) / t;
  const double logits = tokens * vocab;
  KernelList head = list(), head_back = list();
  const auto output = [&](const std::string& prefix) {
    head.memory(prefix + "final-norm", 2 * e * normed * h);
    head.linear(prefix + "logits", tokens, h, vocab);
    if (m.logit_softcap)  // cap x tanh(logits / cap): reads the logits, writes the capped ones
      head.memory(prefix + "logit-softcap", 2 * e * logits);
    head.memory(prefix + "cross-entropy", (e + 3 * 4) * logits);
  };
  const auto output_backward = [&](const std::string& prefix) {
    head_back.memory(prefix + "cross-entropy.bwd", (4 + e) * logits);
    if (m.logit_softcap)  // reads the gradient and the capped logits, writes the logits' gradient
      head_back.memory(prefix + "logit-softcap.bwd", 3 * e * logits);
    head_back.linear_backward(prefix + "logits", tokens, h, vocab);
    head_back.memory(prefix + "final-norm.bwd", 4 * e * normed * h);
  };
  output("");
  output_backward("");
  // Multi-token prediction (Megatron-Core's MultiTokenPredictionLayer): each module looks up the
  // next token's embedding, normalises it and the last layer's output (enorm, hnorm), projects
  // both (2h -> h), runs its layer (a layer op of its own) and the shared output layer and loss.
  for (long long d = 0; d < m.mtp_layers; ++d) {
    const std::string prefix = "mtp" + (m.mtp_layers > 1 ? std::to_string(d) : std::string()) + ".";
    head.memory(prefix + "embedding", 2 * e * tokens * h);
    head.memory(prefix + "norms", 2 * 2 * e * normed * h);
    head.linear(prefix + "eh-proj", tokens, 2 * h, h / t);
    output(prefix);
    output_backward(prefix);
    head_back.linear_backward(prefix + "eh-proj", tokens, 2 * h, h / t);
    head_back.memory(prefix + "norms.bwd", 2 * 4 * e * normed * h);
    head_back.memory(prefix + "embedding.bwd", (e + 2 * k.g) * tokens * h);
  }
  attach(costs, costs.head_forward, "head.fwd", head.take());
  const std::vector<Kernel> head_back_k = head_back.take();
  attach(costs, costs.head_backward, "head.bwd", head_back_k);
  auto [head_input_k, head_weight_k] = split_weight_gradients(head_back_k);
  attach(costs, costs.head_backward_input, "head.bwd.input", std::move(head_input_k));
  attach(costs, costs.head_backward_weight, "head.bwd.weight", std::move(head_weight_k));
}

Work scaled(const Work& work, double share) { return {work.flops * share, work.bytes * share}; }

// One kind of layer on one rank: its works, activations and parameters, its kernels named under
// `prefix`. Returns its forward model FLOPs, the whole layer on the whole micro-batch.
double layer_costs(ModelCosts& costs, LayerCosts& layer, const ModelSpec& m, long long micro_batch, long long seq_len,
                   Precision precision, Precision grad_precision, bool flash_attention, const Sharding& sharding,
                   const std::string& prefix) {
  const double t = static_cast<double>(sharding.tp), cp = static_cast<double>(sharding.cp);
  const double b = static_cast<double>(micro_batch), s = static_cast<double>(seq_len);
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn);
  const double heads = static_cast<double>(m.heads);
  const double q_width = static_cast<double>(m.heads * m.head_dim);
  const double kv_width = static_cast<double>(m.kv_heads * m.head_dim);
  const double e = bytes_per_element(precision);        // activations and parameters
  const double g = bytes_per_element(grad_precision);   // gradients
  const double tokens = b * s / cp;                      // this rank's share of the sequence
  const double mask = 1.0;                               // dropout masks are one byte per element
  const double unsplit = sharding.sp ? t : 1.0;          // sequence parallelism splits the rest over tp

  // Queries are local, keys and values span the whole sequence (gathered around the CP ring).
  // Latent attention (tp = cp = 1) projects through its latents; its values are v_head_dim wide.
  const LatentShape latent(m);
  const double v_width = m.mla() ? latent.values : q_width;
  const double qkv_flops = m.mla() ? 2 * tokens * latent.projected_per_token : 2 * tokens * h * (q_width + 2 * kv_width) / t;
  // A sliding window of w < s keys: a query sees w (1 - w / 2s) keys on average instead of s / 2;
  // FlashAttention skips the blocks outside it, eager attention computes every score anyway.
  const double w = static_cast<double>(m.attention_window);
  const double windowed = w > 0 && w < s ? w * (1 - w / (2 * s)) / (s / 2) : 1.0;
  const double full_core_flops = m.mla() ? 2 * b * s * s * (q_width + v_width) : 4 * b * (s / cp) * s * q_width / t;
  const double core_model_flops = windowed * full_core_flops;
  const double core_flops = flash_attention ? core_model_flops : full_core_flops;
  const double out_flops = 2 * tokens * v_width * h / t;
  double mlp_flops = 2 * tokens * h * f * (m.gated_mlp ? 3 : 2) / t;
  // A mixture: the router on every token, top-k experts per token, the shared experts (model FLOPs,
  // the router's counted once over tp however many ranks run it).
  const double top_k = static_cast<double>(m.experts_per_token), fe = static_cast<double>(m.expert_ffn);
  const double fs = static_cast<double>(m.shared_expert_ffn);
  // The roofline's MLP work counts the copies this rank's experts really compute (dropped ones
  // not, a busy place's more); the model FLOPs of MFU count top-k per token.
  double mlp_work_flops = mlp_flops;
  const ExpertTraffic traffic = m.moe() ? expert_traffic(m, tokens / unsplit, sharding) : ExpertTraffic{};
  const double et = static_cast<double>(sharding.expert_tp());
  if (m.moe()) {
    // The experts' copies: tokens x top-k of the model's, split over tp as the rest; or the copies
    // this rank's experts compute, their GEMMs split over etp.
    const auto mixture_flops = [&](double expert_flops) {
      return 2 * tokens * h * static_cast<double>(m.experts) / t + expert_flops + 2 * tokens * h * fs * 3 / t +
             (m.shared_expert_gate ? 2 * tokens * h / t : 0.0);
    };
    mlp_flops = mixture_flops(2 * tokens * top_k * h * fe * 3 / t);
    mlp_work_flops = mixture_flops(2 * traffic.received * h * fe * 3 / et);
  }

  // Korthikanti et al. Table 2 term by term; GQA shrinks K and V, SwiGLU keeps gate and up.
  // Tensor-parallel terms are split over t; the rest over t only with sequence parallelism.
  LayerActivations& act = layer.activations;
  double scores = 0;
  if (!flash_attention) {
    const double score_elements = heads / t * (s / cp) * s * b;
    scores = e * score_elements;                         // softmax output
    if (m.score_softcap)
      scores += e * score_elements;                      // the capped scores, for tanh's gradient
    if (m.attention_dropout)
      scores += mask * score_elements + e * score_elements;  // dropout mask and output
  }
  const double hidden_masks = m.hidden_dropout ? mask * tokens * h / unsplit : 0.0;
  const double attention = m.mla() ? e * tokens * (h + latent.kept_per_token + v_width) + hidden_masks + scores
                                   : e * tokens * h / unsplit            // QKV projection input
                                         + e * tokens * q_width / t      // Q
                                         + 2 * e * tokens * kv_width / t // K and V
                                         + e * tokens * q_width / t      // output projection input
                                         + hidden_masks + scores;
  double mlp = e * tokens * h / unsplit                    // first linear input
               + e * tokens * f * (m.gated_mlp ? 2 : 1) / t  // activation function input
               + e * tokens * f / t                        // second linear input
               + hidden_masks;
  if (m.moe()) {
    // The router's input and fp32 probabilities; per routed copy of a token (tokens x top-k on
    // this rank's experts, gathered over etp): the experts' input, SwiGLU's input, the second
    // linear's input, and back on the sending rank the experts' outputs the weighted sum reads;
    // the shared expert as a dense MLP.
    const double routed = traffic.routed, assigned = traffic.received;
    mlp = e * tokens * h / unsplit + 4 * tokens / unsplit * static_cast<double>(m.experts) +
          e * assigned * (h + 3 * fe / et) + e * routed * h + (fs > 0 ? e * tokens * 3 * fs / t : 0.0) +
          (m.shared_expert_gate ? e * tokens / unsplit * h : 0.0) + hidden_masks;  // the gate multiply's input
  }
  const double norms = (m.sandwich_norms ? 4 : 2) * e * tokens * h / unsplit;  // each norm's input
  act.input = e * tokens * h / unsplit;
  act.attention_core = scores;
  act.total = attention + mlp + norms;
  // torchtitan's op-level selective activation checkpointing (selective_ac_option = "op",
  // torchtitan/distributed/activation_checkpoint.py): a checkpointed block keeps its input and
  // the outputs of the ops on its save list: FlashAttention (output and fp32 log-sum-exp),
  // reduce-scatters, and every other matmul. A block's matmuls run in the order wq, wk, wv, wo,
  // then w1, w3, w2 (gated: gate, up, down) or fc1, fc2, so it keeps Q, V, the gate (or fc1's
  // output) and, gated, the down projection's output; it recomputes K, the output projection,
  // the up projection and the elementwise kernels, stopping once backward's tensors are back
  // (non-reentrant checkpointing's early stop: the last matmul and residual add are not re-run).
  const double queries_kept = e * tokens * q_width / t, values_kept = e * tokens * kv_width / t;
  const double mlp_kept_output = e * tokens * f / t;  // the gate, or fc1's output
  double attention_output = 0;
  if (flash_attention)
    attention_output = e * tokens * q_width / t + 4 * tokens * heads / t;
  act.op_saved = act.input + queries_kept + values_kept + attention_output + mlp_kept_output +
                 (m.gated_mlp ? e * tokens * h : 0.0) + (sharding.sp ? 2 * e * tokens * h / t : 0.0);
  // Of what a layer keeps without recompute, all but the input, Q, V, the attention's output and
  // the gate (or fc1's output) comes back in backward.
  const double kept_in_total = act.input + queries_kept + values_kept + (flash_attention ? e * tokens * q_width / t : 0.0) +
                               mlp_kept_output;
  act.op_rematerialized = std::max(0.0, act.total - kept_in_total);

  // The roofline's work (compute.model = roofline): model FLOPs at a fixed fraction of peak, and
  // HBM traffic: forward reads the weights and writes each kept activation once; backward reads
  // the weights and the activations, writes activation gradients of about the same size, and
  // reads and writes (accumulates) the weight gradients. Backward's parts take the forward's
  // shares; under context parallelism the attention's ring part is the (cp - 1) / cp of its core
  // that waits for the other ranks' K and V.
  layer.parameters = layer_parameters_per_rank(m, sharding.tp, sharding.ep);
  layer.expert_parameters = expert_parameters_per_rank(m, sharding.expert_tp(), sharding.ep);
  layer.routed = m.moe();
  const double attention_share = (qkv_flops + core_flops + out_flops) / (qkv_flops + core_flops + out_flops + mlp_flops);
  const double attention_kept = attention + norms / 2, mlp_kept = mlp + norms / 2;
  double attention_weights = layer.parameters * attention_share * e;
  double mlp_weights = layer.parameters * (1 - attention_share) * e;
  const double held = layer.parameters + layer.expert_parameters;
  if (m.moe()) {  // a mixture's MLP holds most weights for few FLOPs: each part reads its own
    const double attention_parameters =
        m.mla() ? static_cast<double>(latent_attention_parameters(m))
                : (h * (q_width + 2 * kv_width) + q_width * h + (m.qkv_bias ? q_width + 2 * kv_width : 0.0)) / t;
    attention_weights = attention_parameters * e;
    mlp_weights = (held - attention_parameters) * e;
  }
  layer.attention_forward = {qkv_flops + core_flops + out_flops, attention_weights + attention_kept};
  layer.mlp_forward = {mlp_work_flops, mlp_weights + mlp_kept};
  layer.forward = {layer.attention_forward.flops + layer.mlp_forward.flops,
                   layer.attention_forward.bytes + layer.mlp_forward.bytes};
  layer.backward.flops = 2 * layer.forward.flops;
  layer.backward.bytes = held * e + 2 * act.total + 2 * held * g;
  const double mlp_share = layer.mlp_forward.flops / layer.forward.flops;
  layer.mlp_backward = scaled(layer.backward, mlp_share);
  layer.attention_backward = scaled(layer.backward, 1 - mlp_share);
  // A mixture's split backward under expert parallelism: the attention's W is its linear layers'
  // weight gradients (their forward FLOPs) with their share of the bytes, B the rest, so that the
  // roofline's two passes add up to the whole.
  layer.attention_backward_weight.flops = qkv_flops + out_flops;
  layer.attention_backward_weight.bytes =
      layer.attention_backward.bytes * layer.attention_backward_weight.flops / layer.attention_backward.flops;
  layer.attention_backward_input = {layer.attention_backward.flops - layer.attention_backward_weight.flops,
                                    layer.attention_backward.bytes - layer.attention_backward_weight.bytes};
  // Split backward: W is the linear layers' weight-gradient GEMMs (as many FLOPs as their
  // forward); it reads their inputs and output gradients and accumulates the weight gradients.
  // Transformer Engine's delay_wgrad_compute keeps both as the GEMMs use them (wgrad_store): under
  // SP the column-parallel layers' inputs and the row-parallel layers' output gradients gathered.
  act.weight_gradient_inputs = e * tokens * (2 * h + q_width / t + f / t)  // inputs of QKV, FC1; out, FC2
                               + e * tokens * ((q_width + 2 * kv_width) / t + f * (m.gated_mlp ? 2 : 1) / t)  // of QKV, FC1
                               + 2 * e * tokens * h;  // output gradients of the out projection and FC2
  // Latent attention: each projection's input and output gradient, the output projection's too.
  const double latent_weight_gradient_inputs = e * tokens * (latent.weight_gradient_per_token + v_width + h);
  if (m.mla())
    act.weight_gradient_inputs = latent_weight_gradient_inputs + e * tokens * (h + f) + e * tokens * f * 2 + e * tokens * h;
  if (m.moe()) {
    // The attention's as above; the router's input and logits' gradient on this rank's tokens; per
    // copy the experts computed, the first linear's input and output gradient (gate and up) and
    // the second's input and output gradient; the shared expert as a dense MLP.
    // (Without expert parallelism under tp the router's weight gradient stays in B, with the
    // dense parts' first piece; the shared gate reads the rank's own tokens.)
    const bool router_in_w = sharding.ep > 1 || sharding.tp == 1;
    act.weight_gradient_inputs = (m.mla() ? latent_weight_gradient_inputs
                                          : e * tokens * (h + q_width / t) + e * tokens * (q_width + 2 * kv_width) / t +
                                                e * tokens * h) +
                                 (router_in_w ? e * tokens / unsplit * (h + static_cast<double>(m.experts)) : 0.0) +
                                 e * traffic.received * (2 * h + 3 * fe / et) +
                                 (fs > 0 ? e * tokens * (2 * h + 3 * fs / t) : 0.0) +
                                 (m.shared_expert_gate ? e * tokens / unsplit * (h + 1) : 0.0);
  }
  layer.backward_weight = {qkv_flops + out_flops + mlp_work_flops, 2 * held * g + act.weight_gradient_inputs};
  layer.backward_input = {layer.backward.flops - layer.backward_weight.flops,
                          std::max(0.0, layer.backward.bytes - layer.backward_weight.bytes)};
  layer.attention_core.flops = core_flops;
  layer.attention_core.bytes = 2 * scores + 2 * e * tokens * (q_width + v_width) / t;
  layer.op_recompute.flops = 2 * tokens * h * kv_width / t + out_flops + (m.gated_mlp ? 2 * tokens * h * f / t : 0.0) +
                             (flash_attention ? 0.0 : core_flops);
  const double ring = (cp - 1) / cp;
  const double forward_ring = core_flops * ring / layer.attention_forward.flops;
  const double backward_ring = 2 * core_flops * ring / layer.attention_backward.flops;
  layer.attention_forward_local = scaled(layer.attention_forward, 1 - forward_ring);
  layer.attention_forward_ring = scaled(layer.attention_forward, forward_ring);
  layer.attention_backward_local = scaled(layer.attention_backward, 1 - backward_ring);
  layer.attention_backward_ring = scaled(layer.attention_backward, backward_ring);
  layer.cp_kv_bytes = 2 * e * b * s * kv_width / t;
  describe_layer_kernels(costs, layer,
                         KernelShapes{m, b, s, t, cp, static_cast<double>(sharding.ep), sharding.sp, e, g, flash_attention,
                                      sharding, precision == Precision::fp8},
                         prefix);
  return (qkv_flops + core_model_flops + out_flops + mlp_flops) * t * cp;
}


} // namespace

double KernelSet::flops() const {
  double total = 0;
  for (const Kernel& kernel : kernels)
    total += kernel.flops * kernel.count;
  return total;
}

double KernelSet::bytes() const {
  double total = 0;
  for (const Kernel& kernel : kernels)
    total += kernel.bytes * kernel.count;
  return total;
}

ModelCosts compute_costs(const ModelSpec& m, long long micro_batch, long long seq_len, Precision precision,
                         Precision grad_precision, bool flash_attention, const Sharding& sharding,
                         const ModelCosts* prior) {
  const double t = static_cast<double>(sharding.tp), cp = static_cast<double>(sharding.cp);
  const double b = static_cast<double>(micro_batch), s = static_cast<double>(seq_len);
  const double h = static_cast<double>(m.hidden);
  const double vocab = static_cast<double>(m.padded_vocab);
  const double e = bytes_per_element(precision);        // activations and parameters
  const double g = bytes_per_element(grad_precision);   // gradients
  const double tokens = b * s / cp;                      // this rank's share of the sequence
  const double mask = 1.0;                               // dropout masks are one byte per element
  const double unsplit = sharding.sp ? t : 1.0;          // sequence parallelism splits the rest over tp
  const ParameterCounts counts = count_parameters(m);

  ModelCosts costs;
  if (prior) {
    costs.kernel_sets = prior->kernel_sets;
    costs.all_to_all_splits = prior->all_to_all_splits;
  }
  const double dense_layers = static_cast<double>(m.dense_layers.size());
  // Layers attending over the whole sequence beside windowed ones (no mixture has both: refused
  // when the model is read) are a kind of their own once the sequence is longer than the window.
  const bool mixed_attention =
      !m.full_attention_layers.empty() && m.attention_window > 0 && m.attention_window < seq_len;
  const double full_layers = mixed_attention ? static_cast<double>(m.full_attention_layers.size()) : 0.0;
  // The main kind (every layer, or a mixture's expert layers, or the windowed ones), or under
  // routing per layer one kind per expert layer ("layer3" for the fourth); then a mixture's dense
  // layers or the layers attending over the whole sequence.
  const std::size_t main_kinds = std::max<std::size_t>(1, sharding.layer_expert_shares.size());
  costs.layer_kinds.resize(main_kinds + (m.dense_layers.empty() ? 0 : 1) + (mixed_attention ? 1 : 0));
  std::vector<long long> expert_layers;  // the model's layers of the main kinds, in order
  for (long long l = 0; l < m.layers; ++l)
    if (std::find(m.dense_layers.begin(), m.dense_layers.end(), l) == m.dense_layers.end())
      expert_layers.push_back(l);
  double layers_flops = 0;
  std::vector<double> kind_flops(costs.layer_kinds.size(), 0.0);  // one layer of each kind, forward model FLOPs
  for (std::size_t kind = 0; kind < main_kinds; ++kind) {
    Sharding of_kind = sharding;
    std::string prefix = "layer";
    if (main_kinds > 1) {
      of_kind.expert_shares = sharding.layer_expert_shares[kind];
      of_kind.layer_expert_shares.clear();
      prefix += std::to_string(expert_layers[kind]);
    }
    const double flops = layer_costs(costs, costs.layer_kinds[kind], m, micro_batch, seq_len, precision,
                                     grad_precision, flash_attention, of_kind, prefix);
    kind_flops[kind] = flops;
    layers_flops += main_kinds > 1 ? flops : (static_cast<double>(m.layers) - dense_layers - full_layers) * flops;
  }
  costs.kind_of_layer.assign(static_cast<std::size_t>(m.layers), 0);
  if (!m.dense_layers.empty()) {
    kind_flops[main_kinds] = layer_costs(costs, costs.layer_kinds[main_kinds], dense_mlp_model(m), micro_batch,
                                         seq_len, precision, grad_precision, flash_attention, sharding, "dense-layer");
    layers_flops += dense_layers * kind_flops[main_kinds];
    for (const long long l : m.dense_layers)
      costs.kind_of_layer[static_cast<std::size_t>(l)] = static_cast<int>(main_kinds);
  }
  if (mixed_attention) {
    const std::size_t full_kind = costs.layer_kinds.size() - 1;
    kind_flops[full_kind] = layer_costs(costs, costs.layer_kinds[full_kind], full_attention_model(m), micro_batch,
                                        seq_len, precision, grad_precision, flash_attention, sharding,
                                        "full-attention-layer");
    layers_flops += full_layers * kind_flops[full_kind];
    for (const long long l : m.full_attention_layers)
      costs.kind_of_layer[static_cast<std::size_t>(l)] = static_cast<int>(full_kind);
  }
  if (main_kinds > 1) {  // the expert layers' kinds in order
    int next = 0;
    for (std::size_t l = 0; l < costs.kind_of_layer.size(); ++l)
      if (costs.kind_of_layer[l] == 0)
        costs.kind_of_layer[l] = next++;
  }
  // Each multi-token-prediction module's layer is built as the model's last (DeepSeek-V3's layer 61).
  const double mtp = static_cast<double>(m.mtp_layers);
  for (long long d = 0; d < m.mtp_layers; ++d) {
    costs.kind_of_layer.push_back(costs.kind_of_layer[static_cast<std::size_t>(m.layers - 1)]);
    layers_flops += kind_flops[static_cast<std::size_t>(costs.kind_of_layer.back())];
  }
  costs.embedding_parameters = static_cast<double>(counts.embedding) / t + static_cast<double>(counts.positions);
  // With multi-token prediction the head's rank also holds each module's projection and norms.
  costs.head_parameters = static_cast<double>(counts.final_norm) + static_cast<double>(counts.output_head) / t +
                          mtp * (2 * h * h / t + 3 * static_cast<double>(counts.final_norm));
  const double embedding_rows = tokens * h * (m.learned_positions ? 2 : 1);
  costs.embedding_forward.bytes = 2 * e * embedding_rows;
  costs.embedding_backward.bytes = (e + 2 * g) * embedding_rows;
  costs.embedding_activations = m.hidden_dropout ? mask * tokens * h / unsplit : 0.0;

  // The output layer is split over the vocabulary (Megatron's vocabulary-parallel cross-entropy).
  // Multi-token prediction runs it once more per module, and before it the module's projection
  // of its two normalised inputs (the last layer's output and the next token's embedding).
  const double logits = tokens * vocab / t;
  const double outputs = 1 + mtp;  // the output layer's passes
  const double projection_flops = 2 * tokens * 2 * h * h / t;
  const double projection_weights = 2 * h * h / t;
  costs.head_forward.flops = outputs * 2 * tokens * h * vocab / t + mtp * projection_flops;
  costs.head_forward.bytes = outputs * (vocab / t * h * e + 2 * 4 * logits + (m.logit_softcap ? 2 * e * logits : 0.0)) +
                             mtp * (projection_weights * e + 2 * e * tokens * h * 3);  // the lookup and two norms
  costs.head_backward.flops = 2 * costs.head_forward.flops;
  costs.head_backward.bytes = 2 * costs.head_forward.bytes + 2 * (outputs * vocab / t * h + mtp * projection_weights) * g;
  costs.head_weight_gradient_inputs = outputs * (e * tokens * h + e * logits) + mtp * e * tokens * 3 * h;
  costs.head_backward_weight = {outputs * 2 * tokens * h * vocab / t + mtp * projection_flops,
                                2 * (outputs * vocab / t * h + mtp * projection_weights) * g + costs.head_weight_gradient_inputs};
  costs.head_backward_input = {costs.head_backward.flops - costs.head_backward_weight.flops,
                               std::max(0.0, costs.head_backward.bytes - costs.head_backward_weight.bytes)};
  // Final norm input, output projection input, and the fp32 logits the loss keeps (and soft-capped
  // logits, the capped ones for tanh's gradient).
  // Each module keeps the inputs of its two norms, of its projection (both, concatenated) and of its
  // final norm and output layer, and its logits.
  costs.head_activations = outputs * (2 * e * tokens * h / unsplit + 4 * logits + (m.logit_softcap ? e * logits : 0.0)) +
                           mtp * e * tokens * 4 * h;
  costs.activation_gradient_buffer = 2 * e * tokens * h;
  costs.tp_collective_bytes = e * tokens * h;

  // Model FLOPs count the whole model on the whole micro-batch, whatever the sharding.
  costs.model_flops_per_micro_batch = 3 * (layers_flops + costs.head_forward.flops * t * cp);
  describe_edge_kernels(costs, KernelShapes{m, b, s, t, cp, static_cast<double>(sharding.ep), sharding.sp, e, g,
                                            flash_attention, sharding, precision == Precision::fp8});
  return costs;
}

double ModelCosts::layer_parameters(long long first, long long count) const {
  double sum = 0;
  for (long long l = first; l < first + count; ++l)
    sum += layer(l).parameters;
  return sum;
}

double ModelCosts::layer_expert_parameters(long long first, long long count) const {
  double sum = 0;
  for (long long l = first; l < first + count; ++l)
    sum += layer(l).expert_parameters;
  return sum;
}

LayerList ModelCosts::layers_from(long long first, long long count) const {
  LayerList layers;
  for (long long l = first; l < first + count; ++l)
    layers.push_back(&layer(l));
  return layers;
}

Work optimizer_step_work(double parameters, Precision precision, Precision grad_precision) {
  // Adam reads the gradient, master weights, momentum and variance and writes the last three;
  // with 16-bit training it also writes the 16-bit copy of the weights.
  const double master_and_moments = 3 * 4.0;
  double per_parameter = bytes_per_element(grad_precision) + 2 * master_and_moments;
  if (precision != Precision::fp32)
    per_parameter += bytes_per_element(precision);
  return Work{12.0 * parameters, per_parameter * parameters};
}

double kernel_seconds(const Work& work, const GpuInfo& gpu, Precision precision, const ComputeEfficiency& efficiency) {
  const double math = work.flops > 0 ? work.flops / (matmul_peak(gpu, precision, efficiency.allow_tf32) * efficiency.matmul) : 0.0;
  const double traffic = work.bytes > 0 ? work.bytes / (gpu.hbm_bandwidth * efficiency.memory) : 0.0;
  return std::max(math, traffic);
}

} // namespace trainsim
