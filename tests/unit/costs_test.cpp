#include <doctest/doctest.h>

#include "model/costs.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {
ModelSpec model(const std::string& name) { return load_model(test::source_dir() / "models" / (name + ".json"), 128); }
} // namespace

TEST_CASE("activation bytes per layer are sbh(34 + 5as/h) for a GPT layer without FlashAttention") {
  // Korthikanti et al. 2022, Table 2, no parallelism (REFERENCES.md).
  const ModelSpec gpt3 = model("gpt3-175b");
  const double s = 2048, b = 1, h = 12288, a = 96;
  const ModelCosts costs = compute_costs(gpt3, 1, 2048, Precision::bf16, Precision::fp32, false);
  CHECK(costs.layer(0).activations.total == doctest::Approx(s * b * h * (34 + 5 * a * s / h)).epsilon(1e-12));
  // Selective recompute drops the 5as/h term, full recompute keeps the 2sbh layer input (same table).
  CHECK(costs.layer(0).activations.total - costs.layer(0).activations.attention_core == doctest::Approx(34 * s * b * h));
  CHECK(costs.layer(0).activations.input == doctest::Approx(2 * s * b * h));
}

TEST_CASE("FlashAttention drops the 5as/h term") {
  const ModelSpec tiny = model("tiny-gpt");
  const double s = 512, b = 4, h = 256;
  const ModelCosts costs = compute_costs(tiny, 4, 512, Precision::bf16, Precision::fp32, true);
  CHECK(costs.layer(0).activations.total == doctest::Approx(34 * s * b * h));
  CHECK(costs.layer(0).activations.attention_core == 0);
}

TEST_CASE("a Llama layer keeps K and V at GQA width, both SwiGLU inputs, and no dropout masks") {
  // Hand derivation for tiny-llama (h=256, f=688, 8 heads, 2 KV heads, 16-bit):
  //   attention: QKV input 2sbh + Q 2sbh + K,V 2*2sbh*(2/8) + projection input 2sbh = 7sbh
  //   MLP: input 2sbh + gate and up 2*2sbf + down input 2sbf = 2sbh + 6sbf
  //   two RMSNorm inputs 4sbh          -> 13sbh + 6sbf, plus 2as^2b of softmax output without flash.
  const ModelSpec llama = model("tiny-llama");
  const double s = 128, b = 2, h = 256, f = 688, a = 8;
  const ModelCosts flash = compute_costs(llama, 2, 128, Precision::bf16, Precision::fp32, true);
  CHECK(flash.layer(0).activations.total == doctest::Approx(13 * s * b * h + 6 * s * b * f));
  const ModelCosts eager = compute_costs(llama, 2, 128, Precision::bf16, Precision::fp32, false);
  CHECK(eager.layer(0).activations.total - flash.layer(0).activations.total == doctest::Approx(2 * a * s * s * b));
}

TEST_CASE("model FLOPs per step follow 72BsLh^2(1 + s/(6h) + V/(12Lh))") {
  // Narayanan et al. 2021 (REFERENCES.md), here for one sequence (B = 1) of GPT-3.
  const ModelSpec gpt3 = model("gpt3-175b");
  const double s = 2048, L = 96, h = 12288, V = 51200;
  const ModelCosts costs = compute_costs(gpt3, 1, 2048, Precision::bf16, Precision::fp32, false);
  const double expected = 72 * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
  CHECK(costs.model_flops_per_micro_batch == doctest::Approx(expected).epsilon(1e-12));
  // Backward is twice the forward.
  CHECK(costs.layer(0).backward.flops == doctest::Approx(2 * costs.layer(0).forward.flops));
}

