// Mixtures of experts: the costs of an expert MLP, the expert-parallel groups and what a step's
// programs send and keep, each against a hand derivation.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include "common/error.hpp"
#include "config/scenario.hpp"
#include "layout/layout.hpp"
#include "model/costs.hpp"
#include "model/routing.hpp"
#include "program/runtime_memory.hpp"
#include "program/trace_io.hpp"
#include "program/workload_builder.hpp"
#include "test_support.hpp"

using namespace trainsim;
namespace fs = std::filesystem;

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
  const MoeParts& moe = costs.layer(0).moe;
  CHECK(moe.to_experts_bytes == 2 * (tokens / 2) * 2 * h);
  CHECK(moe.from_experts_bytes == moe.to_experts_bytes);  // uniform: as many come back as went
  CHECK(moe.to_experts_split == -1);
  CHECK(moe.gathered_bytes == 2 * tokens * 2 * h);
  // One of the 8 experts per rank, its three matrices split over tp.
  CHECK(costs.layer(0).expert_parameters == 3 * h * f / 2);
  // The rest: attention split over tp (Q and O 4096^2, K and V 4096 x 1024), replicated norms and router.
  CHECK(costs.layer(0).parameters == (h * (h + 2 * kv) + h * h) / 2 + 2 * h + h * 8);
  // The experts' grouped GEMMs compute 8192 copies x 4096 x 3 x 14336 / 2 x 2 FLOPs forward.
  CHECK(moe.experts.flops == doctest::Approx(2 * (2 * tokens) * h * 3 * f / 2));
  // Without expert parallelism the experts are held whole (and reduced with the rest) and no
  // all-to-all is written: one rank holds the whole layer of the published count.
  const ModelCosts whole = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true);
  CHECK(whole.layer(0).expert_parameters == 0);
  CHECK(whole.layer(0).parameters == static_cast<double>(count_parameters(mixtral()).per_layer));
  CHECK(whole.layer(0).moe.to_experts_bytes == 0);
}

TEST_CASE("experts unsplit under tensor parallelism (etp 1), by hand") {
  // The same 4096 tokens, tp 2 with SP, ep 8, etp 1 (Megatron-Core's --expert-tensor-parallel-size
  // 1): each rank routes its own 2048 tokens to 2 experts; the ep group's copies for its expert
  // arrive (8 ranks x 2048 x 2 / 8 = 4096) and are not gathered: its expert is whole.
  Sharding sharding{2, true, 1, 8};
  sharding.etp = 1;
  const ModelCosts costs = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, sharding);
  const MoeParts& moe = costs.layer(0).moe;
  CHECK(moe.to_experts_bytes == 2 * (tokens / 2) * 2 * h);
  CHECK(moe.from_experts_bytes == 2 * (tokens / 2) * 2 * h);
  CHECK(costs.layer(0).expert_parameters == 3 * h * f);
  // The attention is still split over tp.
  CHECK(costs.layer(0).parameters == (h * (h + 2 * kv) + h * h) / 2 + 2 * h + h * 8);
  // 4096 copies x 4096 x 3 x 14336 x 2 FLOPs forward: as many as with etp 2 (twice the copies,
  // half the columns).
  CHECK(moe.experts.flops == doctest::Approx(2 * tokens * h * 3 * f));
  // The model FLOPs do not depend on how the experts are split.
  CHECK(costs.model_flops_per_micro_batch == compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true,
                                                           Sharding{2, true, 1, 8})
                                                 .model_flops_per_micro_batch);
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
  // With context parallelism Megatron-Core folds ep over cp x dp, cp innermost: tp 2, cp 2, dp 4
  // (rank = tp + 2 cp + 4 dp), ep 4: data-parallel place cp + 2 dp, blocks of 4 places.
  layout.cp = 2;
  layout.ep = 4;
  const LayoutGroups with_cp = groups_of(layout);
  const auto members_cp = [&](const std::vector<int>& of_rank, int rank) {
    return with_cp.groups.at(of_rank.at(rank)).ranks;
  };
  CHECK(members_cp(with_cp.ep, 0) == std::vector<int>{0, 2, 4, 6});    // places 0-3: inside one node of 8
  CHECK(members_cp(with_cp.ep, 9) == std::vector<int>{9, 11, 13, 15});  // places 4-7 of tp 1
  CHECK(members_cp(with_cp.expert_gradient, 0) == std::vector<int>{0, 8});
  CHECK(members_cp(with_cp.expert_gradient, 6) == std::vector<int>{6, 14});
  // Experts unsplit under tp 2 (etp 1), dp 4, ep 4: the expert layers fold ep x expert-dp over the
  // stage's places tp + 2 dp (here the ranks), ep innermost: ep blocks {0..3}, {4..7}, the same
  // experts on ranks 4 apart, and no group splits the experts.
  Layout unsplit;
  unsplit.dp = 4;
  unsplit.tp = 2;
  unsplit.ep = 4;
  unsplit.etp = 1;
  const LayoutGroups whole = groups_of(unsplit);
  const auto members_whole = [&](const std::vector<int>& of_rank, int rank) {
    return whole.groups.at(of_rank.at(rank)).ranks;
  };
  CHECK(members_whole(whole.ep, 0) == std::vector<int>{0, 1, 2, 3});
  CHECK(members_whole(whole.ep, 6) == std::vector<int>{4, 5, 6, 7});
  CHECK(members_whole(whole.expert_gradient, 1) == std::vector<int>{1, 5});
  CHECK(whole.expert_tp.at(0) == -1);
  CHECK(members_whole(whole.tp, 2) == std::vector<int>{2, 3});  // the attention's tp pairs stay
  // tp 4, etp 2, ep 2, dp 2 (places tp + 4 dp): etp pairs {0,1}, {2,3}, ...; an ep group takes
  // the same place in the etp pairs of a block of 4: {0,2}, {1,3}, {4,6}; the same experts' halves
  // on ranks 4 apart. The etp groups are tensor-parallel traffic of their own.
  Layout split;
  split.dp = 2;
  split.tp = 4;
  split.ep = 2;
  split.etp = 2;
  const LayoutGroups halves = groups_of(split);
  const auto members_halves = [&](const std::vector<int>& of_rank, int rank) {
    return halves.groups.at(of_rank.at(rank)).ranks;
  };
  CHECK(members_halves(halves.expert_tp, 3) == std::vector<int>{2, 3});
  CHECK(halves.groups.at(halves.expert_tp.at(3)).kind == "tp");
  CHECK(halves.groups.at(halves.expert_tp.at(3)).name == "etp1");
  CHECK(members_halves(halves.ep, 1) == std::vector<int>{1, 3});
  CHECK(members_halves(halves.ep, 6) == std::vector<int>{4, 6});
  CHECK(members_halves(halves.expert_gradient, 2) == std::vector<int>{2, 6});
  // With etp = tp (the default) the experts are split over the tp groups themselves.
  split.etp = 0;
  const LayoutGroups as_tp = groups_of(split);
  CHECK(as_tp.expert_tp.at(5) == as_tp.tp.at(5));
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

