#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

#include "cli.hpp"

using namespace trainsim::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {
const std::string tiny = project_file("tests/fixtures/tiny-ddp.ini");
constexpr double gib = 1024.0 * 1024 * 1024;
} // namespace

TEST_CASE("run prints a summary and writes summary.json with the documented keys") {
  const CliResult result = run_trainsim("run_keys", "run " + tiny + " --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  CHECK(result.out.find("step time") != std::string::npos);
  CHECK(result.out.find("MFU") != std::string::npos);
  const json summary = read_json(result.dir / "out/summary.json");
  CHECK(summary["model"]["name"] == "tiny-gpt");
  // tiny-gpt: 4 x (12h^2 + 13h) + (V + positions) h + 2h with h = 256, V = 1024, 1024 positions.
  CHECK(summary["model"]["parameters"] == 4 * (12 * 256 * 256 + 13 * 256) + (1024 + 1024) * 256 + 2 * 256);
  CHECK(summary["platform"]["gpus_used"] == 16);
  const double step = summary["step_time_s"];
  CHECK(step > 0);
  CHECK(summary["tokens_per_s"].get<double>() * step == doctest::Approx(64.0 * 512));
  // Training takes whole steps: 1e9 tokens / (64 x 512) per step = 30,517.6, so 30,518 steps.
  CHECK(summary["time_to_train_s"].get<double>() == doctest::Approx(30518 * step).epsilon(1e-12));
  CHECK(summary["mfu"].get<double>() > 0);
  CHECK(summary["mfu"].get<double>() < 1);
  CHECK(summary["memory"]["capacity_bytes"] == 80 * gib);  // A100 80GB
  CHECK(summary["memory"]["fits"] == true);
  REQUIRE(summary["memory"]["ranks"].size() == 16);
  for (const json& rank : summary["memory"]["ranks"]) {
    double at_peak = 0;
    for (const char* category :
         {"weights", "gradients", "optimizer", "activations", "buffers", "cuda_context", "nccl_buffers"})
      at_peak += rank["at_peak"][category].get<double>();
    CHECK(at_peak == doctest::Approx(rank["peak_bytes"].get<double>()));
    // The tiny scenario's dp = 16 is one NCCL communicator: 16 channels x 9,633,792 bytes.
    CHECK(rank["at_peak"]["cuda_context"] == 512.0 * 1024 * 1024);
    CHECK(rank["at_peak"]["nccl_buffers"] == 16 * 9633792.0);
    // The reserve is fragmentation 0.15 of what the allocator reserves: 0.15 / 0.85 of the tensors.
    const double tensors = at_peak - 512.0 * 1024 * 1024 - 16 * 9633792.0;
    CHECK(rank["reserve_bytes"].get<double>() == doctest::Approx(tensors * 0.15 / 0.85));
    CHECK(rank["headroom_bytes"].get<double>() ==
          doctest::Approx(80 * gib - rank["peak_bytes"].get<double>() - rank["reserve_bytes"].get<double>()));
    for (const char* state : {"weights", "gradients", "optimizer"})
      CHECK(rank["model_states"][state].get<double>() > 0);
  }
  CHECK(summary["memory"]["peak_bytes"] == summary["memory"]["ranks"][0]["peak_bytes"]);
  const json& time = summary["time"];
  CHECK(time["compute_s"].get<double>() <= step);
  CHECK(time["comm"]["dp"]["total_s"].get<double>() > 0);
  CHECK(time["comm"]["dp"]["exposed_s"].get<double>() <= time["comm"]["dp"]["total_s"].get<double>());
}

TEST_CASE("memory from program order equals the simulated peaks of run") {
  const CliResult run = run_trainsim("memory_vs_run_run", "run " + tiny + " --out out");
  const CliResult memory = run_trainsim("memory_vs_run_memory", "memory " + tiny + " --out out");
  REQUIRE_MESSAGE(run.status == 0, run.err);
  REQUIRE_MESSAGE(memory.status == 0, memory.err);
  const json simulated = read_json(run.dir / "out/summary.json")["memory"];
  const json ordered = read_json(memory.dir / "out/memory.json")["memory"];
  CHECK(simulated["peak_bytes"] == ordered["peak_bytes"]);
  REQUIRE(simulated["ranks"].size() == ordered["ranks"].size());
  for (std::size_t i = 0; i < simulated["ranks"].size(); ++i) {
    CHECK(simulated["ranks"][i]["peak_bytes"] == ordered["ranks"][i]["peak_bytes"]);
    CHECK(simulated["ranks"][i]["at_peak"] == ordered["ranks"][i]["at_peak"]);
  }
}

TEST_CASE("trace then replay gives the same step as run") {
  // Also with the tp ring's messages of comm.tp_comm_overlap, whose peers only some slots bind.
  for (const std::string settings : {"", " --set parallel.tp=2 --set parallel.sp=true --set parallel.dp=8 "
                                         "--set comm.tp_comm_overlap=true"}) {
    CAPTURE(settings);
    const std::string name = settings.empty() ? "trace_replay" : "trace_replay_tp_ring";
    const CliResult run = run_trainsim(name + "_run", "run " + tiny + settings + " --out out");
    REQUIRE_MESSAGE(run.status == 0, run.err);
    const CliResult trace = run_trainsim(name + "_trace", "trace " + tiny + settings + " --out trace");
    REQUIRE_MESSAGE(trace.status == 0, trace.err);
    const CliResult replay = run_trainsim(
        name + "_replay", "replay " + (trace.dir / "trace").string() + " --platform dgx-a100-2n.xml --out out");
    REQUIRE_MESSAGE(replay.status == 0, replay.err);
    const json a = read_json(run.dir / "out/summary.json");
    const json b = read_json(replay.dir / "out/summary.json");
    CHECK(a["step_time_s"] == b["step_time_s"]);
    CHECK(a["mfu"] == b["mfu"]);
    CHECK(a["memory"]["peak_bytes"] == b["memory"]["peak_bytes"]);
    CHECK(a["time"]["comm"] == b["time"]["comm"]);
  }
}

TEST_CASE("two runs of the same scenario write byte-identical outputs") {
  const CliResult first = run_trainsim("determinism_1", "run " + tiny + " --out out");
  const CliResult second = run_trainsim("determinism_2", "run " + tiny + " --out out");
  REQUIRE(first.status == 0);
  REQUIRE(second.status == 0);
  CHECK(read_file(first.dir / "out/summary.json") == read_file(second.dir / "out/summary.json"));
  CHECK(read_file(first.dir / "out/memory.csv") == read_file(second.dir / "out/memory.csv"));
  CHECK(first.out == second.out);
  const CliResult trace_a = run_trainsim("determinism_trace_1", "trace " + tiny + " --out trace");
  const CliResult trace_b = run_trainsim("determinism_trace_2", "trace " + tiny + " --out trace");
  REQUIRE(trace_a.status == 0);
  CHECK(read_file(trace_a.dir / "trace/workload.txt") == read_file(trace_b.dir / "trace/workload.txt"));
  CHECK(read_file(trace_a.dir / "trace/program-00000.trace") == read_file(trace_b.dir / "trace/program-00000.trace"));
}

TEST_CASE("memory.csv has one column per category and reaches the reported peak") {
  const CliResult result = run_trainsim("memory_csv", "run " + tiny + " --out out");
  REQUIRE(result.status == 0);
  std::string header;
  const auto rows = memory_rows(result.dir / "out/memory.csv", 0, &header);
  CHECK(header == "rank,time_s,weights,gradients,optimizer,activations,buffers,cuda_context,nccl_buffers,host,nvme");
  double highest = 0, last_time = 0;
  for (const auto& row : rows) {
    CHECK(row.size() == 10);
    CHECK(row[0] >= last_time);  // a timeline in simulated-time order
    last_time = row[0];
    CHECK(row[6] == 512.0 * 1024 * 1024);  // the CUDA context, from the start
    CHECK(row[8] == 0);  // nothing offloaded
    CHECK(row[9] == 0);
    double total = 0;
    for (std::size_t c = 1; c <= 7; ++c)
      total += row[c];
    highest = std::max(highest, total);
  }
  CHECK(rows.size() > 10);
  const json summary = read_json(result.dir / "out/summary.json");
  CHECK(highest == doctest::Approx(summary["memory"]["ranks"][0]["peak_bytes"].get<double>()));
  CHECK(last_time <= summary["step_time_s"].get<double>());
}

TEST_CASE("a scenario that does not fit still simulates and reports the overflow") {
  // GPT-3 175B replicated on each GPU needs 18 bytes per parameter of model states alone (> 3 TB).
  const CliResult result = run_trainsim(
      "oom", "run " + tiny + " --out out --set model.name=gpt3-175b --set platform.file=dgx-a100.xml "
                              "--set parallel.dp=8 --set training.seq_len=2048 --set training.micro_batch=1 "
                              "--set training.global_batch=8");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  CHECK(result.out.find("DOES NOT FIT") != std::string::npos);
  const json summary = read_json(result.dir / "out/summary.json");
  CHECK(summary["memory"]["fits"] == false);
  CHECK(summary["memory"]["ranks"][3]["overflow_bytes"].get<double>() > 3e12 - 80 * gib);
  // The model states are allocated first, at time 0: that is when the step stops fitting.
  CHECK(summary["memory"]["ranks"][3]["over_capacity_at"] == 0.0);
  CHECK(summary["step_time_s"].get<double>() > 0);
}

TEST_CASE("--set changes the layout and the accumulation") {
  const CliResult result = run_trainsim("set", "run " + tiny + " --out out --set parallel.dp=8");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const json summary = read_json(result.dir / "out/summary.json");
  CHECK(summary["platform"]["gpus_used"] == 8);
  CHECK(summary["layout"] == "dp=8 tp=1 pp=1 cp=1");
  CHECK(result.out.find("2 x 4 accumulation steps") != std::string::npos);  // 64 / (2 x 8)
}

TEST_CASE("the README's default scenario runs and fits") {
  const CliResult result = run_trainsim("default", "run " + project_file("scenarios/default.ini") + " --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const json summary = read_json(result.dir / "out/summary.json");
  CHECK(summary["model"]["parameters"].get<double>() >= 1e9);
  CHECK(summary["platform"]["gpus_used"].get<int>() >= 16);
  CHECK(summary["memory"]["fits"] == true);
}

TEST_CASE("help lists every command and every scenario key with its default") {
  const CliResult top = run_trainsim("help_top", "--help");
  CHECK(top.status == 0);
  for (const char* command : {"run", "memory", "trace", "replay"})
    CHECK(top.out.find(command) != std::string::npos);
  const CliResult run = run_trainsim("help_run", "run --help");
  CHECK(run.status == 0);
  for (const char* key : {"--set", "--out", "--log-level", "--sg-log", "--sg-cfg", "[parallel]", "dp = 1",
                          "precision = bf16", "global_batch = auto", "bucket_size = auto", "[memory]"})
    CHECK(run.out.find(key) != std::string::npos);
}

TEST_CASE("--sg-cfg reaches SimGrid: the TCP model slows the all-reduce down") {
  const CliResult ours = run_trainsim("sgcfg_default", "run " + tiny + " --out out");
  const CliResult lv08 = run_trainsim("sgcfg_lv08", "run " + tiny + " --out out --sg-cfg network/model:LV08");
  REQUIRE_MESSAGE(lv08.status == 0, lv08.err);
  const double fast = read_json(ours.dir / "out/summary.json")["time"]["comm"]["dp"]["total_s"];
  const double slow = read_json(lv08.dir / "out/summary.json")["time"]["comm"]["dp"]["total_s"];
  CHECK(slow > fast);  // LV08's 0.97 bandwidth and 13.01 latency factors (SimGrid documentation)
}

TEST_CASE("a rerun into the same folder leaves only its own outputs") {
  const fs::path out = fresh_dir("rerun_out");
  const CliResult first = run_trainsim("rerun_with_report", "run " + tiny + " --out " + out.string());
  REQUIRE_MESSAGE(first.status == 0, first.err);
  REQUIRE(fs::exists(out / "report.html"));
  const CliResult second = run_trainsim("rerun_no_report", "run " + tiny + " --out " + out.string() + " --no-report");
  REQUIRE_MESSAGE(second.status == 0, second.err);
  // The first run's report would describe a run that these summary.json and memory.csv do not.
  for (const char* stale : {"report.html", "trace.json", "memory.svg", "pipeline.svg", "breakdown.svg"})
    CHECK_MESSAGE(!fs::exists(out / stale), stale);
  CHECK(fs::exists(out / "summary.json"));
  CHECK(fs::exists(out / "memory.csv"));
}
