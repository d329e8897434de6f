#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "layout/layout.hpp"
#include "model/costs.hpp"
#include "program/collective_plan.hpp"
#include "program/pipeline_schedule.hpp"
#include "program/workload_builder.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {

// The 22B model of Korthikanti et al. 2022 (Fig. 1, Table 4): a=64, h=6144, L=48.
ModelSpec model_22b() {
  return parse_model(R"({"model_type": "gpt2", "n_embd": 6144, "n_layer": 48, "n_head": 64, "n_positions": 2048,
                        "vocab_size": 51200})",
                     "22b.json", "22b", 128);
}

constexpr double gib = 1024.0 * 1024 * 1024;


// A rank's passes as text: F, B (input gradients), W (weight gradients) or BW (a whole backward),
// then the micro-batch, primed for chunk 1.
std::string pass_order(Schedule schedule, int pp, long long m, int stage) {
  std::string text;
  for (const PipelineStep& step : pipeline_schedule(schedule, pp, 2, m, stage)) {
    const char* pass = step.pass == Pass::forward          ? "F"
                       : step.pass == Pass::backward_input ? "B"
                       : step.pass == Pass::backward_weight ? "W"
                                                            : "BW";
    text += (step.beside_previous ? "+" : "") + std::string(pass) + std::to_string(step.micro_batch) +
            (step.chunk == 1 ? "' " : " ");
  }
  return text;
}

// Every micro-batch of every chunk runs its forward, then a whole backward (state 0 -> 1 -> 3) or
// its input gradients, then its weight gradients (0 -> 1 -> 2 -> 3), once each.
void check_each_micro_batch_done(const std::vector<PipelineStep>& steps, int chunks, long long m) {
  std::map<std::pair<long long, int>, int> seen;
  for (const PipelineStep& step : steps) {
    int& state = seen[{step.micro_batch, step.chunk}];
    switch (step.pass) {
    case Pass::forward: CHECK(state == 0); state = 1; break;
    case Pass::backward: CHECK(state == 1); state = 3; break;
    case Pass::backward_input: CHECK(state == 1); state = 2; break;
    case Pass::backward_weight: CHECK(state == 2); state = 3; break;
    }
  }
  CHECK(seen.size() == static_cast<std::size_t>(m * chunks));
  for (const auto& [micro_batch, state] : seen)
    CHECK(state == 3);
}

} // namespace

TEST_CASE("activation bytes per layer with tensor and sequence parallelism follow Korthikanti et al. Table 2") {
  const ModelSpec model = model_22b();
  const double s = 2048, b = 4, h = 6144, a = 64, t = 8, sbh = s * b * h;
  const LayerActivations tp =
      compute_costs(model, 4, 2048, Precision::bf16, Precision::fp32, false, Sharding{8, false, 1}).layer(0).activations;
  CHECK(tp.total == doctest::Approx(sbh * (10 + 24 / t + 5 * a * s / (h * t))));
  CHECK(tp.total - tp.attention_core == doctest::Approx(sbh * (10 + 24 / t)));  // + selective recompute
  const LayerActivations sp =
      compute_costs(model, 4, 2048, Precision::bf16, Precision::fp32, false, Sharding{8, true, 1}).layer(0).activations;
  CHECK(sp.total == doctest::Approx(sbh * (34 / t + 5 * a * s / (h * t))));
  CHECK(sp.total - sp.attention_core == doctest::Approx(sbh * 34 / t));
  // The paper's worked check for all 48 layers: 59.25 GiB with TP only, 9.5625 GiB with
  // TP + SP + selective recompute.
  CHECK(48 * tp.total / gib == doctest::Approx(59.25));
  CHECK(48 * (sp.total - sp.attention_core) / gib == doctest::Approx(9.5625));
}

TEST_CASE("context parallelism splits the sequence: a rank keeps 1/cp of the activations with FlashAttention") {
  const ModelSpec model = model_22b();
  const double whole =
      compute_costs(model, 4, 2048, Precision::bf16, Precision::fp32, true, Sharding{1, false, 1}).layer(0).activations.total;
  const double quarter =
      compute_costs(model, 4, 2048, Precision::bf16, Precision::fp32, true, Sharding{1, false, 4}).layer(0).activations.total;
  CHECK(quarter == doctest::Approx(whole / 4));
}

