#pragma once
// How long a kernel takes on a GPU, from the GPU's peaks and SM count and a calibration per GPU
// generation (KernelProfile), taken from published kernel-level measurements, cited in
// kernel_timing.cpp; end-to-end step times are never fitted here.
// - GEMM: the FLOPs over peak x efficiency, the efficiency being the generation's asymptote
//   (what a large GEMM reaches) scaled by tile and wave quantization (the output tiles spread
//   over the SMs in waves; a last, partial wave idles SMs) and by the K loop's fixed prologue and
//   epilogue (small K is less efficient); never faster than its operands stream from HBM.
// - Attention (a fused kernel: FlashAttention-2 or -3, cuDNN): forward and backward asymptotes,
//   with the same wave quantization over query (forward) or key (backward) blocks and a fixed
//   cost per block row that makes short sequences less efficient, fitted per kernel to its
//   published throughput curve.
// - Memory-bound kernels: their bytes over the HBM bandwidth streaming kernels reach.
// Every launch also pays a fixed overhead (launch latency, ramp-up and tail), which is what makes
// small models and small micro-batches less efficient.
#include <string>
#include <vector>

#include "cluster/gpu.hpp"
#include "common/precision.hpp"
#include "model/kernels.hpp"

namespace trainsim {

// A GEMM thread-block tile the library chooses among, and how fast it runs relative to the best
// (larger tiles reuse more of what they load).
struct GemmTile {
  double m = 0, n = 0;
  double relative = 1;
};

// A fused attention kernel's speed: the fraction of the 16-bit peak it would reach with full
// waves and unbounded keys, and a fixed cost per block row, in keys, that makes short sequences
// slower. Fitted to a published throughput curve (kernel_timing.cpp cites each).
struct AttentionCurve {
  double forward = 0, backward = 0;
  double forward_overhead = 0, backward_overhead = 0;
};

struct KernelProfile {
  GpuArchitecture architecture = GpuArchitecture::unknown;
  // Fraction of the dense peak of each precision reached by `reference_gemm` (a large GEMM), the
  // most any GEMM reaches.
  double gemm_16bit = 0, gemm_tf32 = 0, gemm_fp32 = 0, gemm_fp8 = 0;
  double reference_m = 8192, reference_n = 8192, reference_k = 8192;
  // The fused attention kernel timed (backward FLOPs counted as 2.5 forward: it recomputes the
  // scores).
  AttentionKernel attention_kernel = AttentionKernel::fa2;
  AttentionCurve attention;
  double stream = 0;                // fraction of peak HBM bandwidth streaming kernels reach
  double launch_s = 0;              // fixed seconds per kernel launch
};

// The calibration of the GPU's generation with its `attention` kernel (Transformer Engine's
// resolved to the one it runs there); nullptr when the generation has none (a platform names a
// GPU's generation with the `architecture` and `sm_count` host properties when its model is not
// in the catalog). InputError for an attention kernel the generation does not run or has no
// figures for. kernel_profile: InputError for an uncalibrated generation too.
const KernelProfile* find_kernel_profile(const GpuInfo& gpu, AttentionKernel attention);
const KernelProfile& kernel_profile(const GpuInfo& gpu, AttentionKernel attention);

struct KernelTime {
  double seconds = 0;     // all launches: max(math, memory) + launch overhead each
  double efficiency = 0;  // fraction of peak FLOP/s while it runs (0 for memory kernels)
  const char* bound = ""; // "compute", "memory" or "launch": what sets its time
};

KernelTime time_kernel(const Kernel& kernel, const GpuInfo& gpu, Precision precision, bool allow_tf32,
                       const KernelProfile& profile);
double kernel_set_seconds(const KernelSet& set, const GpuInfo& gpu, Precision precision, bool allow_tf32,
                          const KernelProfile& profile);
// An op whose kernels are not known (the optimizer step, a hand-written trace): one kernel of its
// FLOPs at the GEMM asymptote and its bytes at the streaming bandwidth.
double opaque_kernel_seconds(const Work& work, const GpuInfo& gpu, Precision precision, bool allow_tf32,
                             const KernelProfile& profile);

} // namespace trainsim
