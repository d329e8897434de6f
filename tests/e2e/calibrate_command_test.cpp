// trainsim calibrate: the efficiencies it fits make the scenario simulate what was measured (a
// step time, or a profiler trace's compute and NCCL time), a run takes them from the calibration
// file, and measurements no efficiency can reach are refused with one line and no file.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "cli.hpp"

using namespace trainsim::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Tiny GPT on four GPUs of one DGX A100 node, data parallel.
const char* const tiny_ini = "[model]\nname = tiny-gpt\n[platform]\nfile = dgx-a100-2n.xml\n[parallel]\ndp = 4\n"
                             "[training]\nseq_len = 512\nmicro_batch = 2\nglobal_batch = 16\n";

fs::path write_scenario(const std::string& name) {
  const fs::path dir = fresh_dir(name);
  std::ofstream(dir / "tiny.ini") << tiny_ini;
  return dir / "tiny.ini";
}

double comm_total(const json& summary) {
  double total = 0;
  for (const auto& [kind, comm] : summary["time"]["comm"].items())
    total += comm["total_s"].get<double>();
  return total;
}

// A profiler trace of two steps of `step` seconds on rank 0's GPU, each with `compute` seconds
// of kernels and `nccl` seconds of NCCL kernels (microseconds in the file).
std::string profile_trace(double step, double compute, double nccl) {
  std::ostringstream out;
  out.precision(17);
  out << R"({"traceEvents": [)";
  for (int s = 0; s < 2; ++s) {
    const double start = s * step * 1e6;
    out << (s ? "," : "") << R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#)" << s << R"(", "ts": )" << start
        << R"(, "dur": )" << step * 1e6 << "},"
        << R"({"ph": "X", "cat": "kernel", "name": "ampere_bf16_s16816gemm", "ts": )" << start << R"(, "dur": )"
        << compute * 1e6 << R"(, "args": {"device": 0}},)"
        << R"({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "ts": )"
        << start + compute * 1e6 << R"(, "dur": )" << nccl * 1e6 << R"(, "args": {"device": 0}})";
  }
  out << "]}";
  return out.str();
}

// Simulates `scenario` with the defaults, calibrates it to a step `factor` times as long, and
// simulates it again with the calibration file (`out`, relative to calibrate's folder; empty: its
// default place).
struct StepFit {
  double measured = 0;
  json calibrated;   // the summary with the calibration
  CliResult fitted;  // calibrate's run
};
StepFit fit_step(const std::string& name, const fs::path& scenario, double factor, const std::string& out = "fit.ini") {
  StepFit fit;
  fit.measured = run_summary(name + "_base", scenario.string() + " --no-report")["step_time_s"].get<double>() * factor;
  std::ostringstream step;
  step.precision(17);
  step << fit.measured;
  fit.fitted = run_trainsim(name, "calibrate " + scenario.string() + " --step-time " + step.str() + "s" +
                                      (out.empty() ? "" : " -o " + out));
  REQUIRE_MESSAGE(fit.fitted.status == 0, fit.fitted.err);
  const fs::path file = fit.fitted.dir / (out.empty() ? fs::path("results") / scenario.stem() / "calibration.ini" : fs::path(out));
  fit.calibrated = run_summary(name + "_run", scenario.string() + " --no-report --set platform.calibration=" + file.string());
  return fit;
}

} // namespace

TEST_CASE("calibrate fits the matmul efficiency to a measured step time, and a run with the file simulates it") {
  // A step 20 % longer than simulated with the defaults.
  const StepFit fit = fit_step("calibrate_step", write_scenario("calibrate_step_scenario"), 1.2, "");
  const fs::path file = fit.fitted.dir / "results" / "tiny" / "calibration.ini";  // the default place
  const std::string text = read_file(file);
  CHECK(text.find("[calibration]\ngpu = A100-SXM4-80GB\n") != std::string::npos);
  CHECK(text.find("bandwidth_efficiency =") == std::string::npos);  // a step time cannot split it
  CHECK(fit.fitted.out.find("compute.matmul_efficiency  0.55 -> ") != std::string::npos);
  // Four significant digits of the efficiency leave at most 0.05 % of the compute off.
  CHECK(fit.calibrated["step_time_s"].get<double>() == doctest::Approx(fit.measured).epsilon(2e-3));
  CHECK(fit.calibrated["settings"]["platform.calibration"] == file.string());
}