TEST_CASE("tensor-parallel traffic per layer is 8bsh(t-1)/t elements per device per micro-batch, 10 under SP") {
  // Narayanan et al. 2021, section 3.2: two all-reduces in forward and two in backward, each of
  // 2bsh(t-1)/t elements on a ring; the same with sequence parallelism's all-gathers and
  // reduce-scatters, plus, in backward, the all-gather again of each column-parallel GEMM's
  // sequence-split input for its weight gradient, bsh(t-1)/t each (Megatron-LM's
  // LinearWithGradAccumulationAndAsyncCommunication.backward under sequence_parallel).
  for (const char* sp : {"false", "true"}) {
    CAPTURE(sp);
    const Scenario scenario = load_scenario(test::write_temp_file("tp.ini", test::tiny_scenario_ini),
                                            {"parallel.tp=4", "parallel.dp=1", "training.global_batch=2",
                                             std::string("parallel.sp=") + sp});
    const ModelSpec model = load_model(scenario.model_file, 128 * 4);
    const WorkloadBuild build = build_workload(scenario, model, 0);
    double bytes = 0;
    for (const Op& op : build.workload.program(0).ops)
      if (op.kind == OpKind::collective && op.stream == Stream::tp_comm && op.name.rfind("L0.", 0) == 0)
        bytes += bytes_sent_per_rank(op.collective, op.bytes,
                                     static_cast<int>(build.workload.groups[build.workload.group_of(0, op.group)].ranks.size()));
    const double b = 2, s = 512, h = 256, t = 4;
    CHECK(bytes / 2.0 /* bf16 */ == doctest::Approx((sp == std::string("true") ? 10 : 8) * b * s * h * (t - 1) / t));
  }
}

TEST_CASE("ring attention sends cp - 1 K/V blocks per layer in forward and twice that in backward") {
  // Liu et al. 2023 (Ring Attention); Transformer Engine's p2p context parallelism: forward
  // passes each rank's K/V block around the ring (cp - 1 sends); backward passes K/V around
  // again and the dK/dV accumulators behind them (cp - 1 sends each, dK/dV in the type of K/V).
  const Scenario scenario = load_scenario(test::write_temp_file("cp.ini", test::tiny_scenario_ini),
                                          {"parallel.cp=4", "parallel.dp=1", "training.global_batch=2"});
  const ModelSpec model = load_model(scenario.model_file, scenario.vocab_multiple);
  const WorkloadBuild build = build_workload(scenario, model, 0);
  double forward = 0, backward = 0;
  for (const Op& op : build.workload.program(0).ops) {
    if (op.kind != OpKind::collective || op.stream != Stream::cp_comm)
      continue;
    const int members = static_cast<int>(build.workload.groups[build.workload.group_of(0, op.group)].ranks.size());
    const double sent = bytes_sent_per_rank(op.collective, op.bytes, members);
    if (op.name.rfind("L0.fwd.", 0) == 0)
      forward += sent;
    if (op.name.rfind("L0.bwd.", 0) == 0)
      backward += sent;
  }
  // tiny-gpt: multi-head attention of width h = 256; a block is K and V of b = 2 sequences of
  // s / cp = 128 tokens in bf16: 2 x 2 x 128 x 256 x 2 bytes.
  const double block = 2.0 * 2 * 128 * 256 * 2;
  CHECK(forward == doctest::Approx(3 * block));
  CHECK(backward == doctest::Approx(6 * block));
}

