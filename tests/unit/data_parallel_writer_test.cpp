#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "common/error.hpp"
#include "common/text.hpp"
#include "memory/memory_tracker.hpp"
#include "model/costs.hpp"
#include "program/collective_plan.hpp"
#include "program/program_writer.hpp"
#include "program/workload_builder.hpp"
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
  const Workload fp16_work = build_workload(fp16, model, 0).workload;
  CHECK(model_state_bytes(memory_in_program_order(fp16_work.program(0))) == 16 * parameters);

  const Scenario bf16 = tiny_scenario({"memory.precision=bf16"});
  CHECK(model_state_bytes(memory_in_program_order(build_workload(bf16, model, 0).workload.program(0))) == 18 * parameters);

  // fp32 training: 4 (weights) + 4 (gradients) + 8 (momentum, variance) = 16, Megatron's table.
  const Scenario fp32 = tiny_scenario({"memory.precision=fp32"});
  CHECK(model_state_bytes(memory_in_program_order(build_workload(fp32, model, 0).workload.program(0))) == 16 * parameters);
}

TEST_CASE("the peak is model states plus one micro-batch of activations at the end of its forward") {
  const Scenario scenario = tiny_scenario();
  const ModelSpec model = tiny_model(scenario);
  const ModelCosts costs = compute_costs(model, 2, 256, Precision::bf16, Precision::fp32, true);
  const RankMemory memory = memory_in_program_order(build_workload(scenario, model, 0).workload.program(0));
  // Forward keeps every layer's activations, the embedding dropout mask and the head's inputs and
  // fp32 logits; backward then adds the activation-gradient buffer before the head frees its logits.
  // Beside them from the start: the CUDA context (512 MiB) and NCCL's buffers for the one
  // communicator of dp = 4, 16 channels x (4 MiB Simple + 512 KiB LL + 4,915,200 B LL128).
  const double context = 512.0 * 1024 * 1024, nccl = 16 * (4194304.0 + 524288 + 4915200);
  const double expected = context + nccl + model_state_bytes(memory) + 4 * costs.layer(0).activations.total +
                          costs.embedding_activations + costs.head_activations + costs.activation_gradient_buffer;
  CHECK(memory.gpu().peak == doctest::Approx(expected));
  CHECK(memory.gpu().at_peak[static_cast<int>(MemCategory::activations)] ==
        doctest::Approx(4 * costs.layer(0).activations.total + costs.embedding_activations + costs.head_activations));
  CHECK(memory.gpu().at_peak[static_cast<int>(MemCategory::cuda_context)] == context);
  CHECK(memory.gpu().at_peak[static_cast<int>(MemCategory::nccl_buffers)] == nccl);
  // The caching allocator's reserve, fragmentation 0.15 of what it reserves: 0.15 / 0.85 of the
  // tensors, which are all but the context and NCCL's buffers.
  CHECK(memory.reserve == doctest::Approx((expected - context - nccl) * 0.15 / 0.85));
}

