#include <doctest/doctest.h>

#include "common/error.hpp"
#include "config/scenario.hpp"
#include "memory/memory_tracker.hpp"
#include "model/model.hpp"
#include "program/runtime_memory.hpp"
#include "program/workload_builder.hpp"
#include "report/metrics.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {

Scenario scenario_with(const std::vector<std::string>& overrides) {
  return load_scenario(test::write_temp_file("runtime.ini", test::tiny_scenario_ini), overrides);
}

std::string error_of(const std::vector<std::string>& overrides) {
  try {
    scenario_with(overrides);
  } catch (const InputError& error) {
    return error.what();
  }
  FAIL("the scenario was accepted");
  return "";
}

// What rank `rank`'s program holds at its peak in `category`.
double held(const WorkloadBuild& build, int rank, MemCategory category) {
  return memory_in_program_order(build.workload.program(static_cast<std::size_t>(rank))).gpu().at_peak[static_cast<int>(category)];
}

// NCCL's default buffers of one ring connection, from NCCL's src/init.cc and device.h: Simple
// 1 << 22 bytes; LL 8 lines per thread x 512 threads x 8 steps x 16 bytes; LL128 120 elements per
// thread x 640 threads x 8 steps x 8 bytes. 16 channels per communicator.
constexpr double connection = 4194304.0 + 8 * 512 * 8 * 16 + 120 * 640 * 8 * 8;  // 9,633,792 bytes
constexpr double communicator = 16 * connection;                                     // 154,140,672 bytes

Op alloc(const std::string& tensor, MemCategory category, double bytes) {
  Op op;
  op.kind = OpKind::alloc;
  op.tensor = tensor;
  op.category = category;
  op.bytes = bytes;
  return op;
}

} // namespace

TEST_CASE("NCCL's buffers count the rank's communicators and the pipeline neighbours it talks to") {
  CHECK(nccl_communicator_bytes == communicator);
  CHECK(communicator == 154'140'672);
  // dp = 2, tp = 2, pp = 2 with tiny-gpt, whose embedding is tied: stage 0 is in a dp group, a tp
  // group and the embedding's group with the last stage, and sends to stage 1: 4 connections;
  // stage 1 likewise (dp, tp, embedding, receives from stage 0).
  const Scenario pipeline = scenario_with({"parallel.dp=2", "parallel.tp=2", "parallel.pp=2", "training.global_batch=16"});
  const ModelSpec model = load_model(pipeline.model_file, pipeline.vocab_multiple);
  const WorkloadBuild build = build_workload(pipeline, model, 0);
  for (int rank = 0; rank < 8; ++rank) {
    CAPTURE(rank);
    CHECK(held(build, rank, MemCategory::nccl_buffers) == 4 * communicator);
    CHECK(held(build, rank, MemCategory::cuda_context) == 512.0 * 1024 * 1024);
  }
  // pp = 4 without dp: a tp group each; the first and last stages the embedding's group and one
  // neighbour, the middle stages two neighbours: 3 connections everywhere.
  const Scenario deep = scenario_with({"parallel.dp=1", "parallel.tp=2", "parallel.pp=4", "training.global_batch=8"});
  const WorkloadBuild deep_build = build_workload(deep, model, 0);
  for (int rank = 0; rank < 8; ++rank) {
    CAPTURE(rank);
    CHECK(held(deep_build, rank, MemCategory::nccl_buffers) == 3 * communicator);
  }
  // ZB-V's V on pp = 4 (Llama 3 8B, untied, 32 layers in 8 chunks): its turn is on the last rank,
  // so the end ranks talk to one neighbour and the middle ones to two, as under 1F1B, each with
  // its tp group: 2, 3, 3, 2 (interleaved chunks would link every rank to two).
  const Scenario v = scenario_with({"model.name=llama3-8b", "parallel.dp=1", "parallel.tp=2", "parallel.pp=4",
                                    "parallel.schedule=zb-v", "training.global_batch=8"});
  const WorkloadBuild v_build = build_workload(v, load_model(v.model_file, v.vocab_multiple), 0);
  for (int rank = 0; rank < 8; ++rank) {
    CAPTURE(rank);
    const int stage = rank / 2;
    CHECK(held(v_build, rank, MemCategory::nccl_buffers) == (stage == 0 || stage == 3 ? 2 : 3) * communicator);
  }
  // One GPU has no communicator, and a context of 0 bytes is not allocated.
  const Scenario single = scenario_with({"parallel.dp=1", "training.global_batch=2", "memory.cuda_context=0B"});
  const WorkloadBuild alone = build_workload(single, model, 0);
  CHECK(held(alone, 0, MemCategory::nccl_buffers) == 0);
  CHECK(held(alone, 0, MemCategory::cuda_context) == 0);
  // Sizes given replace the count.
  const Scenario given = scenario_with({"memory.nccl_buffers=600MiB", "memory.cuda_context=1GiB"});
  const WorkloadBuild fixed = build_workload(given, model, 0);
  CHECK(held(fixed, 0, MemCategory::nccl_buffers) == 600.0 * 1024 * 1024);
  CHECK(held(fixed, 0, MemCategory::cuda_context) == 1024.0 * 1024 * 1024);
}

