// Simulated times checked against hand derivations from the platform files'
// bandwidths and latencies: the engine must reproduce what the hardware numbers imply. The
// collectives here are ideal (comm.collectives = ideal: links at full speed, route latency per
// ring step), so that the derivations need nothing but the platform file; NCCL's algorithms and
// protocols are checked in nccl_model_test.cpp and collectives_test.cpp.
#include <doctest/doctest.h>

#include <fstream>

#include "cli.hpp"

using namespace trainsim::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Writes a trace where every rank runs the same program.
fs::path write_trace(const std::string& name, int ranks, const std::string& program, const std::string& extra = "") {
  const fs::path dir = fresh_dir(name + "_trace");
  std::ofstream(dir / "workload.txt") << "format 1\nranks " << ranks << "\nprecision bf16\nmatmul_efficiency 0.5\n"
                                      << "memory_efficiency 0.8\ngroup world dp 0-" << ranks - 1 << '\n'
                                      << "program p.trace 0-" << ranks - 1 << '\n'
                                      << extra;
  std::ofstream(dir / "p.trace") << program;
  return dir;
}

json replay(const std::string& name, const fs::path& trace, const std::string& platform, const std::string& extra = "") {
  const CliResult result =
      run_trainsim(name, "replay " + trace.string() + " --platform " + platform + " --collectives ideal --out out " + extra);
  REQUIRE_MESSAGE(result.status == 0, result.err);
  return read_json(result.dir / "out/summary.json");
}

json run(const std::string& name, const std::string& arguments) {
  const CliResult result = run_trainsim(name, "run " + project_file("tests/fixtures/tiny-ddp.ini") +
                                                  " --set comm.collectives=ideal --out out " + arguments);
  REQUIRE_MESSAGE(result.status == 0, result.err);
  return read_json(result.dir / "out/summary.json");
}

} // namespace

TEST_CASE("a compute op lasts FLOPs / (peak x efficiency), or bytes / (HBM bandwidth x efficiency)") {
  // A100: 312 TFLOP/s bf16, 2039 GB/s HBM (platforms/dgx-a100.xml).
  // 1.56e14 FLOPs at 0.5 x 312e12 = 1 s; then 1631.2 GB at 0.8 x 2039 GB/s = 1 s.
  const auto trace = write_trace("compute", 1, "0 compute flops=1.56e14 bytes=0\n1 compute flops=1 bytes=1.6312e12\n");
  const json summary = replay("compute", trace, "dgx-a100.xml");
  CHECK(summary["step_time_s"].get<double>() == doctest::Approx(2.0).epsilon(1e-9));
  CHECK(summary["time"]["compute_s"].get<double>() == doctest::Approx(2.0).epsilon(1e-9));
}

TEST_CASE("an all-reduce inside a DGX A100 runs at the NVLink bandwidth of each GPU") {
  // Ring all-reduce of S = 8e9 bytes over 8 GPUs, 8 rings: in each of the two phases every GPU
  // sends 7/8 S through its own NVLink (300 GB/s per direction): 7e9 / 300e9 = 23.333 ms.
  // Latency: a flow crosses two 1 us NVLink hops (2 us), and the ring's other 6 steps add 6 x 2 us.
  const auto trace = write_trace("nvlink", 8, "0 collective op=allreduce group=world bytes=8e9\n");
  const json summary = replay("nvlink", trace, "dgx-a100.xml");
  const double phase = 7e9 / 300e9 + 2e-6 + 6 * 2e-6;
  CHECK(summary["step_time_s"].get<double>() == doctest::Approx(2 * phase).epsilon(1e-6));
  CHECK(summary["time"]["comm"]["dp"]["bytes"].get<double>() == doctest::Approx(2 * 8e9 * 7 / 8));
}

