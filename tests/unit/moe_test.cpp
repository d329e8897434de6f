// Mixtures of experts: the costs of an expert MLP, the expert-parallel groups and what a step's
// programs send and keep, each against a hand derivation.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "common/error.hpp"
#include "config/scenario.hpp"
#include "layout/layout.hpp"
#include "memory/memory_tracker.hpp"
#include "model/costs.hpp"
#include "program/workload_builder.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {

ModelSpec mixtral() { return load_model(test::source_dir() / "models" / "mixtral-8x7b.json", 128); }

// Mixtral 8x7B on 16 A100s: tp 2 with SP, dp 8 of which ep share the experts, 4 micro-batches.
Scenario mixtral_scenario(const std::vector<std::string>& overrides = {}) {
  const std::string text = R"([model]
name = mixtral-8x7b
[platform]
file = dgx-a100-2n.xml
[parallel]
tp = 2
sp = true
dp = 8
ep = 8
[memory]
zero = 1
[training]
seq_len = 4096
micro_batch = 1
global_batch = 32
)";
  return parse_scenario(text, test::write_temp_file("mixtral.ini", text), overrides);
}

std::string refusal(const std::vector<std::string>& overrides) {
  try {
    const Scenario scenario = mixtral_scenario(overrides);
    build_workload(scenario, load_model(scenario.model_file, scenario.vocab_multiple), 0);
  } catch (const InputError& error) {
    return error.what();
  }
  FAIL("accepted");
  return "";
}

constexpr double h = 4096, f = 14336, vocab = 32000, kv = 1024, tokens = 4096;

} // namespace

TEST_CASE("an expert MLP under expert and tensor parallelism, by hand") {
  // One micro-batch of 4096 tokens in bf16, tp 2 with SP, ep 8: each rank routes its 2048 tokens
  // to 2 experts each, and the 8 ranks' copies arrive at the experts' ranks: 4096 per rank, then
  // all-gathered over the tp pair (8192 copies x the whole hidden size).
  const ModelCosts costs = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, Sharding{2, true, 1, 8});
  const MoeParts& moe = costs.layer.moe;
  CHECK(moe.all_to_all_bytes == 2 * (tokens / 2) * 2 * h);
  CHECK(moe.gathered_bytes == 2 * tokens * 2 * h);
  // One of the 8 experts per rank, its three matrices split over tp.
  CHECK(costs.layer.expert_parameters == 3 * h * f / 2);
  // The rest: attention split over tp (Q and O 4096^2, K and V 4096 x 1024), replicated norms and router.
  CHECK(costs.layer.parameters == (h * (h + 2 * kv) + h * h) / 2 + 2 * h + h * 8);
  // The experts' grouped GEMMs compute 8192 copies x 4096 x 3 x 14336 / 2 x 2 FLOPs forward.
  CHECK(moe.experts.flops == doctest::Approx(2 * (2 * tokens) * h * 3 * f / 2));
  // Without expert parallelism the experts are held whole (and reduced with the rest) and no
  // all-to-all is written: one rank holds the whole layer of the published count.
  const ModelCosts whole = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true);
  CHECK(whole.layer.expert_parameters == 0);
  CHECK(whole.layer.parameters == static_cast<double>(count_parameters(mixtral()).per_layer));
  CHECK(whole.layer.moe.all_to_all_bytes == 0);
}

TEST_CASE("a mixture's model FLOPs count the router and the top-k experts, whatever the layout") {
  // Forward per layer: 2 x tokens x (the attention's matmul weights + router + 2 experts of 3hf)
  // plus the attention core's 4 b s^2 q (the full s x s product); the head 2 x tokens x h x V;
  // backward twice the forward.
  const double layer = 2 * tokens * (h * (h + 2 * kv) + h * h + h * 8 + 2 * 3 * h * f) + 4 * tokens * tokens * h;
  const double expected = 3 * (32 * layer + 2 * tokens * h * vocab);
  for (const Sharding& sharding : {Sharding{}, Sharding{2, true, 1, 8}, Sharding{4, true, 2, 2}}) {
    const ModelCosts costs = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, sharding);
    CHECK(costs.model_flops_per_micro_batch == doctest::Approx(expected).epsilon(1e-12));
  }
}