TEST_CASE("experts unsplit under tensor parallelism: no gather around them, whole experts reduced over tp x dp / ep") {
  // tp 2 (SP), dp 8, ep 8, etp 1: the 16 ranks of the stage hold 8 experts twice; rank 0's expert
  // (whole: 3 h f per layer) is also on rank 8, and its 32 layers' gradients are reduced over
  // those two ranks; the tokens each rank routes (2048, x 2 copies) go straight to the experts.
  const Scenario scenario = mixtral_scenario({"parallel.etp=1"});
  const WorkloadBuild build = build_workload(scenario, mixtral(), 0);
  const Workload& workload = build.workload;
  const double expert_per_rank = 32 * 3 * h * f;
  long all_to_alls = 0, expert_gathers = 0;
  double expert_gradients = 0;
  for (const Op& op : workload.program(0).ops) {
    if (op.kind != OpKind::collective)
      continue;
    if (op.collective == Collective::all_to_all) {
      ++all_to_alls;
      CHECK(workload.groups.at(workload.group_of(0, op.group)).ranks == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
      CHECK(op.bytes == 2 * (tokens / 2) * 2 * h);
    }
    expert_gathers += op.name.find("experts-allgather") != std::string::npos;
    if (op.name.rfind("expert-grad-reducescatter", 0) == 0) {
      CHECK(workload.groups.at(workload.group_of(0, op.group)).ranks == std::vector<int>{0, 8});
      expert_gradients += op.bytes;
    }
  }
  CHECK(all_to_alls == 4 * 32 * scenario.grad_accum);
  CHECK(expert_gathers == 0);
  CHECK(expert_gradients == doctest::Approx(4 * expert_per_rank));  // fp32, reduced once
  CHECK(build.expert_states->ranks == 2);
  CHECK(build.states.ranks == 8);
  // Layouts name it where it is not tp.
  CHECK(ParallelSizes{8, 2, 1, 1, 1, true, 8, 1}.label() == "dp=8 tp=2+sp pp=1 cp=1 ep=8 etp=1");
  CHECK(ParallelSizes{8, 2, 1, 1, 1, true, 8, 2}.label() == "dp=8 tp=2+sp pp=1 cp=1 ep=8");
}

TEST_CASE("overlapped parameter all-gathers under expert parallelism gather the experts over their own group, in the order the layers need them") {
  // dp 8, ep 4, tp 2 (etp 2): each rank holds 2 experts per layer, halves of 3 h f each:
  // 2 x 3 x 4096 x 14336 / 2 = 176,160,768 parameters per layer, 32 layers. Buckets of
  // 704,643,072 bytes of fp32 gradients hold 176,160,768 parameters: one layer's experts each,
  // 32 expert buckets over the expert-data-parallel pair, in bf16 (2 bytes each), all at the step's
  // start, each layer's experts in the first forward waiting for their own (the forward needs the
  // last layer's bucket, cut first in backward order, last), none after the optimizer.
  const double layer_experts = 2 * 3 * h * f / 2;
  const Scenario scenario =
      mixtral_scenario({"parallel.ep=4", "comm.overlap_grad_reduce=true", "comm.overlap_param_gather=true",
                        "comm.bucket_size=" + std::to_string(static_cast<long long>(4 * layer_experts)) + "B"});
  const WorkloadBuild build = build_workload(scenario, mixtral(), 0);
  const Workload& workload = build.workload;
  const Program& program = workload.program(0);
  std::vector<OpId> expert_gathers;
  OpId last_dense_gather = 0;
  bool after_optimizer = false;
  for (OpId id = 0; id < program.ops.size(); ++id) {
    const Op& op = program.ops[id];
    after_optimizer = after_optimizer || op.name == "optimizer.step";
    if (op.kind != OpKind::collective || op.collective != Collective::all_gather || op.stream != Stream::dp_comm)
      continue;
    CHECK_FALSE(after_optimizer);
    CHECK(op.deps.empty());
    if (op.name.rfind("expert-param-allgather", 0) == 0) {
      CHECK(workload.groups.at(workload.group_of(0, op.group)).name.rfind("edp", 0) == 0);
      CHECK(op.bytes == doctest::Approx(2 * layer_experts));
      expert_gathers.push_back(id);
    } else {
      last_dense_gather = id;
    }
  }
  CHECK(expert_gathers.size() == 32);
  CHECK(expert_gathers.front() < last_dense_gather);  // issued as the layers need them, not after every dense bucket
  // The op named `name`, or with a name ending in '.', the first op whose name starts with it (a
  // layer's forward starts with its sequence-parallel all-gather).
  const auto waits = [&](const std::string& name, OpId gather) {
    const bool prefix = name.back() == '.';
    for (const Op& op : program.ops)
      if (prefix ? op.name.rfind(name, 0) == 0 : op.name == name)
        return std::find(op.deps.begin(), op.deps.end(), gather) != op.deps.end();
    FAIL("no op " << name);
    return false;
  };
  // The experts' grouped GEMMs wait for them, as Megatron's forward pre-hook of the experts
  // module does; the attention before them waits for its dense bucket only.
  CHECK(waits("L0.fwd.mb0.moe.experts", expert_gathers.front()));
  CHECK_FALSE(waits("L0.fwd.mb0.", expert_gathers.front()));
  CHECK(waits("L31.fwd.mb0.moe.experts", expert_gathers.back()));
  CHECK_FALSE(waits("L31.fwd.mb1.moe.experts", expert_gathers.back()));
  // The embedding holds no experts and waits for none.
  for (const OpId gather : expert_gathers)
    CHECK_FALSE(waits("embedding.fwd.mb0", gather));
}

TEST_CASE("under expert parallelism comm.tp_comm_overlap overlaps the attention's tp collectives, the experts' stay") {
  // tp 2, ep 8 (etp 2): each layer's attention forward runs as a dense layer's under
  // userbuffers: its sequence gathered by a ring exchange with the tp neighbour (one send per
  // layer and micro-batch in forward, one in backward for the output projection's input
  // gradient), its output reduce-scattered in chunks; the experts' tp
  // all-gather and reduce-scatter and the all-to-alls are written as without the overlap.
  const Scenario plain = mixtral_scenario();
  const Scenario overlapped = mixtral_scenario({"comm.tp_comm_overlap=true"});
  const auto count = [](const Scenario& scenario, const std::string& part) {
    const WorkloadBuild build = build_workload(scenario, mixtral(), 0);
    long found = 0;
    for (const Op& op : build.workload.program(0).ops)
      found += op.name.find(part) != std::string::npos && op.kind != OpKind::alloc && op.kind != OpKind::free;
    return found;
  };
  const long forwards = 32 * plain.grad_accum;
  CHECK(count(plain, "fwd.mb0.attn.column.ring-send") == 0);
  CHECK(count(overlapped, ".attn.column.ring-send1") == forwards);
  CHECK(count(overlapped, ".attn.row-dgrad.ring-send1") == forwards);  // backward's output gradient, the same way
  CHECK(count(overlapped, ".attn.sp-allgather") < count(plain, ".attn.sp-allgather"));
  for (const char* kept : {"dispatch-alltoall", "combine-alltoall", "experts-allgather", "experts-reducescatter"})
    CHECK_MESSAGE(count(overlapped, kept) == count(plain, kept), kept);
}

// The collectives and allocations of rank 0's program whose names start with `prefix`.
struct NamedOps {
  long count = 0;
  double bytes = 0;
  std::vector<OpId> ids;
};
NamedOps named(const Program& program, const std::string& prefix, OpKind kind) {
  NamedOps found;
  for (OpId id = 0; id < program.ops.size(); ++id) {
    const Op& op = program.ops[id];
    const std::string& name = kind == OpKind::alloc ? op.tensor : op.name;
    if (op.kind == kind && name.rfind(prefix, 0) == 0) {
      ++found.count;
      found.bytes += op.bytes;
      found.ids.push_back(id);
    }
  }
  return found;
}

TEST_CASE("ZeRO-2 under expert parallelism (DeepSpeed-MoE) shards the experts' gradients over their own group and reduces them every micro-batch from bucket buffers") {
  // dp 8, tp 2 (etp 2), ep 4: 2 experts per rank and layer, halves of 3 h f; the 16 ranks hold
  // each expert half twice, so the expert-data-parallel group is 16 / (4 x 2) = 2 ranks.
  const Scenario scenario = mixtral_scenario({"parallel.ep=4", "memory.zero=2", "training.framework=deepspeed"});
  const WorkloadBuild build = build_workload(scenario, mixtral(), 0);
  const Workload& workload = build.workload;
  const Program& program = workload.program(0);
  const double experts_per_rank = 32 * 2 * 3 * h * f / 2;
  REQUIRE(scenario.grad_accum == 4);
  CHECK(build.expert_states->ranks == 2);
  // bf16 weights whole; fp32 gradients and the 12-byte optimizer states halved.
  CHECK(named(program, "expert-weights", OpKind::alloc).bytes == 2 * experts_per_rank);
  CHECK(named(program, "expert-gradients", OpKind::alloc).bytes == 4 * experts_per_rank / 2);
  CHECK(named(program, "expert-optimizer", OpKind::alloc).bytes == 12 * experts_per_rank / 2);
  // ZeRO-2 reduces every micro-batch (comm.grad_sync auto): 4 x the fp32 expert gradients, each
  // bucket copied into a buffer of its size first, over the expert-data-parallel pair.
  const NamedOps reductions = named(program, "expert-grad-reducescatter", OpKind::collective);
  CHECK(reductions.bytes == doctest::Approx(4 * 4 * experts_per_rank));
  for (const OpId id : reductions.ids)
    CHECK(workload.groups.at(workload.group_of(0, program.ops[id].group)).ranks == std::vector<int>{0, 8});
  CHECK(named(program, "expert-grad-bucket", OpKind::alloc).bytes == doctest::Approx(4 * 4 * experts_per_rank));
  // The updated bf16 halves gathered after the step; the dense gradients over all 8 dp ranks.
  CHECK(named(program, "expert-param-allgather", OpKind::collective).bytes == doctest::Approx(2 * experts_per_rank));
  CHECK(build.states.ranks == 8);
  CHECK(named(program, "grad-reducescatter", OpKind::collective).count > 0);
}

TEST_CASE("ZeRO-3 under expert parallelism (torchtitan on FSDP2) gathers each layer's experts over their own group before each use and reduces them layer by layer") {
  // As above, under FSDP2: each layer's local experts (2 halves of 3 h f = 3 h f parameters) are
  // a module of their own sharded over the expert-data-parallel pair, kept in fp32 (4 bytes).
  const Scenario scenario = mixtral_scenario({"parallel.ep=4", "memory.zero=3"});
  REQUIRE(scenario.framework == Framework::fsdp2);
  const WorkloadBuild build = build_workload(scenario, mixtral(), 0);
  const Workload& workload = build.workload;
  const Program& program = workload.program(0);
  const double layer_experts = 3 * h * f;
  CHECK(named(program, "expert-weights", OpKind::alloc).bytes == 4 * 32 * layer_experts / 2);
  // Gathered in bf16 before each forward and each backward of each micro-batch: 4 x 32 x 2.
  const NamedOps gathers = named(program, "gather.expert-L", OpKind::collective);
  CHECK(gathers.count == 4 * 32 * 2);
  CHECK(gathers.bytes == doctest::Approx(4 * 32 * 2 * 2 * layer_experts));
  for (const OpId id : gathers.ids)
    CHECK(workload.groups.at(workload.group_of(0, program.ops[id].group)).ranks == std::vector<int>{0, 8});
  // Each layer's expert gradients one reduce-scatter per micro-batch, in fp32.
  const NamedOps reductions = named(program, "expert-grad-reducescatter", OpKind::collective);
  CHECK(reductions.count == 4 * 32);
  CHECK(reductions.bytes == doctest::Approx(4 * 32 * 4 * layer_experts));
  // A layer's forward waits for its experts' gather.
  const OpId gather = named(program, "gather.expert-L5.params.fwd.mb1", OpKind::collective).ids.at(0);
  const auto forward = std::find_if(program.ops.begin(), program.ops.end(), [](const Op& op) {
    return op.kind != OpKind::alloc && op.kind != OpKind::free && op.name.rfind("L5.fwd.mb1.", 0) == 0;
  });
  REQUIRE(forward != program.ops.end());
  CHECK(std::find(forward->deps.begin(), forward->deps.end(), gather) != forward->deps.end());
  // Nothing gathered after the step: the next forward gathers again.
  CHECK(named(program, "expert-param-allgather", OpKind::collective).count == 0);
}

TEST_CASE("ZeRO-Offload under expert parallelism moves the experts' reduced gradients to the CPU optimizer") {
  // ZeRO-2 with the optimizer in host memory: the GPU keeps the bf16 weights only; each
  // micro-batch's expert gradients (fp32) reach the host as this rank's half, and one CPU Adam
  // step updates dense and expert shards.
  const Scenario scenario = mixtral_scenario(
      {"parallel.ep=4", "memory.zero=2", "training.framework=deepspeed", "memory.offload_optimizer=cpu"});
  const WorkloadBuild build = build_workload(scenario, mixtral(), 0);
  const Program& program = build.workload.program(0);
  const double experts_per_rank = 32 * 2 * 3 * h * f / 2;
  CHECK(named(program, "expert-weights", OpKind::alloc).bytes == 2 * experts_per_rank);
  CHECK(named(program, "expert-gradients", OpKind::alloc).bytes == 0);
  CHECK(named(program, "expert-optimizer", OpKind::alloc).count == 0);
  CHECK(named(program, "d2h.grads.expert-bucket", OpKind::copy).bytes == doctest::Approx(4 * 4 * experts_per_rank / 2));
  CHECK(named(program, "cpu-adam", OpKind::compute).count == 1);
  // The host keeps 12 bytes (fp32 master, momentum, variance) and 4 of fp32 gradients for each
  // parameter of the rank's shards: the experts' half and an eighth of the dense parameters.
  // Dense per rank under tp 2, by layer: attention (2 h^2 + 2 h kv) / 2 = 20,971,520, the router
  // h x 8 = 32,768 and two norms 2 h = 8,192 whole: 21,012,480, x 32 = 672,399,360; embedding and
  // head vocab x h / 2 = 65,536,000 each; the final norm 4,096: 803,475,456, an eighth 100,434,432.
  const double shard = 803475456.0 / 8 + experts_per_rank / 2;
  CHECK(named(program, "optimizer.states", OpKind::alloc).bytes == 12 * shard);
  CHECK(named(program, "gradients.offloaded", OpKind::alloc).bytes == 4 * shard);
  // The updated bf16 shards go up once, the experts' then gathered over their pair.
  CHECK(named(program, "h2d.params", OpKind::copy).bytes == 2 * shard);
  CHECK(named(program, "expert-param-allgather", OpKind::collective).bytes == doctest::Approx(2 * experts_per_rank));
}

TEST_CASE("every buffer the expert states take under ZeRO-3, ZeRO-2 and offload is freed, checkpointed segments keeping their gathers until their backward") {
  const auto balanced = [](const std::vector<std::string>& overrides) {
    const Scenario scenario = mixtral_scenario(overrides);
    const WorkloadBuild build = build_workload(scenario, mixtral(), 0);
    const Program program = build.workload.program(0);
    std::map<std::string, int> live;
    for (const Op& op : program.ops) {
      if (op.kind == OpKind::alloc)
        ++live[op.tensor];
      if (op.kind == OpKind::free)
        --live[op.tensor];
    }
    for (const auto& [tensor, count] : live) {
      const bool transient = tensor.find(".params.") != std::string::npos || tensor.find("grad-bucket") != std::string::npos ||
                             tensor.find("accumulator") != std::string::npos || tensor.find(".mb") != std::string::npos;
      CHECK_MESSAGE(count == (transient ? 0 : 1), tensor);
    }
    return program;
  };
  // ZeRO-3 with full recompute: each layer's experts gathered for the recompute and kept until its
  // backward, so still once per forward and once per backward.
  const Program full = balanced({"parallel.ep=4", "memory.zero=3", "memory.recompute=full"});
  CHECK(named(full, "gather.expert-L", OpKind::collective).count == 4 * 32 * 2);
  balanced({"parallel.ep=4", "memory.zero=3", "memory.recompute=full", "comm.grad_sync=last"});
  balanced({"parallel.ep=4", "memory.zero=2", "training.framework=deepspeed", "memory.recompute=every:4"});
  // Activation checkpoints offloaded to host memory beside the experts (ZeRO-Offload's offloaded
  // checkpoints): each segment's input copied out once per micro-batch.
  const Program activations = balanced({"parallel.ep=4", "memory.zero=2", "memory.offload_optimizer=cpu",
                                        "memory.offload_activations=cpu", "memory.recompute=full"});
  CHECK(named(activations, "d2h.S", OpKind::copy).count == 4 * 32);
}

TEST_CASE("expert parallelism refuses what it cannot simulate, naming the setting") {
  CHECK(refusal({"parallel.ep=3"}).find("parallel.ep") != std::string::npos);
  CHECK(refusal({"parallel.sp=false"}).find("accepted: parallel.sp = true, or parallel.tp = 1") != std::string::npos);
  CHECK(refusal({"parallel.sp=false", "parallel.ep=1"}).find("parallel.sp = true") != std::string::npos);
  CHECK(refusal({"training.framework=ddp", "memory.zero=0"}).find("training.framework") != std::string::npos);
  // DeepSpeed's MoE layers do not run under ZeRO-3 (FSDP2's do), nor dispatch otherwise than by
  // all-to-all; DeepSpeed and torchtitan split experts over tp or not at all.
  CHECK(refusal({"memory.zero=3", "training.framework=deepspeed"}).find("training.framework = fsdp2") != std::string::npos);
  CHECK(refusal({"memory.zero=2", "training.framework=deepspeed", "moe.dispatcher=deepep", "parallel.etp=1"})
            .find("accepted under deepspeed: alltoall") != std::string::npos);
  CHECK(refusal({"memory.zero=3", "moe.dispatcher=allgather", "parallel.tp=1", "parallel.sp=false", "parallel.dp=16",
                 "training.global_batch=32"})
            .find("allgather: training.framework = megatron") != std::string::npos);
  CHECK(refusal({"memory.zero=3", "parallel.tp=4", "parallel.dp=4", "parallel.ep=2", "parallel.etp=2"})
            .find("parallel.etp") != std::string::npos);
  CHECK(refusal({"memory.offload_optimizer=cpu", "training.framework=deepspeed", "parallel.pp=2", "parallel.dp=4",
                 "parallel.ep=4"})
            .find("memory.offload_optimizer") != std::string::npos);
  CHECK(refusal({"model.name=llama3-8b"}).find("is dense") != std::string::npos);
  // Llama 4's chunked attention is simulated within one chunk of 8,192 tokens, where it is causal.
  CHECK(refusal({"model.name=llama4-scout", "training.seq_len=16384"})
            .find("training.seq_len = 16384 is longer than model llama4-scout's attention chunks of 8192 tokens") !=
        std::string::npos);
  CHECK(refusal({"parallel.ep=1", "memory.recompute=op"}).find("memory.recompute = op") != std::string::npos);
  CHECK(refusal({"parallel.dp=16", "parallel.ep=16", "parallel.tp=1", "parallel.sp=false"})
            .find("8 experts, not divisible by parallel.ep = 16") != std::string::npos);
  CHECK(refusal({"model.name=qwen1.5-moe-a2.7b", "parallel.ep=1"}).find("shared expert") != std::string::npos);
  // Expert tensor parallelism splits an ep group's experts, and etp x ep folds over tp x dp x cp.
  CHECK(refusal({"parallel.ep=1", "parallel.etp=1"}).find("parallel.etp") != std::string::npos);
  CHECK(refusal({"parallel.etp=3"}).find("etp x ep = 24 does not divide the tp x dp x cp = 16") != std::string::npos);
  // Experts of 14336 (2^11 x 7) do not split in 3; under ep the experts split over etp, not tp.
  CHECK(refusal({"parallel.tp=1", "parallel.sp=false", "parallel.dp=24", "parallel.etp=3", "training.global_batch=24"})
            .find("experts of 14336, not divisible by parallel.etp = 3") != std::string::npos);
  // Without expert parallelism a mixture's MLP is not overlapped with its tp collectives.
  CHECK(refusal({"parallel.ep=1", "comm.tp_comm_overlap=true"}).find("comm.tp_comm_overlap = true without expert parallelism") !=
        std::string::npos);
}

TEST_CASE("a routing file gives each expert layer its counts' shares, each layer a kind of its own") {
  // Mixtral (32 expert layers) with a row per layer: layer 0 sends 3 of every 10 copies to expert 0
  // (the rest evenly), the others route evenly. tp 2, ep 8 (one expert per place): place 0's
  // expert in layer 0 computes 0.3 / (1/8) = 2.4 times an even share, in layer 1 an even share.
  std::string text = "# tokens per expert, a row per expert layer\n3000, 1000,1000,1000,1000,1000,1000,1000\n\n";
  for (int layer = 1; layer < 32; ++layer)
    text += "5,5,5,5,5,5,5,5  # even\n";
  const fs::path file = test::write_temp_file("routing.csv", text);
  const Scenario scenario = mixtral_scenario({"moe.routing=file:" + file.string()});
  REQUIRE(scenario.routing.layer_loads.size() == 32);
  CHECK(scenario.routing.layer_loads[0] == std::vector<double>{3000, 1000, 1000, 1000, 1000, 1000, 1000, 1000});
  CHECK(expert_shares(scenario.routing, 8, 2, 0)[0] == doctest::Approx(0.3));
  CHECK(expert_shares(scenario.routing, 8, 2, 5) == std::vector<double>(8, 0.125));
  const ModelCosts even = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, Sharding{2, true, 1, 8});
  Sharding place0{2, true, 1, 8};
  for (long long layer = 0; layer < 32; ++layer)
    place0.layer_expert_shares.push_back(expert_shares(scenario.routing, 8, 2, layer));
  const ModelCosts busy = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, place0);
  CHECK(busy.layer_kinds.size() == 32);
  CHECK(busy.model_flops_per_micro_batch == doctest::Approx(even.model_flops_per_micro_batch));
  CHECK(busy.layer(0).moe.experts.flops == doctest::Approx(2.4 * even.layer(0).moe.experts.flops));
  CHECK(busy.layer(1).moe.experts.flops == doctest::Approx(even.layer(0).moe.experts.flops));
  // What place 0 sends back: 2.4 times its even share.
  CHECK(busy.layer(0).moe.from_experts_bytes == doctest::Approx(2.4 * even.layer(0).moe.from_experts_bytes));
  // The workload's programs: place 0's layer 0 experts compute 2.4 times layer 1's.
  const WorkloadBuild build = build_workload(scenario, mixtral(), 0);
  std::map<std::string, double> flops;
  for (const Op& op : build.workload.program(0).ops)
    flops[op.name] = op.flops;
  CHECK(flops.at("L0.fwd.mb0.moe.experts") == doctest::Approx(2.4 * flops.at("L1.fwd.mb0.moe.experts")));
  // One row stands for every layer.
  const fs::path one = test::write_temp_file("routing-one.csv", "3000, 1000,1000,1000,1000,1000,1000,1000\n");
  const Scenario all_alike = mixtral_scenario({"moe.routing=file:" + one.string()});
  CHECK_FALSE(routing_per_layer(all_alike.routing));
  CHECK(expert_shares(all_alike.routing, 8, 2, 31)[0] == doctest::Approx(0.3));
}