TEST_CASE("calibrate fits compute and bandwidth separately to a profiler trace's kernels") {
  const fs::path scenario = write_scenario("calibrate_profile_scenario");
  const json base = run_summary("calibrate_profile_base", scenario.string() + " --no-report");
  // Compute kernels 25 % longer and NCCL kernels 50 % longer than simulated with the defaults.
  const double compute = base["time"]["compute_s"].get<double>() * 1.25;
  const double nccl = comm_total(base) * 1.5;
  REQUIRE(nccl > 0);
  const fs::path trace = scenario.parent_path() / "trace.json";
  std::ofstream(trace) << profile_trace(base["step_time_s"].get<double>() * 1.3, compute, nccl);
  const CliResult fitted = run_trainsim("calibrate_profile", "calibrate " + scenario.string() + " --profile " + trace.string() +
                                                                 " -o fit.ini");
  REQUIRE_MESSAGE(fitted.status == 0, fitted.err);
  const json calibrated = run_summary("calibrate_profile_run", scenario.string() + " --no-report --set platform.calibration=" +
                                                                    (fitted.dir / "fit.ini").string());
  CHECK(calibrated["time"]["compute_s"].get<double>() == doctest::Approx(compute).epsilon(2e-3));
  CHECK(comm_total(calibrated) == doctest::Approx(nccl).epsilon(2e-3));
  CHECK(fitted.out.find("comm.bandwidth_efficiency  1 -> 0.") != std::string::npos);
}

TEST_CASE("calibrate refuses a measurement no efficiency reaches, and bad options, with one line and no file") {
  const fs::path scenario = write_scenario("calibrate_refused_scenario");
  const auto refused = [&](const std::string& name, const std::string& arguments, const std::string& part) {
    const CliResult result = run_trainsim(name, "calibrate " + scenario.string() + " " + arguments);
    CHECK(result.status == 2);
    CHECK_MESSAGE(result.err.find(part) != std::string::npos, part, " not in: ", result.err);
    CHECK_FALSE(fs::exists(result.dir / "results"));
  };
  // A step of 1 us: even at 100 % of peak the tiny model takes longer.
  refused("calibrate_too_fast", "--step-time 1us", "compute.matmul_efficiency would need to exceed 1");
  refused("calibrate_neither", "", "give the measurement as --step-time T");
  refused("calibrate_both", "--step-time 1s --profile x.json", "one of them");
  refused("calibrate_kernels", "--step-time 1s --set compute.model=kernels", "calibrate fits the roofline's");
  refused("calibrate_bad_time", "--step-time fast", "--step-time fast");
  refused("calibrate_no_profile", "--profile missing.json", "missing.json: no such file");
  // A profile without NCCL kernels for a scenario that communicates is another run.
  const fs::path trace = scenario.parent_path() / "no-nccl.json";
  std::ofstream(trace) << profile_trace(1e-3, 5e-4, 0);
  refused("calibrate_no_nccl", "--profile " + trace.string(), "no NCCL kernels, but");
}

TEST_CASE("calibrate fits the step of a pipeline, whose bubble grows with its compute") {
  // Four stages of tiny GPT and one micro-batch: the step is mostly bubble, which scales with the
  // compute, so a step-time fit must move the efficiency less than the compute alone suggests.
  const fs::path dir = fresh_dir("calibrate_pipeline_scenario");
  std::ofstream(dir / "pp.ini") << "[model]\nname = tiny-gpt\n[platform]\nfile = dgx-a100.xml\n[parallel]\npp = 4\n"
                                   "[training]\nseq_len = 512\nmicro_batch = 1\nglobal_batch = 1\n";
  const StepFit fit = fit_step("calibrate_pipeline", dir / "pp.ini", 1.3);
  CHECK(fit.calibrated["step_time_s"].get<double>() == doctest::Approx(fit.measured).epsilon(2e-3));
}

