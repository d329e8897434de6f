#include <doctest/doctest.h>

#include <algorithm>

#include "report/metrics.hpp"

using namespace trainsim;

TEST_CASE("busy time is the union of overlapping spans") {
  BusyTime busy;
  busy.begin(0);
  busy.begin(1);
  busy.end(2);
  busy.end(3);   // [0, 3]
  busy.begin(3);
  busy.end(4);   // back to back: still one interval [0, 4]
  busy.begin(6);
  busy.end(7);   // [6, 7]
  REQUIRE(busy.intervals().size() == 2);
  CHECK(busy.total() == 5);
}

TEST_CASE("exposed time is the part of communication not covered by compute") {
  // comm [0,4] and [6,10]; compute [1,2], [3,7], [9,12] -> uncovered 0-1, 2-3, 7-9 = 4.
  const std::vector<Interval> comm = {{0, 4}, {6, 10}};
  const std::vector<Interval> compute = {{1, 2}, {3, 7}, {9, 12}};
  CHECK(uncovered_time(comm, compute) == 4);
  CHECK(uncovered_time(comm, {}) == 8);
  CHECK(uncovered_time({}, compute) == 0);
}

TEST_CASE("the collector turns op events into step metrics") {
  // Rank 0: compute [0, 2], all-reduce of 800 bytes over 2 ranks [1, 3]: 1 s exposed.
  Workload workload;
  workload.groups.push_back({"dp0", "dp", {0, 1}});
  Program program;
  Op compute;
  compute.name = "fwd";
  program.add(compute);
  Op reduce;
  reduce.kind = OpKind::collective;
  reduce.stream = Stream::dp_comm;
  reduce.group = 0;
  reduce.bytes = 800;
  program.add(reduce);
  const auto shared = std::make_shared<const Program>(program);
  workload.programs = {shared, shared};
  workload.step.tokens_per_step = 1000;
  workload.step.model_flops_per_step = 312e12;
  workload.step.precision = Precision::bf16;

  GpuInfo gpu;
  gpu.peak_bf16 = 312e12;
  gpu.hbm_capacity = 1e9;
  const std::vector<GpuInfo> gpus = {gpu, gpu};
  StepCollector collector(workload, gpus, {false, false}, AllocatorReserve{0, 0});
  for (int rank = 0; rank < 2; ++rank) {
    collector.op_started(rank, 0, 0);
    collector.op_started(rank, 1, 1);
    collector.op_finished(rank, 0, 2);
    collector.op_transferred(rank, 1, {1, 3.0 + rank});  // data moved from 1 s
    collector.op_finished(rank, 1, 3 + rank);        // rank 1 finishes last
  }
  const StepMetrics metrics = collector.finish(1e6);
  CHECK(metrics.step_time_s == 4);
  CHECK(metrics.critical_rank == 1);
  CHECK(metrics.tokens_per_s == 250);
  CHECK(metrics.time_to_train_s == 4000);
  CHECK(metrics.mfu == doctest::Approx(312e12 / (4 * 2 * 312e12)));
  const CommMetrics& dp = metrics.ranks[0].comm.at("dp");
  CHECK(dp.total_s == 2);
  CHECK(dp.exposed_s == 1);
  CHECK(dp.bytes == 800);  // ring all-reduce over 2 ranks: 2 x 1/2 x 800
  CHECK(metrics.ranks[1].comm.at("dp").exposed_s == 2);
}

TEST_CASE("memory timelines are kept for every rank up to 64, then for one rank per stage") {
  CHECK(default_timeline_ranks(std::vector<int>(64, 0)) == std::vector<bool>(64, true));
  std::vector<int> stages;
  for (int rank = 0; rank < 128; ++rank)
    stages.push_back(rank / 32);  // 4 stages of 32 ranks
  const std::vector<bool> kept = default_timeline_ranks(stages);
  CHECK(std::count(kept.begin(), kept.end(), true) == 4);
  CHECK(kept[0]);
  CHECK(kept[32]);
  CHECK_FALSE(kept[1]);
}

