// A mixture whose first layers have a dense MLP (Qwen-MoE's mlp_only_layers, as DeepSeek's first
// k dense layers): each layer costs, holds and communicates what its own kind does.
#include <doctest/doctest.h>

#include <string>

#include "common/error.hpp"
#include "config/scenario.hpp"
#include "model/costs.hpp"
#include "program/workload_builder.hpp"
#include "test_support.hpp"

using namespace trainsim;
namespace fs = std::filesystem;

namespace {

// hidden 256 in 4 heads of 64 (2 KV heads), 4 layers of which 0 and 1 dense (inner 512), 8
// experts of inner 64, top 2, Qwen3's q/k norms, untied 1,000-token vocabulary.
const char* const model_json = R"({"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 512,
  "moe_intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 4, "num_key_value_heads": 2,
  "vocab_size": 1000, "num_experts": 8, "num_experts_per_tok": 2, "mlp_only_layers": [0, 1]})";

constexpr double h = 256, dense_ffn = 512, expert_ffn = 64, experts = 8;
// Per layer: attention h (h + 2 x 128) + h x h + the q/k norms 2 x 64, two norms of h.
constexpr double attention = h * (h + 2 * 128) + h * h + 2 * 64, norms = 2 * h;
constexpr double dense_layer = attention + 3 * h * dense_ffn + norms;                    // 590,464
constexpr double expert = 3 * h * expert_ffn;                                            // 49,152
constexpr double expert_layer = attention + h * experts + experts * expert + norms;      // 592,512

ModelSpec model() { return load_model(test::write_temp_file("dense-first.json", model_json), 1); }

Scenario scenario(const std::vector<std::string>& overrides) {
  const std::string text = R"([model]
path = dense-first.json
vocab_multiple = 1
[platform]
file = dgx-a100.xml
[parallel]
dp = 4
ep = 2
[training]
seq_len = 512
micro_batch = 1
global_batch = 8
)";
  test::write_temp_file("dense-first.json", model_json);
  return parse_scenario(text, test::write_temp_file("dense-first.ini", text), overrides);
}

} // namespace

TEST_CASE("a mixture with dense layers counts each layer by its kind") {
  const ParameterCounts counts = count_parameters(model());
  CHECK(counts.per_dense_layer == dense_layer);
  CHECK(counts.per_layer == expert_layer);
  CHECK(counts.layers == 2 * dense_layer + 2 * expert_layer);
  CHECK(counts.total == 2 * 1000 * h + h + 2 * dense_layer + 2 * expert_layer);  // 3,878,144
  CHECK(counts.routed_experts == 2 * experts * expert);
  CHECK(counts.active == counts.total - 2 * (experts - 2) * expert);  // 6 unused experts in 2 layers
}

TEST_CASE("each layer of a mixture with dense layers has its kind's costs") {
  const ModelCosts costs = compute_costs(model(), 1, 512, Precision::bf16, Precision::fp32, true, Sharding{1, false, 1, 2, 0, {}});
  REQUIRE(costs.layer_kinds.size() == 2);
  CHECK(costs.kind_of_layer == std::vector<int>{1, 1, 0, 0});
  CHECK_FALSE(costs.layer(0).routed);
  CHECK(costs.layer(3).routed);
  // ep 2: a dense layer is held whole; an expert layer keeps its router and 4 of its 8 experts.
  CHECK(costs.layer(0).parameters == dense_layer);
  CHECK(costs.layer(0).expert_parameters == 0);
  CHECK(costs.layer(3).parameters == attention + h * experts + norms);
  CHECK(costs.layer(3).expert_parameters == 4 * expert);
  CHECK(costs.layer_parameters(0, 4) == 2 * dense_layer + 2 * (attention + h * experts + norms));
  CHECK(costs.layer_expert_parameters(1, 3) == 2 * 4 * expert);
  // The dense MLP forward: 2 x 512 tokens x h x 512 x 3 (gate, up, down).
  const double tokens = 512;
  CHECK(costs.layer(0).mlp_forward.flops == doctest::Approx(2 * tokens * h * dense_ffn * 3));
  // Model FLOPs: 3 x (forward of every layer + the head), attention 2 s h (h + 2 x 128) + 4 s^2 h + 2 s h h.
  const double attention_flops = 2 * tokens * h * (h + 256) + 4 * tokens * tokens * h + 2 * tokens * h * h;
  const double expert_mlp_flops = 2 * tokens * h * experts + 2 * tokens * 2 * h * expert_ffn * 3;
  const double head_flops = 2 * tokens * h * 1000;
  CHECK(costs.model_flops_per_micro_batch ==
        doctest::Approx(3 * (4 * attention_flops + 2 * 2 * tokens * h * dense_ffn * 3 + 2 * expert_mlp_flops +
                             head_flops)));
}