TEST_CASE("pipeline schedules run every micro-batch's forward before its backward, once each") {
  struct Case {
    Schedule schedule;
    long long m;
  };
  for (const Case& c : {Case{Schedule::gpipe, 8}, Case{Schedule::one_f_one_b, 8}, Case{Schedule::interleaved, 8},
                        Case{Schedule::interleaved, 12}, Case{Schedule::zb_h1, 8}, Case{Schedule::zb_h2, 8},
                        Case{Schedule::zb_v, 8}, Case{Schedule::zb_v, 3}}) {
    const Schedule schedule = c.schedule;
    const long long m = c.m;
    CAPTURE(to_string(schedule));
    CAPTURE(m);
    const int chunks = schedule == Schedule::interleaved || schedule == Schedule::zb_v ? 2 : 1;
    for (int stage = 0; stage < 4; ++stage) {
      CAPTURE(stage);
      // The zero-bubble schedules' first virtual stage runs each W right after its B: one backward.
      std::size_t passes = 0;
      for (int chunk = 0; chunk < chunks; ++chunk)
        passes += splits_backward(schedule) && virtual_stage(schedule, 4, chunk, stage) > 0 ? 3 : 2;
      const auto steps = pipeline_schedule(schedule, 4, chunks, m, stage);
      CHECK(steps.size() == passes * static_cast<std::size_t>(m));
      check_each_micro_batch_done(steps, chunks, m);
    }
  }
  // 1F1B warms up with p - stage - 1 forwards: stage 0 of 4 holds 4 micro-batches, the last 1.
  CHECK(peak_in_flight(pipeline_schedule(Schedule::one_f_one_b, 4, 1, 8, 0)) == 4);
  CHECK(peak_in_flight(pipeline_schedule(Schedule::one_f_one_b, 4, 1, 8, 3)) == 1);
  CHECK(peak_in_flight(pipeline_schedule(Schedule::gpipe, 4, 1, 8, 0)) == 8);
  // Interleaved (Megatron-LM): (p - 1) * 2 + (v - 1) * p warm-up chunks, then one more.
  CHECK(peak_in_flight(pipeline_schedule(Schedule::interleaved, 4, 2, 8, 0)) == 6 + 4 + 1);
  // Qi et al. 2024, section 2: ZB-H1 keeps 1F1B's p micro-batches on the first stage (until
  // their W), ZB-H2 2p - 1; the last stage holds p (its W waits p - 1 slots after its F and B)
  // and 2p - 1.
  CHECK(peak_in_flight(pipeline_schedule(Schedule::zb_h1, 4, 1, 8, 0)) == 4);
  CHECK(peak_in_flight(pipeline_schedule(Schedule::zb_h1, 4, 1, 8, 3)) == 4);
  CHECK(peak_in_flight(pipeline_schedule(Schedule::zb_h2, 4, 1, 8, 0)) == 7);
  CHECK(peak_in_flight(pipeline_schedule(Schedule::zb_h2, 4, 1, 8, 3)) == 7);
  // ZB-V (section 6): 2p chunks, half a stage each, as many layers as 1F1B's p micro-batches.
  for (int stage = 0; stage < 4; ++stage)
    CHECK(peak_in_flight(pipeline_schedule(Schedule::zb_v, 4, 2, 8, stage)) <= 8);
  CHECK(peak_in_flight(pipeline_schedule(Schedule::zb_v, 4, 2, 8, 0)) == 8);
}

TEST_CASE("ZB-V runs each rank's chunks in the order of Qi et al.'s V schedule") {
  // Section 6, p = 2, m = 4 (n = max(m, 2p - 1) = 4). Rank 0 holds virtual stages 0 (chunk 0) and
  // 3 (chunk 1): 2(p - r) - 1 = 3 forwards of chunk 0, p - r = 2 triples F1 B1 W1, the steady
  // F0 B0 W0 F1 B1 W1 (without F0 once all 4 are done), p - r = 2 pairs B0 W0. On the first
  // virtual stage each W follows its B: whole backwards (BW). Rank 1 (virtual stages 1 and 2): 1
  // forward of chunk 0, r = 1 pair F1 F0, 1 triple F1 B1 W1, the steady state twice, r = 1 pair
  // B0 B1, 1 pair B0 W0, then the Ws left, chunk 1's first.
  CHECK(pass_order(Schedule::zb_v, 2, 4, 0) == "F0 F1 F2 F0' B0' W0' F1' B1' W1' F3 BW0 F2' B2' W2' BW1 F3' B3' W3' BW2 BW3 ");
  CHECK(pass_order(Schedule::zb_v, 2, 4, 1) == "F0 F0' F1 F1' B0' W0' F2 B0 W0 F2' B1' W1' F3 B1 W1 F3' B2' W2' B2 B3' B3 W2 W3' W3 ");
  // The V: chunk 1 of rank r is virtual stage 2p - 1 - r, so rank 0 holds the first and the last.
  CHECK(virtual_stage(Schedule::zb_v, 4, 1, 0) == 7);
  CHECK(stage_of_virtual_stage(Schedule::zb_v, 4, 5) == 2);
  CHECK(stage_of_virtual_stage(Schedule::interleaved, 4, 5) == 1);
}

