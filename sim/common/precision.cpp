#include "common/precision.hpp"

namespace trainsim {

const char* to_string(Precision precision) {
  switch (precision) {
  case Precision::fp32: return "fp32";
  case Precision::fp16: return "fp16";
  case Precision::bf16: return "bf16";
  case Precision::fp8: return "fp8";
  }
  return "?";
}

const char* to_string(ComputeModel model) {
  switch (model) {
  case ComputeModel::automatic: return "auto";
  case ComputeModel::kernels: return "kernels";
  case ComputeModel::roofline: return "roofline";
  }
  return "auto";
}

const char* to_string(AttentionKernel kernel) {
  switch (kernel) {
  case AttentionKernel::fa2: return "fa2";
  case AttentionKernel::fa3: return "fa3";
  case AttentionKernel::cudnn: return "cudnn";
  case AttentionKernel::transformer_engine: return "te";
  }
  return "fa2";
}

double bytes_per_element(Precision precision) { return precision == Precision::fp32 ? 4.0 : 2.0; }

} // namespace trainsim