TEST_CASE("a routing file is checked against the model") {
  const auto refused_file = [](const std::string& name, const std::string& text) {
    return refusal({"moe.routing=file:" + test::write_temp_file(name, text).string()});
  };
  CHECK(refused_file("narrow.csv", "1,2,3\n").find("row 1: 3 counts; model mixtral-8x7b has 8 experts") != std::string::npos);
  CHECK(refused_file("rows.csv", "1,1,1,1,1,1,1,1\n1,1,1,1,1,1,1,1\n")
            .find("2 rows; model mixtral-8x7b has 32 expert layers") != std::string::npos);
  // 9 of 16 copies to one expert: more than a token's top-2 copies can bring it.
  CHECK(refused_file("steep.csv", "9,1,1,1,1,1,1,1\n").find("more than 1/2 (top-k)") != std::string::npos);
  CHECK(refused_file("word.csv", "1,x,1,1,1,1,1,1\n").find(":1: 'x' is not a token count") != std::string::npos);
  CHECK(refused_file("empty.csv", "# nothing\n").find("no rows") != std::string::npos);
  CHECK(refused_file("zero.csv", "0,0,0,0,0,0,0,0\n").find("no tokens in the row") != std::string::npos);
  CHECK(refusal({"moe.routing=file:/nonexistent/routing.csv"}).find("no file '/nonexistent/routing.csv' found") !=
        std::string::npos);
}