TEST_CASE("DualPipeV runs each rank's chunks in the order of PyTorch's ScheduleDualPipeV") {
  // p = 2, m = 4, by hand from the eight steps of ScheduleDualPipeV (torch.distributed.pipelining,
  // after DeepSeek's DualPipeV). Rank 0 (virtual stages 0 and 3): 2(p - r - 1) = 2 forwards of chunk
  // 0; r + 1 = 1 pair F0 F1; p - r - 1 = 1 triple B1 W F1; m - 2p + r + 1 = 1 pair of overlapped
  // (F0 with a whole backward of chunk 1, F1 with one of chunk 0); 1 pair B1, F1 with B0; r + 1 = 1
  // pair B1 B0, B0 split (the middle of the pairs, r even); 1 pair W B0 (split); the W left. On the
  // first virtual stage each W right after its B runs with it (BW). Rank 1 (virtual stages 1 and
  // 2): 2 pairs F0 F1, 2 overlapped pairs (the first F0 and B1 apart: the last rank runs them one
  // after the other in both DeepSeek's DualPipeV and PyTorch's), 2 pairs B1 B0 (split from the
  // second, r odd), 2 W.
  // The whole backward of an overlapped pair is marked (+) as running beside its forward.
  CHECK(pass_order(Schedule::dualpipev, 2, 4, 0) == "F0 F1 F2 F0' B0' W0' F1' F3 +BW1' F2' +BW0 BW2' F3' +BW1 BW3' BW2 BW3 ");
  CHECK(pass_order(Schedule::dualpipev, 2, 4, 1) == "F0 F0' F1 F1' F2 BW0' F2' +BW0 F3 +BW1' F3' +BW1 BW2' BW2 B3' B3 W3' W3 ");
  for (const long long m : {8LL, 11LL}) {
    for (int stage = 0; stage < 4; ++stage) {
      CAPTURE(m);
      CAPTURE(stage);
      check_each_micro_batch_done(pipeline_schedule(Schedule::dualpipev, 4, 2, m, stage), 2, m);
    }
  }
  // The first rank warms up with 2p chunk forwards and holds one more through the steady state:
  // 2p + 1 chunks (DeepSeek-AI 2024's PP + 1 for DualPipe, in stages of half a rank).
  CHECK(peak_in_flight(pipeline_schedule(Schedule::dualpipev, 4, 2, 8, 0)) == 9);
  CHECK(virtual_stage(Schedule::dualpipev, 4, 1, 0) == 7);
}

