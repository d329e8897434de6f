// Kernels slow down while communication runs beside them on the same GPU (compute.comm_slowdown):
// with slowdown f a kernel progresses at 1 / (1 + f) of its speed while a collective or a send is
// under way, and at full speed otherwise; the communication itself is not slowed. And
// communication slows down when it reaches less of the links' bandwidth (comm.bandwidth_efficiency).
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "engine/replay.hpp"
#include "platform/simulation_context.hpp"

using namespace trainsim;

namespace {

// Two ranks of one DGX A100 node, each with a kernel and, if asked, an all-reduce of the pair
// that starts with it on the data-parallel stream.
Workload pair_workload(bool kernel, bool all_reduce) {
  Workload workload;
  workload.groups = {{"dp0", "dp", {0, 1}}};
  for (int rank = 0; rank < 2; ++rank) {
    Program program;
    if (kernel) {
      Op op;
      op.name = "kernel";
      op.flops = 2e12;  // about 12 ms on an A100 at the roofline's efficiency
      op.phase = Phase::forward;
      program.add(op);
    }
    if (all_reduce) {
      Op op;
      op.kind = OpKind::collective;
      op.stream = Stream::dp_comm;
      op.collective = Collective::all_reduce;
      op.name = "all-reduce";
      op.bytes = 5e8;  // a few ms over NVLink
      op.group = 0;
      program.add(op);
    }
    workload.programs.push_back(std::make_shared<const Program>(std::move(program)));
  }
  validate_workload(workload, "pair workload");
  return workload;
}

struct Ends : ReplayObserver {
  std::vector<double> finished;  // rank 0's ops
  void op_started(int, OpId, double) override {}
  void op_finished(int rank, OpId op, double time) override {
    if (rank == 0) {
      finished.resize(std::max(finished.size(), static_cast<std::size_t>(op) + 1));
      finished[op] = time;
    }
  }
  void op_transferred(int, OpId, const Transfer&) override {}
};

// When rank 0's ops finished, replayed in a child process.
std::vector<double> finish_times(const Workload& workload, const ReplaySettings& settings) {
  const std::string bytes = test::in_child([&] {
    SimulationContext context({});
    const std::vector<GpuInfo> gpus = context.load_platform(test::platform_file("dgx-a100.xml"));
    Ends ends;
    replay(context, workload, gpus, settings, ends);
    return std::string(reinterpret_cast<const char*>(ends.finished.data()), ends.finished.size() * sizeof(double));
  });
  std::vector<double> times(bytes.size() / sizeof(double));
  std::memcpy(times.data(), bytes.data(), times.size() * sizeof(double));
  return times;
}

std::vector<double> finish_times(const Workload& workload, double slowdown, bool analytic = false) {
  ReplaySettings settings;
  settings.comm_slowdown = slowdown;
  settings.fast_collectives = analytic;
  return finish_times(workload, settings);
}

} // namespace

// The collective simulated as flows (the kernel then runs in the simulation beside a companion
// execution) or timed from its ring (both settled ahead of the clock: the kernel's time is
// stretched over the collective's span).
TEST_CASE("a kernel beside a collective runs 1 + f times as long while the collective lasts") {
  for (const bool analytic : {false, true}) {
    CAPTURE(analytic);
    const double kernel = finish_times(pair_workload(true, false), 0.5, analytic).at(0);
    const double all_reduce = finish_times(pair_workload(false, true), 0.5, analytic).at(0);
    REQUIRE(all_reduce < kernel / 1.5);  // the collective ends while the kernel still runs
    for (const double f : {0.0, 0.189, 0.5, 1.0}) {
      CAPTURE(f);
      const std::vector<double> both = finish_times(pair_workload(true, true), f, analytic);
      REQUIRE(both.size() == 2);
      // For `all_reduce` seconds the kernel does all_reduce / (1 + f) seconds of its work; the
      // rest runs at full speed afterwards.
      CHECK(both[0] == doctest::Approx(kernel + all_reduce * f / (1 + f)).epsilon(1e-9));
      CHECK(both[1] == doctest::Approx(all_reduce).epsilon(1e-9));  // communication is not slowed
    }
  }
}

// Two collectives one after the other on the data-parallel stream beside one kernel that outlasts
// them, the kernel settled last (so with collectives timed from their ring, both spans are known
// by then and the kernel's time is stretched over them): the kernel is slowed over both.
TEST_CASE("a kernel beside two collectives in turn is slowed during both") {
  Workload workload = pair_workload(false, true);
  for (auto& shared : workload.programs) {
    Program program = *shared;
    Op second = program.ops[0];
    second.name = "second";
    second.deps = {0};
    program.add(second);
    // Two memory ops ahead of the kernel make it the last op settled.
    Op alloc;
    alloc.kind = OpKind::alloc;
    alloc.tensor = "t";
    alloc.name = "alloc.t";
    alloc.bytes = 1e6;
    const OpId allocated = program.add(alloc);
    Op free = alloc;
    free.kind = OpKind::free;
    free.name = "free.t";
    free.deps = {allocated};
    const OpId freed = program.add(free);
    Op kernel;
    kernel.name = "kernel";
    kernel.flops = 8e12;  // about 50 ms: longer than both collectives
    kernel.phase = Phase::forward;
    kernel.deps = {freed};
    program.add(kernel);
    shared = std::make_shared<const Program>(std::move(program));
  }
  validate_workload(workload, "two collectives");
  for (const bool analytic : {false, true}) {
    CAPTURE(analytic);
    const std::vector<double> alone = finish_times(workload, 0.0, analytic);
    const std::vector<double> slowed = finish_times(workload, 0.5, analytic);
    REQUIRE(slowed.size() == 5);
    const double collectives = alone[1], kernel = alone[4];
    REQUIRE(collectives < kernel / 1.5);
    // For the collectives' `collectives` seconds the kernel does collectives / 1.5 of its work.
    CHECK(slowed[1] == doctest::Approx(collectives).epsilon(1e-9));
    CHECK(slowed[4] == doctest::Approx(kernel + collectives * 0.5 / 1.5).epsilon(1e-9));
  }
}

TEST_CASE("a kernel alone is not slowed, whatever the slowdown") {
  const double alone = finish_times(pair_workload(true, false), 0).at(0);
  CHECK(finish_times(pair_workload(true, false), 1.0).at(0) == doctest::Approx(alone).epsilon(1e-12));
}

TEST_CASE("a collective at bandwidth efficiency e moves its bytes at e times the links' bandwidth") {
  // The pair's all-reduce of S = 5e8 bytes: two ring phases, in each both GPUs send (n-1)/n S =
  // 2.5e8 bytes through their own 300 GB/s NVLink port, crossing two 1 us hops (dgx-a100.xml).
  // Simulated as flows or timed from the ring formula, the same.
  for (const bool analytic : {false, true})
    for (const double e : {1.0, 0.8, 0.5}) {
      CAPTURE(analytic);
      CAPTURE(e);
      ReplaySettings settings;
      settings.fast_collectives = analytic;
      settings.bandwidth_efficiency = e;
      settings.tuning.ideal = true;  // NCCL's protocols aside: the links' bandwidth and latency alone
      const double expected = 2 * (2.5e8 / (e * 300e9) + 2e-6);
      CHECK(finish_times(pair_workload(false, true), settings).at(0) == doctest::Approx(expected).epsilon(1e-6));
    }
}
