#include "model/costs.hpp"

#include <algorithm>

namespace trainsim {

ModelCosts compute_costs(const ModelSpec& m, long long micro_batch, long long seq_len, Precision precision,
                         Precision grad_precision, bool flash_attention) {
  const double b = static_cast<double>(micro_batch), s = static_cast<double>(seq_len);
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn);
  const double heads = static_cast<double>(m.heads);
  const double q_width = static_cast<double>(m.heads * m.head_dim);
  const double kv_width = static_cast<double>(m.kv_heads * m.head_dim);
  const double vocab = static_cast<double>(m.padded_vocab);
  const double e = bytes_per_element(precision);        // activations and parameters
  const double g = bytes_per_element(grad_precision);   // gradients
  const double tokens = b * s;
  const double mask = 1.0;                               // dropout masks are one byte per element
  const double per_layer_params = static_cast<double>(count_parameters(m).per_layer);

  ModelCosts costs;
  LayerCosts& layer = costs.layer;

  const double qkv_flops = 2 * tokens * h * (q_width + 2 * kv_width);
  const double core_flops = 4 * b * s * s * q_width;     // QK^T and scores x V, all heads
  const double out_flops = 2 * tokens * q_width * h;
  const double mlp_flops = 2 * tokens * h * f * (m.gated_mlp ? 3 : 2);
  layer.forward.flops = qkv_flops + core_flops + out_flops + mlp_flops;

  // Korthikanti et al. Table 2 term by term; GQA shrinks K and V, SwiGLU keeps gate and up.
  LayerActivations& act = layer.activations;
  double scores = 0;
  if (!flash_attention) {
    scores = e * heads * s * s * b;                      // softmax output
    if (m.attention_dropout)
      scores += mask * heads * s * s * b + e * heads * s * s * b;  // dropout mask and output
  }
  const double attention = e * tokens * h                // QKV projection input
                           + e * tokens * q_width        // Q
                           + 2 * e * tokens * kv_width   // K and V
                           + e * tokens * q_width        // output projection input
                           + (m.hidden_dropout ? mask * tokens * h : 0.0) + scores;
  const double mlp = e * tokens * h                      // first linear input
                     + e * tokens * f * (m.gated_mlp ? 2 : 1)  // activation function input
                     + e * tokens * f                    // second linear input
                     + (m.hidden_dropout ? mask * tokens * h : 0.0);
  const double norms = 2 * e * tokens * h;
  act.input = e * tokens * h;
  act.attention_core = scores;
  act.total = attention + mlp + norms;

  // HBM traffic: forward reads the weights and writes each kept activation once; backward reads
  // the weights and the activations, writes activation gradients of about the same size, and
  // reads and writes (accumulates) the weight gradients.
  const double layer_weight_bytes = per_layer_params * e;
  layer.forward.bytes = layer_weight_bytes + act.total;
  layer.backward.flops = 2 * layer.forward.flops;
  layer.backward.bytes = layer_weight_bytes + 2 * act.total + 2 * per_layer_params * g;
  layer.attention_core.flops = core_flops;
  layer.attention_core.bytes = 2 * scores + 4 * e * tokens * q_width;

  const double embedding_rows = tokens * h * (m.learned_positions ? 2 : 1);
  costs.embedding_forward.bytes = 2 * e * embedding_rows;
  costs.embedding_backward.bytes = (e + 2 * g) * embedding_rows;
  costs.embedding_activations = m.hidden_dropout ? mask * tokens * h : 0.0;

  const double logits = tokens * vocab;
  costs.head_forward.flops = 2 * tokens * h * vocab;
  costs.head_forward.bytes = vocab * h * e + 2 * 4 * logits;
  costs.head_backward.flops = 2 * costs.head_forward.flops;
  costs.head_backward.bytes = 2 * costs.head_forward.bytes + 2 * vocab * h * g;
  // Final norm input, output projection input, and the fp32 logits the loss keeps.
  costs.head_activations = 2 * e * tokens * h + 4 * logits;
  costs.activation_gradient_buffer = 2 * e * tokens * h;

  costs.model_flops_per_micro_batch =
      3 * (static_cast<double>(m.layers) * layer.forward.flops + costs.head_forward.flops);
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