TEST_CASE("a routing file named in a scenario is found beside it, whatever the working directory") {
  // A file of the same name in the working directory does not shadow the scenario's own.
  const fs::path dir = test::fresh_dir("routing-scenario");
  std::ofstream(dir / "routes.csv") << "3000,1000,1000,1000,1000,1000,1000,1000\n";
  const std::string text = "[model]\nname = mixtral-8x7b\n[platform]\nfile = dgx-a100-2n.xml\n[parallel]\ntp = 2\n"
                           "sp = true\ndp = 8\nep = 8\n[training]\nseq_len = 4096\nglobal_batch = 32\n[moe]\n"
                           "routing = file:routes.csv\n";
  const fs::path elsewhere = test::fresh_dir("routing-cwd");
  std::ofstream(elsewhere / "routes.csv") << "1,1,1,1,1,1,1,1\n";
  struct WorkingDirectory {  // back where it was, however the parse ends
    fs::path previous = fs::current_path();
    ~WorkingDirectory() { fs::current_path(previous); }
  } restore;
  fs::current_path(elsewhere);
  const Scenario scenario = parse_scenario(text, dir / "s.ini", {});
  CHECK(fs::equivalent(scenario.routing.file, dir / "routes.csv"));
  CHECK(scenario.routing.layer_loads.at(0).at(0) == 3000);
}

TEST_CASE("routing shares follow the Zipf law and the capacity caps them") {
  // zipf:1 over 4 experts: 1, 1/2, 1/3, 1/4 over their sum 25/12.
  const std::vector<double> zipf = expert_shares(ExpertRouting{1, 0}, 4, 1);
  CHECK(zipf[0] == doctest::Approx(12.0 / 25));
  CHECK(zipf[1] == doctest::Approx(6.0 / 25));
  CHECK(zipf[3] == doctest::Approx(3.0 / 25));
  // Capacity 1.25 x an even share (1/4): at most 0.3125 each; the rest of expert 0's is dropped.
  const std::vector<double> capped = expert_shares(ExpertRouting{1, 1.25}, 4, 1);
  CHECK(capped[0] == doctest::Approx(0.3125));
  CHECK(capped[1] == doctest::Approx(6.0 / 25));
  // A capacity above every share drops nothing; uniform routing is even.
  CHECK(expert_shares(ExpertRouting{0, 1.5}, 8, 2) == std::vector<double>(8, 0.125));
  // A token's 2 copies go to 2 different experts: none gets more than half of them. zipf:2 over
  // 8 experts would give expert 0 1 / (1 + 1/4 + ... + 1/64) = 0.655; it gets 0.5 and the others
  // share the other half in proportion to 1/(e+1)^2.
  const std::vector<double> steep = expert_shares(ExpertRouting{2, 0}, 8, 2);
  double rest = 0;
  for (int e = 2; e <= 8; ++e)
    rest += 1.0 / (e * e);
  CHECK(steep[0] == doctest::Approx(0.5));
  CHECK(steep[1] == doctest::Approx(0.5 * 0.25 / rest));
  CHECK(steep[7] == doctest::Approx(0.5 / 64 / rest));
}

