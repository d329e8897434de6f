#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "memory/memory_tracker.hpp"
#include "engine/program_graph.hpp"
#include "program/workload_builder.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {

// The tiny model with fp16 mixed precision (16-bit gradients, as the ZeRO-Offload table assumes),
// one micro-batch of 256 tokens per rank on `dp` ranks.
Scenario offload_scenario(int dp, const std::vector<std::string>& overrides) {
  std::vector<std::string> all = {"training.seq_len=256", "training.micro_batch=1",
                                  "training.global_batch=" + std::to_string(dp), "parallel.dp=" + std::to_string(dp),
                                  "memory.precision=fp16"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return load_scenario(test::write_temp_file("offload.ini", test::tiny_scenario_ini), all);
}

struct States {
  double gpu = 0;   // weights + gradients + optimizer still on the GPU at the end of the step
  double host = 0;  // peak of host memory
  double nvme = 0;
};

Workload workload_of(const Scenario& scenario) {
  return build_workload(scenario, load_model(scenario.model_file, scenario.vocab_multiple), 0).workload;
}

States states_of(const Scenario& scenario) {
  const RankMemory memory = memory_in_program_order(workload_of(scenario).program(0));
  const auto& p = memory.persistent_gpu;
  States states;
  states.gpu = p[static_cast<int>(MemCategory::weights)] + p[static_cast<int>(MemCategory::gradients)] +
               p[static_cast<int>(MemCategory::optimizer)];
  states.host = memory.devices[static_cast<int>(Device::host)].peak;
  states.nvme = memory.devices[static_cast<int>(Device::nvme)].peak;
  return states;
}

double parameters_of(const Scenario& scenario) {
  return static_cast<double>(count_parameters(load_model(scenario.model_file, scenario.vocab_multiple)).total);
}

// Steps of the optimizer that run on the node's CPU.
int cpu_optimizer_steps(const Program& program) {
  return static_cast<int>(std::count_if(program.ops.begin(), program.ops.end(), [&](const Op& op) {
    return op.kind == OpKind::compute && op.target == node_cpu && op.phase == Phase::optimizer;
  }));
}

} // namespace

TEST_CASE("GPU model states follow the ZeRO-Offload table: 16M on the GPU, 4M with the optimizer on the CPU, 2M with the gradients too") {
  // REFERENCES.md, ZeRO-Offload: all on the GPU 16M bytes (2 fp16 weights + 2 fp16 gradients + 12
  // fp32 master, momentum, variance); fp32 gradients and update on the CPU 4M (the GPU keeps fp16
  // weights and gradients); fp16 gradients on the CPU too 2M.
  const Scenario none = offload_scenario(1, {});
  const double m = parameters_of(none);
  CHECK(states_of(none).gpu == 16 * m);

  // One GPU, optimizer on the CPU: gradients are produced on the GPU and copied out.
  const Scenario cpu = offload_scenario(1, {"memory.offload_optimizer=cpu"});
  const States cpu_states = states_of(cpu);
  CHECK(cpu_states.gpu == 4 * m);
  // The host holds the rest: fp32 master weights, momentum, variance and fp32 gradients.
  CHECK(cpu_states.host == 16 * m);

  // ZeRO-2 over 4 GPUs streams each reduced bucket's shard to the host: the GPU keeps only its
  // fp16 weights; the host holds 16 bytes for each parameter of the rank's quarter.
  const Scenario zero2 = offload_scenario(4, {"memory.zero=2", "memory.offload_optimizer=cpu"});
  const States zero2_states = states_of(zero2);
  CHECK(zero2_states.gpu == 2 * m);
  CHECK(zero2_states.host == doctest::Approx(16 * m / 4).epsilon(1e-3));  // shards round up per rank

  // Optimizer on NVMe: the same 16 bytes per shard parameter sit on the drive; host memory
  // holds the pinned staging buffer only.
  const Scenario nvme = offload_scenario(4, {"memory.zero=2", "memory.offload_optimizer=nvme",
                                             "memory.pinned_buffer_bytes=64MiB"});
  const States nvme_states = states_of(nvme);
  CHECK(nvme_states.gpu == 2 * m);
  CHECK(nvme_states.nvme == doctest::Approx(16 * m / 4).epsilon(1e-3));
  CHECK(nvme_states.host == 64.0 * 1024 * 1024);

  // ZeRO-3 with parameters offloaded too: nothing persists on the GPU (ZeRO-Infinity); the
  // rank's fp16 parameter shard joins the host.
  const Scenario params = offload_scenario(4, {"memory.zero=3", "memory.offload_optimizer=cpu", "memory.offload_params=cpu"});
  const States params_states = states_of(params);
  CHECK(params_states.gpu == 0);
  CHECK(params_states.host == doctest::Approx(18 * m / 4).epsilon(1e-2));
}

