#include "model/costs.hpp"

#include <algorithm>

namespace trainsim {

double layer_parameters_per_rank(const ModelSpec& m, long long tp) {
  const double t = static_cast<double>(tp);
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn);
  const double q_width = static_cast<double>(m.heads * m.head_dim);
  const double kv_width = static_cast<double>(m.kv_heads * m.head_dim);
  double split = h * (q_width + 2 * kv_width) + q_width * h + (m.gated_mlp ? 3 : 2) * h * f;
  double replicated = (m.rms_norm ? 2 : 4) * h;  // two norms
  if (m.qkv_bias)
    split += q_width + 2 * kv_width;
  if (m.out_bias)
    replicated += h;
  if (m.mlp_bias) {
    split += (m.gated_mlp ? 2 : 1) * f;
    replicated += h;
  }
  return split / t + replicated;
}

ModelCosts compute_costs(const ModelSpec& m, long long micro_batch, long long seq_len, Precision precision,
                         Precision grad_precision, bool flash_attention, const Sharding& sharding) {
  const double t = static_cast<double>(sharding.tp), cp = static_cast<double>(sharding.cp);
  const double b = static_cast<double>(micro_batch), s = static_cast<double>(seq_len);
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn);
  const double heads = static_cast<double>(m.heads);
  const double q_width = static_cast<double>(m.heads * m.head_dim);
  const double kv_width = static_cast<double>(m.kv_heads * m.head_dim);
  const double vocab = static_cast<double>(m.padded_vocab);
  const double e = bytes_per_element(precision);        // activations and parameters
  const double g = bytes_per_element(grad_precision);   // gradients
  const double tokens = b * s / cp;                      // this rank's share of the sequence
  const double mask = 1.0;                               // dropout masks are one byte per element
  const double unsplit = sharding.sp ? t : 1.0;          // sequence parallelism splits the rest over tp
  const ParameterCounts counts = count_parameters(m);

  ModelCosts costs;
  LayerCosts& layer = costs.layer;

  // Queries are local, keys and values span the whole sequence (gathered around the CP ring).
  const double qkv_flops = 2 * tokens * h * (q_width + 2 * kv_width) / t;
  const double core_flops = 4 * b * (s / cp) * s * q_width / t;
  const double out_flops = 2 * tokens * q_width * h / t;
  const double mlp_flops = 2 * tokens * h * f * (m.gated_mlp ? 3 : 2) / t;

  // Korthikanti et al. Table 2 term by term; GQA shrinks K and V, SwiGLU keeps gate and up.
  // Tensor-parallel terms are split over t; the rest over t only with sequence parallelism.
  LayerActivations& act = layer.activations;
  double scores = 0;
  if (!flash_attention) {
    const double score_elements = heads / t * (s / cp) * s * b;
    scores = e * score_elements;                         // softmax output
    if (m.attention_dropout)
      scores += mask * score_elements + e * score_elements;  // dropout mask and output
  }
  const double hidden_masks = m.hidden_dropout ? mask * tokens * h / unsplit : 0.0;
  const double attention = e * tokens * h / unsplit             // QKV projection input
                           + e * tokens * q_width / t           // Q
                           + 2 * e * tokens * kv_width / t      // K and V
                           + e * tokens * q_width / t           // output projection input
                           + hidden_masks + scores;
  const double mlp = e * tokens * h / unsplit                    // first linear input
                     + e * tokens * f * (m.gated_mlp ? 2 : 1) / t  // activation function input
                     + e * tokens * f / t                        // second linear input
                     + hidden_masks;
  const double norms = 2 * e * tokens * h / unsplit;
  act.input = e * tokens * h / unsplit;
  act.attention_core = scores;
  act.total = attention + mlp + norms;

  // HBM traffic: forward reads the weights and writes each kept activation once; backward reads
  // the weights and the activations, writes activation gradients of about the same size, and
  // reads and writes (accumulates) the weight gradients.
  layer.parameters = layer_parameters_per_rank(m, sharding.tp);
  const double attention_share = (qkv_flops + core_flops + out_flops) / (qkv_flops + core_flops + out_flops + mlp_flops);
  const double attention_kept = attention + norms / 2, mlp_kept = mlp + norms / 2;
  const double attention_weights = layer.parameters * attention_share * e;
  const double mlp_weights = layer.parameters * (1 - attention_share) * e;
  layer.attention_forward = {qkv_flops + core_flops + out_flops, attention_weights + attention_kept};
  layer.mlp_forward = {mlp_flops, mlp_weights + mlp_kept};
  layer.forward = {layer.attention_forward.flops + layer.mlp_forward.flops,
                   layer.attention_forward.bytes + layer.mlp_forward.bytes};
  layer.backward.flops = 2 * layer.forward.flops;
  layer.backward.bytes = layer.parameters * e + 2 * act.total + 2 * layer.parameters * g;
  layer.attention_core.flops = core_flops;
  layer.attention_core.bytes = 2 * scores + 4 * e * tokens * q_width / t;
  layer.tp_collective_bytes = e * tokens * h;
  layer.cp_kv_bytes = 2 * e * b * s * kv_width / t;

  costs.embedding_parameters = static_cast<double>(counts.embedding) / t + static_cast<double>(counts.positions);
  costs.head_parameters = static_cast<double>(counts.final_norm) + static_cast<double>(counts.output_head) / t;
  const double embedding_rows = tokens * h * (m.learned_positions ? 2 : 1);
  costs.embedding_forward.bytes = 2 * e * embedding_rows;
  costs.embedding_backward.bytes = (e + 2 * g) * embedding_rows;
  costs.embedding_activations = m.hidden_dropout ? mask * tokens * h / unsplit : 0.0;

  // The output layer is split over the vocabulary (Megatron's vocabulary-parallel cross-entropy).
  const double logits = tokens * vocab / t;
  costs.head_forward.flops = 2 * tokens * h * vocab / t;
  costs.head_forward.bytes = vocab / t * h * e + 2 * 4 * logits;
  costs.head_backward.flops = 2 * costs.head_forward.flops;
  costs.head_backward.bytes = 2 * costs.head_forward.bytes + 2 * vocab / t * h * g;
  // Final norm input, output projection input, and the fp32 logits the loss keeps.
  costs.head_activations = 2 * e * tokens * h / unsplit + 4 * logits;
  costs.activation_gradient_buffer = 2 * e * tokens * h;

  // Model FLOPs count the whole model on the whole micro-batch, whatever the sharding.
  const double whole_layer = (qkv_flops + core_flops + out_flops + mlp_flops) * t * cp;
  costs.model_flops_per_micro_batch =
      3 * (static_cast<double>(m.layers) * whole_layer + costs.head_forward.flops * t * cp);
  return costs;
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
