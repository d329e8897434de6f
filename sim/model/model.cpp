#include "model/model.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace trainsim {
namespace {

using nlohmann::json;

class ConfigReader {
public:
  ConfigReader(const json& config, std::string where) : config_(config), where_(std::move(where)) {}

  bool has(const char* key) const { return config_.contains(key) && !config_.at(key).is_null(); }

  // The first present key among the aliases, as a positive integer.
  long long integer(std::initializer_list<const char*> aliases, long long fallback = -1) const {
    for (const char* key : aliases) {
      if (!has(key))
        continue;
      const json& value = config_.at(key);
      if (!value.is_number_integer() || value.get<long long>() <= 0 || value.get<long long>() > 10'000'000'000LL)
        throw InputError(where_ + ": field '" + key + "' = " + value.dump() + "; accepted: a positive integer");
      return value.get<long long>();
    }
    if (fallback >= 0)
      return fallback;
    std::string names;
    for (const char* key : aliases)
      names += (names.empty() ? "'" : " or '") + std::string(key) + "'";
    throw InputError(where_ + ": missing field " + names + "; accepted: a positive integer");
  }

  // A count that may be 0 (null: 0 too, as Hugging Face's None); `fallback` when absent.
  long long count(const char* key, long long fallback) const {
    if (!config_.contains(key))
      return fallback;
    const json& value = config_.at(key);
    if (value.is_null())
      return 0;
    if (!value.is_number_integer() || value.get<long long>() < 0 || value.get<long long>() > 10'000'000'000LL)
      throw InputError(where_ + ": field '" + key + "' = " + value.dump() + "; accepted: an integer from 0");
    return value.get<long long>();
  }

  bool boolean(const char* key, bool fallback) const {
    if (!has(key))
      return fallback;
    const json& value = config_.at(key);
    if (!value.is_boolean())
      throw InputError(where_ + ": field '" + key + "' = " + value.dump() + "; accepted: true or false");
    return value.get<bool>();
  }

  // A soft cap (cap x tanh(x / cap)): a positive number applies one, null none; `fallback` when absent.
  bool cap(const char* key, bool fallback) const {
    if (!config_.contains(key))
      return fallback;
    const json& value = config_.at(key);
    if (value.is_null())
      return false;
    if (!value.is_number() || !(value.get<double>() > 0))
      throw InputError(where_ + ": field '" + key + "' = " + value.dump() + "; accepted: a positive number, or null for none");
    return true;
  }

  // Dropout probabilities: present and positive means masks are kept.
  bool positive_number(std::initializer_list<const char*> aliases, bool fallback) const {
    for (const char* key : aliases) {
      if (!has(key))
        continue;
      const json& value = config_.at(key);
      if (!value.is_number() || value.get<double>() < 0 || value.get<double>() >= 1)
        throw InputError(where_ + ": field '" + key + "' = " + value.dump() + "; accepted: a probability in [0, 1)");
      return value.get<double>() > 0;
    }
    return fallback;
  }

  std::string text(const char* key) const {
    if (!has(key))
      return "";
    if (!config_.at(key).is_string())
      throw InputError(where_ + ": field '" + key + "' = " + config_.at(key).dump() + "; accepted: a string");
    return config_.at(key).get<std::string>();
  }

  // A list of layer indices, each in [0, layers).
  std::vector<long long> layer_indices(const char* key, long long layers) const {
    std::vector<long long> indices;
    if (!has(key))
      return indices;
    const json& value = config_.at(key);
    const auto refuse = [&] {
      throw InputError(where_ + ": field '" + key + "' = " + value.dump() + "; accepted: a list of layer indices, 0 to " +
                       std::to_string(layers - 1));
    };
    if (!value.is_array())
      refuse();
    for (const json& item : value) {
      if (!item.is_number_integer() || item.get<long long>() < 0 || item.get<long long>() >= layers)
        refuse();
      indices.push_back(item.get<long long>());
    }
    return indices;
  }

  const std::string& where() const { return where_; }

private:
  const json& config_;
  std::string where_;
};

enum class Family { llama, gpt2 };

// Hugging Face model types whose mixture of experts trainsim reads (the rest refuse expert fields).
const std::set<std::string>& moe_types() {
  static const std::set<std::string> types = {"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3",
                                              "llama4_text"};
  return types;
}

Family family_of(const ConfigReader& config, const std::string& where) {
  static const std::set<std::string> llama_like = {"llama",     "mistral",     "qwen2",       "qwen3",
                                                   "gemma2",    "mixtral",     "qwen2_moe",   "qwen3_moe",
                                                   "deepseek_v2", "deepseek_v3", "llama4_text"};
  static const std::set<std::string> gpt2_like = {"gpt2", "gpt3", "gpt"};
  const std::string type = config.text("model_type");
  if (llama_like.count(type))
    return Family::llama;
  if (gpt2_like.count(type))
    return Family::gpt2;
  if (type.empty() && config.has("n_embd"))
    return Family::gpt2;
  if (type.empty() && config.has("hidden_size") && config.has("intermediate_size"))
    return Family::llama;
  throw InputError(where + ": field 'model_type' = \"" + type +
                   "\" is not a supported architecture; accepted: llama, mistral, qwen2, qwen3, gemma2, mixtral, "
                   "qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3, llama4, gpt2, gpt3");
}

// A JSON object with one key twice: parsers keep one of the values silently, so the config does
// not say which it means.
json parse_without_duplicate_keys(const std::string& text, const std::string& where) {
  std::vector<std::set<std::string>> keys_of_open_objects;
  const json::parser_callback_t check = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start)
      keys_of_open_objects.emplace_back();
    else if (event == json::parse_event_t::object_end)
      keys_of_open_objects.pop_back();
    else if (event == json::parse_event_t::key && !keys_of_open_objects.back().insert(parsed.get<std::string>()).second)
      throw InputError(where + ": field '" + parsed.get<std::string>() +
                       "' is given twice; accepted: each field once");
    return true;
  };
  return json::parse(text, check);
}

// A field with this value in use makes a model trainsim does not simulate: refused rather than
// simulated as the dense Llama or GPT the other fields describe. Fields not listed are metadata
// (torch_dtype, bos_token_id, architectures, ...) or fine details that do not change the counts.
struct UnmodelledFeature {
  const char* field;
  const char* feature;
  bool (*in_use)(const json& value);
};

bool more_than_one(const json& value) { return value.is_number() && value.get<double>() > 1; }
bool is_true(const json& value) { return value.is_boolean() && value.get<bool>(); }

bool not_empty(const json& value) { return value.is_array() && !value.empty(); }

void refuse_unmodelled(const json& config, const std::string& where) {
  const bool reads_experts = moe_types().count(config.value("model_type", "")) > 0;
  static const UnmodelledFeature moe_features[] = {
      {"num_local_experts", "a mixture of experts", more_than_one},
      {"num_experts", "a mixture of experts", more_than_one},
      {"n_routed_experts", "a mixture of experts", more_than_one},
      {"moe_num_experts", "a mixture of experts", more_than_one},
      {"num_experts_per_tok", "a mixture of experts", more_than_one},
  };
  // Dense MLP layers among the expert ones: read for the Qwen mixtures, whose Hugging Face models
  // define them; Mixtral's ignore these fields.
  static const UnmodelledFeature mixed_layers[] = {
      {"decoder_sparse_step", "dense layers between expert layers", more_than_one},
      {"mlp_only_layers", "dense layers among expert layers", not_empty},
  };
  static const UnmodelledFeature features[] = {
      {"is_encoder_decoder", "an encoder-decoder", is_true},
      {"add_cross_attention", "cross-attention", is_true},
      {"parallel_attn", "parallel attention and MLP blocks", is_true},
      {"use_parallel_residual", "parallel attention and MLP blocks", is_true},
  };
  const auto refuse = [&](const auto& list, const char* accepted) {
    for (const UnmodelledFeature& feature : list)
      if (config.contains(feature.field) && feature.in_use(config.at(feature.field)))
        throw InputError(where + ": field '" + feature.field + "' = " + config.at(feature.field).dump() + " makes " +
                         feature.feature + ", which trainsim does not simulate; accepted: " + accepted);
  };
  const char* decoder_only = "decoder-only transformers (llama, mistral, qwen2, qwen3, gemma2, gpt2, gpt3; mixtures of "
                             "experts: mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3, llama4)";
  refuse(features, decoder_only);
  const std::string type = config.value("model_type", "");
  if (type == "mixtral")
    refuse(mixed_layers, "an expert MLP in every layer (Mixtral's model does not read decoder_sparse_step or "
                         "mlp_only_layers; qwen2_moe and qwen3_moe do)");
  else if (!reads_experts)
    refuse(moe_features, decoder_only);
}

// The experts of a mixture (Mixtral: num_local_experts and intermediate_size; Qwen-MoE:
// num_experts, moe_intermediate_size, Qwen2-MoE's gated shared expert; DeepSeek: n_routed_experts,
// n_shared_experts of moe_intermediate_size each, the first k layers dense).
void read_experts(const ConfigReader& reader, const std::string& type, ModelSpec& model) {
  if (!moe_types().count(type))
    return;
  model.experts = reader.integer({"num_local_experts", "num_experts", "n_routed_experts"});
  model.experts_per_token = reader.integer({"num_experts_per_tok"});
  model.expert_ffn = type == "mixtral" || type == "llama4_text" ? model.ffn : reader.integer({"moe_intermediate_size"});
  if (type == "deepseek_v2" || type == "deepseek_v3") {
    // As DeepseekV3DecoderLayer: layer l has the experts from first_k_dense_replace on, where l is a
    // multiple of moe_layer_freq; the shared experts are one SwiGLU of their summed inner size,
    // ungated; V3's router (topk_method "noaux_tc", its only one) adds a bias per expert to the
    // scores. Absent keys take Hugging Face's defaults (DeepseekV3Config, DeepseekV2Config).
    const bool v3 = type == "deepseek_v3";
    const long long first_dense = reader.count("first_k_dense_replace", v3 ? 3 : 0);
    const long long frequency = reader.integer({"moe_layer_freq"}, 1);
    for (long long l = 0; l < model.layers; ++l)
      if (l < first_dense || l % frequency != 0)
        model.dense_layers.push_back(l);
    model.shared_expert_ffn = reader.count("n_shared_experts", v3 ? 1 : 0) * model.expert_ffn;
    model.router_bias = v3 || reader.text("topk_method") == "noaux_tc";
    // V3's router always limits the groups (DeepseekV3TopkRouter); V2's when topk_method says so.
    if (v3 || reader.text("topk_method") == "group_limited_greedy") {
      model.expert_groups = reader.count("n_group", v3 ? 8 : 1);
      model.groups_per_token = reader.count("topk_group", v3 ? 4 : 1);
      // DeepseekV3TopkRouter ranks a group by its top two scores, V2's group_limited_greedy by its best.
      model.group_score_experts = v3 ? 2 : 1;
    }
    if (static_cast<long long>(model.dense_layers.size()) == model.layers)
      throw InputError(reader.where() + ": first_k_dense_replace = " + std::to_string(first_dense) +
                       " and moe_layer_freq = " + std::to_string(frequency) +
                       " leave no layer with experts; accepted: at least one expert layer");
  }
  if (type == "llama4_text") {
    // As Llama4TextDecoderLayer: the layers of moe_layers (Llama4TextConfig: every
    // interleave_moe_layer_step-th, from step - 1) have the routed experts (intermediate_size
    // each, top-k by a sigmoid of the router's logits) and one ungated shared expert of the same
    // size; the others a dense MLP of intermediate_size_mlp.
    model.shared_expert_ffn = model.expert_ffn;
    model.ffn = reader.integer({"intermediate_size_mlp"}, 16384);
    const std::vector<long long> listed = reader.layer_indices("moe_layers", model.layers);
    const long long step = reader.integer({"interleave_moe_layer_step"}, 1);
    std::set<long long> expert_layers(listed.begin(), listed.end());
    if (!reader.has("moe_layers"))
      for (long long l = step - 1; l < model.layers; l += step)
        expert_layers.insert(l);
    for (long long l = 0; l < model.layers; ++l)
      if (expert_layers.count(l) == 0)
        model.dense_layers.push_back(l);
    if (expert_layers.empty())
      throw InputError(reader.where() + ": moe_layers and interleave_moe_layer_step = " + std::to_string(step) +
                       " leave no layer with experts; accepted: at least one expert layer");
  }
  if (type == "qwen2_moe") {
    model.shared_expert_ffn = reader.integer({"shared_expert_intermediate_size"}, 0);
    model.shared_expert_gate = model.shared_expert_ffn > 0;
  }
  if (type == "qwen2_moe" || type == "qwen3_moe") {
    // As Qwen2MoeDecoderLayer: layer l has the experts unless it is in mlp_only_layers or l + 1 is
    // not a multiple of decoder_sparse_step; the others a dense MLP of intermediate_size.
    const std::vector<long long> listed = reader.layer_indices("mlp_only_layers", model.layers);
    const std::set<long long> mlp_only(listed.begin(), listed.end());
    const long long step = reader.integer({"decoder_sparse_step"}, 1);
    for (long long l = 0; l < model.layers; ++l)
      if (mlp_only.count(l) > 0 || (l + 1) % step != 0)
        model.dense_layers.push_back(l);
    if (static_cast<long long>(model.dense_layers.size()) == model.layers)
      throw InputError(reader.where() + ": mlp_only_layers and decoder_sparse_step = " + std::to_string(step) +
                       " leave no layer with experts; accepted: at least one expert layer (else a dense model type)");
  }
  const double expert_parameters = static_cast<double>(model.experts) * 3 * static_cast<double>(model.hidden) *
                                   static_cast<double>(model.expert_ffn) * static_cast<double>(model.layers);
  if (model.experts > 65536 || model.expert_ffn > 1'000'000 || model.shared_expert_ffn > 1'000'000 ||
      expert_parameters > 1e15)
    throw InputError(reader.where() + ": implausible experts (" + std::to_string(model.experts) + " of inner size " +
                     std::to_string(model.expert_ffn) + ", shared " + std::to_string(model.shared_expert_ffn) +
                     "); accepted: at most 65536 experts, inner sizes at most 1000000, at most 1e15 expert parameters");
  if (model.experts_per_token > model.experts)
    throw InputError(reader.where() + ": field 'num_experts_per_tok' = " + std::to_string(model.experts_per_token) +
                     " is more than the " + std::to_string(model.experts) + " experts; accepted: 1 to " +
                     std::to_string(model.experts));
  if (model.expert_groups < 1 || model.experts % model.expert_groups != 0)
    throw InputError(reader.where() + ": field 'n_group' = " + std::to_string(model.expert_groups) +
                     " does not divide the " + std::to_string(model.experts) +
                     " experts into equal groups; accepted: a divisor of n_routed_experts");
  if (model.groups_per_token < 1 || model.groups_per_token > model.expert_groups ||
      model.experts_per_token > model.groups_per_token * (model.experts / model.expert_groups))
    throw InputError(reader.where() + ": field 'topk_group' = " + std::to_string(model.groups_per_token) +
                     " is not 1 to n_group = " + std::to_string(model.expert_groups) +
                     " groups holding the top-k = " + std::to_string(model.experts_per_token) +
                     " experts; accepted: groups enough for num_experts_per_tok, at most n_group");
}

// DeepSeek's multi-head latent attention: queries through a latent of q_lora_rank (none: one
// projection), keys and values from a shared latent of kv_lora_rank beside a rotary key of
// qk_rope_head_dim shared by the heads; each head's query and key have qk_nope_head_dim +
// qk_rope_head_dim, its value v_head_dim.
void read_latent_attention(const ConfigReader& reader, ModelSpec& model) {
  if (reader.boolean("attention_bias", false))
    throw InputError(reader.where() + ": field 'attention_bias' = true with multi-head latent attention, whose "
                     "projections' biases trainsim does not simulate; accepted: false");
  model.q_lora_rank = reader.count("q_lora_rank", 1536);  // Hugging Face's default; null: one projection
  model.kv_lora_rank = reader.integer({"kv_lora_rank"});
  model.qk_rope_head_dim = reader.integer({"qk_rope_head_dim"});
  model.v_head_dim = reader.integer({"v_head_dim"});
  model.head_dim = reader.integer({"qk_nope_head_dim"}) + model.qk_rope_head_dim;
  model.kv_heads = model.heads;  // every head has its own key and value, up-projected from the latent
  model.qkv_bias = model.out_bias = false;
  // In double: the weights of an absurd config would overflow the count.
  const double heads = static_cast<double>(model.heads), h = static_cast<double>(model.hidden);
  const double weights = (h + heads * static_cast<double>(model.head_dim)) * static_cast<double>(model.q_lora_rank) +
                         h * static_cast<double>(model.kv_lora_rank + model.qk_rope_head_dim) +
                         static_cast<double>(model.kv_lora_rank) * heads *
                             static_cast<double>(model.head_dim + model.v_head_dim) +
                         heads * static_cast<double>(model.v_head_dim) * h;
  if (model.kv_lora_rank > 1'000'000 || model.q_lora_rank > 1'000'000 || model.head_dim > 100'000 ||
      model.v_head_dim > 100'000 || weights * static_cast<double>(model.layers) > 1e15)
    throw InputError(reader.where() + ": implausible latent attention (kv_lora_rank " +
                     std::to_string(model.kv_lora_rank) + ", q_lora_rank " + std::to_string(model.q_lora_rank) +
                     "); accepted: ranks up to 1000000, head sizes up to 100000, at most 1e15 attention weights");
}

// Qwen's models slide their window only with use_sliding_window (default false), and then only
// from layer max_window_layers on (Qwen2Config, Qwen3Config, Qwen2MoeConfig, Qwen3MoeConfig).
bool qwen_type(const std::string& type) {
  return type == "qwen2" || type == "qwen3" || type == "qwen2_moe" || type == "qwen3_moe";
}

// Mistral's sliding window (null: none); Qwen's as above; Gemma 2's 4,096 tokens unless given (null:
// none).
long long attention_window(const json& config, const ConfigReader& reader, const std::string& type) {
  if (type == "gemma2")
    return config.contains("sliding_window") && config.at("sliding_window").is_null()
               ? 0
               : reader.integer({"sliding_window"}, 4096);
  if (!reader.has("sliding_window") || !reader.boolean("use_sliding_window", !qwen_type(type)))
    return 0;
  return reader.integer({"sliding_window"});
}

// Under a window, the layers attending over the whole sequence: those layer_types calls
// "full_attention"; without layer_types Gemma 2's every second layer (Gemma2Config: layer i slides
// when i is even), Qwen's first max_window_layers (default 28), other models' none.
std::vector<long long> full_attention_layers(const json& config, const ConfigReader& reader, long long layers,
                                             const std::string& type) {
  std::vector<long long> full;
  if (!config.contains("layer_types") || config.at("layer_types").is_null()) {
    if (type == "gemma2")
      for (long long l = 1; l < layers; l += 2)
        full.push_back(l);
    if (qwen_type(type))
      for (long long l = 0; l < std::min(layers, reader.count("max_window_layers", 28)); ++l)
        full.push_back(l);
    return full;
  }
  const json& types = config.at("layer_types");
  if (!types.is_array() || static_cast<long long>(types.size()) != layers)
    throw InputError(reader.where() + ": field 'layer_types' is not a list of " + std::to_string(layers) +
                     " layer types; accepted: one \"sliding_attention\" or \"full_attention\" per layer");
  for (long long l = 0; l < layers; ++l) {
    const json& kind = types.at(static_cast<std::size_t>(l));
    if (kind == "full_attention")
      full.push_back(l);
    else if (kind != "sliding_attention")
      throw InputError(reader.where() + ": field 'layer_types' [" + std::to_string(l) + "] = " + kind.dump() +
                       "; accepted: \"sliding_attention\" or \"full_attention\"");
  }
  return full;
}

// Llama 4's chunked attention: the rotary layers (no_rope_layers 1; Llama4TextConfig: all but
// every no_rope_layer_interval-th, default 4) attend within chunks of attention_chunk_size
// tokens; 0 when no layer does.
long long attention_chunk(const json& config, const ConfigReader& reader) {
  if (config.contains("attention_chunk_size") && config.at("attention_chunk_size").is_null())
    return 0;
  const long long chunk = reader.integer({"attention_chunk_size"}, 8192);
  if (config.contains("no_rope_layers") && config.at("no_rope_layers").is_array()) {
    for (const json& rotary : config.at("no_rope_layers"))
      if (rotary == 1 || rotary == true)
        return chunk;
    return 0;
  }
  return reader.integer({"no_rope_layer_interval"}, 4) > 1 ? chunk : 0;  // 1: every layer without rotary
}

// Llama4ForConditionalGeneration's config: the language model is its text_config (the vision
// encoder and projector are not simulated: trainsim trains the language model).
json language_model_config(const json& config, const std::string& where) {
  if (!config.contains("model_type") || config.at("model_type") != "llama4")  // a non-string is refused later
    return config;
  if (!config.contains("text_config") || !config.at("text_config").is_object())
    throw InputError(where + ": field 'text_config' is missing or not an object; accepted: a Llama 4 config.json "
                             "(Llama4ForConditionalGeneration's, with its text_config)");
  json text = config.at("text_config");
  text["model_type"] = "llama4_text";
  return text;
}

} // namespace

ModelSpec parse_model(const std::string& json_text, const std::string& where, const std::string& name,
                      long long vocab_multiple) {
  json config;
  try {
    config = parse_without_duplicate_keys(json_text, where);
  } catch (const json::exception& error) {  // parse errors, and numbers too large for a double
    throw InputError(where + ": not valid JSON (" + std::string(error.what()) + "); accepted: a Hugging Face config.json");
  }
  if (!config.is_object())
    throw InputError(where + ": the top level is not a JSON object; accepted: a Hugging Face config.json");
  config = language_model_config(config, where);
  const ConfigReader reader(config, where);
  const Family family = family_of(reader, where);
  refuse_unmodelled(config, where);

  ModelSpec model;
  model.name = name;
  model.hidden = reader.integer({"hidden_size", "n_embd", "d_model"});
  model.layers = reader.integer({"num_hidden_layers", "n_layer", "num_layers"});
  model.heads = reader.integer({"num_attention_heads", "n_head"});
  model.kv_heads = reader.integer({"num_key_value_heads"}, model.heads);
  model.vocab = reader.integer({"vocab_size"});
  // Before anything loops over the layers.
  if (model.layers > 100'000 || model.hidden > 1'000'000 || model.heads > model.hidden)
    throw InputError(where + ": implausible size (layers " + std::to_string(model.layers) + ", hidden " +
                     std::to_string(model.hidden) + ", heads " + std::to_string(model.heads) +
                     "); accepted: at most 100000 layers, hidden at most 1000000, heads at most hidden");
  if (family == Family::gpt2) {
    model.ffn = reader.integer({"n_inner", "intermediate_size"}, 4 * model.hidden);
    model.max_positions = reader.integer({"n_positions", "max_position_embeddings"});
    model.rms_norm = false;
    model.gated_mlp = false;
    model.qkv_bias = model.out_bias = model.mlp_bias = true;
    model.learned_positions = true;
    model.tied_embeddings = reader.boolean("tie_word_embeddings", true);
    model.attention_dropout = reader.positive_number({"attn_pdrop", "attention_dropout"}, true);
    model.hidden_dropout = reader.positive_number({"resid_pdrop", "hidden_dropout"}, true);
  } else {
    model.ffn = reader.integer({"intermediate_size"});
    model.max_positions = reader.integer({"max_position_embeddings"}, 0);
    model.rms_norm = true;
    model.gated_mlp = true;
    const std::string type = config.value("model_type", "");
    model.qkv_bias = reader.boolean("attention_bias", type == "qwen2" || type == "qwen2_moe");
    model.out_bias = reader.boolean("attention_bias", false);
    model.mlp_bias = reader.boolean("mlp_bias", false);
    model.learned_positions = false;
    const bool gemma = type == "gemma2";
    model.tied_embeddings = reader.boolean("tie_word_embeddings", gemma);
    model.attention_dropout = reader.positive_number({"attention_dropout"}, false);
    model.hidden_dropout = reader.positive_number({"hidden_dropout"}, false);
    model.qk_norm = type == "qwen3" || type == "qwen3_moe" || (type == "llama4_text" && reader.boolean("use_qk_norm", true));
    // Llama 4's is an L2 norm without weights (Llama4TextL2Norm).
    model.qk_norm_weights = type != "llama4_text";
    model.sandwich_norms = gemma;
    // Gemma2Config caps the final logits at 30 and the attention scores at 50 unless null.
    model.logit_softcap = gemma && reader.cap("final_logit_softcapping", true);
    model.score_softcap = gemma && reader.cap("attn_logit_softcapping", true);
    read_experts(reader, type, model);
    if (type == "deepseek_v2" || type == "deepseek_v3")
      read_latent_attention(reader, model);
    if (type == "deepseek_v3") {  // DeepseekV3Config: 1 unless given; its Hugging Face model builds none
      model.mtp_layers = reader.count("num_nextn_predict_layers", 1);
      if (model.mtp_layers > 16)
        throw InputError(where + ": field 'num_nextn_predict_layers' = " + std::to_string(model.mtp_layers) +
                         "; accepted: 0 to 16 (as model.mtp_layers)");
    }
  }
  const std::string type = config.value("model_type", "");
  model.attention_window = attention_window(config, reader, type);
  if (type == "llama4_text")
    model.attention_chunk = attention_chunk(config, reader);
  if (model.attention_window > 0)
    model.full_attention_layers = full_attention_layers(config, reader, model.layers, type);
  if (static_cast<long long>(model.full_attention_layers.size()) == model.layers) {  // no layer slides
    model.attention_window = 0;
    model.full_attention_layers.clear();
  }
  if (model.moe() && !model.full_attention_layers.empty())
    throw InputError(where + ": field 'layer_types' mixes sliding-window and full attention in a mixture of "
                     "experts, which trainsim does not simulate; accepted: the same attention in every layer");
  if (!model.mla())
    model.head_dim = reader.integer({"head_dim"}, type == "gemma2" ? 256 : model.hidden / model.heads);
  if (!model.mla() && !reader.has("head_dim") && model.hidden % model.heads != 0)
    throw InputError(where + ": hidden size " + std::to_string(model.hidden) + " is not divisible by " +
                     std::to_string(model.heads) + " attention heads; give 'head_dim' explicitly");
  if (model.heads % model.kv_heads != 0)
    throw InputError(where + ": num_attention_heads " + std::to_string(model.heads) +
                     " is not a multiple of num_key_value_heads " + std::to_string(model.kv_heads));
  model.padded_vocab = (model.vocab + vocab_multiple - 1) / vocab_multiple * vocab_multiple;
  return model;
}

ModelSpec load_model(const std::filesystem::path& file, long long vocab_multiple, long long mtp_layers) {
  std::ifstream stream(file);
  if (!stream)
    throw InputError(file.string() + ": cannot read the model file");
  std::stringstream buffer;
  buffer << stream.rdbuf();
  ModelSpec model = parse_model(buffer.str(), file.string(), file.stem().string(), vocab_multiple);
  if (mtp_layers >= 0)
    model.mtp_layers = mtp_layers;
  return model;
}

long long latent_attention_parameters(const ModelSpec& m) {
  const long long heads = m.heads, qk = m.head_dim, nope = m.head_dim - m.qk_rope_head_dim;
  const long long queries = m.q_lora_rank > 0 ? m.hidden * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * heads * qk
                                              : m.hidden * heads * qk;  // down, its norm and up; or one projection
  const long long keys_values = m.hidden * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank +
                                m.kv_lora_rank * heads * (nope + m.v_head_dim);
  return queries + keys_values + heads * m.v_head_dim * m.hidden;  // and the output projection
}

ModelSpec dense_mlp_model(const ModelSpec& model) {
  ModelSpec dense = model;
  dense.experts = dense.experts_per_token = dense.expert_ffn = dense.shared_expert_ffn = 0;
  dense.shared_expert_gate = dense.router_bias = false;
  dense.dense_layers.clear();
  return dense;
}

ModelSpec full_attention_model(const ModelSpec& model) {
  ModelSpec full = model;
  full.attention_window = 0;
  full.full_attention_layers.clear();
  return full;
}

ParameterCounts count_parameters(const ModelSpec& m) {
  ParameterCounts counts;
  const long long q_width = m.heads * m.head_dim;
  const long long kv_width = m.kv_heads * m.head_dim;
  const long long norm = m.rms_norm ? m.hidden : 2 * m.hidden;
  long long attention = m.mla() ? latent_attention_parameters(m) : m.hidden * (q_width + 2 * kv_width) + q_width * m.hidden;
  if (m.qkv_bias)
    attention += q_width + 2 * kv_width;
  if (m.out_bias)
    attention += m.hidden;
  if (m.qk_norm && m.qk_norm_weights)
    attention += 2 * m.head_dim;
  long long dense_mlp = (m.gated_mlp ? 3 : 2) * m.hidden * m.ffn;
  if (m.mlp_bias)
    dense_mlp += (m.gated_mlp ? 2 : 1) * m.ffn + m.hidden;
  long long mlp = dense_mlp;
  long long unrouted_experts = 0;  // of a layer's routed experts, what one token does not use
  const long long dense_layers = static_cast<long long>(m.dense_layers.size());
  const long long expert_layers = m.layers - dense_layers;
  if (m.moe()) {
    const long long expert = 3 * m.hidden * m.expert_ffn;
    const long long shared = 3 * m.hidden * m.shared_expert_ffn + (m.shared_expert_gate ? m.hidden : 0);
    mlp = m.hidden * m.experts + (m.router_bias ? m.experts : 0) + m.experts * expert + shared;  // router, routed and shared experts
    counts.routed_experts = m.experts * expert * expert_layers;
    unrouted_experts = (m.experts - m.experts_per_token) * expert;
  }
  const long long layer_norms = (m.sandwich_norms ? 4 : 2) * norm;
  counts.per_layer = attention + mlp + layer_norms;
  counts.per_dense_layer = dense_layers > 0 ? attention + dense_mlp + layer_norms : 0;
  counts.layers = counts.per_layer * expert_layers + counts.per_dense_layer * dense_layers;
  counts.embedding = m.padded_vocab * m.hidden;
  counts.positions = m.learned_positions ? m.max_positions * m.hidden : 0;
  counts.final_norm = norm;
  counts.output_head = m.tied_embeddings ? 0 : m.padded_vocab * m.hidden;
  counts.total = counts.embedding + counts.positions + counts.layers + counts.final_norm + counts.output_head;
  counts.active = counts.total - unrouted_experts * expert_layers;
  // DeepSeek-V3's module: its layer (as the last: layer 61), eh_proj (2h -> h), enorm, hnorm and
  // shared_head.norm.
  const bool last_dense = std::find(m.dense_layers.begin(), m.dense_layers.end(), m.layers - 1) != m.dense_layers.end();
  counts.per_mtp_module = (last_dense ? counts.per_dense_layer : counts.per_layer) + 2 * m.hidden * m.hidden + 3 * norm;
  counts.mtp = counts.per_mtp_module * m.mtp_layers;
  return counts;
}

} // namespace trainsim