TEST_CASE("the allocator's reserve decides the fit: peak + reserve against the capacity") {
  // 70 GiB of tensors and 1 GiB of CUDA context on an 80 GiB GPU.
  constexpr double gib = 1024.0 * 1024 * 1024;
  Program program;
  program.add(alloc("context", MemCategory::cuda_context, 1 * gib));
  program.add(alloc("w", MemCategory::weights, 70 * gib));
  GpuInfo gpu;
  gpu.hbm_capacity = 80 * gib;
  const auto fits = [&](AllocatorReserve reserve) {
    const RankMemory memory = memory_in_program_order(program, gpu.hbm_capacity, reserve);
    const MemorySummary summary = summarize_memory({memory}, {gpu});
    CHECK(summary.gpu_fits == (memory.over_capacity_at < 0));
    return summary.gpu_fits;
  };
  CHECK(fits({0, 0}));  // 71 GiB
  // Fragmentation 0.15: the allocator reserves 70 / 0.85 = 82.35 GiB for 70 GiB of tensors; with
  // the context 83.35 GiB, over 80.
  CHECK_FALSE(fits({0.15, 0}));
  CHECK(memory_in_program_order(program, gpu.hbm_capacity, {0.15, 0}).reserve == doctest::Approx(70 * gib * 0.15 / 0.85));
  // 0.1: 70 / 0.9 = 77.78 GiB, with the context 78.78: fits.
  CHECK(fits({0.1, 0}));
  // A size kept free: 71 + 9 = 80 fits exactly, 71 + 9.5 does not.
  CHECK(fits({0, 9 * gib}));
  CHECK_FALSE(fits({0, 9.5 * gib}));
  // The scenario's default is the 15% fragmentation that GMLake measured.
  const Scenario defaults = scenario_with({});
  CHECK(defaults.reserve.fragmentation == 0.15);
  CHECK(defaults.reserve.bytes == 0);
  CHECK(scenario_with({"memory.reserve=4GiB"}).reserve.bytes == 4 * gib);
  CHECK(scenario_with({"memory.reserve=4GiB"}).reserve.fragmentation == 0);
  CHECK(scenario_with({"memory.reserve=0"}).reserve.unallocated(70 * gib) == 0);
}

TEST_CASE("runtime memory and reserve settings are refused when invalid or without effect") {
  CHECK(error_of({"memory.reserve=0.6"}).find("a fraction from 0 to 0.5") != std::string::npos);
  CHECK(error_of({"memory.reserve=-0.1"}).find("memory.reserve") != std::string::npos);
  CHECK(error_of({"memory.reserve=lots"}).find("memory.reserve") != std::string::npos);
  CHECK(error_of({"memory.cuda_context=512"}).find("memory.cuda_context") != std::string::npos);
  CHECK(error_of({"memory.nccl_buffers=some"}).find("memory.nccl_buffers") != std::string::npos);
  const std::string single = error_of({"parallel.dp=1", "training.global_batch=2", "memory.nccl_buffers=100MiB"});
  CHECK(single.find("more than one GPU") != std::string::npos);
}

TEST_CASE("the optimal recompute budget leaves out the runtime memory and the reserve") {
  constexpr double gib = 1024.0 * 1024 * 1024;
  const Scenario base = scenario_with({"memory.recompute=optimal"});
  const ModelSpec model = load_model(base.model_file, base.vocab_multiple);
  // dp = 4: one communicator. Of 80 GiB, the context and NCCL's buffers leave
  // 80 GiB - 512 MiB - 16 x 9,633,792 B, of which a 4 GiB reserve leaves the rest to tensors; the
  // budget is that less the model states and buffers at the peak (below it by those).
  const double tensors = 80 * gib - 512.0 * 1024 * 1024 - communicator - 4 * gib;
  const RecomputePlan reserved =
      build_workload(scenario_with({"memory.recompute=optimal", "memory.reserve=4GiB"}), model, 80 * gib).recompute;
  const RecomputePlan unreserved =
      build_workload(scenario_with({"memory.recompute=optimal", "memory.reserve=0"}), model, 80 * gib).recompute;
  CHECK(unreserved.budget - reserved.budget == doctest::Approx(4 * gib));
  CHECK(reserved.budget < tensors);
  // A reserve that takes the whole GPU leaves nothing: full recompute, which does not fit either.
  const RecomputePlan none =
      build_workload(scenario_with({"memory.recompute=optimal", "memory.reserve=100GiB"}), model, 80 * gib).recompute;
  CHECK_FALSE(none.fits_budget);
  CHECK(none.checkpointed_layers == model.layers);
}

