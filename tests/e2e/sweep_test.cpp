// trainsim sweep runs each configuration in its own process and loses nothing: invalid
// combinations are recorded with their reason, shards cover the product once, a killed sweep
// resumes where it stopped.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "cli.hpp"

using namespace trainsim::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string tiny = project_file("tests/fixtures/tiny-ddp.ini");
// 3 x 2 x 2 = 12 configurations. tiny-ddp has micro_batch 2: a global batch of 12 divides by
// micro_batch x dp for dp = 2 (4) but not for dp = 4 (8) or dp = 8 (16).
const std::string varied = " --vary parallel.dp=2,4,8 --vary memory.zero=0,1 --vary training.global_batch=16,12";

std::vector<json> rows_of(const fs::path& jsonl) {
  std::vector<json> rows;
  std::ifstream in(jsonl);
  std::string line;
  while (std::getline(in, line))
    rows.push_back(json::parse(line));
  return rows;
}

// Starts `trainsim arguments...` in `dir` with TMPDIR set to `tmp`; its pid.
pid_t start_trainsim(const fs::path& dir, const fs::path& tmp, const std::vector<std::string>& arguments) {
  std::vector<std::string> all = {TRAINSIM_BINARY};
  all.insert(all.end(), arguments.begin(), arguments.end());
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0 || ::setenv("TMPDIR", tmp.c_str(), 1) != 0 ||
        !std::freopen("stdout.txt", "w", stdout) || !std::freopen("stderr.txt", "w", stderr))
      ::_exit(126);
    std::vector<char*> argv;
    for (std::string& argument : all)
      argv.push_back(argument.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Live processes whose command line mentions `text`: a sweep's workers name their scratch
// folder, under TMPDIR, in --out; the sweep itself does not.
int processes_mentioning(const std::string& text) {
  int found = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::string command_line = read_file(entry.path() / "cmdline");  // empty for a zombie
    std::replace(command_line.begin(), command_line.end(), '\0', ' ');
    found += command_line.find(text) != std::string::npos;
  }
  return found;
}

std::vector<fs::path> scratch_folders(const fs::path& tmp) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(tmp))
    if (entry.path().filename().string().find("trainsim-") != std::string::npos)
      found.push_back(entry.path());
  return found;
}

bool wait_until(double seconds, const std::function<bool()>& condition) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > end)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

int wait_for(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

// Two configurations whose simulations take seconds each (Llama 3 70B, pp 4, 32 micro-batches),
// so that both workers are still running when the sweep is stopped.
const std::vector<std::string> slow_sweep = {"sweep", project_file("scenarios/llama3-70b-pp4-1f1b.ini"), "--vary",
                                             "training.tokens=1e9,2e9", "-j", "2", "-o", "s.csv"};

} // namespace

TEST_CASE("a sweep runs the product, records invalid combinations with their reason, and writes sorted rows") {
  const CliResult result = run_trainsim("sweep_full", "sweep " + tiny + varied + " -j 2 -o out/sweep.csv");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const auto rows = rows_of(result.dir / "out/sweep.jsonl");
  REQUIRE(rows.size() == 12);
  int invalid = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i]["index"] == i);
    const int dp = std::stoi(rows[i]["settings"][0][1].get<std::string>());
    const int batch = std::stoi(rows[i]["settings"][2][1].get<std::string>());
    const bool divides = batch % (2 * dp) == 0;
    CHECK(rows[i]["status"] == std::string(divides ? "ok" : "invalid"));
    if (!divides) {
      ++invalid;
      CHECK(rows[i]["reason"].get<std::string>().find("not a multiple of micro_batch x dp") != std::string::npos);
    } else {
      CHECK(rows[i]["step_time_s"].get<double>() > 0);
    }
  }
  CHECK(invalid == 4);  // dp = 4 and 8 with global batch 12, for both ZeRO stages
  const std::string csv = read_file(result.dir / "out/sweep.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 13);
  CHECK(csv.rfind("index,status,parallel.dp,memory.zero,training.global_batch,step_time_s", 0) == 0);
  CHECK(result.out.find("12 configurations: 8 simulated (8 fit), 4 invalid, 0 failed") != std::string::npos);

  // sweep.svg: one point per simulated configuration; sweep.html: the plot and every row.
  const auto svg = xml_tree(result.dir / "out/sweep.svg");
  CHECK(xml_elements(svg, "circle").size() == 8);  // all fit: no crosses
  const auto html = xml_tree(result.dir / "out/sweep.html");
  CHECK(xml_elements(html, "svg").size() == 1);
  CHECK(xml_elements(html, "tr").size() == 1 + 12);
  CHECK(xml_elements(html, "script").size() == 1);  // the inline sorter; nothing fetched
  CHECK(read_file(result.dir / "out/sweep.html").find("src=") == std::string::npos);
}