TEST_CASE("an all-reduce across two DGX A100 nodes is bound by the rail NICs, one ring per NIC") {
  // S = 4e9 bytes over 16 GPUs, 8 rings of S/8. Each ring crosses between the nodes through a
  // different NIC (25 GB/s per direction), so per phase each NIC carries (15/16)(S/8) = 0.46875 GB:
  // 18.75 ms. The crossing route is PCIe 0.5 us + NIC 1 us + fabric 0.5 us + NIC 1 us + PCIe 0.5 us
  // = 3.5 us, and the ring's other 14 steps add 14 x 3.5 us.
  const auto trace = write_trace("rails", 16, "0 collective op=allreduce group=world bytes=4e9\n");
  const json eight_rings = replay("rails", trace, "dgx-a100-2n.xml");
  const double phase = 0.46875e9 / 25e9 + 3.5e-6 + 14 * 3.5e-6;
  CHECK(eight_rings["step_time_s"].get<double>() == doctest::Approx(2 * phase).epsilon(1e-3));
  // A single ring funnels the whole buffer through one NIC per direction: 8 times slower.
  const json one_ring = replay("rails_one", trace, "dgx-a100-2n.xml", "--channels 1");
  const double ratio = one_ring["step_time_s"].get<double>() / eight_rings["step_time_s"].get<double>();
  CHECK(ratio == doctest::Approx(8.0).epsilon(0.01));
}

TEST_CASE("the gradient all-reduce overlaps backward only when it is split into buckets") {
  // One bucket holds every gradient, so its all-reduce starts after the whole backward and nothing
  // hides it: all of it is exposed. 25 MiB buckets start during backward and hide most of it.
  // (A 1B model, so that bandwidth rather than per-collective latency decides.)
  const std::string model = "--set model.name=llama3.2-1b --set training.seq_len=1024 --set training.micro_batch=1 "
                            "--set training.global_batch=16 ";
  const json single = run("single_bucket", model + "--set comm.bucket_size=100GB");
  const json& single_dp = single["time"]["comm"]["dp"];
  CHECK(single_dp["exposed_s"].get<double>() == doctest::Approx(single_dp["total_s"].get<double>()));
  const json buckets = run("small_buckets", model + "--set comm.bucket_size=25MiB");
  const json& dp = buckets["time"]["comm"]["dp"];
  CHECK(dp["exposed_s"].get<double>() < 0.9 * dp["total_s"].get<double>());
  CHECK(buckets["step_time_s"].get<double>() < single["step_time_s"].get<double>());
}

TEST_CASE("Megatron's overlap_param_gather hides the parameter all-gathers behind the next forward") {
  // The distributed optimizer's all-gathers of the updated parameters move the same bytes either
  // way. After the optimizer step nothing runs beside them: all of their time is exposed, on top
  // of the reduce-scatters'. Issued at the step's start, they run while the forward computes
  // the layers whose buckets arrived first, so the step gets shorter and less of dp is exposed.
  const std::string megatron = "--set model.name=llama3.2-1b --set training.seq_len=1024 --set training.micro_batch=1 "
                               "--set training.global_batch=16 --set training.framework=megatron --set memory.zero=1 "
                               "--set comm.overlap_grad_reduce=true ";
  const json after_step = run("param_gather_after_step", megatron);
  const json overlapped = run("param_gather_overlapped", megatron + "--set comm.overlap_param_gather=true");
  const json& blocking_dp = after_step["time"]["comm"]["dp"];
  const json& overlapped_dp = overlapped["time"]["comm"]["dp"];
  CHECK(overlapped_dp["bytes"].get<double>() == blocking_dp["bytes"].get<double>());
  CHECK(overlapped_dp["exposed_s"].get<double>() < 0.75 * blocking_dp["exposed_s"].get<double>());
  CHECK(overlapped["step_time_s"].get<double>() < after_step["step_time_s"].get<double>());
  CHECK(std::string(overlapped["settings"]["comm.overlap_param_gather"]) == "true");
}

TEST_CASE("tp_comm_overlap hides most tensor-parallel communication behind the GEMMs") {
  // Llama 3 8B on tp 8 with sequence parallelism. Without userbuffers, Megatron already reduces
  // each column GEMM's input gradient beside its weight-gradient GEMM and gathers its input
  // again beside its input-gradient GEMM; the forward's all-gathers and reduce-scatters and the
  // backward's gathers of the output gradient stand between kernels, exposed: over half of the
  // time. With Transformer Engine's userbuffers those run in chunks beside the GEMMs too, moving
  // the same bytes (a ring exchange passes 7 chunks of B / 8 where an all-gather moves 7/8 B).
  const std::string tp8 = "--set model.name=llama3-8b --set parallel.dp=2 --set parallel.tp=8 --set parallel.sp=true "
                          "--set training.seq_len=4096 --set training.micro_batch=1 --set training.global_batch=4 ";
  const json blocking = run("tp_blocking", tp8);
  const json overlapped = run("tp_overlapped", tp8 + "--set comm.tp_comm_overlap=true");
  const json& blocking_tp = blocking["time"]["comm"]["tp"];
  const json& overlapped_tp = overlapped["time"]["comm"]["tp"];
  CHECK(blocking_tp["exposed_s"].get<double>() > 0.5 * blocking_tp["total_s"].get<double>());
  CHECK(overlapped_tp["bytes"].get<double>() == doctest::Approx(blocking_tp["bytes"].get<double>()));
  CHECK(overlapped_tp["exposed_s"].get<double>() < 0.3 * blocking_tp["exposed_s"].get<double>());
  CHECK(overlapped["step_time_s"].get<double>() < blocking["step_time_s"].get<double>());
}