TEST_CASE("only the expert layers send tokens by all-to-all and keep expert states") {
  for (const std::string pp : {"1", "2"}) {
    CAPTURE(pp);
    const Scenario s = scenario({"parallel.pp=" + pp, "parallel.dp=" + std::string(pp == "1" ? "4" : "2")});
    const WorkloadBuild build = build_workload(s, model(), 0);
    for (std::size_t rank = 0; rank < build.workload.programs.size(); ++rank) {
      CAPTURE(rank);
      long all_to_alls = 0;
      double expert_weights = 0, expert_gradients_reduced = 0;
      for (const Op& op : build.workload.program(rank).ops) {
        if (op.kind == OpKind::collective && op.collective == Collective::all_to_all) {
          ++all_to_alls;
          CHECK((op.name.rfind("L2.", 0) == 0 || op.name.rfind("L3.", 0) == 0));
        }
        if (op.kind == OpKind::alloc && op.tensor == "expert-weights")
          expert_weights = op.bytes;
        if (op.kind == OpKind::collective && op.name.rfind("expert-grad-", 0) == 0)
          expert_gradients_reduced += op.bytes;
      }
      // Dispatch and combine, forward and backward, per expert layer on the rank and micro-batch;
      // the rank's 4 experts of each expert layer in bf16.
      const bool has_expert_layers = pp == "1" || build.coords[rank].pp == 1;
      CHECK(all_to_alls == (has_expert_layers ? 4 * 2 * s.grad_accum : 0));
      CHECK(expert_weights == (has_expert_layers ? 2 * 2 * 4 * expert : 0));
      // Without a pipeline (dp 4, ep 2) their fp32 gradients are reduced once over the two ranks
      // holding the same experts, the last bucket too (in backward the last expert layer comes
      // before the dense ones); with one (dp 2, ep 2) no other rank holds them.
      CHECK(expert_gradients_reduced == doctest::Approx(pp == "1" ? 4 * 2 * 4 * expert : 0));
    }
  }
}

