// A whole run in this process, through the run module the CLI calls: prepare, simulate, read the
// numbers (no files). SimGrid holds one engine per process; CTest runs each case in its own.
#include <doctest/doctest.h>

#include <filesystem>
#include <numeric>

#include "run/memory_estimate.hpp"
#include "run/run.hpp"

using namespace trainsim;

namespace {

const std::filesystem::path tiny_ddp = std::filesystem::path(TRAINSIM_SOURCE_DIR) / "tests/fixtures/tiny-ddp.ini";

double model_state_bytes(const RankMemory& memory) {
  return memory.persistent_gpu[static_cast<int>(MemCategory::weights)] +
         memory.persistent_gpu[static_cast<int>(MemCategory::gradients)] +
         memory.persistent_gpu[static_cast<int>(MemCategory::optimizer)];
}

} // namespace

TEST_CASE("a data-parallel run prepared and simulated in process trains its batch on 16 ranks") {
  SimulationContext context(SimulationOptions{});
  const PreparedRun prepared = prepare(context, tiny_ddp, {});
  // dp = 16 on the two 8-GPU nodes of dgx-a100-2n: one rank per GPU.
  REQUIRE(prepared.workload.ranks() == 16);
  REQUIRE(prepared.gpus.size() == 16);
  CHECK(prepared.run.layout == "dp=16 tp=1 pp=1 cp=1");
  CHECK(prepared.run.grad_accum == 2);  // global_batch 64 / (micro_batch 2 x dp 16)

  const std::vector<bool> every_rank(16, true);
  const SimulatedRun simulated =
      simulate(context, prepared, replay_settings(prepared.scenario), every_rank, std::vector<int>{0});
  const StepMetrics& metrics = simulated.metrics;
  REQUIRE(metrics.ranks.size() == 16);

  // A step trains global_batch x seq_len = 64 x 512 tokens.
  CHECK(metrics.tokens_per_s * metrics.step_time_s == doctest::Approx(64.0 * 512));

  // No rank computes faster than its GPU's bf16 peak: rank 0's FLOPs at peak bound the step.
  const auto& ops = prepared.workload.program(0).ops;
  const double flops = std::accumulate(ops.begin(), ops.end(), 0.0, [](double sum, const Op& op) { return sum + op.flops; });
  CHECK(flops > 0);
  CHECK(metrics.step_time_s > flops / prepared.gpus[0].peak_bf16);

  // tiny-gpt has 4 x (12h^2 + 13h) + (V + positions) h + 2h parameters, h = 256, V = 1024, 1024
  // positions. bf16 DDP keeps per parameter 2 bytes of weights, 4 of fp32 gradients and 12 of
  // fp32 master weights and Adam moments: 18 bytes.
  const double parameters = 4 * (12 * 256 * 256 + 13 * 256) + (1024 + 1024) * 256 + 2 * 256;
  for (const RankMetrics& rank : metrics.ranks)
    CHECK(model_state_bytes(rank.memory) == 18 * parameters);

  // DDP frees in program order what the replay frees: the estimate without simulating agrees.
  const std::vector<RankMemory> estimated = estimate_memory(prepared.workload, prepared.gpus, prepared.scenario.reserve);
  REQUIRE(estimated.size() == 16);
  for (std::size_t rank = 0; rank < 16; ++rank) {
    CHECK(estimated[rank].gpu().peak == metrics.ranks[rank].memory.gpu().peak);
    CHECK(estimated[rank].reserve == metrics.ranks[rank].memory.reserve);
  }

  // Only rank 0's spans were asked for.
  CHECK(simulated.spans.ranks() == std::vector<int>{0});
  CHECK(!simulated.spans.spans(0).empty());
}