TEST_CASE("gradient accumulation repeats the same micro-batch work") {
  // With 2, 4 and 8 micro-batches per rank, compute time grows by the same amount per micro-batch:
  // (c8 - c4) = 2 (c4 - c2), whatever the optimizer step and the last backward cost.
  const double c2 = run("accum2", "--set training.global_batch=64")["time"]["compute_s"];
  const double c4 = run("accum4", "--set training.global_batch=128")["time"]["compute_s"];
  const double c8 = run("accum8", "--set training.global_batch=256")["time"]["compute_s"];
  CHECK(c8 - c4 == doctest::Approx(2 * (c4 - c2)).epsilon(1e-9));
}

TEST_CASE("the hand-written trace of docs/trace-format.md hides its all-reduce behind backward") {
  // Defaults: 0.55 of the A100's 312 TFLOP/s, 0.8 of its 2039 GB/s. Three 3e13-FLOP kernels are
  // compute-bound; the optimizer's 3e10 bytes are memory-bound. The all-reduce of 2e9 bytes over
  // two GPUs (two rings) sends 1e9 bytes per phase through each GPU's 300 GB/s NVLink, plus the
  // 2 us route latency, twice, while the second half of backward runs. Meanwhile that kernel runs
  // 1 + f times slower (f = 0.189, the default comm slowdown): it loses total x f / (1 + f) seconds.
  const double kernels = 3 * 3e13 / (312e12 * 0.55) + 3e10 / (2039e9 * 0.8);
  const double all_reduce = 2 * (1e9 / 300e9 + 2e-6);
  for (const double f : {0.189, 0.0}) {
    CAPTURE(f);
    const json summary = replay(f > 0 ? "hand_trace" : "hand_trace_unslowed", project_file("tests/fixtures/hand-trace"),
                                "dgx-a100.xml", f > 0 ? "" : "--comm-slowdown 0");
    CHECK(summary["step_time_s"].get<double>() == doctest::Approx(kernels + all_reduce * f / (1 + f)).epsilon(1e-9));
    const json& dp = summary["time"]["comm"]["dp"];
    CHECK(dp["total_s"].get<double>() == doctest::Approx(all_reduce).epsilon(1e-6));
    CHECK(dp["exposed_s"].get<double>() == 0);
    CHECK(summary["memory"]["peak_bytes"].get<double>() == 6e9);
  }
}

TEST_CASE("kernels on two streams share the GPU, kernels on one stream run back to back") {
  // Each kernel alone lasts 1 s (1.56e14 FLOPs at 0.5 x 312 TFLOP/s). On two streams they run at
  // once and SimGrid shares the GPU's speed: both end at 2 s. On one stream: 1 s, then 1 s more.
  const std::string kernels = "0 compute flops=1.56e14 bytes=0\n1 compute stream=copy flops=1.56e14 bytes=0\n";
  const json shared = replay("two-streams", write_trace("two-streams", 1, kernels), "dgx-a100.xml");
  CHECK(shared["step_time_s"].get<double>() == doctest::Approx(2.0).epsilon(1e-9));
  CHECK(shared["time"]["compute_s"].get<double>() == doctest::Approx(2.0).epsilon(1e-9));
  const std::string chained = "0 compute flops=1.56e14 bytes=0\n1 compute flops=1.56e14 bytes=0\n"
                              "2 alloc tensor=x category=activations bytes=1e9 deps=0\n3 free tensor=x deps=1\n";
  const json serial = replay("one-stream", write_trace("one-stream", 1, chained), "dgx-a100.xml");
  CHECK(serial["step_time_s"].get<double>() == doctest::Approx(2.0).epsilon(1e-9));
  CHECK(serial["memory"]["peak_bytes"].get<double>() == doctest::Approx(1e9));
}

