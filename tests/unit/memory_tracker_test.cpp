#include <doctest/doctest.h>

#include "common/error.hpp"
#include "memory/memory_tracker.hpp"

using namespace trainsim;

namespace {
Op alloc(const std::string& tensor, MemCategory category, double bytes, Device device = Device::gpu) {
  Op op;
  op.kind = OpKind::alloc;
  op.tensor = tensor;
  op.category = category;
  op.bytes = bytes;
  op.device = device;
  return op;
}
Op release(const std::string& tensor) {
  Op op;
  op.kind = OpKind::free;
  op.tensor = tensor;
  return op;
}
// Applies ops to a tracker in order, pairing each free with its alloc as the collector does.
void apply_all(MemoryTracker& tracker, const std::vector<std::pair<Op, double>>& events) {
  Program program;
  for (const auto& event : events)
    program.add(event.first);
  const auto pairs = pair_allocations(program);
  for (OpId id = 0; id < program.ops.size(); ++id)
    tracker.apply(program.ops[id], pairs[id], events[id].second);
}

} // namespace

TEST_CASE("the peak and its breakdown are taken at the highest total") {
  Program program;
  program.add(alloc("w", MemCategory::weights, 100));
  program.add(alloc("a0", MemCategory::activations, 50));
  program.add(alloc("a1", MemCategory::activations, 30));   // total 180: the peak
  program.add(release("a1"));
  program.add(release("a0"));
  program.add(alloc("buf", MemCategory::buffers, 60));      // total 160
  program.add(alloc("host", MemCategory::optimizer, 999, Device::host));  // other device
  const RankMemory memory = memory_in_program_order(program);
  CHECK(memory.gpu().peak == 180);
  CHECK(memory.gpu().peak_time == 2);  // op index
  CHECK(memory.gpu().at_peak[static_cast<int>(MemCategory::weights)] == 100);
  CHECK(memory.gpu().at_peak[static_cast<int>(MemCategory::activations)] == 80);
  CHECK(memory.gpu().at_peak[static_cast<int>(MemCategory::buffers)] == 0);
  CHECK(memory.devices[static_cast<int>(Device::host)].peak == 999);
  // Still allocated at the end of the step: weights and the buffer.
  CHECK(memory.persistent_gpu[static_cast<int>(MemCategory::weights)] == 100);
  CHECK(memory.persistent_gpu[static_cast<int>(MemCategory::buffers)] == 60);
  CHECK(memory.persistent_gpu[static_cast<int>(MemCategory::activations)] == 0);
}

TEST_CASE("the timeline records every event with its time, on the GPU, in host memory and on NVMe") {
  MemoryTracker tracker(true);
  apply_all(tracker, {{alloc("w", MemCategory::weights, 10), 0.5},
                      {alloc("a", MemCategory::activations, 5), 1.0},
                      {release("a"), 2.0},
                      {alloc("states", MemCategory::optimizer, 70, Device::host), 2.5},
                      {alloc("spill", MemCategory::optimizer, 30, Device::nvme), 3.0}});
  REQUIRE(tracker.timeline().size() == 5);
  CHECK(tracker.timeline()[1].time == 1.0);
  CHECK(tracker.timeline()[1].gpu[static_cast<int>(MemCategory::activations)] == 5);
  CHECK(tracker.timeline()[2].gpu[static_cast<int>(MemCategory::activations)] == 0);
  CHECK(tracker.timeline()[2].host == 0);
  CHECK(tracker.timeline()[3].host == 70);
  CHECK(tracker.timeline()[3].gpu[static_cast<int>(MemCategory::weights)] == 10);  // the GPU as it was
  CHECK(tracker.timeline()[4].nvme == 30);
}

TEST_CASE("freeing an unknown tensor or allocating twice is an error") {
  Program ghost;
  ghost.add(release("ghost"));
  CHECK_THROWS_AS(pair_allocations(ghost), InputError);
  MemoryTracker tracker(false);
  tracker.apply(alloc("x", MemCategory::buffers, 1), 0, 0);
  CHECK_THROWS_AS(tracker.apply(alloc("x", MemCategory::buffers, 1), 0, 0), InputError);
}

TEST_CASE("the moment GPU use first exceeds the capacity is recorded") {
  MemoryTracker tracker(false, 100);
  apply_all(tracker, {{alloc("w", MemCategory::weights, 60), 1.0},
                      {alloc("a", MemCategory::activations, 50), 2.0},    // 110 > 100
                      {alloc("b", MemCategory::activations, 50), 3.0}});  // still over: the first moment stays
  CHECK(tracker.result().over_capacity_at == 2.0);
  MemoryTracker roomy(false, 1000);
  apply_all(roomy, {{alloc("w", MemCategory::weights, 60), 1.0}});
  CHECK(roomy.result().over_capacity_at == -1);
}