TEST_CASE("under uneven routing each ep rank computes its experts' share and sends back as much") {
  // Mixtral, tp 2 + SP, ep 8, zipf:1: expert e gets (1/(e+1)) / H_8 of the copies, H_8 = 761/280.
  const double harmonic = 761.0 / 280;
  const std::vector<double> shares = expert_shares(ExpertRouting{1, 0}, 8, 2);
  Sharding hot{2, true, 1, 8, 0, shares}, cold{2, true, 1, 8, 7, shares};
  const ModelCosts first = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, hot);
  const ModelCosts last = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, cold, &first);
  // Every rank routes its 2048 tokens x 2 copies, split over the ep group as the shares.
  CHECK(first.layer(0).moe.to_experts_bytes == doctest::Approx(2 * 2048 * 2 * h));
  REQUIRE(first.layer(0).moe.to_experts_split >= 0);
  const std::vector<double>& split = last.all_to_all_splits.at(static_cast<std::size_t>(first.layer(0).moe.to_experts_split));
  CHECK(split.size() == 8);
  CHECK(split[0] == doctest::Approx(1 / harmonic));
  CHECK(split[7] == doctest::Approx(1.0 / 8 / harmonic));
  // Rank 0's expert computes the ep group's 8 x 4096 copies x its share (after the tp gather),
  // and sends each rank back its share of that rank's copies.
  CHECK(first.layer(0).moe.gathered_bytes == doctest::Approx(2 * 8 * tokens * 2 / harmonic * h));
  CHECK(first.layer(0).moe.from_experts_bytes == doctest::Approx(2 * 8 * 2048 * 2 / harmonic * h));
  CHECK(last.layer(0).moe.from_experts_bytes == doctest::Approx(2 * 8 * 2048 * 2 / 8 / harmonic * h));
  // Its grouped GEMM: 8.0 / H_8 = 2.94 times the uniform FLOPs.
  const ModelCosts even = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, Sharding{2, true, 1, 8});
  CHECK(first.layer(0).moe.experts.flops == doctest::Approx(even.layer(0).moe.experts.flops * 8 / harmonic));
  // The second costs continue the first's kernel sets: both index one list.
  CHECK(last.layer(0).moe.experts.kernel_set > first.layer(0).moe.experts.kernel_set);
  CHECK(last.kernel_sets.size() > first.kernel_sets.size());
}

TEST_CASE("uneven routing builds one program per place in the ep group, and a trace keeps the split") {
  const Scenario scenario = mixtral_scenario({"parallel.ep=8", "moe.routing=zipf:1.2"});
  const Workload workload = build_workload(scenario, mixtral(), 0).workload;
  // Order tp-cp-dp-pp: ranks 0 and 1 (dp 0) at place 0, ranks 2 and 3 at place 1.
  CHECK(workload.programs[0] == workload.programs[1]);
  CHECK(workload.programs[0] != workload.programs[2]);
  CHECK(workload.all_to_all_splits.size() == 8);  // one per place's costs, all alike
  const fs::path dir = test::fresh_dir("moe-trace");
  write_trace(workload, dir);
  const Workload copy = read_trace(dir);
  CHECK(copy.all_to_all_splits == workload.all_to_all_splits);
  std::size_t uneven = 0;
  const auto& ops = workload.program(2).ops;
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].kind == OpKind::collective && ops[i].collective == Collective::all_to_all) {
      CHECK(copy.program(2).ops[i].peer == ops[i].peer);
      uneven += ops[i].peer >= 0;
    }
  CHECK(uneven == 2 * 32 * static_cast<std::size_t>(scenario.grad_accum));  // toward the experts, forward and backward
}

TEST_CASE("fp8 dispatch quantizes each token once and turns the experts' copies back before bf16 GEMMs") {
  // Mixtral, tp 2 with SP, ep 8: a rank routes its 2048 tokens' 4096 copies; its expert receives
  // its ep group's 8 x 4096 / 8 = 4096 copies, 8192 once gathered over tp. Quantizing reads 2
  // bytes and writes 1 + 4/128 per element of the rank's tokens; turning back reads those and
  // writes 2 per element of the gathered copies.
  Sharding sharding{2, true, 1, 8, 0, {}, true};
  const ModelCosts costs = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, sharding);
  const MoeParts& moe = costs.layer(0).moe;
  const auto bytes_in = [](const ModelCosts& of, const Work& work, const std::string& name) {
    for (const Kernel& kernel : of.kernel_sets.at(static_cast<std::size_t>(work.kernel_set)).kernels)
      if (kernel.name == name)
        return kernel.bytes;
    return -1.0;
  };
  const auto bytes_of = [&](const Work& work, const std::string& name) { return bytes_in(costs, work, name); };
  const double fp8 = 1 + 4.0 / 128;
  CHECK(bytes_of(moe.dispatch, "dispatch-quantize") == doctest::Approx((2 + fp8) * 2048 * h));
  CHECK(bytes_of(moe.experts, "dispatch-dequantize") == doctest::Approx((fp8 + 2) * 8192 * h));
  CHECK(moe.forward_dispatch_ratio == doctest::Approx(fp8 / 2));
  // The permutation copies the quantized tokens: the rank's 2048 read, its 4096 copies written.
  CHECK(bytes_of(moe.dispatch, "permute") == doctest::Approx(fp8 * h * (2048 + 4096)));
  // Under fp8 training the experts' GEMMs read the fp8 copies as they come.
  const ModelCosts fp8_training = compute_costs(mixtral(), 1, 4096, Precision::fp8, Precision::fp32, true, sharding);
  CHECK(bytes_in(fp8_training, fp8_training.layer(0).moe.experts, "dispatch-dequantize") == -1);
  CHECK(bytes_in(fp8_training, fp8_training.layer(0).moe.dispatch, "dispatch-quantize") > 0);
  sharding.fp8_dispatch = false;
  const ModelCosts plain = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, sharding);
  CHECK(plain.layer(0).moe.forward_dispatch_ratio == 1);
  CHECK(plain.layer(0).moe.to_experts_bytes == moe.to_experts_bytes);
}

TEST_CASE("routing settings are checked") {
  CHECK(refusal({"moe.routing=zipf"}).find("moe.routing") != std::string::npos);
  CHECK(refusal({"moe.routing=zipf:-1"}).find("exponent") != std::string::npos);
  CHECK(refusal({"moe.capacity_factor=0.5"}).find("moe.capacity_factor") != std::string::npos);
  CHECK(refusal({"model.name=llama3-8b", "parallel.ep=1", "moe.routing=zipf:1"}).find("is dense") != std::string::npos);
  CHECK(refusal({"model.name=llama3-8b", "parallel.ep=1", "moe.capacity_factor=1.25"}).find("is dense") !=
        std::string::npos);
}

TEST_CASE("an expert layer keeps its copies' activations and runs grouped GEMMs of its tokens per expert") {
  // Mixtral, 1 x 4096 tokens, tp 2 + SP, ep 4 (2 experts per rank). Kept for backward, in bf16
  // (2 bytes): the norm's input (4096 / 2 tokens x h), the router's fp32 probabilities
  // (2048 x 8 x 4 bytes), and per copy computed here (4096 tokens x 2 copies after the tp gather):
  // the experts' input (h), SwiGLU's input (2 f / 2) and the second linear's input (f / 2); and
  // the returned copies the weighted sum reads (2048 x 2 x h).
  const ModelCosts costs = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, Sharding{2, true, 1, 4});
  const double copies = tokens * 2;
  const double mlp = 2 * 2048 * h + 4 * 2048 * 8 + 2 * copies * (h + 3 * f / 2) + 2 * 2048 * 2 * h;
  // The attention's terms (Korthikanti et al. with GQA, SP): QKV input h / 2, Q, K, V and the
  // output projection's input over tp; the two norms' inputs.
  const double attention = 2 * tokens * (h / 2 + h / 2 + 2 * kv / 2 + h / 2);
  const double norms = 2 * 2 * tokens * h / 2;
  CHECK(costs.layer(0).activations.total == doctest::Approx(attention + mlp + norms));
  // Each grouped GEMM: 2 local experts of 8192 x 4 / 8 = 4096 copies each.
  const KernelSet& experts = costs.kernel_sets.at(static_cast<std::size_t>(costs.layer(0).moe.experts.kernel_set));
  REQUIRE(experts.kernels.front().name == "fc1");
  CHECK(experts.kernels.front().batch == 2);
  CHECK(experts.kernels.front().m == 4096);
  CHECK(experts.kernels.front().n == 2 * f / 2);
  CHECK(experts.kernels.front().k == h);
}