TEST_CASE("the roofline takes the slower of math and memory traffic") {
  GpuInfo a100;
  a100.peak_bf16 = 312e12;
  a100.peak_fp32 = 19.5e12;
  a100.peak_tf32 = 156e12;
  a100.hbm_bandwidth = 2039e9;
  ComputeEfficiency efficiency;
  efficiency.matmul = 0.5;
  efficiency.memory = 1.0;
  // 156 TFLOP at half of 312 TF/s is 1 s; 1 GB of traffic is negligible.
  CHECK(kernel_seconds({156e12, 1e9}, a100, Precision::bf16, efficiency) == doctest::Approx(1.0));
  // 2039 GB of traffic at full bandwidth is 1 s, and dominates 1 TFLOP.
  CHECK(kernel_seconds({1e12, 2039e9}, a100, Precision::bf16, efficiency) == doctest::Approx(1.0));
  // fp32 runs on TF32 tensor cores unless that is turned off.
  CHECK(kernel_seconds({78e12, 0}, a100, Precision::fp32, efficiency) == doctest::Approx(1.0));
  efficiency.allow_tf32 = false;
  CHECK(kernel_seconds({9.75e12, 0}, a100, Precision::fp32, efficiency) == doctest::Approx(1.0));
}

TEST_CASE("an Adam step moves about 30 bytes per parameter in bf16 with fp32 gradients") {
  // Read fp32 gradient 4 + master, momentum, variance 12; write those 12 and the bf16 copy 2.
  CHECK(optimizer_step_work(1e9, Precision::bf16, Precision::fp32).bytes == doctest::Approx(30e9));
  // fp32 training has no separate master copy to write: 4 + 12 + 12.
  CHECK(optimizer_step_work(1e9, Precision::fp32, Precision::fp32).bytes == doctest::Approx(28e9));
}

TEST_CASE("under tensor parallelism a block's parts add up to it and its GEMM chunks are slices of the tokens") {
  // Llama 3 8B, one sequence of 8,192 tokens, tp 8 with sequence parallelism. Per rank QKV maps
  // h = 4,096 to (4,096 + 2 x 1,024) / 8 = 768 features, the output projection 4,096 / 8 = 512
  // back to 4,096. The ring exchange computes QKV on 8,192 / 8 = 1,024 tokens at a time, the
  // pipelined reduce-scatter the projection on 8,192 / 4 = 2,048.
  const ModelSpec llama = model("llama3-8b");
  const ModelCosts costs = compute_costs(llama, 1, 8192, Precision::bf16, Precision::fp32, true, {8, true, 1});
  const LayerCosts& layer = costs.layer(0);
  const auto forward = [](const BlockParts& p, double Work::*field) {
    return p.before.*field + 8 * p.column_chunk.*field + p.between.*field + 4 * p.row_chunk.*field + p.after.*field;
  };
  const auto backward = [](const BlockParts& p, double Work::*field) {
    return p.to_column_back.*field + p.column_dgrad.*field + p.column_wgrad.*field + p.before_back.*field;
  };
  const auto to_column = [](const BlockParts& p, double Work::*field) {
    return p.after_back.*field + 8 * p.row_dgrad_chunk.*field + p.row_wgrad.*field + p.between_back.*field;
  };
  for (double Work::*field : {&Work::flops, &Work::bytes}) {
    CHECK(forward(layer.attention_parts, field) == doctest::Approx(layer.attention_forward.*field));
    CHECK(forward(layer.mlp_parts, field) == doctest::Approx(layer.mlp_forward.*field));
    CHECK(backward(layer.attention_parts, field) == doctest::Approx(layer.attention_backward.*field));
    CHECK(backward(layer.mlp_parts, field) == doctest::Approx(layer.mlp_backward.*field));
    CHECK(to_column(layer.attention_parts, field) == doctest::Approx(layer.attention_parts.to_column_back.*field));
    CHECK(to_column(layer.mlp_parts, field) == doctest::Approx(layer.mlp_parts.to_column_back.*field));
  }
  // As a roofline each GEMM part is its GEMM's FLOPs and the attention core is counted whole
  // (4 b s^2 q / t, the convention of the model FLOPs): 4 x 8,192^2 x 512.
  CHECK(8 * layer.attention_parts.column_chunk.flops == doctest::Approx(2.0 * 8192 * 4096 * 768));
  CHECK(layer.attention_parts.between.flops == doctest::Approx(4.0 * 8192 * 8192 * 512));
  CHECK(layer.attention_parts.before.flops == 0);
  const auto only_kernel = [&](const Work& work) {
    const KernelSet& set = costs.kernel_sets.at(static_cast<std::size_t>(work.kernel_set));
    REQUIRE(set.kernels.size() == 1);
    return set.kernels.front();
  };
  const Kernel qkv = only_kernel(layer.attention_parts.column_chunk);
  CHECK(qkv.name == "qkv.chunk");
  CHECK((qkv.m == 1024 && qkv.n == 768 && qkv.k == 4096));
  CHECK(qkv.flops == 2.0 * 1024 * 768 * 4096);
  CHECK(qkv.bytes == 2.0 * (1024 * 4096 + 4096 * 768 + 1024 * 768));  // each chunk reads the whole weight
  const Kernel out = only_kernel(layer.attention_parts.row_chunk);
  CHECK((out.name == "out.chunk" && out.m == 2048 && out.n == 4096 && out.k == 512));
  const Kernel out_dgrad = only_kernel(layer.attention_parts.row_dgrad_chunk);
  CHECK((out_dgrad.name == "out.dgrad.chunk" && out_dgrad.m == 1024 && out_dgrad.n == 512 && out_dgrad.k == 4096));
  CHECK(only_kernel(layer.mlp_parts.column_wgrad).name == "fc1.wgrad");
  // Without tensor parallelism no part exists.
  const ModelCosts single = compute_costs(llama, 1, 8192, Precision::bf16, Precision::fp32, true);
  CHECK(single.layer(0).attention_parts.column_chunk.kernel_set == -1);
}

