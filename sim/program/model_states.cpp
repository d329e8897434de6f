#include "program/model_states.hpp"

#include <cmath>

namespace trainsim {
namespace {

Device device_of(OffloadTier tier) {
  return tier == OffloadTier::nvme ? Device::nvme : tier == OffloadTier::cpu ? Device::host : Device::gpu;
}

} // namespace

double ModelStatePlan::shard(double parameters) const { return std::ceil(parameters / ranks); }

double ModelStatePlan::held(const StatePlacement& state, double parameters) const {
  return state.sharded ? shard(parameters) : parameters;
}

double ModelStatePlan::gpu_bytes(double parameters) const {
  double bytes = 0;
  for (const StatePlacement* state : {&weights, &gradients, &optimizer, &offloaded_gradients})
    if (state->device == Device::gpu)
      bytes += held(*state, parameters) * state->bytes_per_parameter;
  return bytes;
}

std::string ModelStatePlan::label() const {
  return configured_stage > 0 ? zero_stage_label(configured_stage) : "";
}

int effective_zero_stage(int zero, int gradient_ranks, bool offloads) {
  return gradient_ranks > 1 || offloads ? zero : 0;
}

std::string zero_stage_label(int stage) { return "ZeRO-" + std::to_string(stage); }

ModelStatePlan plan_model_states(const Scenario& s, int gradient_ranks) {
  ModelStatePlan plan;
  plan.configured_stage = s.zero;
  plan.ranks = gradient_ranks;
  plan.stage = effective_zero_stage(s.zero, gradient_ranks,
                                    s.offload_params != OffloadTier::none || s.offload_optimizer != OffloadTier::none);
  plan.gradient_element_bytes = bytes_per_element(s.grad_precision);
  plan.parameter_element_bytes = bytes_per_element(s.precision);

  plan.weights = {s.precision == Precision::fp8 ? 3.0 : bytes_per_element(s.precision), device_of(s.offload_params),
                  plan.stage >= 3};
  const double master_copy = s.precision == Precision::fp32 ? 0.0 : 4.0;
  const bool offloaded = s.offload_optimizer != OffloadTier::none;
  if (!offloaded) {
    plan.gradients = {plan.gradient_element_bytes, Device::gpu, plan.stage >= 2};
    plan.optimizer = {master_copy + (s.fp32_grad_copy ? 4.0 : 0.0) + 8.0, Device::gpu, plan.stage >= 1};
  } else {
    // Offloading the optimizer moves the fp32 states and gradients to the host: the GPU keeps its
    // 16-bit gradients only where they are reduced in place (ZeRO-0/1); ZeRO-2/3 stream each
    // reduced bucket out. ZeRO-Infinity keeps the fp32 gradients beside the states: a trillion
    // parameters' gradients exceed any node's DRAM.
    if (plan.stage < 2)
      plan.gradients = {plan.gradient_element_bytes, Device::gpu, false};
    plan.optimizer = {master_copy + 8.0, device_of(s.offload_optimizer), plan.stage >= 1};
    plan.offloaded_gradients = {4.0, device_of(s.offload_optimizer), plan.stage >= 1};
  }
  if (s.framework == Framework::fsdp2 && s.precision != Precision::fp32) {
    // FSDP2 with a mixed-precision policy keeps the sharded parameters, their gradients and Adam's
    // states in fp32 and casts to the 16-bit type only for the all-gather: 4 + 4 + 8 = 16 bytes per
    // parameter, with no separate master copy (torchtitan's MixedPrecisionPolicy).
    plan.weights.bytes_per_parameter = 4.0;
    plan.gradients.bytes_per_parameter = 4.0;
    plan.optimizer.bytes_per_parameter = 8.0;
  }
  if (s.offload_optimizer == OffloadTier::nvme || s.offload_params == OffloadTier::nvme)
    plan.pinned_buffer_bytes = s.pinned_buffer_bytes;

  plan.gradient_reduction = plan.stage == 0 ? Collective::all_reduce : Collective::reduce_scatter;
  plan.gathers_after_step = (plan.stage == 1 || plan.stage == 2) && gradient_ranks > 1;
  plan.gathers_per_use = plan.stage >= 3;
  plan.accumulates_unsharded = plan.stage >= 2 && s.grad_sync == GradSync::last && s.grad_accum > 1;
  plan.reduces_from_bucket_buffers = plan.stage >= 2 && !plan.accumulates_unsharded;
  return plan;
}

} // namespace trainsim