TEST_CASE("ZeRO-Offload moves 4 bytes per parameter over PCIe: 16-bit gradients down, 16-bit parameters up") {
  // REFERENCES.md: the minimum PCIe traffic of ZeRO-Offload is 4M bytes per step.
  const Scenario cpu = offload_scenario(1, {"memory.offload_optimizer=cpu"});
  const double m = parameters_of(cpu);
  const Workload workload = workload_of(cpu);
  double down = 0, up = 0;
  for (const Op& op : workload.program(0).ops)
    if (op.kind == OpKind::copy)
      (op.inbound ? up : down) += op.bytes;
  CHECK(down == doctest::Approx(2 * m));
  CHECK(up == doctest::Approx(2 * m));
  // The Adam step runs once, on the node's CPU, after every gradient is down.
  const Program& program = workload.program(0);
  CHECK(cpu_optimizer_steps(program) == 1);
  const auto step = std::find_if(program.ops.begin(), program.ops.end(), [](const Op& op) {
    return op.kind == OpKind::compute && op.target == node_cpu && op.phase == Phase::optimizer;
  });
  CHECK(step->stream == Stream::cpu);
  // Each gradient copy is turned into fp32 on the CPU (2 bytes read, 4 written per parameter),
  // and the step waits for every one of those.
  double converted = 0;
  for (OpId id = 0; id < program.ops.size(); ++id) {
    const Op& op = program.ops[id];
    if (op.kind != OpKind::compute || op.target != node_cpu || op.phase == Phase::optimizer)
      continue;
    CHECK(op.stream == Stream::cpu);
    REQUIRE(op.deps.size() == 1);
    CHECK(program.ops[op.deps[0]].kind == OpKind::copy);
    converted += op.bytes;
    CHECK(std::find(step->deps.begin(), step->deps.end(), id) != step->deps.end());
  }
  CHECK(converted == doctest::Approx(6 * m));
}

TEST_CASE("with accumulation the CPU adds each micro-batch's gradients to the fp32 ones") {
  // ZeRO-2 reduces every micro-batch: the first is converted (2 + 4 bytes per parameter of the
  // shard), the second added (2 read + 4 read + 4 written).
  const Scenario two = offload_scenario(2, {"memory.zero=2", "memory.offload_optimizer=cpu", "training.global_batch=4"});
  const double shard = std::ceil(parameters_of(two) / 2);
  const Workload workload = workload_of(two);
  double first = 0, second = 0;
  for (const Op& op : workload.program(0).ops)
    if (op.kind == OpKind::compute && op.target == node_cpu && op.phase != Phase::optimizer)
      (op.name.find(".mb0") != std::string::npos ? first : second) += op.bytes;
  CHECK(first == doctest::Approx(6 * shard).epsilon(1e-3));
  CHECK(second == doctest::Approx(10 * shard).epsilon(1e-3));
}