TEST_CASE("full recompute keeps only 2sbh per layer and re-runs each layer's forward in backward") {
  const Scenario scenario = tiny_scenario({"memory.recompute=full"});
  const ModelSpec model = tiny_model(scenario);
  const Workload workload = build_workload(scenario, model, 0).workload;
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
  const Workload workload = build_workload(scenario, model, 0).workload;
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

TEST_CASE("op-level recompute keeps op_saved per layer and re-materialises the rest before each layer's backward") {
  const Scenario scenario = tiny_scenario({"memory.recompute=op"});
  const ModelSpec model = tiny_model(scenario);
  const Workload workload = build_workload(scenario, model, 0).workload;  // the program lives in it
  const Program& program = workload.program(0);
  const ModelCosts costs = compute_costs(model, 2, 256, Precision::bf16, Precision::fp32, true);
  const LayerActivations& act = costs.layer(0).activations;
  std::vector<double> kept, rematerialized;
  for (std::size_t i = 0; i < program.ops.size(); ++i) {
    const Op& op = program.ops[i];
    if (op.kind == OpKind::alloc && op.tensor.front() == 'L' && op.tensor.find(".act.") != std::string::npos)
      kept.push_back(op.bytes);  // a layer's, not the embedding's or the head's
    if (op.kind == OpKind::alloc && op.tensor.find(".ops.") != std::string::npos) {
      rematerialized.push_back(op.bytes);
      // The recompute follows its tensor, as a recompute-phase op of the layer's forward work.
      const Op& recompute = program.ops.at(i + 1);
      CHECK(recompute.phase == Phase::recompute);
      CHECK(recompute.flops == doctest::Approx(costs.layer(0).op_recompute.flops));
    }
  }
  CHECK(kept == std::vector<double>(4, act.op_saved));
  CHECK(rematerialized == std::vector<double>(4, act.op_rematerialized));
}

TEST_CASE("a single replica has no all-reduce") {
  const Scenario scenario = tiny_scenario({"parallel.dp=1", "training.global_batch=2"});
  const Workload workload = build_workload(scenario, tiny_model(scenario), 0).workload;
  CHECK(ops_of_kind(workload.program(0), OpKind::collective).empty());
}

TEST_CASE("every activation allocated in a step is freed in it") {
  for (const char* recompute : {"none", "selective", "full"}) {
    CAPTURE(recompute);
    const Scenario scenario = tiny_scenario({std::string("memory.recompute=") + recompute, "memory.flash_attention=false"});
    const RankMemory memory = memory_in_program_order(build_workload(scenario, tiny_model(scenario), 0).workload.program(0));
    CHECK(memory.persistent_gpu[static_cast<int>(MemCategory::activations)] == 0);
    CHECK(memory.persistent_gpu[static_cast<int>(MemCategory::buffers)] == 0);
  }
}

TEST_CASE("sequences longer than learned positions are refused") {
  const Scenario scenario = tiny_scenario({"training.seq_len=4096"});
  CHECK_THROWS_AS(build_workload(scenario, tiny_model(scenario), 0), InputError);
}

namespace {

// The ZeRO tests use tiny-llama: untied embeddings, and every parameter group divides by 64
// (3,295,488 parameters; layers of 692,736; embedding and output layer of 262,144; final norm 256).
Scenario zero_scenario(int stage, int dp, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> overrides = {"model.name=tiny-llama",   "memory.precision=fp16",
                                        "training.seq_len=128",    "training.micro_batch=1",
                                        "parallel.dp=" + std::to_string(dp), "training.global_batch=" + std::to_string(dp),
                                        "memory.zero=" + std::to_string(stage)};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return load_scenario(test::write_temp_file("zero.ini", test::tiny_scenario_ini), overrides);
}

double bytes_sent(const Workload& workload) {
  double sent = 0;
  for (const Op& op : workload.program(0).ops)
    if (op.kind == OpKind::collective)
      sent += bytes_sent_per_rank(op.collective, op.bytes, static_cast<int>(workload.groups[workload.group_of(0, op.group)].ranks.size()));
  return sent;
}

// The most tensors whose name contains `part` that are allocated at once, in program order.
int most_live(const Program& program, const std::string& part) {
  int live = 0, most = 0;
  for (const Op& op : program.ops) {
    if (op.tensor.find(part) == std::string::npos)
      continue;
    live += op.kind == OpKind::alloc ? 1 : op.kind == OpKind::free ? -1 : 0;
    most = std::max(most, live);
  }
  return most;
}

} // namespace

TEST_CASE("model states per rank follow the ZeRO formulas for every stage") {
  // Rajbhandari et al. 2020, section 5 (REFERENCES.md), with K = 12 and 16-bit gradients:
  // DDP 16 Psi, ZeRO-1 4 Psi + 12 Psi / N, ZeRO-2 2 Psi + 14 Psi / N, ZeRO-3 16 Psi / N.
  const double psi = 3'295'488, n = 64;
  const std::vector<double> expected = {16 * psi, 4 * psi + 12 * psi / n, 2 * psi + 14 * psi / n, 16 * psi / n};
  for (int stage = 0; stage <= 3; ++stage) {
    CAPTURE(stage);
    const Scenario scenario = zero_scenario(stage, 64);
    const ModelSpec model = tiny_model(scenario);
    REQUIRE(count_parameters(model).total == psi);
    const RankMemory memory = memory_in_program_order(build_workload(scenario, model, 0).workload.program(0));
    CHECK(model_state_bytes(memory) == doctest::Approx(expected[stage]).epsilon(1e-12));
    // The paper's worked example: the same bytes per parameter for 7.5e9 parameters at N = 64
    // give 120, 31.4, 16.6 and 1.9 GB.
    const double paper[] = {120, 31.4, 16.6, 1.9};
    CHECK(model_state_bytes(memory) / psi * 7.5e9 / 1e9 == doctest::Approx(paper[stage]).epsilon(0.02));
  }
}

TEST_CASE("bytes per parameter follow the Megatron-LM table for each precision") {
  // Megatron-LM distributed optimizer documentation (REFERENCES.md): replicated 20 / 18 / 16 for
  // fp16 params and grads (plus fp32 main grads in the optimizer), bf16 with fp32 grads, fp32;
  // distributed (ZeRO-1) 4+16/d, 6+12/d, 8+8/d.
  const double psi = 3'295'488, d = 8;
  struct Row {
    const char* precision;
    double replicated, distributed;
  };
  for (const Row& row : {Row{"fp16", 20, 4 + 16 / d}, Row{"bf16", 18, 6 + 12 / d}, Row{"fp32", 16, 8 + 8 / d}}) {
    CAPTURE(row.precision);
    for (int stage : {0, 1}) {
      // The copy exists for 16-bit gradients only (fp16 here; bf16 and fp32 training reduce fp32 ones).
      std::vector<std::string> settings = {std::string("memory.precision=") + row.precision};
      if (std::string(row.precision) == "fp16")
        settings.push_back("memory.fp32_grad_copy=true");
      const Scenario scenario = zero_scenario(stage, 8, settings);
      const RankMemory memory =
          memory_in_program_order(build_workload(scenario, tiny_model(scenario), 0).workload.program(0));
      const double megatron = stage == 0 ? row.replicated : row.distributed;
      CHECK(model_state_bytes(memory) / psi == doctest::Approx(megatron).epsilon(1e-9));
    }
  }
}

TEST_CASE("communication per step is 2 Psi elements for DDP, ZeRO-1 and ZeRO-2 and 3 Psi for ZeRO-3") {
  // Rajbhandari et al. 2020, section 7: all-reduce = reduce-scatter + all-gather, each Psi elements
  // (times (N-1)/N on a ring); ZeRO-3 all-gathers the parameters in forward and again in backward.
  const double psi = 3'295'488, n = 64, ring = (n - 1) / n;
  for (int stage = 0; stage <= 3; ++stage) {
    CAPTURE(stage);
    const Scenario scenario = zero_scenario(stage, 64);
    const Workload workload = build_workload(scenario, tiny_model(scenario), 0).workload;
    const double elements = stage == 3 ? 3 * psi : 2 * psi;
    CHECK(bytes_sent(workload) == doctest::Approx(2.0 /* fp16 */ * elements * ring).epsilon(1e-12));
  }
}

TEST_CASE("ZeRO-3 keeps prefetch_depth + 1 gathered layers and ZeRO-2 two gradient buckets") {
  for (int depth : {0, 1, 3}) {
    CAPTURE(depth);
    const Scenario scenario = zero_scenario(3, 8, {"memory.prefetch_depth=" + std::to_string(depth)});
    const Workload workload = build_workload(scenario, tiny_model(scenario), 0).workload;
    CHECK(most_live(workload.program(0), ".params.") == depth + 1);
  }
  const Scenario zero2 = zero_scenario(2, 8, {"comm.bucket_size=400KB"});
  const Workload workload = build_workload(zero2, tiny_model(zero2), 0).workload;
  CHECK(most_live(workload.program(0), "grad-bucket") == 2);
  double biggest = 0;
  for (const Op& op : workload.program(0).ops)
    if (op.kind == OpKind::alloc && op.tensor.find("grad-bucket") != std::string::npos)
      biggest = std::max(biggest, op.bytes);
  CHECK(biggest == 400e3);
}

TEST_CASE("ZeRO-2/3 reduce every micro-batch by default, and last-only accumulates full gradients first") {
  const Scenario every = zero_scenario(2, 8, {"training.global_batch=32"});  // 4 micro-batches
  const Workload reduce_every = build_workload(every, tiny_model(every), 0).workload;
  const Scenario last = zero_scenario(2, 8, {"training.global_batch=32", "comm.grad_sync=last"});
  const Workload reduce_last = build_workload(last, tiny_model(last), 0).workload;
  // Every: four reduce-scatters of the gradients and one all-gather of the parameters; last: one
  // of each. All fp16, so 5 : 2.
  CHECK(bytes_sent(reduce_every) == doctest::Approx(2.5 * bytes_sent(reduce_last)));
  const RankMemory memory = memory_in_program_order(reduce_last.program(0));
  // The unsharded accumulator: a full fp16 gradient on top of the shard.
  CHECK(memory.gpu().at_peak[static_cast<int>(MemCategory::gradients)] >= 2.0 * 3'295'488);
}

TEST_CASE("ZeRO-3 memory matches DeepSpeed's estimator: 18 Psi / N + 4 Lambda") {
  // DeepSpeed estimate_zero3_model_states_mem_needs (REFERENCES.md): t5-large, Psi = 737.67M,
  // largest layer Lambda = 32.90M (its 32128 x 1024 embedding), 4 GPUs, nothing offloaded:
  // 3291 MiB. A GPT-style model of that embedding and 56 layers has Psi = 738.8M; with bf16 and
  // fp32 gradients (2 + 4 + 12 = 18 bytes), no prefetch, gradient buckets of one embedding in
  // 16-bit, and a one-token micro-batch, trainsim's peak is the states plus the gathered
  // embedding and its gradient bucket: DeepSpeed's 4 Lambda. trainsim also double-buffers the
  // reduce bucket (the previous bucket is still being reduced while the next fills, as DeepSpeed's
  // overlap_comm does), which the estimator leaves out: one more bucket of 2 Lambda.
  const std::string config = R"({"model_type": "gpt2", "n_embd": 1024, "n_layer": 56, "n_head": 16,
                                 "n_positions": 512, "vocab_size": 32128})";
  const ModelSpec model = parse_model(config, "t5-large-like.json", "t5-large-like", 1);
  const double psi = static_cast<double>(count_parameters(model).total);
  const double lambda = 32128.0 * 1024;
  CHECK(psi == doctest::Approx(737.67e6).epsilon(0.002));
  const Scenario scenario = load_scenario(
      test::write_temp_file("deepspeed.ini", test::tiny_scenario_ini),
      {"parallel.dp=4", "training.global_batch=4", "training.micro_batch=1", "training.seq_len=1", "memory.zero=3",
       "memory.prefetch_depth=0", "memory.precision=bf16", "training.framework=deepspeed",
       "comm.bucket_size=" + format_double(2 * lambda) + "B"});
  const RankMemory memory =
      memory_in_program_order(build_workload(scenario, model, 0).workload.program(0));
  const double mib = 1024.0 * 1024;
  // The estimator counts tensors: the CUDA context and NCCL's buffers, outside the allocator, are not.
  CHECK(allocator_bytes(memory.gpu().at_peak) / mib == doctest::Approx(3291 + 2 * lambda / mib).epsilon(0.005));
}

