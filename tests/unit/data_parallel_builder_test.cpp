#include <doctest/doctest.h>

#include <numeric>

#include "common/error.hpp"
#include "memory/ledger.hpp"
#include "model/costs.hpp"
#include "program/data_parallel_builder.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {

// The shared tiny scenario with one micro-batch of 256 tokens per rank.
Scenario tiny_scenario(const std::vector<std::string>& overrides = {}) {
  std::vector<std::string> all = {"training.seq_len=256", "training.global_batch=8"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return load_scenario(test::write_temp_file("ddp.ini", test::tiny_scenario_ini), all);
}

ModelSpec tiny_model(const Scenario& scenario) { return load_model(scenario.model_file, scenario.vocab_multiple); }

double model_state_bytes(const RankMemory& memory) {
  const auto& p = memory.persistent_gpu;
  return p[static_cast<int>(MemCategory::weights)] + p[static_cast<int>(MemCategory::gradients)] +
         p[static_cast<int>(MemCategory::optimizer)];
}

std::vector<const Op*> ops_of_kind(const Program& program, OpKind kind) {
  std::vector<const Op*> found;
  for (const Op& op : program.ops)
    if (op.kind == kind)
      found.push_back(&op);
  return found;
}

} // namespace

TEST_CASE("DDP model states are 16 bytes per parameter with 16-bit gradients, 18 with fp32 gradients") {
  // ZeRO (Rajbhandari et al. 2020, section 3.1): 2 + 2 + 12 bytes per parameter for mixed-precision Adam;
  // Megatron-LM keeps fp32 gradients for bf16: 2 + 4 + 12 = 18 (REFERENCES.md).
  const Scenario fp16 = tiny_scenario({"memory.precision=fp16"});
  const ModelSpec model = tiny_model(fp16);
  const double parameters = static_cast<double>(count_parameters(model).total);
  const Workload fp16_work = build_data_parallel_workload(fp16, model, 0).workload;
  CHECK(model_state_bytes(memory_in_program_order(fp16_work.program(0))) == 16 * parameters);

  const Scenario bf16 = tiny_scenario({"memory.precision=bf16"});
  CHECK(model_state_bytes(memory_in_program_order(build_data_parallel_workload(bf16, model, 0).workload.program(0))) == 18 * parameters);

  // fp32 training: 4 (weights) + 4 (gradients) + 8 (momentum, variance) = 16, Megatron's table.
  const Scenario fp32 = tiny_scenario({"memory.precision=fp32"});
  CHECK(model_state_bytes(memory_in_program_order(build_data_parallel_workload(fp32, model, 0).workload.program(0))) == 16 * parameters);
}

TEST_CASE("the peak is model states plus one micro-batch of activations at the end of its forward") {
  const Scenario scenario = tiny_scenario();
  const ModelSpec model = tiny_model(scenario);
  const ModelCosts costs = compute_costs(model, 2, 256, Precision::bf16, Precision::fp32, true);
  const RankMemory memory = memory_in_program_order(build_data_parallel_workload(scenario, model, 0).workload.program(0));
  // Forward keeps every layer's activations, the embedding dropout mask and the head's inputs and
  // fp32 logits; backward then adds the activation-gradient buffer before the head frees its logits.
  const double expected = model_state_bytes(memory) + 4 * costs.layer.activations.total + costs.embedding_activations +
                          costs.head_activations + costs.activation_gradient_buffer;
  CHECK(memory.gpu().peak == doctest::Approx(expected));
  CHECK(memory.gpu().at_peak[static_cast<int>(MemCategory::activations)] ==
        doctest::Approx(4 * costs.layer.activations.total + costs.embedding_activations + costs.head_activations));
}

TEST_CASE("full recompute keeps only 2sbh per layer and re-runs each layer's forward in backward") {
  const Scenario scenario = tiny_scenario({"memory.recompute=full"});
  const ModelSpec model = tiny_model(scenario);
  const Workload workload = build_data_parallel_workload(scenario, model, 0).workload;
  const Program& program = workload.program(0);
  const double sbh = 256.0 * 2 * 256;
  double kept_after_forward = 0;
  for (const Op& op : program.ops) {
    if (op.name == "head.fwd.mb0")
      break;
    if (op.kind == OpKind::alloc && op.category == MemCategory::activations)
      kept_after_forward += op.bytes;
  }
  // Four 2sbh layer inputs, the embedding's dropout mask (sbh bytes at 1 byte) and the head's inputs.
  const ModelCosts costs = compute_costs(model, 2, 256, Precision::bf16, Precision::fp32, true);
  CHECK(kept_after_forward == doctest::Approx(4 * 2 * sbh + sbh + costs.head_activations));
  long recomputes = 0;
  for (const Op* op : ops_of_kind(program, OpKind::compute))
    recomputes += op->name.find(".recompute") != std::string::npos;
  CHECK(recomputes == 4 /* layers */ * 1 /* micro-batch per rank */);
}

TEST_CASE("gradients are all-reduced in buckets once per step, after the last micro-batch's backward starts") {
  const Scenario scenario = tiny_scenario({"training.global_batch=32", "comm.bucket_size=1MB"});
  REQUIRE(scenario.grad_accum == 4);
  const ModelSpec model = tiny_model(scenario);
  const Workload workload = build_data_parallel_workload(scenario, model, 0).workload;
  const Program& program = workload.program(0);
  const auto collectives = ops_of_kind(program, OpKind::collective);
  REQUIRE(collectives.size() >= 2);
  const double gradient_bytes = 4.0 * static_cast<double>(count_parameters(model).total);  // fp32 gradients
  double reduced = 0;
  for (const Op* op : collectives) {
    CHECK(op->stream == Stream::dp_comm);
    CHECK(op->collective == Collective::all_reduce);
    reduced += op->bytes;
    // Each bucket waits for the backward op that completed it, which belongs to the last micro-batch.
    REQUIRE(op->deps.size() == 1);
    CHECK(program.ops[op->deps[0]].name.find(".mb3") != std::string::npos);
  }
  CHECK(reduced == doctest::Approx(gradient_bytes));
  // The optimizer step is last and waits for every bucket.
  CHECK(program.ops.back().name == "optimizer.step");
  CHECK(program.ops.back().deps.size() == collectives.size());
}

TEST_CASE("a single replica has no all-reduce") {
  const Scenario scenario = tiny_scenario({"parallel.dp=1", "training.global_batch=2"});
  const Workload workload = build_data_parallel_workload(scenario, tiny_model(scenario), 0).workload;
  CHECK(ops_of_kind(workload.program(0), OpKind::collective).empty());
}

TEST_CASE("every activation allocated in a step is freed in it") {
  for (const char* recompute : {"none", "selective", "full"}) {
    CAPTURE(recompute);
    const Scenario scenario = tiny_scenario({std::string("memory.recompute=") + recompute, "memory.flash_attention=false"});
    const RankMemory memory = memory_in_program_order(build_data_parallel_workload(scenario, tiny_model(scenario), 0).workload.program(0));
    CHECK(memory.persistent_gpu[static_cast<int>(MemCategory::activations)] == 0);
    CHECK(memory.persistent_gpu[static_cast<int>(MemCategory::buffers)] == 0);
  }
}

TEST_CASE("sequences longer than learned positions are refused") {
  const Scenario scenario = tiny_scenario({"training.seq_len=4096"});
  CHECK_THROWS_AS(build_data_parallel_workload(scenario, tiny_model(scenario), 0), InputError);
}