TEST_CASE("a node's host memory is what its ranks hold at once in a replay, their peaks added in program order") {
  // Two ranks of one node each hold 10 GB of host memory, rank 0 during [0, 1], rank 1 during
  // [2, 3]: the node never holds more than 10 GB at once. Program order has no common clock, so
  // `trainsim memory` adds the ranks' peaks: 20 GB. A 15 GB node fits the one, not the other.
  Workload workload;
  Program program;
  Op alloc;
  alloc.kind = OpKind::alloc;
  alloc.tensor = "states";
  alloc.device = Device::host;
  alloc.bytes = 10e9;
  program.add(alloc);
  Op release;
  release.kind = OpKind::free;
  release.tensor = "states";
  program.add(release);
  const auto shared = std::make_shared<const Program>(program);
  workload.programs = {shared, shared};
  GpuInfo gpu;
  gpu.node = "node0";
  gpu.hbm_capacity = 1e9;
  gpu.host_memory_capacity = 15e9;
  const std::vector<GpuInfo> gpus = {gpu, gpu};
  StepCollector collector(workload, gpus, {false, false}, AllocatorReserve{0, 0});
  for (int rank = 0; rank < 2; ++rank) {
    collector.op_started(rank, 0, 2.0 * rank);
    collector.op_finished(rank, 0, 2.0 * rank);
    collector.op_started(rank, 1, 2.0 * rank + 1);
    collector.op_finished(rank, 1, 2.0 * rank + 1);
  }
  const StepMetrics metrics = collector.finish(0);
  CHECK(metrics.memory.host.used);
  CHECK(metrics.memory.host.peak_bytes == 10e9);
  CHECK(metrics.memory.host.node == "node0");
  CHECK(metrics.memory.host.fits);
  CHECK(metrics.memory.fits);
  std::vector<RankMemory> ranks;
  for (const RankMetrics& rank : metrics.ranks)
    ranks.push_back(rank.memory);
  const MemorySummary in_program_order = summarize_memory(ranks, gpus);
  CHECK(in_program_order.host.peak_bytes == 20e9);
  CHECK_FALSE(in_program_order.host.fits);
  CHECK_FALSE(in_program_order.fits);
  CHECK(in_program_order.gpu_fits);
  CHECK_FALSE(in_program_order.nvme.used);
}

TEST_CASE("on GPUs of different sizes the memory summary names the rank with the least headroom") {
  // Rank 0: 34 GB on an 80 GB GPU (46 GB free); rank 1: 30 GB on a 20 GB GPU (10 GB over). The
  // highest peak is rank 0's, but rank 1 is the one that does not fit, against its own 20 GB.
  std::vector<RankMemory> ranks(2);
  ranks[0].devices[static_cast<int>(Device::gpu)].peak = 34e9;
  ranks[1].devices[static_cast<int>(Device::gpu)].peak = 30e9;
  std::vector<GpuInfo> gpus(2);
  gpus[0].hbm_capacity = 80e9;
  gpus[1].hbm_capacity = 20e9;
  const MemorySummary summary = summarize_memory(ranks, gpus);
  CHECK(summary.peak_rank == 1);
  CHECK(summary.peak_bytes == 30e9);
  CHECK(summary.capacity_bytes == 20e9);
  CHECK_FALSE(summary.gpu_fits);
}

TEST_CASE("training takes whole steps") {
  // 1,000 tokens with 1,048,576 per step still take one 3.5 s step; 2.5 steps' worth take three;
  // exactly two steps' worth take two.
  CHECK(time_to_train(1000, 1048576, 3.5) == 3.5);
  CHECK(time_to_train(2.5 * 1048576, 1048576, 3.5) == 10.5);
  CHECK(time_to_train(2.0 * 1048576, 1048576, 3.5) == 7.0);
}
