#include <doctest/doctest.h>

#include "common/error.hpp"
#include "program/recompute_plan.hpp"
#include "program/workload_builder.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {

Scenario with_recompute(const std::string& recompute) {
  return load_scenario(test::write_temp_file("recompute.ini", test::tiny_scenario_ini),
                       {"memory.recompute=" + recompute, "memory.flash_attention=false"});
}

// GPT-3 layers: without FlashAttention the attention core is a large share of the activations.
LayerCosts gpt3_layer() {
  const ModelSpec model = load_model(test::source_dir() / "models" / "gpt3-175b.json", 128);
  return compute_costs(model, 1, 2048, Precision::bf16, Precision::fp32, false).layer(0);
}

} // namespace

TEST_CASE("fixed strategies keep what Korthikanti et al. Table 2 says and recompute accordingly") {
  const LayerCosts layer = gpt3_layer();
  const double s = 2048, b = 1, h = 12288, a = 96;
  const RecomputePlan none = plan_recompute(with_recompute("none"), LayerList(96, &layer), 0);
  CHECK(none.kept_bytes == doctest::Approx(96 * s * b * h * (34 + 5 * a * s / h)));
  CHECK(none.extra_flops == 0);
  const RecomputePlan selective = plan_recompute(with_recompute("selective"), LayerList(96, &layer), 0);
  CHECK(selective.kept_bytes == doctest::Approx(96 * 34 * s * b * h));
  CHECK(selective.extra_flops == doctest::Approx(96 * 4 * b * s * s * h));  // QK^T and attention over V
  const RecomputePlan full = plan_recompute(with_recompute("full"), LayerList(96, &layer), 0);
  CHECK(full.kept_bytes == doctest::Approx(96 * 2 * s * b * h));
  CHECK(full.checkpointed_layers == 96);
  CHECK(full.extra_flops == doctest::Approx(96 * layer.forward.flops));  // one more forward per layer
}

TEST_CASE("every:N checkpoints every segment of N layers but the last, as torch checkpoint_sequential") {
  // torch/utils/checkpoint.py, checkpoint_sequential: "All segments except the last will not
  // store the intermediate activations"; the last runs without checkpoint and keeps them.
  const LayerCosts layer = gpt3_layer();
  const LayerActivations& act = layer.activations;
  // 10 layers in segments of 4: layers 0-3 and 4-7 checkpointed, 8-9 kept.
  const RecomputePlan ten = plan_recompute(with_recompute("every:4"), LayerList(10, &layer), 0);
  REQUIRE(ten.segments.size() == 3);
  CHECK(ten.segments[0].policy == LayerPolicy::checkpoint);
  CHECK(ten.segments[1].policy == LayerPolicy::checkpoint);
  CHECK(ten.segments[2].policy == LayerPolicy::keep);
  CHECK(ten.segments[2].first == 8);
  CHECK(ten.segments[2].count == 2);
  CHECK(ten.checkpointed_layers == 8);
  // Two segment inputs and two layers' full activations kept; a recompute re-materialises one
  // segment of 4 layers; 8 layers' forward recomputed.
  CHECK(ten.kept_bytes == doctest::Approx(2 * act.input + 2 * act.total));
  CHECK(ten.transient_bytes == doctest::Approx(4 * act.total - act.input));
  CHECK(ten.extra_flops == doctest::Approx(8 * layer.forward.flops));

  // 8 layers in segments of 4: only the first segment is recomputed, the second keeps all.
  const RecomputePlan eight = plan_recompute(with_recompute("every:4"), LayerList(8, &layer), 0);
  REQUIRE(eight.segments.size() == 2);
  CHECK(eight.checkpointed_layers == 4);
  CHECK(eight.extra_flops == doctest::Approx(4 * layer.forward.flops));
  CHECK(eight.kept_bytes == doctest::Approx(act.input + 4 * act.total));
}