TEST_CASE("waiting in a collective for a slower member is idle time attributed to that member") {
  // Ranks 0 and 1 compute 1.56e14 FLOPs (1 s at 0.5 x 312 TFLOP/s), rank 2 three times as much
  // (3 s), then all three all-reduce S = 3e9 bytes over NVLink: two ring phases, in each every
  // GPU sends (n-1)/n S = 2e9 bytes through its own 300 GB/s NVLink; a flow crosses two 1 us hops
  // and the ring's one other step adds another 2 us.
  // The data can only move once rank 2 arrives at 3 s (ranks 0 and 1 can exchange their first
  // pieces earlier, but the ring needs everyone): the two seconds before are idle, caused by
  // rank 2, and only the transfer itself is exposed communication.
  const fs::path dir = fresh_dir("straggler_trace");
  std::ofstream(dir / "workload.txt") << "format 1\nranks 3\nprecision bf16\nmatmul_efficiency 0.5\n"
                                      << "group world dp 0-2\nprogram fast.trace 0-1\nprogram slow.trace 2\n";
  std::ofstream(dir / "fast.trace") << "0 compute flops=1.56e14 bytes=0\n"
                                    << "1 collective op=allreduce group=world bytes=3e9 deps=0\n";
  std::ofstream(dir / "slow.trace") << "0 compute flops=4.68e14 bytes=0\n"
                                    << "1 collective op=allreduce group=world bytes=3e9 deps=0\n";
  const json summary = replay("straggler", dir, "dgx-a100.xml");
  const double transfer = 2 * (2e9 / 300e9 + 2e-6 + 2e-6);
  CHECK(summary["step_time_s"].get<double>() == doctest::Approx(3 + transfer).epsilon(1e-9));
  for (int rank : {0, 1}) {
    CAPTURE(rank);
    const json& fast = summary["time"]["ranks"][rank];
    CHECK(fast["waiting_s"]["2"].get<double>() == doctest::Approx(2.0).epsilon(1e-9));
    CHECK(fast["comm"]["dp"]["total_s"].get<double>() == doctest::Approx(transfer).epsilon(1e-6));
    CHECK(fast["comm"]["dp"]["exposed_s"].get<double>() == doctest::Approx(transfer).epsilon(1e-6));
    CHECK(fast["bubble_s"].get<double>() == doctest::Approx(0.0));
  }
  const json& slow = summary["time"]["ranks"][2];
  CHECK(slow["waiting_s"].empty());
  CHECK(slow["comm"]["dp"]["exposed_s"].get<double>() == doctest::Approx(transfer).epsilon(1e-6));
  // The bottleneck line names the straggler, not communication.
  const std::string bottleneck = summary["bottleneck"];
  CAPTURE(bottleneck);
  CHECK(bottleneck.find("dp-communication") == std::string::npos);
  CHECK(bottleneck.find("rank 2") != std::string::npos);
}

TEST_CASE("every gradient bucket pays the ring's latency, so tiny buckets cost time") {
  // Llama 3.2 1B on two DGX A100 (default scenario, one micro-batch): 1,235,814,400 fp32
  // gradients = 4,943,257,600 bytes, in 1 MiB buckets 4,715 all-reduces, in 25 MiB buckets 189.
  // Each all-reduce over 16 ranks has two ring phases; a phase's flows cross the nodes (PCIe
  // 0.5 us + NIC 1 us + fabric 0.5 us + NIC 1 us + PCIe 0.5 us = 3.5 us) and the ring's other 14
  // steps add 14 x 3.5 us: 105 us per all-reduce. The bytes are the same, so the time with dp
  // transfers in flight differs by the extra latencies: (4,715 - 189) x 105 us = 475.2 ms.
  const std::string scenario =
      project_file("scenarios/default.ini") + " --no-report --set training.global_batch=32 --set comm.collectives=ideal ";
  const json tiny = run_summary("buckets_1mib", scenario + "--set comm.bucket_size=1MiB");
  const json usual = run_summary("buckets_25mib", scenario + "--set comm.bucket_size=25MiB");
  const double tiny_dp = tiny["time"]["comm"]["dp"]["total_s"].get<double>();
  const double usual_dp = usual["time"]["comm"]["dp"]["total_s"].get<double>();
  CHECK(tiny_dp - usual_dp == doctest::Approx((4715 - 189) * 105e-6).epsilon(0.01));
  CHECK(tiny["step_time_s"].get<double>() > usual["step_time_s"].get<double>());
}