TEST_CASE("tp_comm_overlap holds Transformer Engine's ten userbuffers of a micro-batch's hidden states") {
  // initialize_ub registers 10 communicators (ring exchange: qkv_fprop, fc1_fprop, proj_dgrad,
  // fc2_dgrad; pipeline: proj_fprop, fc2_fprop; bulk: qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad),
  // each with a buffer of Megatron's shape (seq_length x micro_batch_size / cp, hidden): tiny-gpt
  // (h = 256), 512 x 2 tokens in bf16: 10 x 1,024 x 256 x 2 bytes.
  const Scenario scenario = scenario_with({"parallel.tp=2", "parallel.sp=true", "parallel.dp=2",
                                           "comm.tp_comm_overlap=true"});
  const ModelSpec model = load_model(scenario.model_file, scenario.vocab_multiple);
  const WorkloadBuild build = build_workload(scenario, model, 0);
  double userbuffers = 0;
  for (const Op& op : build.workload.program(0).ops)
    if (op.kind == OpKind::alloc && op.tensor == "tp-userbuffers")
      userbuffers += op.bytes;
  CHECK(userbuffers == 10.0 * 1024 * 256 * 2);
  const Scenario without = scenario_with({"parallel.tp=2", "parallel.sp=true", "parallel.dp=2"});
  CHECK(runtime_memory(without, 1, 1e6, 256).userbuffers == 0);
}

TEST_CASE("DeepEP's buffers are the larger of its dispatch and combine hints, as Megatron-Core sizes them") {
  // DeepEP csrc/legacy/config.hpp with 20 SMs (10 channels), the configurations of
  // deep_ep/buffers/legacy.py, 8-byte top-k indices; each NVLink slot holds hidden + 8 + 1,024 +
  // 512 + 512 bytes, each RDMA slot twice hidden + 2,072; both rounded up to 128 bytes; plus 160
  // bytes of peer tables and the 32 MiB workspace.
  const double workspace = 32.0 * 1024 * 1024, tables = 160;
  // Hidden 4096 in bf16 (8,192 bytes), 8 ranks on one node: 8 NVLink peers, one RDMA rank, 256
  // slots per channel and peer (dispatch and combine alike), no RDMA buffer:
  // 10 x 8 x (2 + 3) x 4 = 1,600 + 10 x 8 x 256 x 10,248 = 209,879,040 -> 209,880,640 -> 209,880,704.
  CHECK(*deepep_buffer_bytes(8, 8192) == 209880704.0 + tables + workspace);
  // Hidden 7168 (DeepSeek-V3, 14,336 bytes), 64 ranks on 8 nodes: 288 NVLink slots,
  // 10 x 8 x 19 x 4 = 6,080 + 80 x 288 x 16,392 = 377,671,680 -> 377,677,760 -> 377,677,824;
  // 128 RDMA slots (a multiple of the send chunk 8) for 8 RDMA ranks,
  // 10 x 8 x 18 x 2 x 4 = 11,520 + 80 x 128 x 2 x 16,408 = 336,035,840 -> 336,047,360 (aligned).
  CHECK(*deepep_buffer_bytes(64, 14336) == 377677824.0 + tables + 336047360.0 + workspace);
  // 16 ranks: the dispatch's send chunk of 20 rounds its 128 receive slots up to 140 (the
  // combine's 12 to 132; the larger counts): hidden 4096,
  // NVLink 10 x 8 x 7 x 4 = 2,240 + 80 x 288 x 10,248 = 236,113,920 -> 236,116,160 -> 236,116,224;
  // RDMA 10 x 2 x 18 x 2 x 4 = 2,880 + 20 x 140 x 2 x 10,264 = 57,478,400 -> 57,481,280 -> 57,481,344.
  CHECK(*deepep_buffer_bytes(16, 8192) == 236116224.0 + tables + 57481344.0 + workspace);
  // DeepEP asserts on group sizes it has no configuration for.
  CHECK_FALSE(deepep_buffer_bytes(12, 8192));
  CHECK_FALSE(deepep_buffer_bytes(256, 8192));
}