TEST_CASE("uniform:N checkpoints every chunk of N layers, the last too, and block:N the first N layers alone, as Megatron") {
  // Megatron-Core TransformerBlock._checkpointed_forward: "uniform" checkpoints the input of each
  // chunk of recompute_num_layers layers while layers remain; "block" checkpoints the first
  // recompute_num_layers layers one by one and runs the rest normally.
  const LayerCosts layer = gpt3_layer();
  const LayerActivations& act = layer.activations;
  // 10 layers in chunks of 4: 0-3, 4-7 and 8-9, all checkpointed: three chunk inputs kept, the
  // largest chunk (4 layers) re-materialised at once, every layer's forward run twice.
  const RecomputePlan uniform = plan_recompute(with_recompute("uniform:4"), LayerList(10, &layer), 0);
  REQUIRE(uniform.segments.size() == 3);
  CHECK(uniform.segments[2].first == 8);
  CHECK(uniform.segments[2].count == 2);
  CHECK(uniform.segments[2].policy == LayerPolicy::checkpoint);
  CHECK(uniform.strategy == "uniform:4");
  CHECK(uniform.checkpointed_layers == 10);
  CHECK(uniform.kept_bytes == doctest::Approx(3 * act.input));
  CHECK(uniform.transient_bytes == doctest::Approx(4 * act.total - act.input));
  CHECK(uniform.extra_flops == doctest::Approx(10 * layer.forward.flops));
  // block:3 of 10 layers: layers 0, 1, 2 keep their inputs only, the other 7 everything.
  const RecomputePlan block = plan_recompute(with_recompute("block:3"), LayerList(10, &layer), 0);
  REQUIRE(block.segments.size() == 10);
  for (long long l = 0; l < 10; ++l)
    CHECK(block.segments[l].policy == (l < 3 ? LayerPolicy::checkpoint : LayerPolicy::keep));
  CHECK(block.checkpointed_layers == 3);
  CHECK(block.kept_bytes == doctest::Approx(3 * act.input + 7 * act.total));
  CHECK(block.extra_flops == doctest::Approx(3 * layer.forward.flops));
  // More layers than a rank holds: all of them.
  CHECK(plan_recompute(with_recompute("block:12"), LayerList(10, &layer), 0).checkpointed_layers == 10);
  CHECK_THROWS_WITH_AS(with_recompute("uniform:0"), doctest::Contains("uniform:N needs a whole number of layers"), InputError);
  CHECK_THROWS_WITH_AS(with_recompute("block:N"), doctest::Contains("block:N needs a whole number"), InputError);
}

TEST_CASE("nth:N checkpoints every Nth layer and keeps the others, as torchtitan's selective layer option") {
  // torchtitan's apply_ac with selective_ac_option = "2": blocks counted from 1, those whose count
  // is a multiple of 2 wrapped in checkpoint, the others run as they are.
  const LayerCosts layer = gpt3_layer();
  const LayerActivations& act = layer.activations;
  const RecomputePlan plan = plan_recompute(with_recompute("nth:2"), LayerList(5, &layer), 0);
  REQUIRE(plan.segments.size() == 5);
  for (long long l = 0; l < 5; ++l)
    CHECK(plan.segments[l].policy == (l % 2 == 1 ? LayerPolicy::checkpoint : LayerPolicy::keep));
  CHECK(plan.strategy == "nth:2");
  // Layers 1 and 3 keep their input only and recompute their forward; layers 0, 2, 4 keep all.
  CHECK(plan.checkpointed_layers == 2);
  CHECK(plan.kept_bytes == doctest::Approx(2 * act.input + 3 * act.total));
  CHECK(plan.extra_flops == doctest::Approx(2 * layer.forward.flops));
  // nth:1 is full recompute.
  const RecomputePlan every_layer = plan_recompute(with_recompute("nth:1"), LayerList(5, &layer), 0);
  CHECK(every_layer.checkpointed_layers == 5);
}