TEST_CASE("configurations that do not fit are marked in sweep.svg") {
  // Llama 3.2 1B at micro-batch 16 overflows 80 GB without recompute; with full recompute it fits.
  const CliResult result =
      run_trainsim("sweep_fit", "sweep " + project_file("scenarios/default.ini") +
                                    " --vary memory.recompute=none,full --vary training.micro_batch=16 "
                                    "--set training.global_batch=256 -o out/fit.csv");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const auto rows = rows_of(result.dir / "out/fit.jsonl");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["fits"] == false);
  CHECK(rows[1]["fits"] == true);
  const auto svg = xml_tree(result.dir / "out/fit.svg");
  int crosses = 0;
  for (const auto* group : xml_elements(svg, "g"))
    crosses += xml_attribute(*group, "class") == "infeasible";
  CHECK(crosses == 1);
  CHECK(xml_elements(svg, "circle").size() == 1);
}

TEST_CASE("shards cover the sweep once and merge into the same files as one sweep") {
  const CliResult whole = run_trainsim("sweep_whole", "sweep " + tiny + varied + " -j 2 -o whole.csv");
  REQUIRE_MESSAGE(whole.status == 0, whole.err);
  std::string merge = "sweep merge -o merged.csv";
  std::set<int> seen;
  for (int k = 1; k <= 3; ++k) {
    const std::string name = "shard" + std::to_string(k);
    const CliResult shard =
        run_trainsim("sweep_" + name, "sweep " + tiny + varied + " --shard " + std::to_string(k) + "/3 -o " +
                                          (whole.dir / (name + ".csv")).string());
    REQUIRE_MESSAGE(shard.status == 0, shard.err);
    for (const json& row : rows_of(whole.dir / (name + ".jsonl")))
      CHECK(seen.insert(row["index"].get<int>()).second);
    merge += " " + (whole.dir / (name + ".jsonl")).string();
  }
  CHECK(seen.size() == 12);
  const CliResult merged = run_trainsim("sweep_merge", merge);
  REQUIRE_MESSAGE(merged.status == 0, merged.err);
  CHECK(read_file(merged.dir / "merged.csv") == read_file(whole.dir / "whole.csv"));
  CHECK(read_file(merged.dir / "merged.jsonl") == read_file(whole.dir / "whole.jsonl"));
  // The plots too: the GPU's memory line and the page's title come from the shards' rows.
  CHECK(read_file(merged.dir / "merged.svg") == read_file(whole.dir / "whole.svg"));
  CHECK(read_file(merged.dir / "merged.html") == read_file(whole.dir / "whole.html"));
  CHECK(read_file(merged.dir / "merged.svg").find(" memory</text>") != std::string::npos);
}

TEST_CASE("a killed sweep resumes without losing or repeating a configuration") {
  const CliResult whole = run_trainsim("sweep_reference", "sweep " + tiny + varied + " -j 1 -o whole.csv");
  REQUIRE_MESSAGE(whole.status == 0, whole.err);
  const fs::path dir = fresh_dir("sweep_killed");
  // Kill it part-way (SIGKILL: no chance to tidy up) once its first row is written (however slow
  // the build, e.g. under the sanitizers on loaded cores), then resume.
  const std::string command = "cd " + dir.string() + " && { " + std::string(TRAINSIM_BINARY) + " sweep " + tiny +
                              varied + " -j 1 -o killed.csv > /dev/null 2>&1 & pid=$!; for i in $(seq 1 1200); do "
                              "[ -s killed.jsonl ] && break; sleep 0.05; done; kill -KILL $pid; wait $pid; }";
  std::system(command.c_str());
  REQUIRE(fs::exists(dir / "killed.jsonl"));
  // The header written before the first row names the varied keys, as the rows that follow it do.
  CHECK(read_file(dir / "killed.csv").rfind("index,status,parallel.dp,memory.zero,training.global_batch,step_time_s", 0) == 0);
  // A row cut short by the kill is what a kill can leave; the resume must cope with it.
  std::ofstream(dir / "killed.jsonl", std::ios::app) << "{\"index\": 11, \"sett";
  const CliResult refused = run_trainsim("sweep_no_resume", "sweep " + tiny + varied + " -o " + (dir / "killed.csv").string());
  CHECK(refused.status == 2);
  CHECK(refused.err.find("--resume continues that sweep") != std::string::npos);
  const CliResult resumed =
      run_trainsim("sweep_resumed", "sweep " + tiny + varied + " -j 2 --resume -o " + (dir / "killed.csv").string());
  REQUIRE_MESSAGE(resumed.status == 0, resumed.err);
  CHECK(read_file(dir / "killed.jsonl") == read_file(whole.dir / "whole.jsonl"));
  CHECK(read_file(dir / "killed.csv") == read_file(whole.dir / "whole.csv"));
}