TEST_CASE("a mixture without expert parallelism under tensor parallelism runs its MLP as a dense one's parts") {
  // ep 1, tp 2 + SP: Megatron's allgather dispatcher, the tokens gathered over tp before the
  // router as a dense MLP's, the experts' GEMMs cut out as the column and row GEMMs.
  const Scenario scenario = mixtral_scenario({"parallel.ep=1"});
  const Workload workload = build_workload(scenario, mixtral(), 0).workload;
  long gathers = 0, all_to_alls = 0;
  for (const Op& op : workload.program(0).ops) {
    all_to_alls += op.kind == OpKind::collective && op.collective == Collective::all_to_all;
    gathers += op.kind == OpKind::collective && op.collective == Collective::all_gather && op.name.find(".mlp") != std::string::npos &&
               op.bytes == 2 * tokens * h;
  }
  CHECK(all_to_alls == 0);
  CHECK(gathers > 0);
  const ModelCosts costs = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, Sharding{2, true, 1, 1});
  const KernelSet& column = costs.kernel_sets.at(static_cast<std::size_t>(costs.layer(0).mlp_parts.column_chunk.kernel_set));
  REQUIRE(column.kernels.size() == 1);
  CHECK(column.kernels.front().batch == 8);  // all 8 experts on the rank
}

TEST_CASE("a pipeline under expert parallelism reduces each chunk's experts over their own group") {
  // pp 2 (16 layers per stage), dp 4, ep 2: each stage's 16 layers x 4 experts x 3hf / 2 reduced in
  // fp32 over the 2 ranks holding them, once, after the stage's last backward.
  const Scenario scenario = mixtral_scenario({"parallel.pp=2", "parallel.dp=4", "parallel.ep=2"});
  const Workload workload = build_workload(scenario, mixtral(), 0).workload;
  for (const int rank : {0, 15}) {
    CAPTURE(rank);
    double reduced = 0;
    for (const Op& op : workload.program(static_cast<std::size_t>(rank)).ops)
      if (op.kind == OpKind::collective && op.name.rfind("expert-grad-reducescatter", 0) == 0) {
        CHECK(workload.groups.at(workload.group_of(static_cast<std::size_t>(rank), op.group)).ranks.size() == 2);
        reduced += op.bytes;
      }
    CHECK(reduced == doctest::Approx(4 * 16 * 4 * 3 * h * f / 2));
  }
}

TEST_CASE("dropped copies are not computed, under the roofline too") {
  // Mixtral without expert parallelism, zipf:2 (expert 0 at the 1/2 ceiling, the rest in
  // proportion) and a capacity of 1 x an even share (1/8): expert 0 keeps 1/8 of the copies, the
  // others min(their share, 1/8): the MLP's work counts only the kept copies' expert FLOPs.
  const std::vector<double> shares = expert_shares(ExpertRouting{2, 1}, 8, 2);
  double kept = 0;
  for (const double share : shares)
    kept += share;
  CHECK(kept < 1);
  const ModelCosts even = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true);
  const ModelCosts dropping =
      compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, Sharding{1, false, 1, 1, 0, shares});
  const double experts = 2 * tokens * 2 * h * f * 3;  // 4096 tokens x 2 copies through 3 h x f matrices
  CHECK(even.layer(0).mlp_forward.flops - dropping.layer(0).mlp_forward.flops == doctest::Approx(experts * (1 - kept)));
  CHECK(dropping.model_flops_per_micro_batch == even.model_flops_per_micro_batch);  // MFU counts top-k per token
}

TEST_CASE("under another rank order the ep members are listed by their places, which the gradients follow") {
  // Order tp-dp-cp-pp, tp 1, dp 3, cp 2 (rank = dp + 3 cp): data-parallel place cp + 2 dp, ep 3.
  Layout layout;
  layout.dp = 3;
  layout.cp = 2;
  layout.ep = 3;
  layout.order = {Dim::tp, Dim::dp, Dim::cp, Dim::pp};
  const LayoutGroups groups = groups_of(layout);
  // Places 0, 1, 2 are ranks 0 (cp 0 dp 0), 3 (cp 1 dp 0), 1 (cp 0 dp 1).
  CHECK(groups.groups.at(groups.ep.at(0)).ranks == std::vector<int>{0, 3, 1});
  // The ranks at the same place of each block hold the same experts: places 0 and 3 (ranks 0, 4).
  CHECK(groups.groups.at(groups.expert_gradient.at(0)).ranks == std::vector<int>{0, 4});
  CHECK(groups.groups.at(groups.expert_gradient.at(3)).ranks == std::vector<int>{3, 2});
}

TEST_CASE("a shared expert under tensor and expert parallelism gathers every token and reduce-scatters its output") {
  // Qwen1.5-MoE-A2.7B, tp 2 + SP, ep 4: after the combine, the layer's 4096 tokens are gathered
  // over tp (4096 x 2048 x 2 bytes), the shared expert (5632 inner, split over tp) computes on
  // all of them, and its output is reduce-scattered; in backward the same, first.
  const Scenario scenario = mixtral_scenario({"model.name=qwen1.5-moe-a2.7b", "parallel.ep=4"});
  const ModelSpec qwen = load_model(scenario.model_file, scenario.vocab_multiple);
  const Workload workload = build_workload(scenario, qwen, 0).workload;
  const Program& program = workload.program(0);
  const double gathered = 2 * tokens * 2048;
  std::map<std::string, int> found;
  for (const Op& op : program.ops) {
    if (op.place.micro_batch != 0 || op.place.layer != 0 || op.name.find(".shared") == std::string::npos)
      continue;
    if (op.kind == OpKind::compute)
      ++found[op.phase == Phase::forward ? "forward" : "backward"];
    if (op.kind == OpKind::collective) {
      CHECK(op.bytes == gathered);
      ++found[op.collective == Collective::all_gather ? "all-gather" : "reduce-scatter"];
    }
  }
  CHECK(found["forward"] == 1);
  CHECK(found["backward"] == 1);
  CHECK(found["all-gather"] == 3);  // in backward the output gradient and the input (for the weight gradient)
  CHECK(found["reduce-scatter"] == 2);
  // Its FLOPs: every token through 3 x 2048 x 5632 / 2 per rank, twice (multiply-add); the
  // sigmoid gate (2048 -> 1) on the rank's own 2048 tokens, after the reduce-scatter.
  const ModelCosts costs = compute_costs(qwen, 1, 4096, Precision::bf16, Precision::fp32, true, Sharding{2, true, 1, 4});
  const double gate = 2 * (tokens / 2) * 2048;
  CHECK(costs.layer(0).moe.shared.flops == doctest::Approx(2 * tokens * 3 * 2048 * 5632 / 2 + gate));
}

TEST_CASE("a mixture's backward split in two keeps its work and holds what the weight gradients read") {
  // Mixtral, tp 2 + SP, ep 4: the input-gradient parts and the one weight-gradient pass add up to
  // the whole backward's FLOPs, for the MoE parts and for the attention.
  const ModelCosts costs = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, Sharding{2, true, 1, 4});
  const MoeParts& moe = costs.layer(0).moe;
  CHECK(moe.combine_back_input.flops + moe.experts_back_input.flops + moe.dispatch_back_input.flops +
            moe.backward_weight.flops ==
        doctest::Approx(moe.combine_back.flops + moe.experts_back.flops + moe.dispatch_back.flops));
  // Without tp the attention's two passes are its own Works: W its linear layers' weight
  // gradients, 2 x 4096 x (h (h + 2 kv) + h h) FLOPs, B the rest of the whole attention backward.
  const ModelCosts no_tp = compute_costs(mixtral(), 1, 4096, Precision::bf16, Precision::fp32, true, Sharding{1, false, 1, 4});
  const LayerCosts& layer = no_tp.layer(0);
  CHECK(layer.attention_backward_weight.flops == doctest::Approx(2 * tokens * (h * (h + 2 * kv) + h * h)));
  CHECK(layer.attention_backward_input.flops + layer.attention_backward_weight.flops ==
        doctest::Approx(layer.attention_backward.flops));
  CHECK(layer.attention_backward_input.bytes + layer.attention_backward_weight.bytes ==
        doctest::Approx(layer.attention_backward.bytes));
  CHECK(layer.attention_backward_weight.kernel_set >= 0);
  // W: the experts' two weight gradients (8192 copies through 3 h x f / 2) and the router's.
  CHECK(moe.backward_weight.flops == doctest::Approx(2 * (2 * tokens) * h * 3 * f / 2 + 2 * (tokens / 2) * h * 8));
  // What W reads, kept from B: the attention's (QKV input gathered h, out input h / 2; QKV output
  // gradient (h + 2 kv) / 2; out output gradient h), the router's input and logits' gradient on
  // the 2048 local tokens, and per copy computed (4096 x 2): the first linear's input h and
  // output gradient 2 f / 2, the second's input f / 2 and output gradient h; 2 bytes each.
  const double expected = 2 * tokens * (h + h / 2) + 2 * tokens * (h + 2 * kv) / 2 + 2 * tokens * h +
                          2 * 2048 * (h + 8) + 2 * (2 * tokens) * (2 * h + 3 * f / 2);
  CHECK(costs.layer(0).activations.weight_gradient_inputs == doctest::Approx(expected));
}