TEST_CASE("gradient buckets are cut from the backward's bytes: a layer larger than a bucket fills several") {
  // tiny-llama in fp16 (2-byte gradients): 3,295,488 parameters = 6,590,976 bytes. In backward
  // order: the output layer and final norm (262,400 parameters, 524,800 bytes), four layers of
  // 1,385,472 bytes, the embedding (524,288 bytes). 1 MB buckets: six of 1e6 bytes and a last one
  // of 590,976. The first fills during layer 3's backward; layer 2 (bytes 1,910,272 to 3,295,744)
  // completes buckets 1 and 2.
  const Scenario scenario = zero_scenario(0, 8, {"comm.bucket_size=1MB"});
  const Program program = build_workload(scenario, tiny_model(scenario), 0).workload.program(0);
  std::vector<const Op*> reductions;
  for (const Op* op : ops_of_kind(program, OpKind::collective))
    if (op->name.find("grad-allreduce") != std::string::npos)
      reductions.push_back(op);
  REQUIRE(reductions.size() == 7);
  for (std::size_t b = 0; b < 6; ++b)
    CHECK(reductions[b]->bytes == 1e6);
  CHECK(reductions[6]->bytes == 590'976);
  const auto producer = [&](const Op* op) { return program.ops[op->deps.front()].name; };
  CHECK(producer(reductions[0]).find("L3.bwd") == 0);
  CHECK(producer(reductions[1]).find("L2.bwd") == 0);
  CHECK(producer(reductions[2]).find("L2.bwd") == 0);
  CHECK(producer(reductions[6]).find("embedding.bwd") == 0);
  // A bucket larger than the whole backward is one reduction after it.
  const Scenario one = zero_scenario(0, 8, {"comm.bucket_size=1GB"});
  const Program whole = build_workload(one, tiny_model(one), 0).workload.program(0);
  std::vector<double> sizes;
  for (const Op* op : ops_of_kind(whole, OpKind::collective))
    sizes.push_back(op->bytes);
  CHECK(sizes == std::vector<double>{6'590'976});
}

TEST_CASE("ZeRO-2 reduces each bucket out of a buffer of that bucket's size") {
  // The same 6,590,976 bytes in 1 MB buckets: every reduce-scatter moves a whole bucket buffer,
  // so the buffers are the size of what is in flight, never smaller.
  const Scenario scenario = zero_scenario(2, 8, {"comm.bucket_size=1MB"});
  const Program program = build_workload(scenario, tiny_model(scenario), 0).workload.program(0);
  std::vector<double> buffers, reduced;
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::alloc && op.tensor.find("grad-bucket") != std::string::npos)
      buffers.push_back(op.bytes);
    if (op.kind == OpKind::collective && op.name.find("grad-reducescatter") != std::string::npos)
      reduced.push_back(op.bytes);
  }
  CHECK(reduced == std::vector<double>{1e6, 1e6, 1e6, 1e6, 1e6, 1e6, 590'976});
  CHECK(buffers == reduced);
  CHECK(most_live(program, "grad-bucket") == 2);
}

TEST_CASE("the default bucket is PyTorch DDP's 25 MiB without ZeRO and DeepSpeed's 5e8 elements with it") {
  CHECK(zero_scenario(0, 8).bucket_bytes == 25.0 * 1024 * 1024);
  // fp16 gradients: 2 bytes per element; bf16 training keeps fp32 gradients: 4.
  CHECK(zero_scenario(2, 8).bucket_bytes == 1e9);
  CHECK(zero_scenario(1, 8, {"memory.precision=bf16"}).bucket_bytes == 2e9);
}

TEST_CASE("overlapped parameter all-gathers run from the step's start, each forward piece waiting for its bucket") {
  // Buckets are cut in backward order (as gradients fill them): 120 parameters in buckets of 50
  // are [0, 50), [50, 100) and [100, 120) from the end of the forward, so the forward gathers 20,
  // 50, 50. Pieces of 10, 30, 30, 30, 20 end 110, 80, 50, 20 and 0 parameters before the end of the
  // model: in backward buckets 2, 1, 1, 0, 0, which the forward gathers 0th, 1st, 1st, 2nd, 2nd.
  const ParameterGatherPlan plan = plan_parameter_gathers({10, 30, 30, 30, 20}, 50);
  CHECK(plan.bucket_parameters == std::vector<double>{20, 50, 50});
  CHECK(plan.waits_for == std::vector<std::size_t>{0, 1, 1, 2, 2});
  CHECK(plan_parameter_gathers({10, 30}, 1e300).waits_for == std::vector<std::size_t>{0, 0});
  // 0.1 + 0.2 is 0.30000000000000004 in doubles: three buckets of 0.1, not a fourth of the residue.
  CHECK(plan_parameter_gathers({0.1, 0.2}, 0.1).bucket_parameters.size() == 3);
  CHECK(plan_parameter_gathers({0.1, 0.2}, 0.1).waits_for == std::vector<std::size_t>{0, 2});
  CHECK(plan_parameter_gathers({0, 0}, 10).bucket_parameters.empty());

  // tiny-llama in fp16 (2-byte parameters and gradients), 1 MB buckets = 500,000 parameters. In
  // forward order: the embedding (262,144 parameters), four layers of 692,736, the head (262,400);
  // 3,295,488 in all. Backward buckets: six of 500,000, then 295,488, gathered last first. The
  // pieces end 3,033,344, 2,340,608, 1,647,872, 955,136, 262,400 and 0 parameters before the
  // model's end: backward buckets 6, 4, 3, 1, 0, 0, gathered 0th, 2nd, 3rd, 5th, 6th, 6th.
  const std::vector<std::string> megatron = {"training.framework=megatron", "comm.overlap_grad_reduce=true",
                                             "comm.bucket_size=1MB"};
  std::vector<std::string> overlapped = megatron;
  overlapped.push_back("comm.overlap_param_gather=true");
  const Scenario scenario = zero_scenario(1, 8, overlapped);
  const Program program = build_workload(scenario, tiny_model(scenario), 0).workload.program(0);
  std::vector<OpId> gathers;
  std::vector<double> bytes;
  for (OpId id = 0; id < program.ops.size(); ++id)
    if (program.ops[id].name.find("param-allgather") == 0) {
      gathers.push_back(id);
      bytes.push_back(program.ops[id].bytes);
      CHECK(program.ops[id].deps.empty());
    }
  CHECK(bytes == std::vector<double>{590'976, 1e6, 1e6, 1e6, 1e6, 1e6, 1e6});
  const auto waits_for = [&](const std::string& name) {
    for (const Op& op : program.ops)
      if (op.name == name)
        for (std::size_t b = 0; b < gathers.size(); ++b)
          if (std::find(op.deps.begin(), op.deps.end(), gathers[b]) != op.deps.end())
            return static_cast<int>(b);
    return -1;
  };
  CHECK(waits_for("embedding.fwd.mb0") == 0);
  CHECK(waits_for("L0.fwd.mb0") == 2);
  CHECK(waits_for("L1.fwd.mb0") == 3);
  CHECK(waits_for("L2.fwd.mb0") == 5);
  CHECK(waits_for("L3.fwd.mb0") == 6);
  CHECK(waits_for("head.fwd.mb0") == 6);
  for (const OpId gather : gathers)  // issued before the first kernel
    for (OpId id = 0; id < gather; ++id)
      CHECK(program.ops[id].kind != OpKind::compute);

  // Without the overlap the same buckets are gathered after the optimizer step, last bucket first.
  const Scenario blocking = zero_scenario(1, 8, megatron);
  const Program after_step = build_workload(blocking, tiny_model(blocking), 0).workload.program(0);
  std::vector<double> after;
  bool stepped = false;
  for (const Op& op : after_step.ops) {
    stepped = stepped || op.name == "optimizer.step";
    if (op.name.find("param-allgather") == 0) {
      CHECK(stepped);
      after.push_back(op.bytes);
    }
  }
  CHECK(after == std::vector<double>{1e6, 1e6, 1e6, 1e6, 1e6, 1e6, 590'976});
}
