// The offloaded optimizer (OffloadedOptimizer) written into a bare ProgramWriter: where its states
// live and their bytes (the ZeRO-Offload table, Ren et al. 2021: 12 bytes per parameter of fp32
// master weights, momentum and variance, 4 of fp32 gradients), the ops that bring a bucket of
// gradients to it, and the Adam step on the CPU, whole or streamed from NVMe in chunks.
#include <doctest/doctest.h>

#include <vector>

#include "program/model_states.hpp"
#include "program/offloaded_optimizer.hpp"
#include "program/program_writer.hpp"

using namespace trainsim;

namespace {

// fp16 mixed precision with fp16 gradients, as the ZeRO-Offload table assumes; one rank.
Scenario offloading_to(OffloadTier tier) {
  Scenario scenario;
  scenario.precision = Precision::fp16;
  scenario.grad_precision = Precision::fp16;
  scenario.offload_optimizer = tier;
  scenario.pinned_buffer_bytes = 64000;
  return scenario;
}

const Op* alloc_of(const Program& program, const std::string& tensor) {
  for (const Op& op : program.ops)
    if (op.kind == OpKind::alloc && op.tensor == tensor)
      return &op;
  return nullptr;
}

// 2000 bytes of fp16 gradients (1000 parameters) brought to the optimizer once per micro-batch,
// each after the op that stands for their reduction (id 0).
struct Arrivals {
  Program program;
  std::vector<OffloadedOptimizer::Arrival> arrivals;
};

Arrivals arrivals_of(OffloadTier tier, int micro_batches) {
  const Scenario scenario = offloading_to(tier);
  const ModelStatePlan states = plan_model_states(scenario, 1);
  ProgramWriter writer;
  const OpId reduced = writer.compute("reduced", Work{}, Phase::backward);
  OffloadedOptimizer optimizer(writer, scenario, states, 1000);
  Arrivals result;
  for (int micro_batch = 0; micro_batch < micro_batches; ++micro_batch) {
    result.arrivals.push_back(optimizer.gradients(2000, ".bucket0", reduced));
    optimizer.micro_batch_done();
  }
  result.program = writer.take();
  return result;
}

// The step over a shard of `shard` parameters after two ops that stand for the gradients' arrival.
struct Step {
  Program program;
  std::vector<OpId> arrived;
  std::vector<OpId> updated;
};

Step step_over(OffloadTier tier, double shard) {
  const Scenario scenario = offloading_to(tier);
  const ModelStatePlan states = plan_model_states(scenario, 1);
  ProgramWriter writer;
  Step step;
  step.arrived = {writer.compute("a", Work{}, Phase::other), writer.compute("b", Work{}, Phase::other)};
  step.updated = OffloadedOptimizer(writer, scenario, states, shard).step(step.arrived);
  step.program = writer.take();
  return step;
}

} // namespace

TEST_CASE("offloaded optimizer states take 12 bytes and fp32 gradients 4 per shard parameter off the GPU") {
  // ZeRO-Offload keeps both in host memory, with no pinned buffer (it only stages NVMe traffic);
  // ZeRO-Infinity the same 16 bytes on the drive, and the 64000-byte pinned buffer in host memory.
  const double shard = 1000;
  for (const OffloadTier tier : {OffloadTier::cpu, OffloadTier::nvme}) {
    CAPTURE(to_string(tier));
    const Device states_device = tier == OffloadTier::cpu ? Device::host : Device::nvme;
    const Scenario scenario = offloading_to(tier);
    const ModelStatePlan states = plan_model_states(scenario, 1);
    ProgramWriter writer;
    OffloadedOptimizer(writer, scenario, states, shard).allocate_states();
    const Program program = writer.take();
    const Op* optimizer = alloc_of(program, "optimizer.states");
    const Op* gradients = alloc_of(program, "gradients.offloaded");
    const Op* pinned = alloc_of(program, "pinned-buffers");
    REQUIRE(optimizer);
    REQUIRE(gradients);
    CHECK(optimizer->bytes == 12 * shard);
    CHECK(optimizer->device == states_device);
    CHECK(optimizer->category == MemCategory::optimizer);
    CHECK(gradients->bytes == 4 * shard);
    CHECK(gradients->device == states_device);
    CHECK(gradients->category == MemCategory::gradients);
    if (tier == OffloadTier::cpu) {
      CHECK(pinned == nullptr);
      CHECK(program.ops.size() == 2);
    } else {
      REQUIRE(pinned);
      CHECK(pinned->bytes == 64000);
      CHECK(pinned->device == Device::host);
      CHECK(program.ops.size() == 3);
    }
  }
}

TEST_CASE("a bucket of gradients is copied to the host, then turned into fp32 or added to it on the CPU") {
  // 2000 bytes of fp16 gradients: 1000 parameters. The first micro-batch's are converted (read 2,
  // write 4 bytes each); a later one's are added to the fp32 sums (read 2 + 4, write 4).
  const auto [program, arrivals] = arrivals_of(OffloadTier::cpu, 2);
  const OpId reduced = 0;
  REQUIRE(program.ops.size() == 5);

  for (const OffloadedOptimizer::Arrival& arrival : arrivals) {
    const Op& copy = program.ops[arrival.copied];
    CHECK(copy.kind == OpKind::copy);
    CHECK(copy.stream == Stream::copy_out);
    CHECK_FALSE(copy.inbound);
    CHECK(copy.target == node_cpu);
    CHECK(copy.bytes == 2000);
    CHECK(copy.deps == std::vector<OpId>{reduced});
    const Op& cpu = program.ops[arrival.done];
    CHECK(cpu.kind == OpKind::compute);
    CHECK(cpu.stream == Stream::cpu);
    CHECK(cpu.target == node_cpu);
    CHECK(cpu.flops == 1000);  // one conversion or addition per parameter
    CHECK(cpu.deps == std::vector<OpId>{arrival.copied});
  }
  CHECK(program.ops[arrivals[0].done].bytes == 1000 * (2 + 4));
  CHECK(program.ops[arrivals[1].done].bytes == 1000 * (2 + 4 + 4));
}