TEST_CASE("a worker that runs out of time is recorded as failed, and the sweep goes on") {
  const CliResult result =
      run_trainsim("sweep_timeout", "sweep " + tiny + " --vary parallel.dp=2,4 --timeout 0.000001 -o out/t.csv");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const auto rows = rows_of(result.dir / "out/t.jsonl");
  REQUIRE(rows.size() == 2);
  for (const json& row : rows) {
    CHECK(row["status"] == "failed");
    CHECK(row["reason"] == "time limit reached");
  }
}

TEST_CASE("a varied key that is not a scenario key is refused before anything runs") {
  const CliResult result = run_trainsim("sweep_unknown_key", "sweep " + tiny + " --vary parallel.foo=1,2 -o out/s.csv");
  CHECK(result.status == 2);
  CHECK_MESSAGE(std::count(result.err.begin(), result.err.end(), '\n') == 1, result.err);
  CHECK(result.err.rfind("trainsim: error: --vary parallel.foo: unknown key 'parallel.foo'", 0) == 0);
  CHECK_FALSE(fs::exists(result.dir / "out"));
  // A fixed --set of an unknown key likewise.
  const CliResult fixed =
      run_trainsim("sweep_unknown_fixed_key", "sweep " + tiny + " --vary parallel.dp=2,4 --set memory.foo=1 -o out/s.csv");
  CHECK(fixed.status == 2);
  CHECK(fixed.err.rfind("trainsim: error: --set memory.foo=1: unknown key 'memory.foo'", 0) == 0);
  CHECK_FALSE(fs::exists(fixed.dir / "out"));
  // So is a varied key the scenario's calibration file sets: no row could take it.
  const fs::path dir = fresh_dir("sweep_calibrated_key_files");
  std::ofstream(dir / "fit.ini") << "[calibration]\ngpu = A100-SXM4-80GB\n[compute]\nmatmul_efficiency = 0.5\n";
  const CliResult calibrated =
      run_trainsim("sweep_calibrated_key", "sweep " + tiny + " --set platform.calibration=" + (dir / "fit.ini").string() +
                                               " --vary compute.matmul_efficiency=0.4,0.6 -o out/s.csv");
  CHECK(calibrated.status == 2);
  CHECK(calibrated.err.find("--vary compute.matmul_efficiency: set by platform.calibration") != std::string::npos);
  CHECK_FALSE(fs::exists(calibrated.dir / "out"));
}

TEST_CASE("resuming with other --vary values is refused and leaves the results as they were") {
  const CliResult first = run_trainsim("sweep_resume_other", "sweep " + tiny + " --vary parallel.dp=2,4 -o s.csv");
  REQUIRE_MESSAGE(first.status == 0, first.err);
  const std::string csv = read_file(first.dir / "s.csv"), jsonl = read_file(first.dir / "s.jsonl");
  for (const char* other : {" --vary parallel.dp=2,8", " --vary parallel.dp=2,4 --vary memory.zero=0,1"}) {
    CAPTURE(other);
    const CliResult resumed =
        run_trainsim("sweep_resume_other_again", "sweep " + tiny + other + " --resume -o " + (first.dir / "s.csv").string());
    CHECK(resumed.status == 2);
    CHECK_MESSAGE(std::count(resumed.err.begin(), resumed.err.end(), '\n') == 1, resumed.err);
    CHECK(resumed.err.find("s.jsonl: configuration ") != std::string::npos);
    CHECK(resumed.err.find("resume with the same --vary values") != std::string::npos);
    CHECK(read_file(first.dir / "s.csv") == csv);
    CHECK(read_file(first.dir / "s.jsonl") == jsonl);
  }
}

TEST_CASE("a resumed sweep reruns the configurations whose worker failed, not those refused") {
  // dp=2,4 x global batch 16,12: dp=4 with 12 is refused (12 is not a multiple of 2 x 4).
  const std::string sweep = "sweep " + tiny + " --vary parallel.dp=2,4 --vary training.global_batch=16,12";
  const CliResult reference = run_trainsim("sweep_rerun_reference", sweep + " -o s.csv");
  REQUIRE_MESSAGE(reference.status == 0, reference.err);
  const auto expected = rows_of(reference.dir / "s.jsonl");
  REQUIRE(expected.size() == 4);
  REQUIRE(expected[3]["status"] == "invalid");
  // As a worker killed by a signal leaves it, and a refusal whose reason marks it as not rerun.
  const json failed = {{"index", 0}, {"settings", expected[0]["settings"]}, {"status", "failed"}, {"reason", "killed by signal 9"}};
  json refused = expected[3];
  refused["reason"] = "refused earlier";
  const fs::path dir = fresh_dir("sweep_rerun");
  std::ofstream(dir / "s.jsonl") << failed.dump() << "\n" << expected[1].dump() << "\n" << expected[2].dump() << "\n"
                                 << refused.dump() << "\n";
  const CliResult resumed = run_trainsim("sweep_rerun_resumed", sweep + " --resume -o " + (dir / "s.csv").string());
  REQUIRE_MESSAGE(resumed.status == 0, resumed.err);
  CHECK(resumed.err.find("sweep of 4 configurations, 1 to run") != std::string::npos);
  const auto rows = rows_of(dir / "s.jsonl");
  REQUIRE(rows.size() == 4);
  CHECK(rows[0] == expected[0]);  // simulated again
  CHECK(rows[3]["reason"] == "refused earlier");
}