TEST_CASE("the zero-bubble schedules run a mixture under expert parallelism") {
  // pp 2, dp 4, ep 4, ZB-H1: on the second stage (rank 8; the first runs whole backwards, its
  // input gradients going nowhere) each layer's B sends its tokens both ways (4 all-to-alls per
  // layer and micro-batch, as a whole backward does), its W runs later without communication.
  const Scenario scenario =
      mixtral_scenario({"parallel.pp=2", "parallel.dp=4", "parallel.ep=4", "parallel.schedule=zb-h1"});
  const Workload workload = build_workload(scenario, mixtral(), 0).workload;
  long all_to_alls = 0, weight_passes = 0;
  for (const Op& op : workload.program(8).ops) {
    all_to_alls += op.kind == OpKind::collective && op.collective == Collective::all_to_all;
    weight_passes += op.kind == OpKind::compute && op.phase == Phase::weight_gradient &&
                     op.name.find(".moe") != std::string::npos;
  }
  CHECK(all_to_alls == 4 * 16 * scenario.grad_accum);
  CHECK(weight_passes == 16 * scenario.grad_accum);
}

// DeepEP's dispatch (moe.dispatcher = deepep) and group-limited routing: the GPUs and nodes a
// token reaches, what its two legs carry, the groups they run over, and the refusals.
namespace {

// The Mixtral scenario with whole experts (etp 1) and DeepEP's dispatch.
Scenario deepep_scenario(std::vector<std::string> overrides = {}) {
  overrides.insert(overrides.begin(), {"parallel.etp=1", "moe.dispatcher=deepep"});
  return mixtral_scenario(overrides);
}

// Ranks 4 to a node: the ep group of ranks 0-7 (the tp ranks of a node's places first) spans two.
std::vector<int> four_per_node(int ranks) {
  std::vector<int> nodes;
  for (int rank = 0; rank < ranks; ++rank)
    nodes.push_back(rank / 4);
  return nodes;
}

std::string deepep_refusal(const std::vector<std::string>& overrides, const std::vector<int>& nodes = four_per_node(16)) {
  try {
    const Scenario scenario = deepep_scenario(overrides);
    build_workload(scenario, mixtral(), 0, nodes);
  } catch (const InputError& error) {
    return error.what();
  }
  FAIL("accepted");
  return "";
}

} // namespace

TEST_CASE("the GPUs and nodes a token's copies reach under uniform and group-limited routing") {
  // Without group limits a token's copies go to top-k different experts drawn evenly.
  // Mixtral, 8 experts, top-2, over 8 ranks of one expert each: always 2 ranks. Over 2 nodes of 4
  // experts: both copies on one node with chance 2 x C(4,2) / C(8,2) = 12/28, else 2 nodes:
  // 12/28 + 2 x 16/28 = 44/28.
  const RouterChoice mixtral_router{8, 2};
  CHECK(expected_units_reached(mixtral_router, 8) == doctest::Approx(2));
  CHECK(expected_units_reached(mixtral_router, 2) == doctest::Approx(44.0 / 28));
  // Group-limited routing runs the router on simulated tokens. Groups of one expert, the 2 best
  // picked, top-2: the copies are the token's two best experts, an even pair, so 44/28 again
  // (to the sampling's 1 %).
  CHECK(expected_units_reached({8, 2, 8, 2, 1}, 2) == doctest::Approx(44.0 / 28).epsilon(0.01));
  // One copy reaches one unit, whatever the groups.
  CHECK(expected_units_reached({256, 1, 8, 4, 2}, 64) == doctest::Approx(1));
  // Groups of one expert ranked by their "top two" (DeepSeek-V3's rule, n_group = experts): each
  // by its one score, the 2 best picked and both taken: 44/28 over 2 nodes again.
  CHECK(expected_units_reached({8, 2, 8, 2, 2}, 2) == doctest::Approx(44.0 / 28).epsilon(0.01));
  // DeepSeek-V3: 256 experts in 8 groups of 32, the 4 groups with the best top-two sums picked,
  // top-8 among their 128 experts; a node of an ep group of 64 over 8 nodes holds one group. At
  // most the 4 picked nodes are reached, and more than if the copies were drawn evenly from the
  // picked groups (8 x 4/8 x (1 - C(96,8) / C(128,8)) = 3.63, a picked group missed by all 8),
  // since a group is picked for holding two of the token's best experts: at least 3.9 of 4.
  const RouterChoice deepseek{256, 8, 8, 4, 2};
  const double node_missed = 96.0 * 95 * 94 * 93 * 92 * 91 * 90 * 89 / (128.0 * 127 * 126 * 125 * 124 * 123 * 122 * 121);
  const double nodes = expected_units_reached(deepseek, 8);
  CHECK(nodes <= 4);
  CHECK(nodes > 4 * (1 - node_missed));
  CHECK(nodes > 3.9);
  // A rank holds 4 experts: at most 8 ranks reached, more than an even draw from the picked
  // groups would reach (64 x 4/8 x (1 - C(124,8) / C(128,8)) = 7.36).
  const double rank_missed = 124.0 * 123 * 122 * 121 * 120 * 119 * 118 * 117 /
                             (128.0 * 127 * 126 * 125 * 124 * 123 * 122 * 121);
  const double ranks = expected_units_reached(deepseek, 64);
  CHECK(ranks <= 8);
  CHECK(ranks > 32 * (1 - rank_missed));
}

TEST_CASE("DeepSeek-V3's config routes each token within 4 of 8 expert groups") {
  const ModelSpec model = load_model(test::source_dir() / "models" / "deepseek-v3.json", 128);
  CHECK(model.expert_groups == 8);
  CHECK(model.groups_per_token == 4);
  CHECK(model.group_score_experts == 2);
  CHECK(mixtral().expert_groups == 1);
  CHECK(mixtral().groups_per_token == 1);
}