TEST_CASE("latent attention's projections, core and kept activations, by hand") {
  // A DeepSeek-V3-shaped model: hidden 256, 4 heads of queries and keys 32 + 16 (rotary) and
  // values 32, query latent 64, key-value latent 32; its first layer dense (inner 512), then 8
  // experts of 64, top 2, one shared expert.
  const ModelSpec deepseek = parse_model(R"({"model_type": "deepseek_v3", "hidden_size": 256,
      "intermediate_size": 512, "moe_intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 3,
      "vocab_size": 1000, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
      "first_k_dense_replace": 1, "q_lora_rank": 64, "kv_lora_rank": 32, "qk_rope_head_dim": 16,
      "qk_nope_head_dim": 32, "v_head_dim": 32, "topk_method": "noaux_tc"})",
                                         "deepseek.json", "deepseek", 1);
  CHECK(deepseek.dense_layers == std::vector<long long>{0});
  const double b = 2, s = 512, tokens = b * s, e = 2;
  const ModelCosts costs = compute_costs(deepseek, 2, 512, Precision::bf16, Precision::fp32, true);
  const LayerCosts& dense = costs.layer(0);
  // Projections per token: queries 256 x 64 + 64 x 4 x 48, keys and values 256 x (32 + 16) +
  // 32 x 4 x (32 + 32): 28,672 + 20,480 multiply-adds; the core QK (48 wide) and AV (32 wide)
  // over the whole sequence; the output projection 4 x 32 -> 256.
  const double projections = 2 * tokens * (28672 + 20480);
  const double core = 2 * b * s * s * 4 * (48 + 32);
  const double out = 2 * tokens * 128 * 256;
  CHECK(dense.attention_forward.flops == doctest::Approx(projections + core + out));
  CHECK(dense.attention_core.flops == doctest::Approx(core));
  // The kernels' GEMMs are the projections (the core runs causally: half its FLOPs).
  double gemm_flops = 0, attention_kernel_flops = 0;
  for (const Kernel& kernel : costs.kernel_sets.at(static_cast<std::size_t>(dense.attention_forward.kernel_set)).kernels) {
    if (kernel.kind == KernelKind::gemm)
      gemm_flops += kernel.flops * kernel.count;
    if (kernel.kind == KernelKind::attention_forward)
      attention_kernel_flops += kernel.flops * kernel.count;
  }
  CHECK(gemm_flops == doctest::Approx(projections + out));
  CHECK(attention_kernel_flops == doctest::Approx(core / 2));
  // Kept per token without recompute: the norm's output, both latents twice (the norms' inputs and
  // the up-projections' inputs), the rotary key, Q and K (4 x 48 each), V and the output
  // projection's input (4 x 32 each); the dense MLP's input, SwiGLU's input (2 x 512) and the
  // second linear's input (512); the two norms' inputs.
  const double attention_kept = 256 + 2 * 64 + 2 * 32 + 16 + 2 * 192 + 2 * 128;
  CHECK(dense.activations.total == doctest::Approx(e * tokens * (attention_kept + 256 + 3 * 512 + 2 * 256)));
  // Parameters: the latent attention's, held whole (tp 1); the expert layer's router has its bias.
  const double attention = 256 * 64 + 64 + 64 * 192 + 256 * 48 + 32 + 32 * 256 + 128 * 256;
  CHECK(dense.parameters == attention + 3 * 256 * 512 + 2 * 256);
  CHECK(costs.layer(1).parameters == attention + 8 * (256 + 1) + 9 * 3 * 256 * 64 + 2 * 256);
}

TEST_CASE("latent attention is refused under tensor and context parallelism, naming the setting") {
  const char* const deepseek = R"({"model_type": "deepseek_v3", "hidden_size": 256, "intermediate_size": 512,
      "moe_intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000,
      "n_routed_experts": 8, "num_experts_per_tok": 2, "first_k_dense_replace": 1, "kv_lora_rank": 32,
      "qk_rope_head_dim": 16, "qk_nope_head_dim": 32, "v_head_dim": 32})";
  const fs::path model_file = test::write_temp_file("tiny-deepseek.json", deepseek);
  for (const std::vector<std::string> settings :
       {std::vector<std::string>{"parallel.tp=2", "parallel.sp=true"}, std::vector<std::string>{"parallel.cp=2"}}) {
    CAPTURE(settings.front());
    const std::string text = "[model]\npath = tiny-deepseek.json\nvocab_multiple = 1\n[platform]\nfile = dgx-a100.xml\n"
                             "[parallel]\ndp = 4\n[training]\nseq_len = 512\nmicro_batch = 1\nglobal_batch = 8\n";
    const Scenario s = parse_scenario(text, test::write_temp_file("tiny-deepseek.ini", text), settings);
    try {
      build_workload(s, load_model(model_file, 1), 0);
      FAIL("accepted");
    } catch (const InputError& error) {
      CHECK(std::string(error.what()).find("multi-head latent attention") != std::string::npos);
      CHECK(std::string(error.what()).find("accepted: parallel.tp = 1 and parallel.cp = 1") != std::string::npos);
    }
  }
}

