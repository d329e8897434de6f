// trainsim calibrate's pure parts: reading a PyTorch profiler trace, the next guess of the two
// efficiencies, and the calibration file a scenario then takes (platform.calibration).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "calibrate/calibration.hpp"
#include "common/error.hpp"
#include "config/scenario.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {

std::string profile_error(const std::string& name, const std::string& content) {
  try {
    read_profile(test::write_temp_file(name, content));
  } catch (const InputError& error) {
    return error.what();
  }
  FAIL("accepted");
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

} // namespace

TEST_CASE("a profiler trace gives the mean step, the union of compute kernels and the NCCL kernels' time") {
  // Two steps of 1000 and 1200 us (their GPU-side mirror is not a third step). On device 0: a GEMM
  // [0, 100) and an elementwise kernel [50, 150) on another stream overlap: 150 us of compute;
  // NCCL kernels of 60 and 40 us: 100 us. Device 1's kernels are another rank's.
  // Per step: 1.1 ms, 75 us of compute, 50 us of communication.
  const std::string trace = R"({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "ts": 0, "dur": 1000},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "ts": 1000, "dur": 1200},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#3", "ts": 10, "dur": 990},
    {"ph": "X", "cat": "kernel", "name": "sm80_xmma_gemm_bf16bf16_bf16f32", "ts": 0, "dur": 100, "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "ts": 50, "dur": 100, "args": {"device": 0, "stream": 13}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "ts": 200, "dur": 60, "args": {"device": 0, "stream": 20}},
    {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllGather_RING_LL_Sum_int8_t", "ts": 300, "dur": 40, "args": {"device": 0, "stream": 20}},
    {"ph": "X", "cat": "kernel", "name": "sm80_xmma_gemm_bf16bf16_bf16f32", "ts": 0, "dur": 900, "args": {"device": 1, "stream": 7}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5},
    {"ph": "i", "name": "marker", "ts": 3}
  ]})";
  const MeasuredStep measured = read_profile(test::write_temp_file("profile.json", trace));
  CHECK(measured.steps == 2);
  CHECK(measured.step_s == doctest::Approx(1.1e-3));
  CHECK(measured.compute_s == doctest::Approx(75e-6));
  CHECK(measured.comm_s == doctest::Approx(50e-6));
  CHECK(measured.split());
  CHECK(measured.source == "profile.json");
}

TEST_CASE("a file that is not a profiler trace of steps is refused with what to record") {
  CHECK(contains(profile_error("notjson.json", "{nope"), "notjson.json: not JSON"));
  CHECK(contains(profile_error("nosteps.json", R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 1}]})"),
                 "no ProfilerStep#N spans"));
  CHECK(contains(profile_error("nokernels.json",
                               R"({"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 9}]})"),
                 "ProfilerActivity.CUDA"));
  CHECK(contains(profile_error("object.json", R"({"events": []})"), "no traceEvents array"));
}

TEST_CASE("each efficiency is scaled by simulated over measured time, and a step time alone moves compute only") {
  MeasuredStep profile;
  profile.step_s = 3;
  profile.compute_s = 1;
  profile.comm_s = 2;
  // The simulation computed twice as long as measured (too slow: efficiency 0.5 -> 1.0) and
  // communicated half as long (too fast: bandwidth 1 -> 0.5).
  const Efficiencies next = next_efficiencies(profile, {{{0.5, 1.0}, {4, 2, 1}}});
  CHECK(next.matmul == doctest::Approx(1.0));
  CHECK(next.bandwidth == doctest::Approx(0.5));
  CHECK(fit_gap(profile, {4, 2, 1}) == doctest::Approx(1.0));  // compute 100 % off, comm 50 %

  MeasuredStep step_only;
  step_only.step_s = 12;
  // Simulated 10 s of which 8 compute: the 2 s missing go to compute, 10 s at 0.5 x 8 / 10.
  const Efficiencies slower = next_efficiencies(step_only, {{{0.5, 0.9}, {10, 8, 1}}});
  CHECK(slower.matmul == doctest::Approx(0.4));
  CHECK(slower.bandwidth == 0.9);
  CHECK(fit_gap(step_only, {10, 8, 1}) == doctest::Approx(1.0 / 6));
  // Measured 1 s: the 2 s outside compute already exceed it, no efficiency reaches it.
  step_only.step_s = 1;
  CHECK(std::isinf(next_efficiencies(step_only, {{{0.5, 1}, {10, 8, 1}}}).matmul));
}