TEST_CASE("a calibration fitted on one GPU is refused on another") {
  const fs::path dir = fresh_dir("calibrate_other_gpu");
  std::ofstream(dir / "a100.ini") << "[calibration]\ngpu = A100-SXM4-80GB\n[compute]\nmodel = roofline\nmatmul_efficiency = 0.5\n";
  const CliResult result = run_trainsim("calibrate_other_gpu_run", "run " + project_file("scenarios/default.ini") +
                                                                       " --set platform.file=dgx-h100-2n.xml --set platform.calibration=" +
                                                                       (dir / "a100.ini").string() + " -o out");
  CHECK(result.status == 2);
  CHECK(result.err.find("fitted on A100-SXM4-80GB, but the platform's GPUs are H100-SXM5-80GB") != std::string::npos);
  CHECK_FALSE(fs::exists(result.dir / "out"));
}

TEST_CASE("plan --calibration gives every candidate the calibration's efficiencies, on its GPU only") {
  const fs::path dir = fresh_dir("calibrate_plan_file");
  // Half the default matmul efficiency: the same candidate's step takes longer (its compute is
  // most of a step of tiny GPT on two A100s).
  std::ofstream(dir / "a100.ini") << "[calibration]\ngpu = A100-SXM4-80GB\n[compute]\nmodel = roofline\nmatmul_efficiency = 0.275\n";
  const std::string plan = "plan --model tiny-gpt --gpus 2 --global-batch 8 --seq-len 512 -o out ";
  const CliResult plain = run_trainsim("calibrate_plan_plain", plan + "--gpu a100-80gb");
  const CliResult calibrated =
      run_trainsim("calibrate_plan_calibrated", plan + "--gpu a100-80gb --calibration " + (dir / "a100.ini").string());
  REQUIRE_MESSAGE(plain.status == 0, plain.err);
  REQUIRE_MESSAGE(calibrated.status == 0, calibrated.err);
  const json before = read_json(plain.dir / "out" / "plan.json");
  const json after = read_json(calibrated.dir / "out" / "plan.json");
  bool compared = false;
  for (const json& row : after)
    for (const json& base : before)
      if (row["decisions"] == base["decisions"] && row["dp"] == 2 && row["micro_batch"] == 4) {
        CHECK(row["step_time_s"].get<double>() > 1.5 * base["step_time_s"].get<double>());
        compared = true;
      }
  CHECK(compared);
  const CliResult other = run_trainsim("calibrate_plan_h100", plan + "--gpu h100-sxm --calibration " + (dir / "a100.ini").string());
  CHECK(other.status == 2);
  CHECK(other.err.find("fitted on A100-SXM4-80GB, but the platform's GPUs are H100-SXM5-80GB") != std::string::npos);
  const CliResult missing = run_trainsim("calibrate_plan_missing", plan + "--gpu a100-80gb --calibration nope.ini");
  CHECK(missing.status == 2);
  CHECK(missing.err.find("--calibration nope.ini: no such file") != std::string::npos);
}

TEST_CASE("calibrate reaches a step time through a range where memory-bound pieces ignore the matmul efficiency") {
  // One GPU with slow memory: the step is memory-bound until the matmul efficiency falls far
  // enough, so the first guesses change nothing and the fit has to search further down.
  const fs::path dir = fresh_dir("calibrate_memory_bound_scenario");
  std::ofstream(dir / "solo.ini") << "[model]\nname = tiny-gpt\n[platform]\nfile = dgx-a100.xml\n[compute]\n"
                                     "memory_efficiency = 0.3\n[training]\nseq_len = 512\nmicro_batch = 2\nglobal_batch = 2\n";
  const StepFit fit = fit_step("calibrate_memory_bound", dir / "solo.ini", 1.07);
  CHECK(fit.calibrated["step_time_s"].get<double>() == doctest::Approx(fit.measured).epsilon(2e-3));
}
