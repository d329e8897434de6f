#pragma once
// A transformer architecture read from a Hugging Face config.json (Llama-style:
// RMSNorm, SwiGLU, rotary, GQA; Gemma 2 with its sandwich norms, soft-capped logits and a
// sliding window in every other layer; GPT-2/3-style: LayerNorm, GeLU, learned positions,
// tied embeddings; mixtures of experts: Mixtral, Qwen2-MoE and Qwen3-MoE, whose every layer's
// MLP is a router over SwiGLU experts, top-k of them per token, beside optional shared experts),
// normalised to the few numbers that decide memory and time.
#include <filesystem>
#include <string>
#include <vector>

namespace trainsim {

struct ModelSpec {
  std::string name;
  long long hidden = 0;
  long long layers = 0;
  long long heads = 0;
  long long kv_heads = 0;         // < heads for grouped-query attention
  long long head_dim = 0;
  long long ffn = 0;              // MLP inner size
  long long vocab = 0;            // as in the config
  long long padded_vocab = 0;     // padded to the scenario's multiple; what is trained
  long long max_positions = 0;
  long long attention_window = 0; // sliding-window attention: tokens a query sees; 0: the whole sequence
  // With a window: the layers that attend over the whole sequence anyway (Gemma 2's every other
  // layer, from layer_types); empty: every layer is windowed.
  std::vector<long long> full_attention_layers;
  bool sandwich_norms = false;    // Gemma 2: RMSNorms after the attention and the MLP too, before each residual add
  bool logit_softcap = false;     // Gemma 2: the logits through cap x tanh(logits / cap) before the loss
  // Gemma 2: the attention scores soft-capped too; inside FlashAttention's kernel, a pass of its
  // own each way over the scores (and the capped ones kept) in eager attention.
  bool score_softcap = false;
  bool gated_mlp = false;         // SwiGLU: gate and up projections
  bool rms_norm = false;          // RMSNorm (weight only) instead of LayerNorm (weight and bias)
  bool qkv_bias = false;
  bool out_bias = false;
  bool mlp_bias = false;
  bool learned_positions = false;
  bool tied_embeddings = false;
  bool attention_dropout = false; // dropout on attention probabilities: keeps a mask
  bool hidden_dropout = false;    // dropout after attention and MLP: keeps masks
  bool qk_norm = false;           // Qwen3: RMSNorm of each head's queries and keys (head_dim weights each)
  bool qk_norm_weights = true;    // Llama 4's norm of the queries and keys has none (an L2 norm)
  // Llama 4: tokens attend within chunks of this many (its rotary layers; the others over the
  // whole sequence); simulated up to one chunk, where chunked and full attention coincide. 0: none.
  long long attention_chunk = 0;
  // A mixture of experts (experts > 0): each layer's MLP is a router (hidden -> experts, no bias)
  // choosing experts_per_token SwiGLU experts of inner size expert_ffn per token; shared experts
  // (Qwen2-MoE: one of inner size shared_expert_ffn, scaled by a sigmoid gate) see every token.
  long long experts = 0;
  long long experts_per_token = 0;
  long long expert_ffn = 0;
  long long shared_expert_ffn = 0;
  bool shared_expert_gate = false;
  // Of a mixture's layers, those whose MLP is dense (inner size ffn, no router), in order: Qwen-MoE's
  // mlp_only_layers and decoder_sparse_step. Empty: every layer has the experts.
  std::vector<long long> dense_layers;
  bool router_bias = false;       // DeepSeek-V3: a learned bias per expert added to the routing scores
  // Group-limited routing (DeepSeek's n_group, topk_group): the experts in expert_groups equal
  // runs, each token routed to its top-k experts within the groups_per_token groups it scores
  // highest. 1 and 1: over all experts.
  long long expert_groups = 1;
  long long groups_per_token = 1;
  long long group_score_experts = 1;  // a group's rank: the sum of its best this many scores (V3: 2, V2: 1)
  // Multi-head latent attention (DeepSeek-V2/V3, kv_lora_rank > 0): queries through a latent of
  // q_lora_rank (0: one projection), keys and values up-projected from a latent of kv_lora_rank,
  // a rotary key of qk_rope_head_dim shared by the heads; head_dim is a query's and key's size
  // (nope + rope), v_head_dim a value's.
  long long q_lora_rank = 0;
  long long kv_lora_rank = 0;
  long long qk_rope_head_dim = 0;
  long long v_head_dim = 0;
  // Multi-token prediction (DeepSeek-V3, section 2.2; Megatron-Core's --mtp-num-layers): this many
  // modules after the last layer, each an embedding of the next token (shared), two norms, a
  // projection of both to hidden, a layer as the model's last and the shared output head with
  // its loss. Trained beside the model; not in the published parameter counts.
  long long mtp_layers = 0;
  bool moe() const { return experts > 0; }
  bool mla() const { return kv_lora_rank > 0; }
};

// The output layer's side reads the embedding: tied to it, or looking up the next tokens for
// multi-token prediction.
inline bool head_reads_embedding(const ModelSpec& model) { return model.tied_embeddings || model.mtp_layers > 0; }

// A latent attention's weights: down-projections, their norms, up-projections, output projection.
long long latent_attention_parameters(const ModelSpec& model);

// A mixture's dense layers as a model of their own: the same attention, a dense SwiGLU MLP.
ModelSpec dense_mlp_model(const ModelSpec& model);
// The layers of full_attention_layers as a model of their own: attention over the whole sequence.
ModelSpec full_attention_model(const ModelSpec& model);

struct ParameterCounts {
  long long embedding = 0;        // token embedding
  long long positions = 0;        // learned position embedding
  long long per_layer = 0;        // a layer (in a mixture, one with the experts)
  long long per_dense_layer = 0;  // a mixture's layer with a dense MLP (ModelSpec::dense_layers); 0 without
  long long layers = 0;           // all layers
  long long final_norm = 0;
  long long output_head = 0;      // 0 when tied to the embedding
  long long total = 0;
  long long routed_experts = 0;   // of `total`: every layer's routed experts (0 for a dense model)
  long long active = 0;           // what one token uses: `total` less the experts it is not routed to
  // Beside `total`: one multi-token-prediction module (its layer, projection and three norms; the
  // embedding and output head are the model's) and all of them.
  long long per_mtp_module = 0;
  long long mtp = 0;
};

// Throws InputError naming the file and field. `mtp_layers`: the multi-token-prediction modules
// trained (model.mtp_layers); -1: the config's.
ModelSpec load_model(const std::filesystem::path& file, long long vocab_multiple, long long mtp_layers = -1);
ModelSpec parse_model(const std::string& json_text, const std::string& where, const std::string& name,
                      long long vocab_multiple);

ParameterCounts count_parameters(const ModelSpec& model);

} // namespace trainsim