TEST_CASE("with two tries an efficiency takes the secant step in its inverse, exact where time is linear in it") {
  // A step of 2 + 4 u seconds for u = 1 / efficiency (a pipeline: the bubble grows with compute,
  // so the step moves more than the compute the first guess assumed): at 0.5 (u = 2) 10 s, at 0.25
  // (u = 4) 18 s. Measured 12 s: u = 2.5, efficiency 0.4, in one step.
  MeasuredStep step_only;
  step_only.step_s = 12;
  const std::vector<Try> tried = {{{0.5, 1}, {10, 3, 0}}, {{0.25, 1}, {18, 6, 0}}};
  CHECK(next_efficiencies(step_only, tried).matmul == doctest::Approx(0.4));
  // The same time at two efficiencies (memory-bound work): no step can reach the measurement.
  const std::vector<Try> flat = {{{0.5, 1}, {10, 3, 0}}, {{0.25, 1}, {10, 3, 0}}};
  CHECK(std::isnan(next_efficiencies(step_only, flat).matmul));
  // Each efficiency uses the last try that differs in it: here bandwidth only moved last, so
  // compute goes back to the first try. Compute 1 + 2 u: 5 s at u = 2, 9 s at u = 4; measured 7 s:
  // u = 3. Communication 0.5 + 1 u: 1.5 s at u = 1, 2.5 s at u = 2; measured 2 s: u = 1.5.
  MeasuredStep profile;
  profile.step_s = 10;
  profile.compute_s = 7;
  profile.comm_s = 2;
  const std::vector<Try> both = {{{0.5, 1}, {9, 5, 1.5}}, {{0.25, 1}, {12, 9, 1.5}}, {{0.25, 0.5}, {13, 9, 2.5}}};
  const Efficiencies next = next_efficiencies(profile, both);
  CHECK(next.matmul == doctest::Approx(1.0 / 3));
  CHECK(next.bandwidth == doctest::Approx(1.0 / 1.5));
}

TEST_CASE("a scenario takes a calibration file's efficiencies and refuses one it also sets") {
  CalibrationResult result;
  result.scenario = "tiny.ini";
  result.gpu = "A100-SXM4-80GB";
  result.measured.step_s = 1;
  result.measured.compute_s = 0.8;
  result.measured.comm_s = 0.1;
  result.measured.source = "profile.json";
  result.before = {0.55, 1};
  result.after = {0.4321, 0.85};
  result.simulated_before = {0.9, 0.7, 0.08};
  result.simulated_after = {1.0, 0.8, 0.1};
  const std::string text = calibration_file_text(result);
  const auto file = test::write_temp_file("calibration.ini", text);
  const auto scenario_file = test::write_temp_file("calibrated.ini", test::tiny_scenario_ini);
  const Scenario scenario = load_scenario(scenario_file, {"platform.calibration=" + file.string()});
  CHECK(scenario.efficiency.matmul == 0.4321);
  CHECK(scenario.bandwidth_efficiency == 0.85);
  CHECK(scenario.efficiency.model == ComputeModel::roofline);
  CHECK(scenario.calibration.gpu == "A100-SXM4-80GB");
  CHECK(scenario.calibration.keys ==
        std::vector<std::string>{"compute.model", "compute.matmul_efficiency", "comm.bandwidth_efficiency"});
  // The scenario may say what the calibration says.
  CHECK(load_scenario(scenario_file, {"compute.model=roofline", "platform.calibration=" + file.string()})
            .efficiency.matmul == 0.4321);
  CHECK(contains(text, "compute.matmul_efficiency 0.55 -> 0.4321 (-21.4 %)"));

  const auto refused = [&](const std::vector<std::string>& overrides) {
    try {
      load_scenario(scenario_file, overrides);
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    FAIL("accepted");
    return std::string();
  };
  CHECK(contains(refused({"platform.calibration=" + file.string(), "compute.matmul_efficiency=0.5"}),
                 "compute.matmul_efficiency = 0.4321, but --set compute.matmul_efficiency=0.5 sets 0.5"));
  const auto kernels = test::write_temp_file("kernels.ini", "[calibration]\ngpu = A100-SXM4-80GB\n[compute]\nmodel = kernels\n");
  CHECK(contains(refused({"platform.calibration=" + kernels.string()}), "accepted: roofline"));
  const auto twice =
      test::write_temp_file("twice.ini", "[calibration]\ngpu = A100-SXM4-80GB\ngpu = H100-SXM5-80GB\n");
  CHECK(contains(refused({"platform.calibration=" + twice.string()}), "'calibration.gpu' is set twice"));
  const auto stray = test::write_temp_file("stray.ini", "[calibration]\ngpu = A100-SXM4-80GB\n[parallel]\ndp = 2\n");
  CHECK(contains(refused({"platform.calibration=" + stray.string()}), "'parallel.dp' is not a calibration key"));
  const auto no_gpu = test::write_temp_file("nogpu.ini", "[compute]\nmatmul_efficiency = 0.5\n");
  CHECK(contains(refused({"platform.calibration=" + no_gpu.string()}), "no [calibration] gpu"));
  CHECK(contains(refused({"platform.calibration=missing.ini"}), "platform.calibration = 'missing.ini': no such file"));
}

TEST_CASE("a calibration named in a scenario file is found beside it, whatever the working directory") {
  const auto dir = test::fresh_dir("calibrated_folder");
  std::ofstream(dir / "fit.ini") << "[calibration]\ngpu = A100-SXM4-80GB\n[compute]\nmatmul_efficiency = 0.33\n";
  std::ofstream(dir / "scenario.ini") << test::tiny_scenario_ini << "[platform]\ncalibration = fit.ini\n";
  const Scenario scenario = load_scenario(dir / "scenario.ini", {});
  CHECK(scenario.efficiency.matmul == 0.33);
  CHECK(scenario.calibration.file == dir / "fit.ini");
}
