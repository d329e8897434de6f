#include <doctest/doctest.h>

#include "common/error.hpp"
#include "model/model.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {
ModelSpec model(const std::string& name, long long vocab_multiple = 128) {
  return load_model(test::source_dir() / "models" / (name + ".json"), vocab_multiple);
}
} // namespace

TEST_CASE("Llama-2-7B has exactly 6,738,415,616 parameters") {
  // REFERENCES.md, "Known parameter counts" (the Hugging Face checkpoint's count).
  CHECK(count_parameters(model("llama2-7b")).total == 6'738'415'616LL);
}

TEST_CASE("GQA Llama models match their published checkpoint sizes") {
  // Counts of the Hugging Face checkpoints (sum of tensor sizes).
  CHECK(count_parameters(model("llama3-8b")).total == 8'030'261'248LL);
  CHECK(count_parameters(model("llama2-70b")).total == 68'976'648'192LL);
  CHECK(count_parameters(model("llama3-70b")).total == 70'553'706'496LL);
  // Llama 3.2 1B ties its embeddings: 128256*2048 + 16*(2*2048^2 + 2*2048*512 + 3*2048*8192 + 2*2048) + 2048.
  CHECK(count_parameters(model("llama3.2-1b")).total == 1'235'814'400LL);
}

TEST_CASE("the Llama 3.1, Mistral and Qwen2.5 configs match their published checkpoint sizes") {
  // The Hugging Face checkpoints' sizes (sum of tensor sizes): V*h*2 (untied) + L*(attention +
  // 3*h*ffn + 2 norms) + final norm, Qwen2.5 with Q, K and V biases.
  CHECK(count_parameters(model("llama3.1-8b")).total == 8'030'261'248LL);
  CHECK(count_parameters(model("llama3.1-70b")).total == 70'553'706'496LL);
  CHECK(count_parameters(model("llama3.1-405b")).total == 405'853'388'800LL);
  CHECK(count_parameters(model("mistral-7b")).total == 7'248'023'552LL);
  CHECK(count_parameters(model("qwen2.5-7b")).total == 7'615'616'512LL);
  CHECK(count_parameters(model("qwen2.5-72b")).total == 72'706'203'648LL);
}

TEST_CASE("GPT-3 175B follows 12Lh^2(1 + 13/(12h) + (V+s)/(12Lh)) plus the final LayerNorm") {
  // Narayanan et al. 2021 (REFERENCES.md): h=12288, L=96, V=51200, s=2048 -> 174.6B.
  const ModelSpec gpt3 = model("gpt3-175b");
  const double h = 12288, L = 96, V = 51200, s = 2048;
  const double formula = 12 * L * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * L * h));
  const auto counts = count_parameters(gpt3);
  CHECK(static_cast<double>(counts.total) == doctest::Approx(formula + 2 * h).epsilon(1e-12));
  CHECK(counts.total / 1e9 == doctest::Approx(174.6).epsilon(0.001));
  CHECK(counts.output_head == 0);  // tied embeddings
}

TEST_CASE("the vocabulary is padded to the scenario's multiple") {
  const std::string gpt2 = R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
                               "n_positions": 1024, "vocab_size": 50257})";
  CHECK(parse_model(gpt2, "gpt2.json", "gpt2", 128).padded_vocab == 50304);  // Megatron pads GPT-2 to 50304
  CHECK(parse_model(gpt2, "gpt2.json", "gpt2", 1).padded_vocab == 50257);
  // GPT-2 small: 124,439,808 parameters with its own vocabulary (the Hugging Face checkpoint).
  CHECK(count_parameters(parse_model(gpt2, "gpt2.json", "gpt2", 1)).total == 124'439'808LL);
}

TEST_CASE("architecture flags follow the family and the config") {
  const ModelSpec llama = model("tiny-llama");
  CHECK(llama.gated_mlp);
  CHECK(llama.rms_norm);
  CHECK_FALSE(llama.tied_embeddings);
  CHECK(llama.kv_heads == 2);
  CHECK(llama.padded_vocab == 1024);
  const ModelSpec gpt = model("tiny-gpt");
  CHECK_FALSE(gpt.gated_mlp);
  CHECK(gpt.learned_positions);
  CHECK(gpt.attention_dropout);
}

TEST_CASE("bad model files name the file and the field") {
  auto message = [](const std::string& json) {
    try {
      parse_model(json, "bad.json", "bad", 1);
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    FAIL("accepted");
    return std::string();
  };
  CHECK(message("{ not json").find("not valid JSON") != std::string::npos);
  CHECK(message("[]").find("JSON object") != std::string::npos);
  CHECK(message(R"({"model_type": "llama", "hidden_size": 64})").find("num_hidden_layers") != std::string::npos);
  CHECK(message(R"({"model_type": "t5"})").find("accepted: llama") != std::string::npos);
  CHECK(message(R"({"model_type": "llama", "hidden_size": -4, "intermediate_size": 1, "num_hidden_layers": 1,
                    "num_attention_heads": 1, "vocab_size": 10})")
            .find("'hidden_size'") != std::string::npos);
  CHECK(message(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 1, "num_hidden_layers": 1,
                    "num_attention_heads": 6, "vocab_size": 10})")
            .find("divisible") != std::string::npos);
  CHECK(message(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 1, "num_hidden_layers": 1000000000,
                    "num_attention_heads": 4, "vocab_size": 10})")
            .find("implausible") != std::string::npos);
}

namespace {

// A small Llama config with `extra` fields added.
std::string llama_with(const std::string& extra) {
  return R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "vocab_size": 100)" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

std::string refusal_of(const std::string& json) {
  try {
    parse_model(json, "hf.json", "hf", 1);
  } catch (const InputError& error) {
    return error.what();
  }
  FAIL("accepted");
  return "";
}

} // namespace

TEST_CASE("a config with fields that change the architecture trainsim simulates is refused") {
  // Mixtral's fields under model_type llama: 8 experts per layer would be simulated as one dense MLP.
  const std::string moe = refusal_of(llama_with(R"("num_local_experts": 8, "num_experts_per_tok": 2)"));
  CHECK(moe.find("hf.json") != std::string::npos);
  CHECK(moe.find("'num_local_experts' = 8") != std::string::npos);
  CHECK(moe.find("mixture of experts") != std::string::npos);
  CHECK(refusal_of(llama_with(R"("is_encoder_decoder": true)")).find("encoder-decoder") != std::string::npos);
  // One expert is a dense MLP, and metadata changes nothing trainsim counts.
  CHECK_NOTHROW(parse_model(llama_with(R"("num_local_experts": 1)"), "hf.json", "hf", 1));
  CHECK_NOTHROW(parse_model(llama_with(R"("torch_dtype": "bfloat16", "bos_token_id": 1, "architectures": ["LlamaForCausalLM"],
                                          "rope_scaling": {"type": "linear", "factor": 2.0}, "is_encoder_decoder": false)"),
                            "hf.json", "hf", 1));
}

TEST_CASE("a key given twice in a model config is refused") {
  const std::string message = refusal_of(llama_with(R"("hidden_size": 128)"));
  CHECK(message.find("'hidden_size' is given twice") != std::string::npos);
  // The same key in two different objects is no repetition.
  CHECK_NOTHROW(parse_model(llama_with(R"("a": {"factor": 1}, "b": {"factor": 2})"), "hf.json", "hf", 1));
}

TEST_CASE("a sliding attention window is read unless the config turns it off") {
  CHECK(parse_model(llama_with(R"("sliding_window": 4096)"), "m.json", "m", 1).attention_window == 4096);
  CHECK(parse_model(llama_with(R"("sliding_window": null)"), "m.json", "m", 1).attention_window == 0);
  CHECK(parse_model(llama_with(R"("sliding_window": 4096, "use_sliding_window": false)"), "m.json", "m", 1)
            .attention_window == 0);
  for (const ModelSpec& catalog : {model("llama3-8b"), model("gpt3-175b")})
    CHECK(catalog.attention_window == 0);
}

TEST_CASE("Gemma 2 configs match their published checkpoint sizes, with four norms per layer and tied embeddings") {
  // The Hugging Face checkpoints' totals (google/gemma-2-2b, -9b, -27b). Per layer: Q and the
  // output projection heads x head_dim x hidden each, K and V kv_heads x head_dim x hidden each,
  // the gated MLP 3 x hidden x intermediate, four RMSNorms of hidden (before and after the
  // attention and the MLP); then the 256,000-token embedding (tied to the head) and the final norm.
  const auto total = [](long long h, long long f, long long heads, long long kv, long long d, long long layers) {
    return layers * (2 * heads * d * h + 2 * kv * d * h + 3 * h * f + 4 * h) + 256'000 * h + h;
  };
  CHECK(total(2304, 9216, 8, 4, 256, 26) == 2'614'341'888LL);
  CHECK(total(3584, 14336, 16, 8, 256, 42) == 9'241'705'984LL);
  CHECK(total(4608, 36864, 32, 16, 128, 46) == 27'227'128'320LL);
  CHECK(count_parameters(model("gemma2-2b", 1)).total == 2'614'341'888LL);
  CHECK(count_parameters(model("gemma2-9b", 1)).total == 9'241'705'984LL);
  CHECK(count_parameters(model("gemma2-27b", 1)).total == 27'227'128'320LL);
  const ModelSpec gemma = model("gemma2-9b");
  CHECK(gemma.tied_embeddings);
  CHECK(gemma.sandwich_norms);
  CHECK(gemma.logit_softcap);
  CHECK(gemma.head_dim == 256);
  // Gemma2Config: layer i slides over 4,096 tokens when i is even; the odd ones see everything.
  CHECK(gemma.attention_window == 4096);
  REQUIRE(gemma.full_attention_layers.size() == 21);
  CHECK(gemma.full_attention_layers.front() == 1);
  CHECK(gemma.full_attention_layers.back() == 41);
}

TEST_CASE("Qwen slides its window only with use_sliding_window, and then from max_window_layers on") {
  const auto qwen = [](const std::string& extra) {
    return parse_model(R"({"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
                           "num_attention_heads": 4, "vocab_size": 100, "sliding_window": 16)" + extra + "}",
                       "q.json", "q", 1);
  };
  // Qwen2Config: use_sliding_window defaults to false; max_window_layers to 28 (more than 4: none slides).
  CHECK(qwen("").attention_window == 0);
  CHECK(qwen(R"(, "use_sliding_window": true)").attention_window == 0);
  const ModelSpec sliding = qwen(R"(, "use_sliding_window": true, "max_window_layers": 1)");
  CHECK(sliding.attention_window == 16);
  CHECK(sliding.full_attention_layers == std::vector<long long>{0});
  // Gemma 2 without a window: null.
  CHECK(parse_model(R"({"model_type": "gemma2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                        "num_attention_heads": 4, "vocab_size": 100, "sliding_window": null})",
                    "g.json", "g", 1)
            .attention_window == 0);
}

TEST_CASE("layer_types says which layers attend over the whole sequence, and what it cannot be is refused") {
  const std::string types = R"("sliding_window": 16, "layer_types": ["full_attention", "sliding_attention"])";
  CHECK(parse_model(llama_with(types), "m.json", "m", 1).full_attention_layers == std::vector<long long>{0});
  // Without a window every layer sees the whole sequence: the list changes nothing.
  CHECK(parse_model(llama_with(R"("layer_types": ["full_attention", "full_attention"])"), "m.json", "m", 1)
            .full_attention_layers.empty());
  CHECK(refusal_of(llama_with(R"("sliding_window": 16, "layer_types": ["full_attention"])"))
            .find("'layer_types' is not a list of 2 layer types") != std::string::npos);
  CHECK(refusal_of(llama_with(R"("sliding_window": 16, "layer_types": ["full_attention", "chunked_attention"])"))
            .find("'layer_types' [1] = \"chunked_attention\"") != std::string::npos);
  CHECK(refusal_of(R"({"model_type": "gemma2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "vocab_size": 100, "final_logit_softcapping": -1})")
            .find("'final_logit_softcapping' = -1") != std::string::npos);
  CHECK_FALSE(parse_model(R"({"model_type": "gemma2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "vocab_size": 100, "final_logit_softcapping": null})",
                          "m.json", "m", 1)
                  .logit_softcap);
  CHECK(refusal_of(R"({"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "vocab_size": 100, "num_local_experts": 4, "num_experts_per_tok": 2,
                       "sliding_window": 16, "layer_types": ["full_attention", "sliding_attention"]})")
            .find("mixes sliding-window and full attention in a mixture of experts") != std::string::npos);
}

TEST_CASE("mixtures of experts have their published total and active parameter counts") {
  // Mixtral 8x7B (Jiang et al. 2024: 46.7B total, 12.9B active), per layer: attention
  // 4096 x (4096 + 2 x 1024) + 4096^2 = 41,943,040; router 4096 x 8 = 32,768; experts
  // 8 x 3 x 4096 x 14336 = 1,409,286,144; norms 8,192: 1,451,270,144 x 32 layers, plus
  // embedding and output 2 x 32000 x 4096 and the final norm 4096.
  const ParameterCounts mixtral = count_parameters(model("mixtral-8x7b"));
  CHECK(mixtral.total == 1'451'270'144LL * 32 + 2 * 32000LL * 4096 + 4096);
  CHECK(mixtral.total == 46'702'792'704LL);
  CHECK(mixtral.routed_experts == 1'409'286'144LL * 32);
  // A token uses 2 of the 8 experts: the other 6 x 3 x 4096 x 14336 per layer are inactive.
  CHECK(mixtral.active == mixtral.total - 6LL * 3 * 4096 * 14336 * 32);
  CHECK(mixtral.active / 1e9 == doctest::Approx(12.9).epsilon(0.002));
  // Mixtral 8x22B (Mistral AI: 141B total, 39B active).
  const ParameterCounts mixtral22 = count_parameters(model("mixtral-8x22b"));
  CHECK(mixtral22.total / 1e9 == doctest::Approx(141).epsilon(0.003));
  CHECK(mixtral22.active / 1e9 == doctest::Approx(39).epsilon(0.005));
  // Qwen3-30B-A3B (Qwen3 technical report: 30.5B total, 3.3B activated), per layer: attention
  // 2048 x (4096 + 2 x 512) + 4096 x 2048 = 18,874,368 and its q/k norms 2 x 128; router
  // 2048 x 128 = 262,144; experts 128 x 3 x 2048 x 768 = 603,979,776; norms 4096.
  const ParameterCounts qwen3 = count_parameters(model("qwen3-30b-a3b"));
  CHECK(qwen3.total == (18'874'368LL + 256 + 262'144 + 603'979'776 + 4096) * 48 + 2 * 151936LL * 2048 + 2048);
  CHECK(qwen3.total / 1e9 == doctest::Approx(30.5).epsilon(0.002));
  CHECK(qwen3.active == qwen3.total - 120LL * 3 * 2048 * 768 * 48);  // 8 of 128 experts per token
  CHECK(qwen3.active / 1e9 == doctest::Approx(3.3).epsilon(0.02));
  // Qwen1.5-MoE-A2.7B (Qwen blog: 14.3B total, 2.7B activated): QKV biases, 60 experts of 1408,
  // top 4, and a shared expert of 5632 behind a sigmoid gate (2048 x 1) that every token uses.
  const ParameterCounts qwen2 = count_parameters(model("qwen1.5-moe-a2.7b"));
  const long long layer = 4LL * 2048 * 2048 + 3 * 2048 + 60 * 2048 + 60LL * 3 * 2048 * 1408 + 3LL * 2048 * 5632 +
                          2048 + 2 * 2048;
  CHECK(qwen2.total == layer * 24 + 2 * 151936LL * 2048 + 2048);
  CHECK(qwen2.total / 1e9 == doctest::Approx(14.3).epsilon(0.002));
  CHECK(qwen2.active / 1e9 == doctest::Approx(2.7).epsilon(0.01));
  // DeepSeek-V3 (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report": 671B total, 37B activated
  // per token, the multi-token-prediction module apart). Latent attention per layer: queries
  // 7168 x 1536 + norm 1536 + 1536 x 128 x 192; keys and values 7168 x (512 + 64) + norm 512 +
  // 512 x 128 x (128 + 128); output 128 x 128 x 7168: 187,107,328. The first 3 layers have a
  // dense SwiGLU of 18432 (396,361,728); the other 58 a router of 256 x 7168 with a bias of 256,
  // 256 experts of 3 x 7168 x 2048 = 44,040,192 and one shared expert of that size. Two norms
  // per layer; embedding and output 129280 x 7168 each, the final norm.
  const ParameterCounts deepseek = count_parameters(model("deepseek-v3"));
  const long long attention = 7168LL * 1536 + 1536 + 1536LL * 128 * 192 + 7168LL * 576 + 512 + 512LL * 128 * 256 +
                              128LL * 128 * 7168;
  CHECK(attention == 187'107'328LL);
  const long long expert = 3LL * 7168 * 2048, norms = 2 * 7168;
  const long long dense_layer = attention + 3LL * 7168 * 18432 + norms;
  const long long expert_layer = attention + 256LL * 7168 + 256 + 257 * expert + norms;
  CHECK(deepseek.per_dense_layer == dense_layer);
  CHECK(deepseek.per_layer == expert_layer);
  CHECK(deepseek.total == 3 * dense_layer + 58 * expert_layer + 2 * 129280LL * 7168 + 7168);
  CHECK(deepseek.total == 671'026'419'200LL);
  CHECK(deepseek.active == deepseek.total - 58 * 248 * expert);  // 8 of 256 routed experts per token
  CHECK(deepseek.active / 1e9 == doctest::Approx(37).epsilon(0.02));
  // Its multi-token-prediction module beside them (num_nextn_predict_layers 1; the repository's
  // README_WEIGHTS.md: "11.5B unique parameters" apart from the shared embedding and head): layer
  // 61 built as an expert layer, eh_proj 7168 x 14336 and three norms.
  CHECK(deepseek.per_mtp_module == expert_layer + 2 * 7168LL * 7168 + 3 * 7168);
  CHECK(deepseek.mtp == deepseek.per_mtp_module);
  CHECK(deepseek.mtp / 1e9 == doctest::Approx(11.5).epsilon(0.01));
  CHECK(count_parameters(load_model(test::source_dir() / "models" / "deepseek-v3.json", 128, 0)).mtp == 0);
  // A dense model's active parameters are all of them.
  const ParameterCounts dense = count_parameters(model("llama3-8b"));
  CHECK(dense.active == dense.total);
  CHECK(dense.routed_experts == 0);
}

TEST_CASE("Llama 4's language models have their published sizes, interleaved expert layers and chunked attention") {
  // Meta's model card (meta-llama/llama-models, models/llama4/MODEL_CARD.md): Scout 17B activated
  // of 109B, Maverick 17B of 400B. The language model of each config's text_config (vision
  // encoder and projector apart), vocabulary unpadded, per layer: attention 5120 x (5120 + 2 x
  // 1024) + 5120 x 5120 = 62,914,560 (the queries' and keys' L2 norm has no weights), two norms
  // 10,240; an expert layer a router 5120 x E, E experts and one shared expert of 3 x 5120 x 8192
  // = 125,829,120 each; a dense layer a SwiGLU of 3 x 5120 x 16384 = 251,658,240. Embedding and
  // output 202048 x 5120 each, the final norm 5120.
  const long long attention = 62'914'560LL, norms = 10'240, expert = 125'829'120LL;
  const long long ends = 2 * 202048LL * 5120 + 5120;
  const ModelSpec scout_spec = model("llama4-scout", 1);
  const ParameterCounts scout = count_parameters(scout_spec);
  // Scout: 16 experts in every one of its 48 layers.
  CHECK(scout_spec.dense_layers.empty());
  CHECK(scout.total == (attention + 5120LL * 16 + 17 * expert + norms) * 48 + ends);
  CHECK(scout.total == 107'769'861'120LL);  // the card's 109B counts the vision encoder too
  CHECK(scout.active == scout.total - 15 * expert * 48);  // 1 of 16 routed experts per token
  CHECK(scout.active / 1e9 == doctest::Approx(17).epsilon(0.02));
  // Maverick: 128 experts in every second layer (interleave_moe_layer_step 2: layers 1, 3, ...).
  const ModelSpec maverick_spec = model("llama4-maverick", 1);
  const ParameterCounts maverick = count_parameters(maverick_spec);
  CHECK(maverick_spec.dense_layers.size() == 24);
  CHECK(maverick_spec.dense_layers.front() == 0);
  CHECK(maverick_spec.dense_layers.back() == 46);
  CHECK(maverick.total == (attention + 5120LL * 128 + 129 * expert + norms) * 24 +
                              (attention + 3LL * 5120 * 16384 + norms) * 24 + ends);
  CHECK(maverick.total / 1e9 == doctest::Approx(400).epsilon(0.002));
  CHECK(maverick.active / 1e9 == doctest::Approx(17).epsilon(0.02));
  CHECK(maverick_spec.ffn == 16384);
  CHECK(maverick_spec.expert_ffn == 8192);
  CHECK(maverick_spec.shared_expert_ffn == 8192);
  CHECK(maverick_spec.experts_per_token == 1);
  // Scout normalises queries and keys, Maverick does not; both chunk the rotary layers' attention.
  CHECK(scout_spec.qk_norm);
  CHECK_FALSE(scout_spec.qk_norm_weights);
  CHECK_FALSE(maverick_spec.qk_norm);
  CHECK(scout_spec.attention_chunk == 8192);
  CHECK(maverick_spec.attention_chunk == 8192);
  // A model_type that is not a string is refused as such (found by the fuzzer).
  CHECK(refusal_of(R"({"model_type": 200, "n_embd": 8})").find("model_type") != std::string::npos);
  // A Llama 4 config is read through its text_config, which it must have.
  CHECK(refusal_of(R"({"model_type": "llama4", "vision_config": {}})").find("'text_config'") != std::string::npos);
  // Without rotary layers nothing is chunked; a null chunk size chunks nothing.
  const std::string text = R"({"model_type": "llama4", "text_config": {"hidden_size": 256, "intermediate_size": 128,
      "intermediate_size_mlp": 512, "num_attention_heads": 4, "num_hidden_layers": 4, "num_key_value_heads": 2,
      "vocab_size": 1000, "num_local_experts": 4, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2)";
  CHECK(parse_model(text + "}}", "m.json", "m", 1).attention_chunk == 8192);
  CHECK(parse_model(text + R"(, "no_rope_layer_interval": 1}})", "m.json", "m", 1).attention_chunk == 0);
  CHECK(parse_model(text + R"(, "attention_chunk_size": null}})", "m.json", "m", 1).attention_chunk == 0);
  CHECK(parse_model(text + "}}", "m.json", "m", 1).dense_layers == std::vector<long long>{0, 2});
}

TEST_CASE("expert configs outside what trainsim simulates are refused by field") {
  const auto qwen3_moe = [](const std::string& extra) {
    return std::string(R"({"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 512,
      "moe_intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
      "vocab_size": 1000, "num_experts": 8, "num_experts_per_tok": 2)") + extra + "}";
  };
  const ModelSpec read = parse_model(qwen3_moe(""), "m.json", "m", 1);
  CHECK(read.experts == 8);
  CHECK(read.experts_per_token == 2);
  CHECK(read.expert_ffn == 64);
  CHECK(read.qk_norm);
  // Dense layers among the expert ones: read as Qwen2MoeDecoderLayer does, refused where they are
  // out of range or leave no expert layer, and for Mixtral, whose model ignores them.
  CHECK(refusal_of(qwen3_moe(R"(, "mlp_only_layers": [2])")).find("'mlp_only_layers' = [2]; accepted: a list of layer "
                                                                   "indices, 0 to 1") != std::string::npos);
  CHECK(refusal_of(qwen3_moe(R"(, "mlp_only_layers": [0, 1])")).find("leave no layer with experts") !=
        std::string::npos);
  CHECK(refusal_of(qwen3_moe(R"(, "decoder_sparse_step": 3)")).find("leave no layer with experts") !=
        std::string::npos);
  CHECK(refusal_of(qwen3_moe(R"(, "decoder_sparse_step": 0)")).find("'decoder_sparse_step' = 0") != std::string::npos);
  // An implausible layer count is refused before the layers are listed.
  std::string huge = qwen3_moe(R"(, "decoder_sparse_step": 2)");
  huge.replace(huge.find("\"num_hidden_layers\": 2"), 22, "\"num_hidden_layers\": 10000000000");
  CHECK(refusal_of(huge).find("implausible size (layers 10000000000") != std::string::npos);
  CHECK(parse_model(qwen3_moe(R"(, "mlp_only_layers": [0])"), "m.json", "m", 1).dense_layers ==
        std::vector<long long>{0});
  CHECK(parse_model(qwen3_moe(R"(, "decoder_sparse_step": 2)"), "m.json", "m", 1).dense_layers ==
        std::vector<long long>{0});  // (l + 1) % 2: layer 1 has the experts
  CHECK(refusal_of(R"({"model_type": "mixtral", "hidden_size": 256, "intermediate_size": 512,
      "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000, "num_local_experts": 8,
      "num_experts_per_tok": 2, "decoder_sparse_step": 2})")
            .find("dense layers between expert layers") != std::string::npos);
  CHECK(refusal_of(R"({"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 512,
      "moe_intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000,
      "num_experts": 2, "num_experts_per_tok": 4})")
            .find("'num_experts_per_tok' = 4 is more than the 2 experts") != std::string::npos);
  CHECK(refusal_of(R"({"model_type": "deepseek_v3", "hidden_size": 256, "intermediate_size": 512,
      "moe_intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000,
      "n_routed_experts": 8, "num_experts_per_tok": 2, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32,
      "v_head_dim": 32, "first_k_dense_replace": 1})")
            .find("missing field 'kv_lora_rank'") != std::string::npos);
  // DeepSeek's optional keys as Hugging Face reads them: absent, DeepseekV3Config's defaults (3
  // dense layers, one shared expert, a query latent of 1536); 0 and null are values.
  const auto deepseek = [](const std::string& extra) {
    return parse_model(R"({"model_type": "deepseek_v3", "hidden_size": 256, "intermediate_size": 512,
      "moe_intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 4, "vocab_size": 1000,
      "n_routed_experts": 8, "num_experts_per_tok": 2, "kv_lora_rank": 64, "qk_rope_head_dim": 16,
      "qk_nope_head_dim": 32, "v_head_dim": 32)" + extra + "}",
                       "deepseek.json", "deepseek", 1);
  };
  const ModelSpec defaults = deepseek("");
  CHECK(defaults.dense_layers == std::vector<long long>{0, 1, 2});
  CHECK(defaults.shared_expert_ffn == 64);
  CHECK(defaults.q_lora_rank == 1536);
  CHECK(defaults.router_bias);
  const ModelSpec zeros =
      deepseek(R"(, "first_k_dense_replace": 0, "n_shared_experts": 0, "q_lora_rank": null, "moe_layer_freq": 2)");
  CHECK(zeros.dense_layers == std::vector<long long>{1, 3});  // l % 2 != 0
  CHECK(zeros.shared_expert_ffn == 0);
  CHECK(zeros.q_lora_rank == 0);
  CHECK(refusal_of(R"({"model_type": "deepseek_v3", "hidden_size": 256, "intermediate_size": 512,
      "moe_intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 4, "vocab_size": 1000,
      "n_routed_experts": 8, "num_experts_per_tok": 2, "kv_lora_rank": 64, "qk_rope_head_dim": 16,
      "qk_nope_head_dim": 32, "v_head_dim": 32, "attention_bias": true})")
            .find("'attention_bias' = true with multi-head latent attention") != std::string::npos);
  CHECK(refusal_of(R"({"model_type": "deepseek_v3", "hidden_size": 1000000, "intermediate_size": 512,
      "moe_intermediate_size": 64, "num_attention_heads": 100000, "num_hidden_layers": 100000, "vocab_size": 1000,
      "n_routed_experts": 8, "num_experts_per_tok": 2, "kv_lora_rank": 1000000, "qk_rope_head_dim": 16,
      "qk_nope_head_dim": 32, "v_head_dim": 32, "first_k_dense_replace": 1})")
            .find("implausible latent attention") != std::string::npos);
  CHECK(refusal_of(R"({"model_type": "deepseek_v3", "hidden_size": 256, "intermediate_size": 512,
      "moe_intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000,
      "n_routed_experts": 8, "num_experts_per_tok": 2, "kv_lora_rank": 64, "qk_rope_head_dim": 16,
      "qk_nope_head_dim": 32, "v_head_dim": 32, "first_k_dense_replace": 2})")
            .find("leave no layer with experts") != std::string::npos);
}
