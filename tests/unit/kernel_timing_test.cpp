// The kernel-level compute model: which kernels a layer launches, and how each is timed on a
// calibrated GPU (model/kernel_timing), checked against hand derivations and against the one
// per-layer measurement the project calibrates on (Korthikanti et al. 2022, Table 4).
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "model/costs.hpp"
#include "model/kernel_timing.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {

ModelSpec model(const std::string& name) { return load_model(test::source_dir() / "models" / (name + ".json"), 128); }

GpuInfo a100() {
  GpuInfo gpu;
  gpu.model = "A100-SXM4-80GB";
  gpu.peak_bf16 = gpu.peak_fp16 = 312e12;
  gpu.peak_tf32 = 156e12;
  gpu.peak_fp32 = 19.5e12;
  gpu.hbm_bandwidth = 2039e9;
  gpu.sm_count = 108;
  gpu.architecture = GpuArchitecture::ampere;
  return gpu;
}

double seconds(const Kernel& kernel, const GpuInfo& gpu) {
  return time_kernel(kernel, gpu, Precision::bf16, true, kernel_profile(gpu)).seconds;
}

Kernel gemm(double m, double n, double k) {
  return {"gemm", KernelKind::gemm, m, n, k, 1, 2 * m * n * k, 2 * (m * k + k * n + m * n)};
}

const KernelSet& set_named(const ModelCosts& costs, const std::string& name) {
  for (const KernelSet& set : costs.kernel_sets)
    if (set.name == name)
      return set;
  FAIL("no kernel set " << name);
  return costs.kernel_sets.front();
}

} // namespace

TEST_CASE("a GEMM one tile too wide for a wave takes a second wave") {
  // 2304 x 1536 is 9 x 12 = 108 tiles of 256 x 128: one wave on the A100's 108 SMs. One more
  // column of 128 (n = 1664) makes 117 tiles: two waves, twice the time for 13/12 of the work.
  // The best other tile does no better: 128 x 128 tiles are 18 x 13 = 234, three waves of 108,
  // 234/324 of the slots busy at 0.75 of the speed (0.54, against 117/216 = 0.54 for 256 x 128).
  const GpuInfo gpu = a100();
  const double one_wave = seconds(gemm(2304, 1536, 8192), gpu);
  const double two_waves = seconds(gemm(2304, 1664, 8192), gpu);
  CHECK(two_waves / one_wave == doctest::Approx(2.0).epsilon(0.01));
}

TEST_CASE("a large GEMM reaches the measured fraction of peak, and small K costs more per FLOP") {
  // The reference shape of the A100's calibration reaches 271.2 of 312 TFLOP/s by construction
  // (plus one launch of 1.28 us).
  const GpuInfo gpu = a100();
  const Kernel reference = gemm(1024, 10240, 5120);
  CHECK(reference.flops / (seconds(reference, gpu) - 1.28e-6) == doctest::Approx(271.2e12).epsilon(1e-6));
  // K = 128 against 5120 with the same output: the K loop's fixed 128 halves the first's
  // efficiency against 5120 / 5248 for the second.
  const Kernel thin = gemm(1024, 10240, 128);
  const double thin_rate = thin.flops / (seconds(thin, gpu) - 1.28e-6);
  CHECK(thin_rate / 271.2e12 == doctest::Approx((128.0 / 256) / (5120.0 / 5248)).epsilon(1e-6));
}

TEST_CASE("memory-bound kernels stream at the calibrated fraction of HBM bandwidth, plus a launch") {
  const GpuInfo gpu = a100();
  const Kernel norm{"norm", KernelKind::memory, 0, 0, 0, 1, 0, 1.6929e9};
  // 1.6929 GB at 0.83 x 2039 GB/s is 1 ms.
  CHECK(seconds(norm, gpu) == doctest::Approx(1e-3 + 1.28e-6).epsilon(1e-6));
  // Launches add up: a kernel run three times (ring attention steps) costs three launches.
  Kernel thrice = norm;
  thrice.count = 3;
  CHECK(seconds(thrice, gpu) == doctest::Approx(3 * (1e-3 + 1.28e-6)).epsilon(1e-6));
}

TEST_CASE("causal FlashAttention is timed from the measured forward throughput at 16k keys") {
  // The calibration's reference: non-causal, 16k keys, 16 heads of 128: 0.73 of 312 on A100. A
  // causal kernel of the same shape does half the FLOPs (half the keys per query on average),
  // so each block row's fixed 240 keys weigh twice as much: efficiency x (8192 / 8432) /
  // (16384 / 16624). Blocks: 16 x 128 = 2048 over 108 SMs, 19 waves, the same in both.
  const GpuInfo gpu = a100();
  const double flops = 4.0 * 1 * 16 * 16384 * 16384 * 128 / 2;
  const Kernel attention{"flash-attention", KernelKind::attention_forward, 16384, 16384, 128, 16, flops, 0};
  const double rate = flops / (seconds(attention, gpu) - 1.28e-6);
  CHECK(rate == doctest::Approx(0.73 * 312e12 * (8192.0 / 8432) / (16384.0 / 16624)).epsilon(1e-6));
}