TEST_CASE("with the states on NVMe the fp32 gradients are written to the drive after the CPU") {
  const auto [program, arrivals] = arrivals_of(OffloadTier::nvme, 1);
  const OffloadedOptimizer::Arrival& arrival = arrivals.at(0);
  REQUIRE(program.ops.size() == 4);  // the input, the copy, the CPU conversion, the write
  CHECK(program.ops[1].kind == OpKind::copy);
  CHECK(arrival.copied == 1);
  CHECK(program.ops[2].stream == Stream::cpu);
  const Op& write = program.ops[arrival.done];
  CHECK(arrival.done == 3);
  CHECK(write.kind == OpKind::write);
  CHECK(write.stream == Stream::io_write);
  CHECK(write.target == node_nvme);
  CHECK(write.bytes == 1000 * 4);  // fp32
  CHECK(write.deps == std::vector<OpId>{2});
}

TEST_CASE("the Adam step over host states is one CPU op after every gradient has arrived") {
  // CPU Adam per parameter: reads the fp32 gradient (4 bytes), reads and writes the fp32 master
  // weight, momentum and variance (2 x 12), writes the fp16 weight for the GPU (2): 30 bytes;
  // and 12 FLOPs (optimizer_step_work's count).
  const auto [program, arrived, updated] = step_over(OffloadTier::cpu, 1000);
  REQUIRE(updated.size() == 1);
  REQUIRE(program.ops.size() == 3);
  const Op& adam = program.ops[updated[0]];
  CHECK(adam.stream == Stream::cpu);
  CHECK(adam.target == node_cpu);
  CHECK(adam.phase == Phase::optimizer);
  CHECK(adam.flops == 12 * 1000);
  CHECK(adam.bytes == 30 * 1000);
  CHECK(adam.deps == arrived);
}

TEST_CASE("the Adam step over NVMe states reads, updates and writes chunks of half the pinned buffer, two staged at a time") {
  // A chunk fills half of the 64000-byte pinned buffer with 16 bytes per parameter (12 of states,
  // 4 of fp32 gradients): floor(32000 / 16) = 2000 parameters. A shard of 9000 is 5 chunks:
  // 4 x 2000 + 1000. Each chunk is read (16 bytes per parameter), updated on the CPU after the
  // read and every gradient, and its 12 bytes of states written back. Reads k and k + 1 are
  // issued ahead; read k + 2 waits for write k, which frees its half of the buffer.
  const auto [program, arrived, updated] = step_over(OffloadTier::nvme, 9000);

  const std::vector<double> chunk = {2000, 2000, 2000, 2000, 1000};
  std::vector<OpId> reads, adams, writes;
  for (OpId id = static_cast<OpId>(arrived.size()); id < program.ops.size(); ++id) {
    const Op& op = program.ops[id];
    if (op.kind == OpKind::read)
      reads.push_back(id);
    else if (op.kind == OpKind::write)
      writes.push_back(id);
    else if (op.kind == OpKind::compute)
      adams.push_back(id);
  }
  REQUIRE(reads.size() == 5);
  REQUIRE(adams.size() == 5);
  REQUIRE(writes.size() == 5);
  CHECK(program.ops.size() == arrived.size() + 15);
  CHECK(updated == adams);
  // Issue order: the two first reads, then per chunk its update, its write and the read two ahead.
  CHECK(reads[0] < reads[1]);
  CHECK(reads[1] < adams[0]);
  for (std::size_t k = 0; k < 5; ++k) {
    CAPTURE(k);
    const Op& read = program.ops[reads[k]];
    CHECK(read.stream == Stream::io_read);
    CHECK(read.target == node_nvme);
    CHECK(read.bytes == 16 * chunk[k]);
    if (k == 0)
      CHECK(read.deps == arrived);  // DeepSpeed flushes the gradient swapper before swapping states in
    else if (k == 1)
      CHECK(read.deps.empty());  // behind read 0 on its stream
    else
      CHECK(read.deps == std::vector<OpId>{writes[k - 2]});

    const Op& adam = program.ops[adams[k]];
    CHECK(adam.stream == Stream::cpu);
    CHECK(adam.phase == Phase::optimizer);
    CHECK(adam.flops == 12 * chunk[k]);
    CHECK(adam.bytes == 30 * chunk[k]);
    CHECK(adam.deps == std::vector<OpId>{arrived[0], arrived[1], reads[k]});

    const Op& write = program.ops[writes[k]];
    CHECK(write.stream == Stream::io_write);
    CHECK(write.target == node_nvme);
    CHECK(write.bytes == 12 * chunk[k]);
    CHECK(write.deps == std::vector<OpId>{adams[k]});
    CHECK(adams[k] < writes[k]);
    if (k + 2 < 5)
      CHECK(writes[k] < reads[k + 2]);
  }
}
