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