TEST_CASE("a rank's program recomputes the checkpointed segments of every:N only, and every:N recomputing nothing is refused") {
  // tiny-gpt has 4 layers: every:2 checkpoints layers 0-1; layers 2-3 run as without recompute.
  const Scenario every2 = load_scenario(test::write_temp_file("every2.ini", test::tiny_scenario_ini),
                                        {"memory.recompute=every:2", "training.global_batch=8"});
  const ModelSpec model = load_model(every2.model_file, every2.vocab_multiple);
  const WorkloadBuild build = build_workload(every2, model, 0);
  const ModelCosts costs = compute_costs(model, every2.micro_batch, every2.seq_len, every2.precision,
                                         every2.grad_precision, every2.flash_attention);
  double recomputed = 0;
  for (const Op& op : build.workload.program(0).ops)
    if (op.kind == OpKind::compute && op.phase == Phase::recompute) {
      CHECK((op.name.rfind("L0.", 0) == 0 || op.name.rfind("L1.", 0) == 0));
      recomputed += op.flops;
    }
  REQUIRE(every2.grad_accum == 1);
  CHECK(recomputed == doctest::Approx(2 * costs.layer(0).forward.flops));

  // Segments as long as the model (or a pipeline stage's chunk) would checkpoint nothing.
  const auto refusal = [&](const std::vector<std::string>& overrides) {
    const Scenario scenario = load_scenario(test::write_temp_file("every.ini", test::tiny_scenario_ini), overrides);
    try {
      build_workload(scenario, model, 0);
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  CHECK(refusal({"memory.recompute=every:4"}).find("accepted: every:1 to every:3") != std::string::npos);
  CHECK(refusal({"memory.recompute=every:2", "parallel.pp=2"}).find("has 2 layers; accepted: every:1") != std::string::npos);
}

TEST_CASE("the optimal plan fits its budget and never recomputes more than full recompute") {
  const LayerCosts layer = gpt3_layer();
  const RecomputePlan full = plan_recompute(with_recompute("full"), LayerList(96, &layer), 0);
  const RecomputePlan none = plan_recompute(with_recompute("none"), LayerList(96, &layer), 0);
  for (double fraction : {0.05, 0.2, 0.35, 0.5, 0.8, 1.0}) {
    CAPTURE(fraction);
    const double budget = fraction * none.kept_bytes;
    const RecomputePlan plan = plan_recompute(with_recompute("optimal"), LayerList(96, &layer), budget);
    REQUIRE(plan.fits_budget);
    CHECK(plan.kept_bytes + plan.transient_bytes <= budget);
    CHECK(plan.extra_flops <= full.extra_flops);
    CHECK(plan.checkpointed_layers + plan.selective_layers <= 96);
  }
  // With room for everything, nothing is recomputed.
  const RecomputePlan roomy = plan_recompute(with_recompute("optimal"), LayerList(96, &layer), 2 * none.kept_bytes);
  CHECK(roomy.extra_flops == 0);
  // Selective recompute saves the most memory per recomputed FLOP, so a budget between the
  // selective and the full footprint is met with selective layers first.
  const RecomputePlan selective = plan_recompute(with_recompute("selective"), LayerList(96, &layer), 0);
  // (1% above the selective footprint: the plan rounds memory up to the DP's units.)
  const RecomputePlan middle =
      plan_recompute(with_recompute("optimal"), LayerList(96, &layer), 1.01 * (selective.kept_bytes + selective.transient_bytes));
  CHECK(middle.checkpointed_layers == 0);
  CHECK(middle.extra_flops <= selective.extra_flops);
}

TEST_CASE("an impossible budget falls back to full recompute and says so") {
  const LayerCosts layer = gpt3_layer();
  const RecomputePlan plan = plan_recompute(with_recompute("optimal"), LayerList(96, &layer), 1e6);
  CHECK_FALSE(plan.fits_budget);
  CHECK(plan.checkpointed_layers == 96);
}

TEST_CASE("recompute = op keeps what torchtitan's op-level checkpointing saves in every layer") {
  const LayerCosts layer = gpt3_layer();
  const LayerActivations& act = layer.activations;
  const RecomputePlan op = plan_recompute(with_recompute("op"), LayerList(96, &layer), 0);
  REQUIRE(op.segments.size() == 1);
  CHECK(op.segments[0].policy == LayerPolicy::op);
  CHECK(op.selective_layers == 96);
  CHECK(op.checkpointed_layers == 0);
  CHECK(op.kept_bytes == doctest::Approx(96 * act.op_saved));
  CHECK(op.transient_bytes == doctest::Approx(act.op_rematerialized));
  CHECK(op.extra_flops == doctest::Approx(96 * layer.op_recompute.flops));
  // GPT-3 without FlashAttention: the core is re-run too, so more than selective's FLOPs and less
  // than full's; it keeps less than selective and more than full.
  const RecomputePlan selective = plan_recompute(with_recompute("selective"), LayerList(96, &layer), 0);
  const RecomputePlan full = plan_recompute(with_recompute("full"), LayerList(96, &layer), 0);
  CHECK(op.extra_flops > selective.extra_flops);
  CHECK(op.extra_flops < full.extra_flops);
  CHECK(op.kept_bytes < selective.kept_bytes);
  CHECK(op.kept_bytes > full.kept_bytes);
}

TEST_CASE("a step's recompute FLOPs add every rank's chunks, however the pipeline splits the layers") {
  // Full recompute re-runs each layer's forward once per micro-batch: over a step, the model's
  // layers x one layer's forward x the step's micro-batches (global 32 / micro-batch 2), whether
  // 4 data-parallel ranks hold all 4 layers or 2 pipelines of 2 ranks hold 2 chunks of 1 layer each.
  const Scenario flat = with_recompute("full");
  const ModelSpec model = load_model(flat.model_file, flat.vocab_multiple);
  const double layer_forward =
      compute_costs(model, 2, 512, flat.precision, flat.grad_precision, flat.flash_attention).layer(0).forward.flops;
  const double expected = 4 * layer_forward * 32 / 2;
  const WorkloadBuild without_pipeline = build_workload(flat, model, 0);
  CHECK(without_pipeline.recompute_flops * static_cast<double>(flat.grad_accum) == doctest::Approx(expected));
  const Scenario piped = load_scenario(test::write_temp_file("recompute.ini", test::tiny_scenario_ini),
                                       {"memory.recompute=full", "memory.flash_attention=false", "parallel.dp=2",
                                        "parallel.pp=2", "parallel.vpp=2"});
  const WorkloadBuild pipeline = build_workload(piped, model, 0);
  CHECK(pipeline.recompute.extra_flops == doctest::Approx(layer_forward));  // the first chunk's one layer
  CHECK(pipeline.recompute_flops * static_cast<double>(piped.grad_accum) == doctest::Approx(expected));
}
