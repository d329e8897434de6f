#pragma once
// How a GPU computes: the number format of training and how close to its peak it runs.
// Small value types shared by the model's costs, the programs and the scenario.

namespace trainsim {

enum class Precision { fp32, fp16, bf16, fp8 };

const char* to_string(Precision precision);
// Bytes of a stored element: fp8 training keeps its weights and activations in 16-bit.
double bytes_per_element(Precision precision);

// How compute ops are timed: kernel by kernel, with the calibration of the GPU's generation
// (model/kernel_timing), or as one roofline kernel at the fixed efficiencies below; automatic:
// kernels on GPUs whose generation is calibrated, the roofline on the others.
enum class ComputeModel { automatic, kernels, roofline };
const char* to_string(ComputeModel model);

// The fused attention kernel FlashAttention-style layers run (compute.model = kernels):
// FlashAttention-2, FlashAttention-3 (Hopper), cuDNN's fused attention, or Transformer Engine's
// choice among them (cuDNN on Hopper and later, FlashAttention-2 before).
enum class AttentionKernel { fa2, fa3, cudnn, transformer_engine };
const char* to_string(AttentionKernel kernel);

struct ComputeEfficiency {
  ComputeModel model = ComputeModel::roofline;
  // Roofline only. Achieved / peak tensor FLOP/s over a whole layer; 0.55 reproduces the per-layer times of
  // Korthikanti et al. 2022, Table 4 (22B model on A100) once the TP all-reduces are taken out:
  // the layer's 19.6 ms (forward + backward, TP = 8) less four TP all-reduces (about 2.6 ms at
  // NVSwitch bandwidth) is 2.94 TFLOP in about 17 ms per GPU, 0.55 of 312 TFLOP/s.
  double matmul = 0.55;
  double memory = 0.8;   // roofline only: achieved / peak HBM bandwidth for memory-bound kernels
  bool allow_tf32 = true;
  AttentionKernel attention = AttentionKernel::fa2;  // kernels only
};

} // namespace trainsim