TEST_CASE("a layer launches its GEMMs with their shapes, and backward has an input and a weight gradient each") {
  // Llama 3 8B (h = 4096, 32 heads and 8 KV heads of 128, MLP 14336), b = 1, s = 4096, tp = 2.
  const ModelCosts costs = compute_costs(model("llama3-8b"), 1, 4096, Precision::bf16, Precision::fp32, true, {2, false, 1});
  const KernelSet& forward = set_named(costs, "layer.fwd");
  const auto find = [](const KernelSet& set, const std::string& name) -> const Kernel& {
    for (const Kernel& kernel : set.kernels)
      if (kernel.name == name)
        return kernel;
    FAIL("no kernel " << name);
    return set.kernels.front();
  };
  // QKV: 4096 tokens, (4096 + 2 x 1024) / 2 = 3072 outputs, K = 4096.
  const Kernel& qkv = find(forward, "qkv");
  CHECK(qkv.m == 4096);
  CHECK(qkv.n == 3072);
  CHECK(qkv.k == 4096);
  // Gate and up together: 2 x 14336 / 2 outputs.
  CHECK(find(forward, "fc1").n == 14336);
  CHECK(find(forward, "fc2").k == 7168);
  // Causal attention: 16 local heads, half of 4096 x 4096 scores, 4 x b x heads x s x s/2 x d.
  CHECK(find(forward, "flash-attention").flops == doctest::Approx(4.0 * 16 * 4096 * 2048 * 128));
  const KernelSet& backward = set_named(costs, "layer.bwd");
  const Kernel& wgrad = find(backward, "fc2.wgrad");
  CHECK(wgrad.m == 7168);  // the weight's input features
  CHECK(wgrad.n == 4096);
  CHECK(wgrad.k == 4096);  // summed over the tokens
  CHECK(find(backward, "fc2.dgrad").n == 7168);
  // FlashAttention's backward recomputes the scores: 2.5 times the forward's FLOPs.
  CHECK(find(backward, "flash-attention.bwd").flops == doctest::Approx(2.5 * find(forward, "flash-attention").flops));
  // The layer's pieces add up to it.
  const auto set = [&](const Work& work) -> const KernelSet& { return costs.kernel_sets[work.kernel_set]; };
  CHECK(set(costs.layer(0).forward).flops() ==
        doctest::Approx(set(costs.layer(0).attention_forward).flops() + set(costs.layer(0).mlp_forward).flops()));
  CHECK(set(costs.layer(0).backward).bytes() ==
        doctest::Approx(set(costs.layer(0).attention_backward).bytes() + set(costs.layer(0).mlp_backward).bytes()));
}

TEST_CASE("ring attention splits the core: the local block before K and V arrive, the other blocks after") {
  const ModelCosts costs = compute_costs(model("llama3-8b"), 1, 8192, Precision::bf16, Precision::fp32, true, {1, false, 4});
  const LayerCosts& layer = costs.layer(0);
  const auto flops = [&](const Work& work) { return costs.kernel_sets[work.kernel_set].flops(); };
  const double core = flops(layer.attention_core);
  const KernelSet& whole = costs.kernel_sets[layer.attention_forward.kernel_set];
  double before_core = 0;  // norm, QKV and rotary come before the attention kernel
  for (const Kernel& kernel : whole.kernels) {
    if (kernel.kind == KernelKind::attention_forward)
      break;
    before_core += kernel.flops * kernel.count;
  }
  // Local: what precedes the core and a quarter of it; ring: three quarters and the rest.
  CHECK(flops(layer.attention_forward_local) == doctest::Approx(before_core + core / 4));
  CHECK(flops(layer.attention_forward_ring) == doctest::Approx(flops(layer.attention_forward) - before_core - core / 4));
  CHECK(flops(layer.attention_backward_local) + flops(layer.attention_backward_ring) ==
        doctest::Approx(flops(layer.attention_backward)));
}

TEST_CASE("the 22B layer's kernels reproduce Korthikanti et al.'s measured layer time within 6%") {
  // Korthikanti et al. 2022, Table 4 (REFERENCES.md): a 22B layer (h = 6144, 64 heads, s = 2048,
  // b = 4) at tp = 8 on A100 takes 7.7 ms forward and 11.9 ms backward, 19.6 ms in all, without
  // recompute or sequence parallelism (Megatron of 2022: no FlashAttention), including two TP
  // all-reduces of b s h x 2 bytes = 100.7 MB each way. Those take 100.7 MB x 2 x 7/8 / 235 GB/s
  // = 0.75 ms each at the bus bandwidth nccl-tests reach on 8 A100s (NVIDIA's 230-250 GB/s).
  const ModelCosts costs =
      compute_costs(model("megatron-22b"), 4, 2048, Precision::bf16, Precision::fp32, false, {8, false, 1});
  const GpuInfo gpu = a100();
  const KernelProfile& profile = kernel_profile(gpu);
  const auto time = [&](const Work& work) {
    return kernel_set_seconds(costs.kernel_sets[work.kernel_set], gpu, Precision::bf16, true, profile);
  };
  const double all_reduce = 100.7e6 * 2 * 7 / 8 / 235e9;
  const double forward = time(costs.layer(0).attention_forward) + time(costs.layer(0).mlp_forward) + 2 * all_reduce;
  const double backward = time(costs.layer(0).attention_backward) + time(costs.layer(0).mlp_backward) + 2 * all_reduce;
  CHECK(forward + backward == doctest::Approx(19.6e-3).epsilon(0.06));
  CHECK(forward == doctest::Approx(7.7e-3).epsilon(0.10));
  CHECK(backward == doctest::Approx(11.9e-3).epsilon(0.06));
}

TEST_CASE("a GPU generation without a calibration is refused by name under compute.model = kernels") {
  GpuInfo rtx = a100();
  rtx.model = "RTX-4090-24GB";
  rtx.architecture = GpuArchitecture::ada;
  CHECK(find_kernel_profile(rtx) == nullptr);
  try {
    kernel_profile(rtx);
    FAIL("accepted");
  } catch (const InputError& error) {
    CHECK(std::string(error.what()).find("RTX-4090-24GB (ada): no kernel-level calibration") != std::string::npos);
    CHECK(std::string(error.what()).find("compute.model = roofline") != std::string::npos);
  }
}