TEST_CASE("op-level selective checkpointing keeps the input, Q, V, the attention output, the gate and the down output") {
  // torchtitan's policy (selective_ac_option = "op") on tiny-llama (h = 256, f = 688, 8 heads of
  // 32, 2 KV heads: q = 256, kv = 64), 2 sequences of 128 tokens (T = 256), bf16, FlashAttention.
  // Its matmuls run wq, wk, wv, wo, w1, w3, w2; every other one is saved: wq (Q, 2 T q), wv
  // (V, 2 T kv), w1 (the gate, 2 T f), w2 (the down projection's output, 2 T h). Also kept: the
  // block's input (2 T h) and FlashAttention's output (2 T q) with its fp32 log-sum-exp (4 T x 8).
  const ModelSpec llama = model("tiny-llama");
  const double T = 256, h = 256, f = 688, q = 256, kv = 64, heads = 8;
  const ModelCosts costs = compute_costs(llama, 2, 128, Precision::bf16, Precision::fp32, true);
  const LayerActivations& act = costs.layer(0).activations;
  CHECK(act.op_saved == doctest::Approx(2 * T * h + 2 * T * q + 2 * T * kv + (2 * T * q + 4 * T * heads) + 2 * T * f +
                                        2 * T * h));
  // Of the 13 T h + 6 T f kept without recompute (the test above), backward re-materialises all
  // but the input, Q, V, the attention output and the gate.
  CHECK(act.op_rematerialized ==
        doctest::Approx(13 * T * h + 6 * T * f - (2 * T * h + 2 * T * q + 2 * T * kv + 2 * T * q + 2 * T * f)));
  // Recomputed matmuls: K (2 T h kv), the output projection (2 T q h) and the up projection (2 T h f).
  CHECK(costs.layer(0).op_recompute.flops == doctest::Approx(2 * T * h * kv + 2 * T * q * h + 2 * T * h * f));
  const KernelSet& kernels = costs.kernel_sets.at(static_cast<std::size_t>(costs.layer(0).op_recompute.kernel_set));
  CHECK(kernels.flops() == doctest::Approx(costs.layer(0).op_recompute.flops));
  CHECK(costs.layer(0).op_recompute.bytes == doctest::Approx(kernels.bytes()));
}

