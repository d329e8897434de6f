#pragma once
// The GPU kernels a piece of the training step launches (a layer's attention or MLP, forward or
// backward; the embedding; the head and its loss): GEMMs with their M, N and K, attention cores,
// and memory-bound kernels (norms, activation functions, rotary embeddings, dropout, residual
// adds, the loss) with the bytes they move. A piece takes the sum of its kernels' times
// (model/kernel_timing), so the memory-bound kernels add to the matmuls instead of hiding under
// them. Pure data: which kernels a layer has is decided in model/costs.cpp.
#include <string>
#include <vector>

namespace trainsim {

enum class KernelKind { gemm, attention_forward, attention_backward, memory };
const char* to_string(KernelKind kind);

struct Kernel {
  std::string name;  // "qkv", "fc2.wgrad", "rmsnorm", "flash-attention"
  KernelKind kind = KernelKind::memory;
  // gemm: C (m x n) = A (m x k) B (k x n), `batch` of them in one launch (batched GEMM).
  // attention: m queries and n keys per head, k the head dimension, `batch` = sequences x heads.
  double m = 0, n = 0, k = 0, batch = 1;
  double flops = 0;  // one launch: what the hardware executes (causal attention skips masked blocks)
  double bytes = 0;  // one launch: HBM traffic
  double count = 1;  // launches of this kernel in the piece (the steps of ring attention)
  bool weight_gradient = false;  // a linear layer's weight-gradient GEMM (what a split backward defers)
};

// A piece of the step as its kernels, launched one after the other on the compute stream.
struct KernelSet {
  std::string name;  // "layer.attention.fwd"
  std::vector<Kernel> kernels;
  double flops() const;
  double bytes() const;
};

// What a compute op does: its FLOPs and HBM traffic, and, when known, the kernels behind them
// (an index into the workload's kernel sets; -1: one roofline kernel of these FLOPs and bytes).
struct Work {
  double flops = 0;
  double bytes = 0;
  int kernel_set = -1;
};

} // namespace trainsim
