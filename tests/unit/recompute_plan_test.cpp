#include <doctest/doctest.h>

#include "program/recompute_plan.hpp"
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
  return compute_costs(model, 1, 2048, Precision::bf16, Precision::fp32, false).layer;
}

} // namespace

TEST_CASE("fixed strategies keep what Korthikanti et al. Table 2 says and recompute accordingly") {
  const LayerCosts layer = gpt3_layer();
  const double s = 2048, b = 1, h = 12288, a = 96;
  const RecomputePlan none = plan_recompute(with_recompute("none"), 96, layer, 0);
  CHECK(none.kept_bytes == doctest::Approx(96 * s * b * h * (34 + 5 * a * s / h)));
  CHECK(none.extra_flops == 0);
  const RecomputePlan selective = plan_recompute(with_recompute("selective"), 96, layer, 0);
  CHECK(selective.kept_bytes == doctest::Approx(96 * 34 * s * b * h));
  CHECK(selective.extra_flops == doctest::Approx(96 * 4 * b * s * s * h));  // QK^T and attention over V
  const RecomputePlan full = plan_recompute(with_recompute("full"), 96, layer, 0);
  CHECK(full.kept_bytes == doctest::Approx(96 * 2 * s * b * h));
  CHECK(full.checkpointed_layers == 96);
  CHECK(full.extra_flops == doctest::Approx(96 * layer.forward.flops));  // one more forward per layer
}

TEST_CASE("every:N keeps one input per segment and re-materialises a whole segment") {
  const LayerCosts layer = gpt3_layer();
  const RecomputePlan plan = plan_recompute(with_recompute("every:4"), 10, layer, 0);
  REQUIRE(plan.segments.size() == 3);  // 4 + 4 + 2 layers, like torch checkpoint_sequential
  CHECK(plan.segments[2].count == 2);
  CHECK(plan.kept_bytes == doctest::Approx(3 * layer.activations.input));
  CHECK(plan.transient_bytes == doctest::Approx(4 * layer.activations.total - layer.activations.input));
  CHECK(plan.extra_flops == doctest::Approx(10 * layer.forward.flops));
}

TEST_CASE("the optimal plan fits its budget and never recomputes more than full recompute") {
  const LayerCosts layer = gpt3_layer();
  const RecomputePlan full = plan_recompute(with_recompute("full"), 96, layer, 0);
  const RecomputePlan none = plan_recompute(with_recompute("none"), 96, layer, 0);
  for (double fraction : {0.05, 0.2, 0.35, 0.5, 0.8, 1.0}) {
    CAPTURE(fraction);
    const double budget = fraction * none.kept_bytes;
    const RecomputePlan plan = plan_recompute(with_recompute("optimal"), 96, layer, budget);
    REQUIRE(plan.fits_budget);
    CHECK(plan.kept_bytes + plan.transient_bytes <= budget);
    CHECK(plan.extra_flops <= full.extra_flops);
    CHECK(plan.checkpointed_layers + plan.selective_layers <= 96);
  }
  // With room for everything, nothing is recomputed.
  const RecomputePlan roomy = plan_recompute(with_recompute("optimal"), 96, layer, 2 * none.kept_bytes);
  CHECK(roomy.extra_flops == 0);
  // Selective recompute saves the most memory per recomputed FLOP, so a budget between the
  // selective and the full footprint is met with selective layers first.
  const RecomputePlan selective = plan_recompute(with_recompute("selective"), 96, layer, 0);
  // (1% above the selective footprint: the plan rounds memory up to the DP's units.)
  const RecomputePlan middle =
      plan_recompute(with_recompute("optimal"), 96, layer, 1.01 * (selective.kept_bytes + selective.transient_bytes));
  CHECK(middle.checkpointed_layers == 0);
  CHECK(middle.extra_flops <= selective.extra_flops);
}

TEST_CASE("an impossible budget falls back to full recompute and says so") {
  const LayerCosts layer = gpt3_layer();
  const RecomputePlan plan = plan_recompute(with_recompute("optimal"), 96, layer, 1e6);
  CHECK_FALSE(plan.fits_budget);
  CHECK(plan.checkpointed_layers == 96);
}