TEST_CASE("no block part has negative work, whatever the rounding of its model's sizes") {
  // An MLP has nothing between its GEMMs: its block's FLOPs less theirs is 0 up to rounding, and
  // must not come out below it (a compute op's work is checked to be non-negative).
  for (const char* name : {"megatron-310b", "megatron-530b", "megatron-1t", "gpt3-175b", "llama3-8b", "mpt-7b"}) {
    CAPTURE(name);
    for (const long long tp : {2, 8}) {
      const ModelCosts costs = compute_costs(model(name), 1, 2048, Precision::fp16, Precision::fp32, false, {tp, true, 1});
      for (const BlockParts* parts : {&costs.layer(0).attention_parts, &costs.layer(0).mlp_parts})
        for (const Work* work : {&parts->before, &parts->column_chunk, &parts->between, &parts->row_chunk, &parts->after,
                                 &parts->after_back, &parts->row_dgrad_chunk, &parts->row_wgrad, &parts->between_back,
                                 &parts->column_dgrad, &parts->column_wgrad, &parts->before_back,
                                 &parts->to_column_back}) {
          CHECK(work->flops >= 0);
          CHECK(work->bytes >= 0);
        }
    }
  }
}

TEST_CASE("a backward split in two adds up to the backward: W is the linear layers' weight-gradient GEMMs") {
  // Qi et al. 2024: W computes the parameters' gradients, as many FLOPs as the linear layers'
  // forward; B the rest. tiny-llama (h = 256, f = 688 SwiGLU, 8 heads, 2 KV heads of 32), one
  // sequence of 128 tokens: per token 2 (h (q + 2 kv) + q h + 3 h f) FLOPs.
  const ModelSpec llama = model("tiny-llama");
  const double tokens = 128, h = 256, f = 688, q = 256, kv = 64;
  const ModelCosts costs = compute_costs(llama, 1, 128, Precision::bf16, Precision::fp32, true);
  const LayerCosts& layer = costs.layer(0);
  CHECK(layer.backward_weight.flops == doctest::Approx(2 * tokens * (h * (q + 2 * kv) + q * h + 3 * h * f)));
  CHECK(layer.backward_input.flops + layer.backward_weight.flops == doctest::Approx(layer.backward.flops));
  CHECK(layer.backward_input.bytes + layer.backward_weight.bytes == doctest::Approx(layer.backward.bytes));
  // W keeps each linear layer's input and output gradient, 2 bytes each per token: inputs h (QKV),
  // q (output projection), h (gate and up), f (down); output gradients q + 2 kv, h, 2 f, h.
  CHECK(layer.activations.weight_gradient_inputs ==
        doctest::Approx(2 * tokens * (h + q + h + f + (q + 2 * kv) + h + 2 * f + h)));
  // Their kernels: W is the four weight-gradient GEMMs, B every other kernel of the backward.
  const auto kernels = [&](const Work& work) { return costs.kernel_sets.at(static_cast<std::size_t>(work.kernel_set)).kernels; };
  std::vector<std::string> weight;
  for (const Kernel& kernel : kernels(layer.backward_weight))
    weight.push_back(kernel.name);
  CHECK(weight == std::vector<std::string>{"fc2.wgrad", "fc1.wgrad", "out.wgrad", "qkv.wgrad"});
  CHECK(kernels(layer.backward_input).size() + weight.size() == kernels(layer.backward).size());
  // The head's W is the output layer's weight gradient; its input gradient stays in B.
  CHECK(costs.head_backward_weight.flops == doctest::Approx(costs.head_forward.flops));
  CHECK(kernels(costs.head_backward_weight).size() == 1);
}

