// The model-state plan against the memory table of the ZeRO paper (Rajbhandari et al. 2020,
// Figure 1: Psi parameters, mixed-precision Adam, K = 12 bytes of optimizer state per parameter,
// N_d data-parallel ranks) and the ZeRO-Offload placement (Ren et al. 2021, Table 1).
#include <doctest/doctest.h>

#include "program/model_states.hpp"
#include "program/workload_builder.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {

// fp16 weights and gradients, as the paper's table assumes.
Scenario mixed_precision(const std::vector<std::string>& overrides) {
  std::vector<std::string> all = {"memory.precision=fp16", "memory.grad_precision=fp16"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return load_scenario(test::write_temp_file("states.ini", test::tiny_scenario_ini), all);
}

// Bytes one rank keeps of `psi` parameters on the GPU.
double per_rank(const std::vector<std::string>& overrides, int ranks, double psi) {
  return plan_model_states(mixed_precision(overrides), ranks).gpu_bytes(psi);
}

} // namespace

TEST_CASE("per-rank model states follow the ZeRO paper's table: (2 + 2 + K) Psi sharded stage by stage") {
  const double psi = 7.5e9, ranks = 64;  // the paper's worked example: 7.5B parameters on 64 GPUs
  // Baseline 16 Psi = 120 GB; P_os: 4 Psi + 12 Psi / N_d = 31.4 GB; P_os+g: 2 Psi + 14 Psi / N_d =
  // 16.6 GB; P_os+g+p: 16 Psi / N_d = 1.9 GB.
  CHECK(per_rank({"memory.zero=0"}, 64, psi) == doctest::Approx(16 * psi));
  CHECK(per_rank({"memory.zero=1"}, 64, psi) == doctest::Approx(4 * psi + 12 * psi / ranks));
  CHECK(per_rank({"memory.zero=2"}, 64, psi) == doctest::Approx(2 * psi + 14 * psi / ranks));
  CHECK(per_rank({"memory.zero=3"}, 64, psi) == doctest::Approx(16 * psi / ranks));
  CHECK(per_rank({"memory.zero=1"}, 64, psi) / 1e9 == doctest::Approx(31.4).epsilon(0.01));
  CHECK(per_rank({"memory.zero=2"}, 64, psi) / 1e9 == doctest::Approx(16.6).epsilon(0.01));
  CHECK(per_rank({"memory.zero=3"}, 64, psi) / 1e9 == doctest::Approx(1.9).epsilon(0.01));
  // One rank has nothing to shard: ZeRO-3 keeps all 16 Psi, as DDP.
  CHECK(per_rank({"memory.zero=3"}, 1, psi) == doctest::Approx(16 * psi));
}

TEST_CASE("the plan says which collectives move the states, as DDP, ZeRO and Megatron do") {
  const ModelStatePlan ddp = plan_model_states(mixed_precision({"memory.zero=0"}), 8);
  CHECK(ddp.gradient_reduction == Collective::all_reduce);
  CHECK_FALSE(ddp.gathers_after_step);
  CHECK_FALSE(ddp.gathers_per_use);
  CHECK(ddp.label().empty());

  const ModelStatePlan zero2 = plan_model_states(mixed_precision({"memory.zero=2"}), 8);
  CHECK(zero2.gradient_reduction == Collective::reduce_scatter);
  CHECK(zero2.gathers_after_step);
  CHECK_FALSE(zero2.gathers_per_use);
  CHECK(zero2.reduces_from_bucket_buffers);  // stage 2 reduces every micro-batch by default
  CHECK(zero2.label() == "ZeRO-2");

  const ModelStatePlan zero3 = plan_model_states(mixed_precision({"memory.zero=3"}), 8);
  CHECK(zero3.gathers_per_use);
  CHECK_FALSE(zero3.gathers_after_step);  // each use gathers anyway

  // ZeRO-2 reducing after the last of 4 micro-batches only accumulates unsharded gradients.
  const ModelStatePlan last = plan_model_states(mixed_precision({"memory.zero=2", "comm.grad_sync=last"}), 8);
  CHECK(last.accumulates_unsharded);
  CHECK_FALSE(last.reduces_from_bucket_buffers);

  // Across pipelines ZeRO-1 is Megatron's distributed optimizer.
  const ModelStatePlan megatron = plan_model_states(
      mixed_precision({"memory.zero=1", "parallel.pp=2", "parallel.dp=2", "training.global_batch=8"}), 2);
  CHECK(megatron.gradient_reduction == Collective::reduce_scatter);
  CHECK(megatron.gathers_after_step);
}