TEST_CASE("a multi-token-prediction module runs a layer like the last, a projection and the output layer again, where the head is") {
  // model.mtp_layers = 1 on the 4-layer mixture: the module's layer (index 4) is an expert layer
  // as layer 3; the head piece adds the next token's embedding, two norms, the projection
  // 2h -> h and a second output layer and loss: 2 x 512 x 2h x h + 2 x 512 x h x 1000 FLOPs more.
  const Scenario plain = scenario({"model.mtp_layers=0"});
  const Scenario with_mtp = scenario({"model.mtp_layers=1"});
  const ModelSpec mtp_model = load_model(with_mtp.model_file, 1, with_mtp.mtp_layers);
  CHECK(mtp_model.mtp_layers == 1);
  const ModelCosts before = compute_costs(model(), 1, 512, Precision::bf16, Precision::fp32, true);
  const ModelCosts after = compute_costs(mtp_model, 1, 512, Precision::bf16, Precision::fp32, true);
  CHECK(after.layer_count() == 5);
  CHECK(after.kind_of_layer[4] == after.kind_of_layer[3]);
  CHECK(after.head_forward.flops - before.head_forward.flops == doctest::Approx(2 * 512 * 2 * h * h + 2 * 512 * h * 1000));
  // Its parameters beside the model's: the layer, the projection and three norms.
  CHECK(count_parameters(mtp_model).mtp == static_cast<long long>(expert_layer + 2 * h * h + 3 * h));
  CHECK(count_parameters(mtp_model).total == count_parameters(model()).total);
  CHECK(after.head_parameters - before.head_parameters == 2 * h * h + 3 * h);
  bool projection = false;
  for (const KernelSet& set : after.kernel_sets)
    for (const Kernel& kernel : set.kernels)
      projection = projection || (set.name == "head.fwd" && kernel.name == "mtp.eh-proj" && kernel.m == 512 &&
                                  kernel.n == h && kernel.k == 2 * h);
  CHECK(projection);
  for (const std::string pp : {"1", "2"}) {
    CAPTURE(pp);
    const Scenario s = scenario({"model.mtp_layers=1", "parallel.pp=" + pp, "parallel.dp=" + std::string(pp == "1" ? "4" : "2")});
    const WorkloadBuild build = build_workload(s, mtp_model, 0);
    for (std::size_t rank = 0; rank < build.workload.programs.size(); ++rank) {
      CAPTURE(rank);
      const bool last_stage = pp == "1" || build.coords[rank].pp == 1;
      long module_ops = 0, all_to_alls = 0, embedding_sums = 0;
      for (const Op& op : build.workload.program(rank).ops) {
        module_ops += op.kind == OpKind::compute && op.name.rfind("L4.", 0) == 0;
        all_to_alls += op.kind == OpKind::collective && op.collective == Collective::all_to_all;
        embedding_sums += op.kind == OpKind::collective && op.name == "embedding-grad-allreduce";
      }
      // The module's layer runs on the last stage, with its all-to-alls (dispatch and combine,
      // forward and backward, per micro-batch), beside layers 2 and 3's.
      CHECK((module_ops > 0) == last_stage);
      CHECK(all_to_alls == (last_stage ? 4 * 3 * s.grad_accum : 0));
      // Under a pipeline the last stage keeps a copy of the embedding for the module's lookup,
      // whose gradients the first and last stages sum (Megatron-Core's embedding group).
      CHECK(embedding_sums == (pp == "2" ? 1 : 0));
    }
  }
  // Under ZeRO-3 the head's gathered group holds the embedding the module looks up.
  const Scenario sharded = scenario({"model.mtp_layers=1", "memory.zero=3"});
  double head_gathered = 0;
  const WorkloadBuild sharded_build = build_workload(sharded, mtp_model, 0);
  for (const Op& op : sharded_build.workload.program(0).ops)
    if (op.kind == OpKind::collective && op.name == "gather.head.params.fwd.mb0")
      head_gathered = op.bytes;
  CHECK(head_gathered == 2 * (h * 1000 + h + h * 1000 + 2 * h * h + 3 * h));  // bf16: output layer, norms, projection, embedding
  // Its collectives over tp are not written: refused.
  try {
    build_workload(scenario({"model.mtp_layers=1", "parallel.tp=2", "parallel.sp=true", "parallel.dp=2"}), mtp_model, 0);
    FAIL("accepted");
  } catch (const InputError& error) {
    CHECK(std::string(error.what()).find("parallel.tp = 2 with multi-token prediction") != std::string::npos);
  }
}
