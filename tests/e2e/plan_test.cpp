// trainsim plan end to end: the best configuration fits, is at least as fast as every other
// simulated one, and a direct run of it agrees; a model that fits nowhere gets a clear answer.
#include <doctest/doctest.h>

#include "cli.hpp"

using namespace trainsim::test;
using nlohmann::json;
namespace fs = std::filesystem;

TEST_CASE("the plan's best configuration fits, beats the other simulated ones, and a run of it agrees") {
  const CliResult result = run_trainsim(
      "plan_tiny", "plan --model tiny-gpt --gpu a100-80gb --gpus 8..16 --global-batch 32 --seq-len 512 --simulate 6 "
                   "-j 2 -o out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  CHECK(result.err.find("memory check of") != std::string::npos);
  const json plan = read_json(result.dir / "out/plan.json");
  REQUIRE(plan.size() >= 2);
  const json& best = plan[0];
  CHECK(best["peak_bytes"].get<double>() <= best["capacity_bytes"].get<double>());
  for (const json& other : plan)
    CHECK(best["tokens_per_s"].get<double>() >= other["tokens_per_s"].get<double>());
  CHECK(best["decisions"].get<std::string>().find("fits") != std::string::npos);
  CHECK(result.out.find("how the best got there") != std::string::npos);

  // The same configuration run directly gives the same throughput.
  const int gpus = best["gpus"];
  std::string sets = " --set platform.gpu=a100-80gb --set platform.nodes=" + std::to_string((gpus + 7) / 8);
  for (const char* key : {"dp", "tp", "pp", "vpp", "cp"})
    sets += std::string(" --set parallel.") + key + "=" + std::to_string(best[key].get<int>());
  sets += std::string(" --set parallel.sp=") + (best["tp"].get<int>() > 1 ? "true" : "false");
  sets += " --set training.micro_batch=" + std::to_string(best["micro_batch"].get<int>()) +
          " --set memory.zero=" + std::to_string(best["zero"].get<int>()) +
          " --set memory.recompute=" + best["recompute"].get<std::string>();
  const CliResult run = run_trainsim("plan_rerun", "run " + (result.dir / "out/plan-scenario.ini").string() + sets +
                                                       " --out rerun --no-report");
  REQUIRE_MESSAGE(run.status == 0, run.err);
  const json summary = read_json(run.dir / "rerun/summary.json");
  CHECK(summary["tokens_per_s"].get<double>() == doctest::Approx(best["tokens_per_s"].get<double>()).epsilon(1e-12));
  CHECK(summary["memory"]["fits"] == true);
}

TEST_CASE("a model that fits nowhere gets an answer saying what would be needed") {
  const CliResult result =
      run_trainsim("plan_nothing", "plan --model llama3-70b --gpu rtx4090 --gpus 1 --global-batch 8 -o out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  CHECK(result.out.find("nothing fits: the closest") != std::string::npos);
  CHECK(result.out.find("would need GPUs with at least") != std::string::npos);
}

TEST_CASE("plan refuses a cluster given twice or not at all") {
  const CliResult both = run_trainsim("plan_both", "plan --model tiny-gpt --gpu a100-80gb --platform dgx-a100.xml --gpus 8");
  CHECK(both.status == 2);
  CHECK(both.err.find("give either --platform FILE or a described cluster") != std::string::npos);
  const CliResult range = run_trainsim("plan_range", "plan --model tiny-gpt --platform dgx-a100.xml --gpus 4..64");
  CHECK(range.status == 2);
  CHECK(range.err.find("accepted: 1 <= N <= M <= 8") != std::string::npos);
}
