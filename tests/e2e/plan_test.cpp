// trainsim plan end to end: the best configuration fits, is at least as fast as every other
// simulated one, and a direct run of it agrees; a model that fits nowhere gets a clear answer.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <limits>

#include "cli.hpp"

using namespace trainsim::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The shortest step among a plan's simulated candidates (its output folder is out/).
double fastest_step(const CliResult& result) {
  double best = std::numeric_limits<double>::infinity();
  for (const json& row : read_json(result.dir / "out" / "plan.json"))
    best = std::min(best, row["step_time_s"].get<double>());
  return best;
}

} // namespace

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
  // Without a CPU host to offload to, 70B parameters on one 80 GB GPU: the GPU is the limit.
  const CliResult result =
      run_trainsim("plan_nothing", "plan --model llama3-70b --platform dgx-a100.xml --gpus 1 --global-batch 8 -o out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  CHECK(result.out.find("nothing fits: the closest") != std::string::npos);
  CHECK(result.out.find("would need GPUs with at least") != std::string::npos);
  CHECK(result.out.find("a platform with a CPU host to offload to") != std::string::npos);
  // Offloaded to 512 GB of DRAM, the 18 bytes per parameter of ZeRO-Infinity (1.26 TB) do not fit.
  const CliResult host = run_trainsim(
      "plan_nothing_host", "plan --model llama3-70b --gpu rtx4090 --gpus 1 --host-memory 512GB --global-batch 8 -o out");
  REQUIRE_MESSAGE(host.status == 0, host.err);
  CHECK(host.out.find("fits the GPUs but needs") != std::string::npos);
  CHECK(host.out.find("of host memory per node") != std::string::npos);
}

TEST_CASE("plan refuses a cluster given twice or not at all") {
  const CliResult both = run_trainsim("plan_both", "plan --model tiny-gpt --gpu a100-80gb --platform dgx-a100.xml --gpus 8");
  CHECK(both.status == 2);
  CHECK(both.err.find("give either --platform FILE or a described cluster") != std::string::npos);
  const CliResult range = run_trainsim("plan_range", "plan --model tiny-gpt --platform dgx-a100.xml --gpus 4..64");
  CHECK(range.status == 2);
  CHECK(range.err.find("accepted: 1 <= N <= M <= 8") != std::string::npos);
}