TEST_CASE("Gemma 2's windowed layers attend over w(1 - w/2s) keys a query, its others over s/2, each with four norms") {
  // gemma2-9b at s = 8,192 with its 4,096-token window: an even layer's query sees on average
  // w (1 - w / 2s) = 3,072 keys, an odd layer's s / 2 = 4,096 (causal), so the windowed core is
  // 3/4 of the full one, in the kernels and in the roofline's model FLOPs.
  const ModelSpec gemma = model("gemma2-9b");
  const double s = 8192, b = 1, h = 3584, q_width = 16 * 256;
  const ModelCosts costs = compute_costs(gemma, 1, 8192, Precision::bf16, Precision::fp32, true);
  REQUIRE(costs.layer_kinds.size() == 2);
  CHECK(costs.kind_of_layer[0] == 0);
  CHECK(costs.kind_of_layer[1] == 1);
  CHECK(costs.kind_of_layer[41] == 1);
  const auto core_flops = [&](long long layer) {
    const KernelSet& set =
        costs.kernel_sets.at(static_cast<std::size_t>(costs.layer(layer).attention_forward.kernel_set));
    for (const Kernel& kernel : set.kernels)
      if (kernel.name == "flash-attention")
        return kernel.flops * kernel.count;
    return 0.0;
  };
  // FlashAttention's forward: 2 b heads queries keys_seen (d + d).
  CHECK(core_flops(1) == doctest::Approx(2 * b * 16 * s * (s / 2) * 512));
  CHECK(core_flops(0) == doctest::Approx(2 * b * 16 * s * 3072 * 512));
  // The roofline's core: 4 b s^2 (heads x head_dim), a quarter less in a windowed layer.
  CHECK(costs.layer(1).attention_forward.flops - costs.layer(0).attention_forward.flops ==
        doctest::Approx(0.25 * 4 * b * s * s * q_width));
  // Eager attention computes every score, masked or not: both kinds alike, four times the
  // scores GEMM's 2 b heads s^2 head_dim (scores and context, forward), soft-capped scores kept.
  const ModelCosts eager = compute_costs(gemma, 1, 8192, Precision::bf16, Precision::fp32, false);
  CHECK(eager.layer(0).attention_forward.flops == eager.layer(1).attention_forward.flops);
  CHECK(eager.layer(0).attention_core.flops == doctest::Approx(4 * b * s * s * q_width));
  ModelSpec uncapped = gemma;
  uncapped.score_softcap = false;
  const ModelCosts eager_uncapped = compute_costs(uncapped, 1, 8192, Precision::bf16, Precision::fp32, false);
  CHECK(eager.layer(0).activations.attention_core - eager_uncapped.layer(0).activations.attention_core ==
        doctest::Approx(2 * 16 * s * s * b));
  // Four norms' inputs kept (2 bytes each per element), two more than a Llama layer's.
  const ModelCosts within = compute_costs(gemma, 1, 4096, Precision::bf16, Precision::fp32, true);
  CHECK(within.layer_kinds.size() == 1);  // within the window every layer attends alike
  ModelSpec two_norms = gemma;
  two_norms.sandwich_norms = false;
  const ModelCosts fewer = compute_costs(two_norms, 1, 4096, Precision::bf16, Precision::fp32, true);
  CHECK(within.layer(0).activations.total - fewer.layer(0).activations.total == doctest::Approx(2 * 2 * 4096 * b * h));
}

TEST_CASE("soft-capped logits add their elementwise pass and keep the capped logits for backward") {
  ModelSpec gemma = model("gemma2-2b");
  const ModelCosts capped = compute_costs(gemma, 1, 4096, Precision::bf16, Precision::fp32, true);
  gemma.logit_softcap = false;
  const ModelCosts plain = compute_costs(gemma, 1, 4096, Precision::bf16, Precision::fp32, true);
  // The vocabulary padded to 128: 256,000 already is; 2 bytes per capped logit.
  const double logits = 4096.0 * 256000;
  CHECK(capped.head_activations - plain.head_activations == doctest::Approx(2 * logits));
  const auto bytes = [](const ModelCosts& costs, const Work& work) {
    return costs.kernel_sets.at(static_cast<std::size_t>(work.kernel_set)).bytes();
  };
  // Forward reads and writes each logit, backward reads the gradient and the capped logit and writes one.
  CHECK(bytes(capped, capped.head_forward) - bytes(plain, plain.head_forward) == doctest::Approx(2 * 2 * logits));
  CHECK(bytes(capped, capped.head_backward) - bytes(plain, plain.head_backward) == doctest::Approx(3 * 2 * logits));
}