TEST_CASE("routing groups that do not divide the experts or hold the top-k are refused") {
  std::ifstream in(test::source_dir() / "models" / "deepseek-v3.json");
  const std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto refusal_of = [&](const std::string& from, const std::string& to) {
    std::string changed = config;
    REQUIRE(changed.find(from) != std::string::npos);
    changed.replace(changed.find(from), from.size(), to);
    try {
      load_model(test::write_temp_file("deepseek-groups.json", changed), 128);
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    FAIL("accepted " << to);
    return std::string();
  };
  CHECK(refusal_of("\"n_group\": 8", "\"n_group\": 3").find("field 'n_group' = 3") != std::string::npos);
  CHECK(refusal_of("\"topk_group\": 4", "\"topk_group\": 9").find("field 'topk_group' = 9") != std::string::npos);
  // 4 groups of 32 experts hold the top-8; 4 of 256 groups of one expert would not.
  CHECK(refusal_of("\"n_group\": 8", "\"n_group\": 256").find("field 'topk_group' = 4") != std::string::npos);
}

TEST_CASE("DeepEP's legs carry each token once per node and once per GPU its copies reach") {
  // Rank 0 sends its 2,048 tokens of the sequence (SP over tp 2) of 4,096 bf16 values: over the
  // rail (ranks 0 and 4) 2 x 4096 x 2048 x 44/28 bytes (the nodes reached), over its node (ranks
  // 0-3) 2 x 4096 x 2048 x 2 (the GPUs reached: each node's rail rank forwards the tokens of both
  // nodes, N x T x 2/8 to each of the 4, 2 T in all); the all-to-all would send 2 x 2048 copies.
  const double token_bytes = 2.0 * 4096 * 2048;
  const Scenario scenario = deepep_scenario();
  const WorkloadBuild build = build_workload(scenario, mixtral(), 0, four_per_node(16));
  const Workload& workload = build.workload;
  const Program& program = workload.program(0);
  const Op& rail = test::op_named(program, "L0.fwd.mb0.moe.dispatch-rail");
  const Op& node = test::op_named(program, "L0.fwd.mb0.moe.dispatch-node");
  CHECK(rail.kind == OpKind::collective);
  CHECK(rail.collective == Collective::all_to_all);
  CHECK(rail.stream == Stream::ep_rail);
  CHECK(node.stream == Stream::ep_comm);
  CHECK(rail.bytes == doctest::Approx(token_bytes * 44 / 28));
  CHECK(node.bytes == doctest::Approx(token_bytes * 2));
  const Group& rail_group = workload.groups.at(static_cast<std::size_t>(workload.group_of(0, rail.group)));
  const Group& node_group = workload.groups.at(static_cast<std::size_t>(workload.group_of(0, node.group)));
  CHECK(rail_group.ranks == std::vector<int>{0, 4});
  CHECK(node_group.ranks == std::vector<int>{0, 1, 2, 3});
  CHECK(rail_group.kind == "ep");
  CHECK(node_group.kind == "ep");
  // Rank 5 runs the same program over its own legs.
  CHECK(workload.groups.at(static_cast<std::size_t>(workload.group_of(5, rail.group))).ranks == std::vector<int>{1, 5});
  CHECK(workload.groups.at(static_cast<std::size_t>(workload.group_of(5, node.group))).ranks ==
        std::vector<int>{4, 5, 6, 7});
  // The experts wait for both legs, the combine's legs carry the same back, and the combine waits for both.
  const Op& experts = test::op_named(program, "L0.fwd.mb0.moe.experts");
  const auto id_of = [&](const Op& op) { return static_cast<OpId>(&op - program.ops.data()); };
  for (const Op* leg : {&rail, &node})
    CHECK(std::find(experts.deps.begin(), experts.deps.end(), id_of(*leg)) != experts.deps.end());
  CHECK(test::op_named(program, "L0.fwd.mb0.moe.combine-rail").bytes == doctest::Approx(token_bytes * 44 / 28));
  CHECK(test::op_named(program, "L0.fwd.mb0.moe.combine-node").bytes == doctest::Approx(token_bytes * 2));
  const Op& combine = test::op_named(program, "L0.fwd.mb0.moe.combine");
  CHECK(combine.deps.size() == 2);
  // fp8 dispatch: the forward legs carry a byte and 4/128 of a scale per value.
  const WorkloadBuild fp8_build =
      build_workload(deepep_scenario({"moe.dispatch_precision=fp8"}), mixtral(), 0, four_per_node(16));
  const Program& fp8 = fp8_build.workload.program(0);
  CHECK(test::op_named(fp8, "L0.fwd.mb0.moe.dispatch-rail").bytes == doctest::Approx(token_bytes * 44 / 28 * (1 + 4.0 / 128) / 2));
  CHECK(test::op_named(fp8, "L0.fwd.mb0.moe.combine-rail").bytes == doctest::Approx(token_bytes * 44 / 28));
}

TEST_CASE("an ep group on one node needs no rail, one spread over nodes of one member no NVLink leg") {
  // 8 GPUs per node: the ep group of ranks 0-7 is one node; forwarded to the 2 GPUs each token reaches.
  std::vector<int> eight(16);
  for (int rank = 0; rank < 16; ++rank)
    eight[static_cast<std::size_t>(rank)] = rank / 8;
  const WorkloadBuild one_node_build = build_workload(deepep_scenario(), mixtral(), 0, eight);
  const Program& one_node = one_node_build.workload.program(0);
  CHECK(test::op_named(one_node, "L0.fwd.mb0.moe.dispatch-node").bytes == doctest::Approx(2.0 * 4096 * 2048 * 2));
  CHECK(std::none_of(one_node.ops.begin(), one_node.ops.end(),
                     [](const Op& op) { return op.name.find("-rail") != std::string::npos; }));
  // A GPU per node: every member on its own node, the tokens sent once per node (= GPU) reached.
  std::vector<int> alone(16);
  for (int rank = 0; rank < 16; ++rank)
    alone[static_cast<std::size_t>(rank)] = rank;
  const WorkloadBuild spread_build = build_workload(deepep_scenario(), mixtral(), 0, alone);
  const Program& spread = spread_build.workload.program(0);
  CHECK(test::op_named(spread, "L0.fwd.mb0.moe.dispatch-rail").bytes == doctest::Approx(2.0 * 4096 * 2048 * 2));
  CHECK(std::none_of(spread.ops.begin(), spread.ops.end(),
                     [](const Op& op) { return op.name.find("-node") != std::string::npos; }));
}

TEST_CASE("DeepEP's dispatch is refused where it is not simulated") {
  CHECK(deepep_refusal({"parallel.etp=2"}).find("moe.dispatcher") != std::string::npos);
  CHECK(deepep_refusal({"parallel.etp=2"}).find("parallel.etp = 1") != std::string::npos);
  CHECK(deepep_refusal({"moe.routing=zipf:1.2"}).find("uniform routing") != std::string::npos);
  CHECK(deepep_refusal({"parallel.ep=1", "parallel.etp=auto", "parallel.tp=1", "parallel.sp=false", "parallel.dp=16"})
            .find("moe.dispatcher = deepep sends the tokens over the expert-parallel group") != std::string::npos);
  // 3 of the ep group on the first node, 5 on the second.
  std::vector<int> uneven(16, 1);
  std::fill(uneven.begin(), uneven.begin() + 3, 0);
  const std::string split = deepep_refusal({}, uneven);
  CHECK(split.find("moe.dispatcher = deepep: on the platform's nodes, expert-parallel group") != std::string::npos);
  CHECK(split.find("ranks 0-7") != std::string::npos);
}

TEST_CASE("DeepEP's legs move through DeepEP's own buffers, not NCCL communicators") {
  // Whole experts over ep 8 of the 16 ranks; the all-to-all's communicators are the baseline.
  const Scenario alltoall = mixtral_scenario({"parallel.etp=1"});
  const WorkloadBuild plain = build_workload(alltoall, mixtral(), 0);
  const int base = runtime_communicators(plain.workload, 0, plain.coords[0], alltoall);
  const Scenario deepep = deepep_scenario();
  // 4 GPUs a node: a node leg of 4 and a rail leg of 2, DeepEP's NVLink and RDMA traffic: no
  // communicator more.
  const WorkloadBuild two_nodes = build_workload(deepep, mixtral(), 0, four_per_node(16));
  CHECK(runtime_communicators(two_nodes.workload, 0, two_nodes.coords[0], deepep) == base);
  // Its buffer for 8 ranks and hidden 4096 in bf16 (runtime_memory_test derives the bytes).
  double deepep_buffers = 0;
  for (const Op& op : two_nodes.workload.program(0).ops)
    if (op.kind == OpKind::alloc && op.tensor == "deepep-buffers")
      deepep_buffers += op.bytes;
  CHECK(deepep_buffers == 209880704.0 + 160 + 32.0 * 1024 * 1024);
  for (const Op& op : plain.workload.program(0).ops)
    CHECK_FALSE((op.kind == OpKind::alloc && op.tensor == "deepep-buffers" && op.bytes > 0));
}

TEST_CASE("DualPipeV's overlapped pairs interleave their passes at the expert all-to-alls on the one compute stream") {
  // Mixtral (32 expert layers) on 2 DualPipeV stages: 4 virtual stages of 8 layers, tp 1, ep 8.
  // Each pass of a pair issues 2 all-to-alls per layer (dispatch, combine), 16 in all, which cut
  // it into 17 pieces; the pieces alternate, the backward's first (its first piece ends in its
  // combine's all-to-all): 34 runs of kernels of one pass, as Megatron-Core's combined 1F1B
  // orders a layer's f.attn, b.mlp, f.mlp, b.attn. Under full recompute the backward re-runs
  // its forward first: 32 all-to-alls, 33 pieces, among which the forward's 17 are spread so
  // that no two follow each other (17 <= 33), the backward first and last (the forward's 17th
  // goes once 16/17 < taken/33, i.e. after the backward's 32nd): 17 + 18 = 35 runs.
  for (const auto& [recompute, expected_runs] : {std::pair{"none", 34}, {"full", 35}}) {
    CAPTURE(recompute);
    const Scenario scenario =
        mixtral_scenario({"parallel.tp=1", "parallel.sp=false", "parallel.pp=2", "parallel.schedule=dualpipev",
                          "training.global_batch=64", std::string("memory.recompute=") + recompute});
    REQUIRE(scenario.overlap_pairs);
    const WorkloadBuild build = build_workload(scenario, mixtral(), 0);
    const Program& program = build.workload.program(0);
    const auto pass_of = [](const Op& op) {
      return std::to_string(op.phase == Phase::forward) + "/" + std::to_string(op.place.micro_batch) + "/" +
             std::to_string(op.place.chunk);
    };
    int pairs = 0;
    for (OpId id = 0; id < program.ops.size(); ++id) {
      CHECK((program.ops[id].kind != OpKind::compute || program.ops[id].stream == Stream::compute ||
             program.ops[id].stream == Stream::cpu));
      if (program.ops[id].name.rfind("pair-wait", 0) != 0)
        continue;
      ++pairs;
      // The pair's kernels: those after its pair-wait, up to the first of a third pass.
      std::vector<std::string> runs;
      std::set<std::string> passes;
      for (OpId next = id + 1; next < program.ops.size(); ++next) {
        const Op& op = program.ops[next];
        if (op.kind != OpKind::compute || !op.target.empty())
          continue;
        const std::string pass = pass_of(op);
        passes.insert(pass);
        if (passes.size() > 2)
          break;
        if (runs.empty() || runs.back() != pass)
          runs.push_back(pass);
      }
      CAPTURE(program.ops[id].name);
      REQUIRE(runs.size() == static_cast<std::size_t>(expected_runs));
      CHECK(runs.front().front() == '0');  // a backward's
      CHECK(runs.back().front() == (expected_runs % 2 ? '0' : '1'));
    }
    CHECK(pairs > 0);
  }
}
