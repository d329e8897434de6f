#include "model/kernel_timing.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "common/error.hpp"

namespace trainsim {

namespace {

// GEMM tiles cuBLAS chooses among (NVIDIA, "Matrix Multiplication Background User's Guide",
// DU-09799-001, section 2.3: 256x128 and 128x256 for large outputs, down to 64x64 for small
// ones). A tile's speed relative to the largest is taken as its operand reuse, tm tn / (tm + tn)
// multiply-adds per element loaded, over that of 256x128 (85.3): the reason the guide gives for
// larger tiles being more efficient, written as a ratio; no per-tile throughput is published.
std::vector<GemmTile> cublas_tiles() {
  const auto reuse = [](double m, double n) { return m * n / (m + n); };
  std::vector<GemmTile> tiles;
  for (const auto& [m, n] : {std::pair{256.0, 128.0}, {128.0, 256.0}, {128.0, 128.0}, {128.0, 64.0}, {64.0, 128.0},
                             {64.0, 64.0}})
    tiles.push_back({m, n, reuse(m, n) / reuse(256, 128)});
  return tiles;
}

// The K loop's fixed cost: filling the 3- or 4-stage shared-memory pipeline before the first
// multiply (about 3 K-steps of 32) and writing the output tile after the last (a 256x128 tile
// of results is as many bytes as about 3 K-steps of operands, (256 + 128) x 32 each): together
// about 128 of K. A derivation from the tile sizes above, not a measurement.
constexpr double k_loop_overhead = 128;

// A fused attention kernel's published throughput at 512 to 16k keys, in the FlashAttention
// papers' benchmark: 16k tokens per batch, hidden 2048 in 16 heads of 128. The curves of head
// dimension 128 time every head dimension (an assumption: the papers' 64-wide heads run slower,
// their 256-wide ones faster).
struct AttentionBenchmark {
  double peak = 0;  // the measured GPU's 16-bit peak FLOP/s
  int sms = 0;
  bool causal = false;
  std::vector<double> tflops;  // at 512, 1k, 2k, 4k, 8k, 16k keys
};

constexpr double benchmark_keys[] = {512, 1024, 2048, 4096, 8192, 16384};

// A thread block's rows of queries (forward) or keys (backward), as FlashAttention-2 and -3 tile.
constexpr double attention_block_rows = 128;

// Share of the SMs' slots busy over the waves a kernel's blocks need, and the keys each query
// sees (half under a causal mask).
double attention_waves(double rows, double batch, int sms) {
  const double blocks = std::ceil(rows / attention_block_rows) * batch;
  return blocks / (std::ceil(blocks / sms) * sms);
}
// (Under a sliding window `keys` is the window, so a windowed causal kernel counts half of it:
// an approximation of the w (1 - w / 2s) keys a query sees, model/costs.cpp.)
double keys_seen(double keys, bool causal) { return causal ? keys / 2 : keys; }

// Efficiency of a curve's shape (asymptote 1) at a benchmark point.
double benchmark_shape(const AttentionBenchmark& benchmark, double keys, double overhead) {
  const double heads = 16, sequences = 16384 / keys, seen = keys_seen(keys, benchmark.causal);
  return attention_waves(keys, sequences * heads, benchmark.sms) * seen / (seen + overhead);
}

// The asymptote and per-row overhead that fit the benchmark best, least squares on the log of
// throughput (every point weighs alike, whatever its size), the overhead searched in half keys.
std::pair<double, double> fit_attention(const AttentionBenchmark& benchmark) {
  double best_residual = -1, best_asymptote = 0, best_overhead = 0;
  for (double overhead = 0; overhead <= 2000; overhead += 0.5) {
    std::vector<double> logs;
    for (std::size_t i = 0; i < benchmark.tflops.size(); ++i)
      logs.push_back(std::log(benchmark.tflops[i] * 1e12 /
                              (benchmark.peak * benchmark_shape(benchmark, benchmark_keys[i], overhead))));
    double mean = 0;
    for (double value : logs)
      mean += value / logs.size();
    double residual = 0;
    for (double value : logs)
      residual += (value - mean) * (value - mean);
    if (best_residual < 0 || residual < best_residual)
      best_residual = residual, best_asymptote = std::exp(mean), best_overhead = overhead;
  }
  return {best_asymptote, best_overhead};
}

AttentionCurve attention_curve(const AttentionBenchmark& forward, const AttentionBenchmark& backward) {
  AttentionCurve curve;
  std::tie(curve.forward, curve.forward_overhead) = fit_attention(forward);
  std::tie(curve.backward, curve.backward_overhead) = fit_attention(backward);
  return curve;
}

constexpr double a100_peak = 312e12, h100_peak = 989e12;
constexpr int a100_sms = 108, h100_sms = 132;

// FlashAttention-2 on A100 80GB, head dimension 128, causal, forward and backward together
// (Dao 2023, arXiv 2307.08691, Fig. 4; Dao-AILab/flash-attention assets/
// flash2_a100_fwd_bwd_benchmark.png, the bar labels). The paper gives forward and backward apart
// only as their best, 73 % and 63 % of peak (section 4.1): the fitted curve of both together is
// split in that ratio, one overhead for both (3.5 forwards' FLOPs take 1/f + 2.5/b forwards' time).
AttentionCurve ampere_fa2() {
  const AttentionBenchmark both{a100_peak, a100_sms, true, {99, 133, 155, 173, 182, 189}};
  const auto [together, overhead] = fit_attention(both);
  const double backward_to_forward = 0.63 / 0.73;
  AttentionCurve curve;
  curve.forward = together * (1 + 2.5 / backward_to_forward) / 3.5;
  curve.backward = curve.forward * backward_to_forward;
  curve.forward_overhead = curve.backward_overhead = overhead;
  return curve;
}

// Hopper, H100 80GB SXM5, head dimension 128, 16-bit (Shah et al. 2024, "FlashAttention-3",
// arXiv 2407.08608 v1, the forward and backward speed figures; the forward's bar labels as in
// Dao-AILab/flash-attention assets/flash3_fp16_fwd.png). Forward with the causal mask; backward
// published without it only, so a causal backward takes the non-causal curve at half the keys (the
// same rule reproduces FlashAttention-2's causal forward-and-backward curve on H100 within 3.1 %,
// flash2_h100_fwd_bwd_benchmark.png; a unit test holds it).
AttentionCurve hopper_fa3() {
  return attention_curve({h100_peak, h100_sms, true, {292, 423, 521, 579, 602, 616}},
                         {h100_peak, h100_sms, false, {316, 424, 501, 542, 559, 561}});
}
AttentionCurve hopper_fa2() {
  return attention_curve({h100_peak, h100_sms, true, {191, 260, 298, 319, 333, 335}},
                         {h100_peak, h100_sms, false, {214, 260, 291, 310, 318, 322}});
}
AttentionCurve hopper_cudnn() {
  return attention_curve({h100_peak, h100_sms, true, {315, 410, 484, 518, 529, 539}},
                         {h100_peak, h100_sms, false, {305, 408, 465, 499, 518, 516}});
}

// The best tile's share of useful work over the waves it needs.
double gemm_utilization(double m, double n, double batch, int sms, const std::vector<GemmTile>& tiles) {
  double best = 0;
  for (const GemmTile& tile : tiles) {
    const double count = std::ceil(m / tile.m) * std::ceil(n / tile.n) * batch;
    const double waves = std::ceil(count / sms);
    best = std::max(best, tile.relative * (m * n * batch) / (waves * sms * tile.m * tile.n));
  }
  return best;
}

double k_loop_share(double k) { return k / (k + k_loop_overhead); }

// The A100's GEMM figures: cuBLAS's bf16 8192^3 GEMM with random data holds 257 TFLOP/s on an A100
// SXM (H. He, "Strangely, Matrix Multiplications on GPUs Run Faster When Given 'Predictable'
// Data!", thonking.ai, 2024: the 400 W power limit lowers the clock; 295 with zeros), where a short
// burst of 1024x10240x5120 reaches 271.2 (S. Bekman, "Machine Learning Engineering Open Book",
// compute/accelerator/README.md, MAMF table, torch 2.6 + CUDA 12.6, randn, mean of 100 runs after
// 50 warm-up). This file's quantization rates 8192^3 1.98 % above the burst's shape on 108 SMs, so
// the sustained clock runs 257 / 271.2 / 1.0198 = 0.929 of the burst's, as NVIDIA's HPL clock of
// 1,305 MHz is 0.926 of the A100's 1,410 MHz boost (glennklockwood.com, "peak FLOPS").
double sustained_over_burst() {
  const std::vector<GemmTile> tiles = cublas_tiles();
  const double sustained_shape = gemm_utilization(8192, 8192, 1, a100_sms, tiles) * k_loop_share(8192);
  const double burst_shape = gemm_utilization(1024, 10240, 1, a100_sms, tiles) * k_loop_share(5120);
  return 257.0 / 271.2 / (sustained_shape / burst_shape);
}

KernelProfile ampere() {
  KernelProfile p;
  p.architecture = GpuArchitecture::ampere;
  // A100 SXM, bf16, sustained: 257 of 312 TFLOP/s at 8192^3 (He, above). fp16 runs at bf16's rate
  // on the same tensor cores; tf32 and fp32 take the same fraction (an assumption).
  p.gemm_16bit = p.gemm_tf32 = p.gemm_fp32 = 257.0 / 312;
  p.reference_m = p.reference_n = p.reference_k = 8192;
  // Streaming kernels: BabelStream triad on A100-SXM4-80GB reaches about 1.7 TB/s of the 2.039
  // specified (UoB-HPC BabelStream results; te42kyfo/gpu-benches gpu-stream: copy 1,732 GB/s,
  // triad 1,759).
  p.stream = 0.83;
  return p;
}

KernelProfile hopper() {
  KernelProfile p;
  p.architecture = GpuArchitecture::hopper;
  // MAMF table as above, H100 SXM: bf16 794.5 of 989 TFLOP/s at 2048x2048x13312 (torch 2.7 +
  // CUDA 12.6); fp8 1402.6 of 1979 at 1024x9216x14336, read at the bf16 shape's quantization.
  // Both bursts; no sustained H100 figure is published, so they take the A100's sustained clock
  // over its burst's (an assumption: the H100's 700 W limit is, if anything, reached sooner).
  p.gemm_16bit = p.gemm_tf32 = p.gemm_fp32 = 794.5 / 989 * sustained_over_burst();
  p.gemm_fp8 = 1402.6 / 1979 * sustained_over_burst();
  p.reference_m = 2048, p.reference_n = 2048, p.reference_k = 13312;
  // Streaming kernels: a device copy on an H100 NVL reaches 0.906 of its 3.938 TB/s; BabelStream
  // on H100 SXM is commonly reported at 0.87-0.91 of 3.35 TB/s.
  p.stream = 0.88;
  // Per launch: 1.28 us per kernel of a replayed CUDA graph on an H100 NVL, the device-side cost
  // once the host is ahead (the report behind the copy figure above).
  p.launch_s = 1.28e-6;
  return p;
}

// The attention kernel a generation runs for `attention`: Transformer Engine prefers cuDNN's
// fused attention on Hopper and later and FlashAttention before (transformer_engine/pytorch/
// attention/dot_product_attention/utils.py, get_attention_backend: "give FusedAttention
// preference on Hopper+ for performance reasons").
AttentionKernel run_by(GpuArchitecture architecture, AttentionKernel attention) {
  if (attention != AttentionKernel::transformer_engine)
    return attention;
  return architecture == GpuArchitecture::ampere ? AttentionKernel::fa2 : AttentionKernel::cudnn;
}

// Each generation's profile with each attention kernel it has figures for.
const std::vector<KernelProfile>& calibrated_profiles() {
  static const std::vector<KernelProfile> profiles = [] {
    std::vector<KernelProfile> all;
    const auto with = [&](KernelProfile profile, AttentionKernel kernel, const AttentionCurve& curve) {
      profile.attention_kernel = kernel;
      profile.attention = curve;
      all.push_back(profile);
    };
    KernelProfile a = ampere();
    // The per-launch cost is read on Hopper only; Ampere takes it (kernels of the same
    // structure; an assumption).
    a.launch_s = hopper().launch_s;
    with(a, AttentionKernel::fa2, ampere_fa2());
    const KernelProfile h = hopper();
    with(h, AttentionKernel::fa2, hopper_fa2());
    with(h, AttentionKernel::fa3, hopper_fa3());
    with(h, AttentionKernel::cudnn, hopper_cudnn());
    return all;
  }();
  return profiles;
}


double gemm_fraction(const KernelProfile& profile, Precision precision, bool allow_tf32) {
  switch (precision) {
  case Precision::fp8: return profile.gemm_fp8;
  case Precision::fp32: return allow_tf32 ? profile.gemm_tf32 : profile.gemm_fp32;
  default: return profile.gemm_16bit;
  }
}

// Fraction of peak a GEMM of this shape reaches: the profile's measured fraction at its reference
// shape, scaled by how this shape's quantization and K loop compare with the reference's.
double gemm_efficiency(const Kernel& kernel, const GpuInfo& gpu, const KernelProfile& profile, Precision precision,
                       bool allow_tf32) {
  static const std::vector<GemmTile> tiles = cublas_tiles();
  const double reference = gemm_utilization(profile.reference_m, profile.reference_n, 1, gpu.sm_count, tiles) *
                           k_loop_share(profile.reference_k);
  const double shape = gemm_utilization(kernel.m, kernel.n, kernel.batch, gpu.sm_count, tiles) * k_loop_share(kernel.k);
  // The references are the best measured (MAMF: the best shape of a sweep; 8192^3 on the A100's
  // plateau): no shape runs faster than its generation's measured fraction.
  const double measured = gemm_fraction(profile, precision, allow_tf32);
  return measured * std::min(1.0, shape / reference);
}

// The kernel's curve at its shape: its blocks' waves over the SMs and its block rows' fixed cost
// against the keys each query sees. Decoder language models attend causally.
double attention_efficiency(const Kernel& kernel, const GpuInfo& gpu, const AttentionCurve& curve, bool backward) {
  const double seen = keys_seen(kernel.n, true);
  const double overhead = backward ? curve.backward_overhead : curve.forward_overhead;
  return (backward ? curve.backward : curve.forward) *
         attention_waves(backward ? kernel.n : kernel.m, kernel.batch, gpu.sm_count) * seen / (seen + overhead);
}

} // namespace

const char* to_string(KernelKind kind) {
  switch (kind) {
  case KernelKind::gemm: return "gemm";
  case KernelKind::attention_forward: return "attention-fwd";
  case KernelKind::attention_backward: return "attention-bwd";
  case KernelKind::memory: return "memory";
  }
  return "memory";
}

const KernelProfile* find_kernel_profile(const GpuInfo& gpu, AttentionKernel attention) {
  if (gpu.sm_count <= 0)
    return nullptr;
  const AttentionKernel run = run_by(gpu.architecture, attention);
  std::string calibrated;
  for (const KernelProfile& profile : calibrated_profiles())
    if (profile.architecture == gpu.architecture) {
      if (profile.attention_kernel == run)
        return &profile;
      calibrated += std::string(calibrated.empty() ? "" : ", ") + to_string(profile.attention_kernel);
    }
  if (calibrated.empty())
    return nullptr;
  const bool hopper_only = run == AttentionKernel::fa3 && gpu.architecture == GpuArchitecture::ampere;
  throw InputError("compute.attention_kernel = " + std::string(to_string(attention)) + ": GPU " + gpu.model + " (" +
                   to_string(gpu.architecture) + ") " +
                   (hopper_only ? "cannot run FlashAttention-3 (Hopper and later)"
                                : std::string("has no published figures for ") + to_string(run) + " here") +
                   "; accepted on it: " + calibrated + ", te");
}

const KernelProfile& kernel_profile(const GpuInfo& gpu, AttentionKernel attention) {
  const KernelProfile* profile = find_kernel_profile(gpu, attention);
  if (profile == nullptr)
    throw InputError("GPU " + gpu.model + " (" + to_string(gpu.architecture) +
                     "): no kernel-level calibration for its generation (calibrated: ampere, hopper); set "
                     "compute.model = roofline to time it with compute.matmul_efficiency");
  return *profile;
}

KernelTime time_kernel(const Kernel& kernel, const GpuInfo& gpu, Precision precision, bool allow_tf32,
                       const KernelProfile& profile) {
  const double peak = matmul_peak(gpu, precision, allow_tf32);
  double efficiency = 0;
  switch (kernel.kind) {
  case KernelKind::gemm: efficiency = gemm_efficiency(kernel, gpu, profile, precision, allow_tf32); break;
  case KernelKind::attention_forward:
  case KernelKind::attention_backward:
    // Fused attention runs in 16 bits whatever the GEMMs' precision.
    efficiency = attention_efficiency(kernel, gpu, profile.attention, kernel.kind == KernelKind::attention_backward);
    break;
  case KernelKind::memory: break;
  }
  const double attention_peak = precision == Precision::fp32 ? peak : gpu.peak_bf16;
  const double rate = (kernel.kind == KernelKind::gemm ? peak : attention_peak) * efficiency;
  const double math = kernel.flops > 0 && rate > 0 ? kernel.flops / rate : 0.0;
  const double memory = kernel.bytes / (gpu.hbm_bandwidth * profile.stream);
  KernelTime time;
  time.seconds = kernel.count * (std::max(math, memory) + profile.launch_s);
  time.efficiency = math > 0 ? efficiency * std::min(1.0, math / std::max(math, memory)) : 0.0;
  time.bound = std::max(math, memory) < profile.launch_s ? "launch" : math >= memory ? "compute" : "memory";
  return time;
}

double kernel_set_seconds(const KernelSet& set, const GpuInfo& gpu, Precision precision, bool allow_tf32,
                          const KernelProfile& profile) {
  double seconds = 0;
  for (const Kernel& kernel : set.kernels)
    seconds += time_kernel(kernel, gpu, precision, allow_tf32, profile).seconds;
  return seconds;
}

double opaque_kernel_seconds(const Work& work, const GpuInfo& gpu, Precision precision, bool allow_tf32,
                             const KernelProfile& profile) {
  const double math = work.flops / (matmul_peak(gpu, precision, allow_tf32) * gemm_fraction(profile, precision, allow_tf32));
  return std::max(math, work.bytes / (gpu.hbm_bandwidth * profile.stream)) + profile.launch_s;
}

} // namespace trainsim