TEST_CASE("DualPipe runs each rank's chunks in the order of deepseek-ai/DualPipe's DualPipe.step") {
  // p = 4, m = 8, by hand from the eight steps of DualPipe.step: micro-batches 0-3 go down the
  // pipeline (chunk 0, virtual stages 0-3), 4-7 up it (chunk 1, stages 4-7, rank r holding 7 - r).
  // A rank's steps take its distance from the nearer end, r' of p / 2 = 2, and its phase 0 is
  // chunk 0 on the first half of the ranks, chunk 1 on the second. Rank 0 (r' = 0): 2(p/2 - r' - 1)
  // = 2 forwards of phase 0; r' + 1 = 1 pair F0 F1; 1 triple B1 W F1 (B of virtual stage 7, the
  // loss, split); n - p + r' + 1 = 1 pair of overlapped pairs (F0 with a whole backward of phase 1,
  // F1 with one of phase 0); 1 triple B1, F1 with B0; r' + 1 = 1 pair B1 B0, B0 split (the middle
  // of the pairs, r' even); 1 pair W B0 (split); the W left. On virtual stage 0 each W right
  // after its B runs with it (BW). Rank 1 (r' = 1, a middle rank): 2 pairs F0 F1, 2 pairs of
  // pairs whose first F0 and B1 are not overlapped, 2 pairs B1 B0, split from the second (r' odd),
  // 2 W. Ranks 3 and 2 run the steps of ranks 0 and 1 with the chunks swapped.
  CHECK(pass_order(Schedule::dualpipe, 4, 8, 0) == "F0 F1 F2 F4' B4' W4' F5' F3 +BW5' F6' +BW0 BW6' F7' +BW1 BW7' BW2 BW3 ");
  CHECK(pass_order(Schedule::dualpipe, 4, 8, 1) == "F0 F4' F1 F5' F2 BW4' F6' +BW0 F3 +BW5' F7' +BW1 BW6' BW2 B7' B3 W7' W3 ");
  CHECK(pass_order(Schedule::dualpipe, 4, 8, 2) == "F4' F0 F5' F1 F6' BW0 F2 +BW4' F7' +BW1 F3 +BW5' BW2 BW6' B3 B7' W3 W7' ");
  CHECK(pass_order(Schedule::dualpipe, 4, 8, 3) == "F4' F5' F6' F0 B0 W0 F1 F7' +BW1 F2 +BW4' BW2 F3 +BW5' BW3 BW6' BW7' ");
  for (const auto& [pp, m] : {std::pair{4, 8LL}, {4, 14LL}, {8, 16LL}, {8, 40LL}}) {
    for (int stage = 0; stage < pp; ++stage) {
      CAPTURE(pp);
      CAPTURE(m);
      CAPTURE(stage);
      const auto steps = pipeline_schedule(Schedule::dualpipe, pp, 2, m, stage);
      // Each micro-batch once, through the chunk of its direction only.
      check_each_micro_batch_done(steps, 1, m);
      for (const PipelineStep& step : steps)
        CHECK(step.chunk == (step.micro_batch < m / 2 ? 0 : 1));
      // DeepSeek-AI 2024, Table 2: DualPipe's activations per device, PP + 1 micro-batches' of a
      // stage (1F1B: PP), reached on the end ranks.
      CHECK(peak_in_flight(steps) <= pp + 1);
      if (stage == 0 || stage == pp - 1)
        CHECK(peak_in_flight(steps) == pp + 1);
    }
  }
  // Rank r holds stage r going down and stage p - 1 - r going up (virtual stage 2p - 1 - r), which
  // begins and ends each direction on the end ranks.
  CHECK(virtual_stage(Schedule::dualpipe, 4, 1, 1) == 6);
  CHECK(stage_of_virtual_stage(Schedule::dualpipe, 4, 4) == 3);
  for (const int vs : {0, 4})
    CHECK(first_virtual_stage(Schedule::dualpipe, 4, vs));
  for (const int vs : {3, 7})
    CHECK(last_virtual_stage(Schedule::dualpipe, 4, 2, vs));
  CHECK(!first_virtual_stage(Schedule::dualpipev, 4, 4));
  CHECK(!last_virtual_stage(Schedule::dualpipev, 4, 2, 3));
}

TEST_CASE("interleaved 1F1B takes the micro-batches in Megatron-Core's groups, the last group the rest") {
  // Megatron-Core's schedules.py, get_schedule_table, its own example: p = 2, v = 2, m = 5 in
  // groups of N = 3, forward order (micro-batch, chunk) 0 1 2 0' 1' 2' 3 4 3' 4'; backwards take
  // the same table with the chunks reversed. Warm-up (p - s - 1) x 2 + (v - 1) x N: 5 forwards on
  // stage 0, 3 on stage 1; then one forward and one backward in turn; then the backwards left.
  const auto order = [](int stage) {
    std::string text;
    for (const PipelineStep& step : pipeline_schedule(Schedule::interleaved, 2, 2, 5, stage, 3))
      text += std::string(step.pass == Pass::forward ? "F" : "B") + std::to_string(step.micro_batch) +
              (step.chunk == 1 ? "' " : " ");
    return text;
  };
  CHECK(order(0) == "F0 F1 F2 F0' F1' F2' B0' F3 B1' F4 B2' F3' B0 F4' B1 B2 B3' B4' B3 B4 ");
  CHECK(order(1) == "F0 F1 F2 F0' B0' F1' B1' F2' B2' F3 B0 F4 B1 F3' B2 F4' B3' B4' B3 B4 ");
  for (int stage = 0; stage < 2; ++stage)
    check_each_micro_batch_done(pipeline_schedule(Schedule::interleaved, 2, 2, 5, stage, 3), 2, 5);
}