TEST_CASE("plan describes a fat tree where the GPUs asked for need more nodes than a single switch joins") {
  // 513 nodes of one GPU: one more than a single switch routes (every pair of its nodes).
  const CliResult result = run_trainsim(
      "plan_fat_tree", "plan --model tiny-gpt --gpu a100-80gb --gpus-per-node 1 --gpus 513 --global-batch 513 "
                       "--seq-len 512 --simulate 1 -j 1 -o out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  CHECK(result.err.find("513 nodes, described as a fat tree") != std::string::npos);
  const std::string scenario = read_file(result.dir / "out/plan-scenario.ini");
  CHECK(scenario.find("topology = fat-tree") != std::string::npos);
  CHECK(read_json(result.dir / "out/plan.json").at(0)["gpus"] == 513);
  // Nodes given outright keep their topology, and a bad cluster option is refused by its name.
  const CliResult single = run_trainsim("plan_single_switch", "plan --model tiny-gpt --gpu a100-80gb --nodes 513");
  CHECK(single.status == 2);
  CHECK(single.err.rfind("trainsim: error: --nodes 513: platform.nodes = '513': a single switch", 0) == 0);
  CHECK(std::count(single.err.begin(), single.err.end(), '\n') == 1);
  // A scenario's own platform lines complete the options (its fat tree gives --nodes-per-leaf a
  // meaning): they are not checked without them.
  const fs::path dir = fresh_dir("plan_fat_tree_ini");
  std::ofstream(dir / "fat-tree.ini") << "[model]\nname = tiny-gpt\n[platform]\ngpu = a100-80gb\nnodes = 4\n"
                                         "topology = fat-tree\n[training]\nseq_len = 512\nglobal_batch = 64\n";
  const CliResult from_scenario =
      run_trainsim("plan_fat_tree_scenario", "plan " + (dir / "fat-tree.ini").string() +
                                                 " --gpu a100-80gb --nodes 4 --nodes-per-leaf 2 --simulate 1 -j 1 -o out");
  CHECK_MESSAGE(from_scenario.status == 0, from_scenario.err);
  // A scenario naming no topology gets the fat tree its nodes need, as options alone do.
  std::ofstream(dir / "no-topology.ini") << "[model]\nname = tiny-gpt\n[training]\nseq_len = 512\nglobal_batch = 513\n";
  const CliResult unnamed =
      run_trainsim("plan_fat_tree_unnamed", "plan " + (dir / "no-topology.ini").string() +
                                                " --gpu a100-80gb --gpus-per-node 1 --gpus 513 --simulate 1 -j 1 -o out");
  REQUIRE_MESSAGE(unnamed.status == 0, unnamed.err);
  CHECK(unnamed.err.find("513 nodes, described as a fat tree") != std::string::npos);
  // A scenario's GPUs per node count where the options name none: 513 GPUs at one per node.
  std::ofstream(dir / "one-per-node.ini") << "[model]\nname = tiny-gpt\n[platform]\ngpus_per_node = 1\n"
                                             "[training]\nseq_len = 512\nglobal_batch = 513\n";
  const CliResult per_node = run_trainsim("plan_fat_tree_per_node", "plan " + (dir / "one-per-node.ini").string() +
                                                                        " --gpu a100-80gb --gpus 513 --simulate 1 -j 1 -o out");
  REQUIRE_MESSAGE(per_node.status == 0, per_node.err);
  CHECK(per_node.err.find("513 nodes, described as a fat tree") != std::string::npos);
  CHECK(read_json(per_node.dir / "out/plan.json").at(0)["gpus"] == 513);
}

TEST_CASE("on a workstation too small for the model, the plan offloads to the CPU and says so") {
  // Llama 3 8B on 4 x 24 GB: mixed-precision Adam needs 16 bytes x 8.03B = 128 GB, more than the
  // 96 GB of the four GPUs together, so no layout fits without moving states to host memory.
  const CliResult result = run_trainsim(
      "plan_offload", "plan --model llama3-8b --gpu rtx4090 --gpus-per-node 4 --fabric pcie --gpus 4 "
                      "--global-batch 16 --seq-len 2048 --simulate 2 -j 2 -o out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const json plan = read_json(result.dir / "out/plan.json");
  REQUIRE(!plan.empty());
  for (const json& row : plan) {
    CHECK(row["offload"].get<std::string>() != "none");
    CHECK(row["decisions"].get<std::string>().find("offloaded to the CPU fits") != std::string::npos);
    CHECK(row["decisions"].get<std::string>().find("host memory") != std::string::npos);
  }
  CHECK(read_file(result.dir / "out/plan.csv").rfind("rank,gpus,dp,tp,pp,vpp,schedule,cp,ep,etp,dispatcher,micro_batch,zero,recompute,offload,", 0) == 0);
}

TEST_CASE("a plan whose results cannot all be written leaves none of them") {
  const fs::path out = fresh_dir("plan_full_disk_out");
  // plan.json's temporary name leads to /dev/full, which refuses every write with ENOSPC.
  fs::create_symlink("/dev/full", out / "plan.json.tmp");
  const CliResult result = run_trainsim("plan_full_disk", "plan --model tiny-gpt --platform dgx-a100.xml --gpus 8 --seq-len 512 "
                                                          "--global-batch 16 --simulate 1 -j 1 -o " + out.string());
  CHECK(result.status == 2);
  CHECK(result.err.find("plan.json: write failed (No space left on device)") != std::string::npos);
  CHECK(result.out.empty());  // no ranking printed as if the plan were complete
  // Only the scenario the workers ran remains: no plan.csv, sweep.svg or sweep.html without plan.json.
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(out))
    left.push_back(entry.path().filename().string());
  CHECK(left == std::vector<std::string>{"plan-scenario.ini"});
}

TEST_CASE("plan --set fixes a setting on every candidate, and refuses what the planner searches or sets itself") {
  const std::string plan = "plan --model tiny-gpt --gpu a100-80gb --gpus 2 --global-batch 8 --seq-len 512 -o out ";
  // Half the default matmul efficiency under the roofline: every candidate's GEMMs take twice
  // as long (most of tiny GPT's step on two A100s), so the fastest plan is slower by far.
  const CliResult plain = run_trainsim("plan_set_plain", plan + "--set compute.model=roofline");
  const CliResult slow =
      run_trainsim("plan_set_slow", plan + "--set compute.model=roofline --set compute.matmul_efficiency=0.275");
  REQUIRE_MESSAGE(plain.status == 0, plain.err);
  REQUIRE_MESSAGE(slow.status == 0, slow.err);
  CHECK(fastest_step(slow) > 1.5 * fastest_step(plain));
  CHECK(slow.out.find("tokens to train, compute.model=roofline, compute.matmul_efficiency=0.275;") != std::string::npos);
  for (const json& row : read_json(slow.dir / "out" / "plan.json"))
    CHECK(row["settings"] == "compute.model=roofline compute.matmul_efficiency=0.275");
  // A setting only some layouts take: tensor-parallel overlap needs tp > 1 (with sequence
  // parallelism, which the planner sets with every tp), so of two GPUs only tp = 2 layouts remain.
  const CliResult overlap = run_trainsim("plan_set_overlap", plan + "--set comm.tp_comm_overlap=true");
  REQUIRE_MESSAGE(overlap.status == 0, overlap.err);
  const json overlapped = read_json(overlap.dir / "out" / "plan.json");
  CHECK(!overlapped.empty());
  for (const json& row : overlapped)
    CHECK(row["tp"] == 2);
  CHECK(overlap.err.find("candidates refused with comm.tp_comm_overlap=true (the first: ") != std::string::npos);
  const auto refused = [&](const std::string& name, const std::string& setting, const std::string& why) {
    const CliResult result = run_trainsim(name, plan + "--set " + setting);
    CHECK(result.status == 2);
    CHECK_MESSAGE(result.err.find("--set " + setting + ": " + why) != std::string::npos, result.err);
  };
  refused("plan_set_searched", "parallel.tp=2", "the planner searches it");
  refused("plan_set_option", "memory.precision=fp16", "plan sets it from --precision");
  refused("plan_set_unknown", "comm.bogus=1", "unknown key 'comm.bogus'");
  refused("plan_set_budget", "memory.activation_budget=10GiB",
          "it applies to memory.recompute = optimal, which the planner does not try");
  const CliResult twice = run_trainsim("plan_set_twice", plan + "--set compute.model=roofline --set compute.model=kernels");
  CHECK(twice.status == 2);
  CHECK(twice.err.find("compute.model is already set to roofline; accepted: each key once") != std::string::npos);
}

TEST_CASE("plan ranks by cost within a deadline, lists the late ones last, and says why the first beats the second") {
  const CliResult result = run_trainsim(
      "plan_cost", "plan --model tiny-gpt --gpu a100-80gb --gpus 2..4 --global-batch 32 --seq-len 512 --simulate 100 -j 2 "
                   "--fix memory.recompute=none --exclude training.micro_batch=1 --rank-by cost "
                   "--gpu-hour-price h100-sxm=9,a100-80gb=2.5 --deadline 100s -o out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const json plan = read_json(result.dir / "out/plan.json");
  REQUIRE(plan.size() >= 2);
  bool late = false;
  double previous = 0;
  for (const json& row : plan) {
    CHECK(row["recompute"] == "none");
    CHECK(row["micro_batch"] != 1);
    const double to_train = row["time_to_train_s"].get<double>(), hours = row["gpu_hours"].get<double>();
    // GPU-hours: the GPUs for the time to train; the cost: those hours at the A100's price.
    CHECK(hours == doctest::Approx(to_train * row["gpus"].get<int>() / 3600.0));
    CHECK(row["cost"].get<double>() == doctest::Approx(2.5 * hours));
    if (!row["within_deadline"].get<bool>()) {
      late = true;
      CHECK(to_train > 100);
      continue;
    }
    CHECK(!late);  // those within the deadline come first
    CHECK(to_train <= 100);
    CHECK(hours >= previous);  // cheapest first
    previous = hours;
  }
  CHECK(plan[0]["within_deadline"] == true);
  CHECK(result.out.find("ranked by cost, at most 1.67 min to train") != std::string::npos);
  CHECK(result.out.find("why 1 ranks above 2: ") != std::string::npos);
  CHECK(result.out.find(" GPU-hours against ") != std::string::npos);
  if (late)
    CHECK(result.out.find("simulated candidates fit but take longer than 1.67 min to train") != std::string::npos);

  const auto refused = [](const std::string& name, const std::string& options, const std::string& why) {
    const CliResult refusal =
        run_trainsim(name, "plan --model tiny-gpt --gpu a100-80gb --gpus 2 --global-batch 8 --seq-len 512 -o out " + options);
    CHECK(refusal.status == 2);
    CHECK_MESSAGE(refusal.err.find(why) != std::string::npos, refusal.err);
  };
  refused("plan_cost_no_price", "--rank-by cost", "--rank-by cost: needs --gpu-hour-price");
  refused("plan_cost_other_gpu", "--gpu-hour-price h100-sxm=2", "no price for the cluster's GPU, a100-80gb");
  refused("plan_deadline_unit", "--deadline 30", "--deadline 30: needs a unit");
  refused("plan_rank_unknown", "--rank-by speed", "accepted: tokens_per_s, time_to_train, gpu_hours, cost");
  refused("plan_fix_unknown", "--fix parallel.sp=true", "--fix parallel.sp=true: accepted keys:");
  refused("plan_fix_nothing", "--fix parallel.tp=4", "--fix parallel.tp=4: no candidate is left; the candidates take parallel.tp 1, 2");
}

TEST_CASE("plan SCENARIO starts from the scenario: its settings hold for every candidate, its layout is searched") {
  // A slower compute model in the scenario, as plan --set would fix it (see the --set case: the
  // GEMMs of tiny GPT's step on two A100s take twice as long at half the efficiency), and a
  // layout the planner replaces.
  const fs::path dir = fresh_dir("plan_scenario_files");
  std::ofstream(dir / "slow.ini") << "[model]\nname = tiny-gpt\n[platform]\ngpu = a100-80gb\n[parallel]\ntp = 2\n"
                                     "[compute]\nmodel = roofline\nmatmul_efficiency = 0.275\n"
                                     "[training]\nseq_len = 512\nglobal_batch = 8\n";
  const CliResult slow = run_trainsim("plan_scenario", "plan " + (dir / "slow.ini").string() + " --gpus 2 -o out");
  const CliResult plain = run_trainsim("plan_scenario_plain", "plan --model tiny-gpt --gpu a100-80gb --gpus 2 "
                                                              "--global-batch 8 --seq-len 512 --set compute.model=roofline -o out");
  REQUIRE_MESSAGE(slow.status == 0, slow.err);
  REQUIRE_MESSAGE(plain.status == 0, plain.err);
  CHECK(slow.err.find("the planner chooses parallel.tp (set in ") != std::string::npos);
  CHECK(fastest_step(slow) > 1.5 * fastest_step(plain));
  bool untensored = false;
  for (const json& row : read_json(slow.dir / "out" / "plan.json"))
    untensored = untensored || row["tp"] == 1;
  CHECK(untensored);
  // The plan's options replace the scenario's values.
  const CliResult batch = run_trainsim("plan_scenario_batch", "plan " + (dir / "slow.ini").string() +
                                                                  " --gpus 2 --global-batch 16 --simulate 1 -o out");
  REQUIRE_MESSAGE(batch.status == 0, batch.err);
  CHECK(batch.out.find("tiny-gpt, global batch 16 x 512 tokens") != std::string::npos);
  const CliResult none = run_trainsim("plan_no_model", "plan --gpu a100-80gb --gpus 2");
  CHECK(none.status == 2);
  CHECK(none.err.find("give a SCENARIO or --model") != std::string::npos);
}