TEST_CASE("expert-parallel groups are blocks of data-parallel ranks, their experts reduced across the blocks") {
  // Order tp-cp-dp-pp: rank = tp + 2 dp. ep 2 pairs dp 0-1 and 2-3; the expert gradients go over
  // the ranks holding the same experts, dp 0 and 2, 1 and 3.
  Layout layout;
  layout.dp = 4;
  layout.tp = 2;
  layout.ep = 2;
  const LayoutGroups groups = groups_of(layout);
  const auto members = [&](const std::vector<int>& of_rank, int rank) { return groups.groups.at(of_rank.at(rank)).ranks; };
  CHECK(members(groups.ep, 0) == std::vector<int>{0, 2});
  CHECK(members(groups.ep, 5) == std::vector<int>{5, 7});
  CHECK(members(groups.expert_gradient, 0) == std::vector<int>{0, 4});
  CHECK(members(groups.expert_gradient, 3) == std::vector<int>{3, 7});
  CHECK(members(groups.gradient, 0) == std::vector<int>{0, 2, 4, 6});
  CHECK(groups.groups.at(groups.ep.at(0)).kind == "ep");
  // The expert gradients are data-parallel traffic.
  CHECK(groups.groups.at(groups.expert_gradient.at(0)).kind == "dp");
  CHECK(groups.groups.at(groups.expert_gradient.at(0)).name == "edp0");
  // With context parallelism the experts' data parallelism spans cp too.
  layout.cp = 2;
  const LayoutGroups with_cp = groups_of(layout);
  CHECK(with_cp.groups.at(with_cp.expert_gradient.at(0)).ranks.size() == 4);
  CHECK(with_cp.groups.at(with_cp.ep.at(0)).ranks.size() == 2);
}

TEST_CASE("a step under expert parallelism sends its tokens by all-to-all and reduces the experts over their own group") {
  // dp 8, ep 4: two ranks hold each expert pair, so the experts' ZeRO-1 shards are halves.
  const Scenario scenario = mixtral_scenario({"parallel.ep=4"});
  const WorkloadBuild build = build_workload(scenario, mixtral(), 0);
  const Workload& workload = build.workload;
  const Program& program = workload.program(0);
  const double experts_per_rank = 32 * 2 * 3 * h * f / 2;  // 2 experts per layer, split over tp
  std::map<std::string, double> bytes_by;
  long all_to_alls = 0;
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::collective && op.collective == Collective::all_to_all) {
      ++all_to_alls;
      CHECK(op.stream == Stream::ep_comm);
      CHECK(workload.groups.at(workload.group_of(0, op.group)).kind == "ep");
      CHECK(op.bytes == 2 * (tokens / 2) * 2 * h);
    }
    if (op.kind == OpKind::collective && op.name.rfind("expert-grad-reducescatter", 0) == 0) {
      CHECK(workload.groups.at(workload.group_of(0, op.group)).name.rfind("edp", 0) == 0);
      bytes_by["expert gradients"] += op.bytes;
    }
    if (op.kind == OpKind::collective && op.name.rfind("expert-param-allgather", 0) == 0)
      bytes_by["expert parameters"] += op.bytes;
    if (op.kind == OpKind::alloc)
      bytes_by[op.tensor] = op.bytes;
  }
  // Dispatch and combine, forward and backward: 4 per layer and micro-batch.
  CHECK(all_to_alls == 4 * 32 * scenario.grad_accum);
  // fp32 gradients reduced once (Megatron reduces after the last micro-batch), bf16 parameters gathered.
  CHECK(bytes_by["expert gradients"] == doctest::Approx(4 * experts_per_rank));
  CHECK(bytes_by["expert parameters"] == doctest::Approx(2 * experts_per_rank));
  // The expert states: bf16 weights and fp32 gradients whole, the 12-byte optimizer states halved.
  CHECK(bytes_by["expert-weights"] == 2 * experts_per_rank);
  CHECK(bytes_by["expert-gradients"] == 4 * experts_per_rank);
  CHECK(bytes_by["expert-optimizer"] == 12 * experts_per_rank / 2);
  CHECK(build.expert_states->ranks == 2);
  // The dense states shard over all 8 data-parallel ranks.
  CHECK(build.states.ranks == 8);
}

TEST_CASE("expert parallelism refuses what it cannot simulate, naming the setting") {
  CHECK(refusal({"parallel.ep=3"}).find("parallel.ep") != std::string::npos);
  CHECK(refusal({"parallel.sp=false"}).find("needs parallel.sp = true") != std::string::npos);
  CHECK(refusal({"memory.zero=2", "training.framework=deepspeed"}).find("memory.zero") != std::string::npos);
  CHECK(refusal({"memory.offload_optimizer=cpu", "training.framework=deepspeed"}).find("memory.offload_optimizer") !=
        std::string::npos);
  CHECK(refusal({"model.name=llama3-8b"}).find("is dense") != std::string::npos);
  CHECK(refusal({"parallel.ep=1", "memory.recompute=op"}).find("memory.recompute = op") != std::string::npos);
  CHECK(refusal({"parallel.dp=16", "parallel.ep=16", "parallel.tp=1", "parallel.sp=false"})
            .find("8 experts, not divisible by parallel.ep = 16") != std::string::npos);
  CHECK(refusal({"model.name=qwen1.5-moe-a2.7b", "parallel.ep=4"}).find("shared expert") != std::string::npos);
}