TEST_CASE("ZB-H1 runs F, B and W in the slots of Qi et al.") {
  // p = 4, m = 8, stage 1: slot x runs F(x), B(x - 2), W(x - 3) (section 2, figure 3 top).
  const auto steps = pipeline_schedule(Schedule::zb_h1, 4, 1, 8, 1);
  std::string order;
  for (const PipelineStep& step : steps)
    order += std::string(step.pass == Pass::forward ? "F" : step.pass == Pass::backward_input ? "B" : "W") +
             std::to_string(step.micro_batch) + " ";
  CHECK(order == "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 B6 W5 B7 W6 W7 ");
}

TEST_CASE("rank order puts tp innermost by default and follows the order given") {
  Layout layout;
  layout.tp = 2;
  layout.dp = 2;
  layout.pp = 2;
  CHECK(layout.coords(1).tp == 1);
  CHECK(layout.coords(2).dp == 1);
  CHECK(layout.coords(4).pp == 1);
  CHECK(layout.group_of(5, {Dim::tp}) == std::vector<int>{4, 5});
  CHECK(layout.group_of(5, {Dim::dp}) == std::vector<int>{5, 7});
  layout.order = {Dim::dp, Dim::tp, Dim::cp, Dim::pp};
  CHECK(layout.coords(1).dp == 1);
  CHECK(layout.group_of(0, {Dim::tp}) == std::vector<int>{0, 2});
}

TEST_CASE("the ranks of a pipeline stage share one program and bind its slots to their own groups") {
  // tp 2 x dp 2 x pp 2 = 8 ranks; default order tp, cp, dp, pp: rank = tp + 2 dp + 4 pp.
  const Scenario scenario = load_scenario(test::write_temp_file("stages.ini", test::tiny_scenario_ini),
                                          {"parallel.tp=2", "parallel.dp=2", "parallel.pp=2",
                                           "training.global_batch=8"});
  const WorkloadBuild build = build_workload(scenario, load_model(scenario.model_file, 128 * 2), 0);
  const Workload& workload = build.workload;
  REQUIRE(workload.ranks() == 8);
  std::set<const Program*> distinct;
  for (const auto& program : workload.programs)
    distinct.insert(program.get());
  CHECK(distinct.size() == 2);
  CHECK(workload.programs[0] == workload.programs[3]);
  CHECK(workload.programs[4] == workload.programs[7]);
  for (int rank = 0; rank < 8; ++rank) {
    CAPTURE(rank);
    const int stage = rank / 4;
    const int neighbour = rank + (stage == 0 ? 4 : -4);  // two stages: both neighbours are the other stage
    int sends = 0;
    for (const Op& op : workload.program(rank).ops) {
      if (op.kind == OpKind::send || op.kind == OpKind::recv) {
        CHECK(workload.peer_of(rank, op.peer) == neighbour);
        ++sends;
      }
      if (op.kind == OpKind::collective) {
        const Group& group = workload.groups[workload.group_of(rank, op.group)];
        CHECK(std::find(group.ranks.begin(), group.ranks.end(), rank) != group.ranks.end());
        if (group.kind == "tp")
          CHECK(group.ranks == std::vector<int>{rank & ~1, rank | 1});
        if (group.kind == "dp")
          CHECK(group.ranks == std::vector<int>{rank & ~2, rank | 2});
      }
    }
    CHECK(sends > 0);
  }
  CHECK_NOTHROW(validate_workload(workload, "stages"));
}

TEST_CASE("a group is its kind and its members: with dp 1 the context-parallel group is not the gradient group") {
  // dp = 1, cp = 4, tp = 2: the gradient group (dp x cp) of rank 0 has the members of its cp
  // group, {0, 2, 4, 6}; ring-attention traffic must still be reported as cp, gradients as dp.
  Layout layout;
  layout.tp = 2;
  layout.cp = 4;
  const LayoutGroups groups = groups_of(layout);
  for (int rank = 0; rank < layout.world(); ++rank) {
    CAPTURE(rank);
    const Group& gradient = groups.groups[groups.gradient[rank]];
    const Group& context = groups.groups[groups.cp[rank]];
    CHECK(gradient.kind == "dp");
    CHECK(context.kind == "cp");
    CHECK(gradient.ranks == context.ranks);
    CHECK(groups.gradient[rank] != groups.cp[rank]);
  }
  CHECK(groups.groups[groups.cp[0]].ranks == std::vector<int>{0, 2, 4, 6});
}