TEST_CASE("workers die with a killed sweep, and the next sweep removes the scratch folder it left in TMPDIR") {
  const fs::path dir = fresh_dir("sweep_sigkill"), tmp = dir / "tmp";
  fs::create_directories(tmp);
  const pid_t sweep = start_trainsim(dir, tmp, slow_sweep);
  REQUIRE(wait_until(30, [&] { return processes_mentioning(tmp.string()) == 2; }));
  ::kill(sweep, SIGKILL);  // no chance to tidy up
  wait_for(sweep);
  CHECK(wait_until(1, [&] { return processes_mentioning(tmp.string()) == 0; }));
  CHECK(scratch_folders(tmp).size() == 1);
  // The next sweep finds the folder of a sweep that no longer runs and removes it, then its own.
  const pid_t next = start_trainsim(dir, tmp, {"sweep", tiny, "--vary", "parallel.dp=2", "-o", "next.csv"});
  const int status = wait_for(next);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(scratch_folders(tmp).empty());
}

TEST_CASE("a sweep stopped by SIGTERM ends its workers and removes its scratch folder before it dies") {
  const fs::path dir = fresh_dir("sweep_sigterm"), tmp = dir / "tmp";
  fs::create_directories(tmp);
  const pid_t sweep = start_trainsim(dir, tmp, slow_sweep);
  REQUIRE(wait_until(30, [&] { return processes_mentioning(tmp.string()) == 2; }));
  ::kill(sweep, SIGTERM);
  const int status = wait_for(sweep);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(processes_mentioning(tmp.string()) == 0);
  CHECK(scratch_folders(tmp).empty());
  CHECK(read_file(dir / "s.csv").rfind("index,status,training.tokens,step_time_s", 0) == 0);
}

TEST_CASE("sweep merge refuses shards that vary other keys") {
  // Different indexes, so no configuration is named twice: only the keys tell the sweeps apart.
  const fs::path dir = fresh_dir("sweep_merge_other_keys");
  std::ofstream(dir / "a.jsonl") << R"({"index":0,"settings":[["parallel.dp","2"]],"status":"invalid","reason":"r"})"
                                 << "\n";
  std::ofstream(dir / "b.jsonl")
      << R"({"index":1,"settings":[["parallel.dp","2"],["memory.zero","1"]],"status":"invalid","reason":"r"})" << "\n";
  const CliResult merged = run_trainsim("sweep_merge_other_keys_run", "sweep merge " + (dir / "a.jsonl").string() + " " +
                                                                          (dir / "b.jsonl").string() + " -o m.csv");
  CHECK(merged.status == 2);
  CHECK(merged.err.find("b.jsonl: configuration 1 varies other keys than configuration 0") != std::string::npos);
  CHECK_FALSE(fs::exists(merged.dir / "m.csv"));
}

TEST_CASE("sweep.svg colours the points by a varied key and, with one key varied, plots throughput against its values") {
  const CliResult result = run_trainsim("sweep_one_key", "sweep " + tiny + " --vary training.micro_batch=1,2,4 -o out/one.csv");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const auto svg = xml_tree(result.dir / "out/one.svg");
  // Three values: three colours among the scatter's points, and a plot over the three values.
  std::set<std::string> colours;
  int by_key_values = 0;
  for (const auto* group : xml_elements(svg, "g")) {
    if (xml_attribute(*group, "class") == "plot")
      for (const auto* circle : xml_elements(*group, "circle"))
        colours.insert(xml_attribute(*circle, "fill"));
    if (xml_attribute(*group, "class") == "by-key")
      by_key_values = std::stoi(xml_attribute(*group, "data-values"));
  }
  CHECK(colours.size() == 3);
  CHECK(by_key_values == 3);
  const CliResult refused =
      run_trainsim("sweep_colour_refused", "sweep " + tiny + " --vary training.micro_batch=1,2 --colour-by memory.zero -o out/x.csv");
  CHECK(refused.status == 2);
  CHECK(refused.err.find("--colour-by memory.zero: not a varied key; accepted: training.micro_batch") != std::string::npos);
}
