#include "model/kernel_timing.hpp"

#include <algorithm>
#include <cmath>

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

KernelProfile ampere() {
  KernelProfile p;
  p.architecture = GpuArchitecture::ampere;
  // Maximum achievable matmul FLOP/s, A100 SXM, bf16, 271.2 of 312 TFLOP/s at 1024x10240x5120
  // (S. Bekman, "Machine Learning Engineering Open Book", compute/accelerator/README.md, MAMF
  // table, torch 2.6 + CUDA 12.6). The same table gives no tf32 or fp32 figure: fp16 runs at
  // bf16's rate on the same tensor cores, tf32 and fp32 take the same fraction (an assumption).
  p.gemm_16bit = p.gemm_tf32 = p.gemm_fp32 = 271.2 / 312;
  p.reference_m = 1024, p.reference_n = 10240, p.reference_k = 5120;
  // FlashAttention-2 on A100 80GB (Dao 2023, "FlashAttention-2", arXiv 2307.08691, section 4.1
  // and Figs. 4-6): forward up to 73% of peak, backward up to 63%, read at the longest sequence
  // of its benchmark (16k keys, hidden 2048 in heads of 128, 16k tokens per batch).
  p.attention_forward = 0.73, p.attention_backward = 0.63;
  p.reference_keys = 16384;
  // Streaming kernels: BabelStream triad on A100-SXM4-80GB reaches about 1.7 TB/s of the 2.039
  // specified (UoB-HPC BabelStream results; commonly reported 0.82-0.86 of spec).
  p.stream = 0.83;
  return p;
}

KernelProfile hopper() {
  KernelProfile p;
  p.architecture = GpuArchitecture::hopper;
  // MAMF table as above, H100 SXM: bf16 794.5 of 989 TFLOP/s at 2048x2048x13312 (torch 2.7 +
  // CUDA 12.6); fp8 1402.6 of 1979 at 1024x9216x14336, read at the bf16 shape's quantization.
  p.gemm_16bit = p.gemm_tf32 = p.gemm_fp32 = 794.5 / 989;
  p.gemm_fp8 = 1402.6 / 1979;
  p.reference_m = 2048, p.reference_n = 2048, p.reference_k = 13312;
  // FlashAttention-3 forward, bf16, head dimension 128, non-causal, 16k tokens per batch and
  // hidden 2048 (the FlashAttention papers' setting): 430, 517, 566, 590, 614 and 621 TFLOP/s at
  // 512 to 16k keys (pytorch/benchmark commit ff65cb67, "Fix dimension order for
  // FlashAttention-3", H100). The blocks per wave are the same at every length there, so the
  // per-row cost alone shapes the curve: s / (s + s0) with s0 = 240 keys fits every point within
  // 1% (from the 512 and 16k points). No backward figure was found: backward keeps
  // FlashAttention-2's backward-to-forward ratio on A100 (0.63 / 0.73).
  p.attention_forward = 621.0 / 989;
  p.attention_backward = p.attention_forward * 0.63 / 0.73;
  p.attention_overhead = 240;
  p.reference_keys = 16384;
  // Streaming kernels: a device copy on an H100 NVL reaches 0.906 of its 3.938 TB/s; BabelStream
  // on H100 SXM is commonly reported at 0.87-0.91 of 3.35 TB/s.
  p.stream = 0.88;
  // Per launch: 1.28 us per kernel of a replayed CUDA graph on an H100 NVL, the device-side cost
  // once the host is ahead (the report behind the copy figure above).
  p.launch_s = 1.28e-6;
  return p;
}

const KernelProfile* profile_of(GpuArchitecture architecture) {
  static const KernelProfile ampere_profile = [] {
    KernelProfile p = ampere();
    // The attention fixed cost per block row and the per-launch cost are read on Hopper only;
    // Ampere takes them (kernels of the same structure; an assumption).
    const KernelProfile h = hopper();
    p.attention_overhead = h.attention_overhead;
    p.launch_s = h.launch_s;
    return p;
  }();
  static const KernelProfile hopper_profile = hopper();
  switch (architecture) {
  case GpuArchitecture::ampere: return &ampere_profile;
  case GpuArchitecture::hopper: return &hopper_profile;
  default: return nullptr;
  }
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
  return std::min(1.0, gemm_fraction(profile, precision, allow_tf32) * shape / reference);
}

// FlashAttention: thread blocks of `attention_block` query rows (forward) or key rows (backward)
// per sequence and head, in waves over the SMs; each row of blocks pays a fixed cost of
// `attention_overhead` keys. Causal attention sees half the keys on average.
double attention_shape_factor(double queries, double keys, double batch, bool backward, bool causal, int sms,
                              const KernelProfile& profile) {
  const double blocks = std::ceil((backward ? keys : queries) / profile.attention_block) * batch;
  const double waves = std::ceil(blocks / sms);
  const double seen = causal ? keys / 2 : keys;
  return blocks / (waves * sms) * seen / (seen + profile.attention_overhead);
}

// The profile's measured fraction at its benchmark's shape (non-causal, 16k tokens per batch in
// heads of 128 over a hidden size of 2048), scaled by how this shape compares with it.
double attention_efficiency(const Kernel& kernel, const GpuInfo& gpu, const KernelProfile& profile, bool backward) {
  const double keys = profile.reference_keys, heads = 2048.0 / 128, sequences = 16384 / keys;
  const double reference =
      attention_shape_factor(keys, keys, sequences * heads, backward, false, gpu.sm_count, profile);
  const double shape = attention_shape_factor(kernel.m, kernel.n, kernel.batch, backward, true, gpu.sm_count, profile);
  const double measured = backward ? profile.attention_backward : profile.attention_forward;
  return std::min(1.0, measured * shape / reference);
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

const KernelProfile* find_kernel_profile(const GpuInfo& gpu) {
  return gpu.sm_count > 0 ? profile_of(gpu.architecture) : nullptr;
}

const KernelProfile& kernel_profile(const GpuInfo& gpu) {
  const KernelProfile* profile = find_kernel_profile(gpu);
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
    // Decoder language models attend causally; FlashAttention runs in 16 bits whatever the
    // GEMMs' precision.
    efficiency = attention_efficiency(kernel, gpu, profile, kernel.kind == KernelKind::attention_backward);
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