TEST_CASE("optimizer states on NVMe are read, updated and written back in chunks of half the pinned buffer") {
  const Scenario nvme = offload_scenario(1, {"memory.offload_optimizer=nvme", "memory.pinned_buffer_bytes=1MiB"});
  const double m = parameters_of(nvme);
  const Workload workload = workload_of(nvme);
  const Program& program = workload.program(0);
  // A chunk moves 12 bytes of states and 4 of fp32 gradients per parameter: 512 KiB / 16 B each.
  const double per_chunk = std::floor(512.0 * 1024 / 16);
  const int chunks = static_cast<int>(std::ceil(m / per_chunk));
  CHECK(cpu_optimizer_steps(program) == chunks);
  double read = 0, written_states = 0;
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::read && op.name.rfind("nvme-read.optimizer", 0) == 0)
      read += op.bytes;
    if (op.kind == OpKind::write && op.name.rfind("nvme-write.optimizer", 0) == 0)
      written_states += op.bytes;
  }
  CHECK(read == doctest::Approx(16 * m));
  CHECK(written_states == doctest::Approx(12 * m));
  // Double buffering: the third read waits for the first chunk's write, so at most two chunks are staged.
  std::vector<OpId> reads, writes;
  for (OpId id = 0; id < program.ops.size(); ++id) {
    if (program.ops[id].name.rfind("nvme-read.optimizer", 0) == 0)
      reads.push_back(id);
    if (program.ops[id].name.rfind("nvme-write.optimizer", 0) == 0)
      writes.push_back(id);
  }
  REQUIRE(reads.size() >= 3);
  CHECK(program.ops[reads[2]].deps == std::vector<OpId>{writes[0]});
  // Reads and write-backs are on streams of their own, so read k + 1 never queues behind write
  // k; the first read waits for every gradient to be on the drive.
  for (OpId id : reads)
    CHECK(program.ops[id].stream == Stream::io_read);
  for (OpId id : writes)
    CHECK(program.ops[id].stream == Stream::io_write);
  for (OpId id = 0; id < program.ops.size(); ++id)
    if (program.ops[id].name.rfind("nvme-write.grads", 0) == 0)
      CHECK(std::find(program.ops[reads[0]].deps.begin(), program.ops[reads[0]].deps.end(), id) !=
            program.ops[reads[0]].deps.end());
}

TEST_CASE("ZeRO-3 parameter reads from NVMe do not queue behind gradient writes") {
  // ZeRO-Infinity with parameters and optimizer on NVMe: backward writes each reduced gradient
  // bucket while the next layers' parameters are read for their backward. Nothing orders a read
  // after a write except the optimizer's reuse of its pinned buffer halves.
  const Scenario scenario = offload_scenario(4, {"memory.zero=3", "memory.offload_optimizer=nvme",
                                                 "memory.offload_params=nvme", "comm.bucket_size=1MB"});
  const Workload workload = workload_of(scenario);
  const Program& program = workload.program(0);
  const ProgramGraph graph(program);
  int parameter_reads = 0, gradient_writes = 0;
  for (OpId id = 0; id < program.ops.size(); ++id) {
    const Op& op = program.ops[id];
    if (op.kind == OpKind::write) {
      CHECK(op.stream == Stream::io_write);
      gradient_writes += op.name.rfind("nvme-write.grads", 0) == 0;
    }
    if (op.kind != OpKind::read || op.name.rfind("nvme-read.L", 0) != 0)
      continue;
    ++parameter_reads;
    CHECK(op.stream == Stream::io_read);
    for (OpId before = 0; before < id; ++before)
      if (program.ops[before].kind == OpKind::write) {
        const auto& next = graph.successors[before];
        CHECK_MESSAGE(std::find(next.begin(), next.end(), id) == next.end(), op.name);
      }
  }
  CHECK(parameter_reads > 0);
  CHECK(gradient_writes > 0);
}

TEST_CASE("offloaded activation checkpoints leave the GPU after their segment and come back before its recompute") {
  const Scenario kept = offload_scenario(1, {"memory.recompute=full"});
  const Scenario offloaded = offload_scenario(1, {"memory.recompute=full", "memory.offload_activations=cpu"});
  const ModelSpec model = load_model(kept.model_file, kept.vocab_multiple);
  const Workload with_workload = build_workload(offloaded, model, 0).workload;
  const Program& with = with_workload.program(0);
  // tiny-gpt: every layer is a checkpoint segment; its 2-byte input of 256 tokens x hidden goes
  // down and comes back once.
  int down = 0, up = 0;
  for (const Op& op : with.ops)
    if (op.kind == OpKind::copy && op.name.find(".input") != std::string::npos)
      ++(op.inbound ? up : down);
  CHECK(down == model.layers);
  CHECK(up == model.layers);
  // The GPU no longer holds all the checkpoints at the end of forward.
  const double kept_peak = memory_in_program_order(build_workload(kept, model, 0).workload.program(0)).gpu().peak;
  const RankMemory offloaded_memory = memory_in_program_order(with);
  CHECK(offloaded_memory.gpu().peak < kept_peak);
  CHECK(offloaded_memory.devices[static_cast<int>(Device::host)].peak > 0);
}