TEST_CASE("offloading moves the fp32 states to the host as the ZeRO-Offload table says") {
  // Ren et al. 2021, Table 1 (fp16 training): the GPU keeps 2 Psi of fp16 parameters (and, without
  // gradient sharding, 2 Psi of fp16 gradients); the host keeps 4 Psi of fp32 gradients and 12 Psi
  // of fp32 parameters, momentum and variance.
  const ModelStatePlan zero1 = plan_model_states(mixed_precision({"memory.zero=1", "memory.offload_optimizer=cpu"}), 4);
  CHECK(zero1.gpu_bytes(1.0) == doctest::Approx(2.0 + 2.0));
  CHECK(zero1.optimizer.device == Device::host);
  CHECK(zero1.optimizer.bytes_per_parameter == 12.0);
  CHECK(zero1.offloaded_gradients.bytes_per_parameter == 4.0);
  CHECK(zero1.pinned_buffer_bytes == 0);  // only NVMe traffic is staged

  const ModelStatePlan zero2 = plan_model_states(mixed_precision({"memory.zero=2", "memory.offload_optimizer=cpu"}), 4);
  CHECK(zero2.gpu_bytes(1.0) == doctest::Approx(2.0));  // reduced buckets stream out: no GPU gradients
  // On one rank too (a single GPU, or the experts' group of one): DeepSpeed still streams the
  // buckets out, and there is nothing to gather after the step.
  const ModelStatePlan alone = plan_model_states(mixed_precision({"memory.zero=2", "memory.offload_optimizer=cpu"}), 1);
  CHECK(alone.stage == 2);
  CHECK(alone.gpu_bytes(1.0) == doctest::Approx(2.0));
  CHECK_FALSE(alone.gathers_after_step);
  CHECK(plan_model_states(mixed_precision({"memory.zero=2"}), 1).stage == 0);  // without offload it collapses

  const ModelStatePlan infinity = plan_model_states(
      mixed_precision({"memory.zero=3", "memory.offload_optimizer=nvme", "memory.offload_params=nvme",
                       "memory.pinned_buffer_bytes=64MiB"}),
      4);
  CHECK(infinity.gpu_bytes(1.0) == 0);
  CHECK(infinity.weights.device == Device::nvme);
  CHECK(infinity.optimizer.device == Device::nvme);
  CHECK(infinity.pinned_buffer_bytes == 64.0 * 1024 * 1024);
}

TEST_CASE("a pipeline's optimal recompute budget is the GPU less the first stage's model states, per micro-batch in flight") {
  // tiny-gpt: h = 256, 4 layers of 12 h^2 + 13 h = 789,760 parameters (GPT-2 layers with biases);
  // pp = 2 puts 2 layers on stage 0. 1F1B keeps pp = 2 micro-batches in flight on stage 0.
  const double layer = 12.0 * 256 * 256 + 13.0 * 256;
  const double capacity = 4e9;
  // Not the tensors': the CUDA context (512 MiB) and NCCL's buffers of stage 0's communicators:
  // its dp group, the tied embedding's group with the last stage and its pipeline neighbour, each
  // 16 channels x (4 MiB Simple + 512 KiB LL + 4,915,200 B LL128). Of the rest the allocator's
  // reserve, fragmentation 0.15, leaves 85% to tensors.
  const double runtime = 512.0 * 1024 * 1024 + 3 * 16 * (4194304.0 + 524288 + 4915200);
  const double tensors = (capacity - runtime) * 0.85;
  const auto budget = [&](const std::vector<std::string>& overrides) {
    std::vector<std::string> all = {"parallel.pp=2", "parallel.dp=2", "training.global_batch=16",
                                    "memory.recompute=optimal"};
    all.insert(all.end(), overrides.begin(), overrides.end());
    const Scenario scenario = load_scenario(test::write_temp_file("budget.ini", test::tiny_scenario_ini), all);
    return build_workload(scenario, load_model(scenario.model_file, scenario.vocab_multiple), capacity).recompute.budget;
  };
  // bf16 weights 2 + fp32 gradients 4 + fp32 master, momentum, variance 12 = 18 bytes per parameter.
  CHECK(budget({"memory.zero=0"}) == doctest::Approx((tensors - 18 * 2 * layer) / 2));
  // ZeRO-1 (Megatron's distributed optimizer) over dp = 2: 2 + 4 + 12 / 2 = 12 bytes.
  CHECK(budget({"memory.zero=1"}) == doctest::Approx((tensors - 12 * 2 * layer) / 2));
}

TEST_CASE("frameworks keep their own model states: FSDP2 16 bytes per parameter, Megatron's distributed optimizer 18") {
  const auto file = test::write_temp_file("framework_states.ini", test::tiny_scenario_ini);
  const double psi = 8e9, ranks = 64;
  const auto held = [&](std::vector<std::string> overrides) {
    return plan_model_states(load_scenario(file, overrides), static_cast<int>(ranks)).gpu_bytes(psi);
  };
  // bf16 training with fp32 gradient reduction (the defaults). FSDP2 with a mixed-precision policy
  // keeps fp32 sharded parameters (4), their fp32 gradients (4) and Adam's two moments (8), with no
  // separate master copy: 16 bytes, all sharded (torchtitan's memory estimate counts the same).
  CHECK(held({"training.framework=fsdp2"}) == doctest::Approx(16 * psi / ranks));
  // DeepSpeed's ZeRO-3 keeps bf16 parameters (2), fp32 gradients (4) and the fp32 master copy with
  // the moments (4 + 8): 18 bytes, all sharded.
  CHECK(held({"training.framework=deepspeed", "memory.zero=3"}) == doctest::Approx(18 * psi / ranks));
  // Megatron's distributed optimizer with fp32 gradients (--accumulate-allreduce-grads-in-fp32):
  // 2 + 4 bytes replicated, 12 sharded (Megatron-Core's distributed optimizer documentation: 18
  // bytes per parameter before sharding, 6 + 12 / d after).
  CHECK(held({"training.framework=megatron", "memory.zero=1"}) == doctest::Approx(6 * psi + 12 * psi / ranks));
  // In fp32 FSDP2 has nothing to cast: the same 4 + 4 + 8.
  CHECK(held({"training.framework=fsdp2", "memory.precision=fp32"}) == doctest::Approx(16 * psi / ranks));
}
