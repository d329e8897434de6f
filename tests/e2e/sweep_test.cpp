// trainsim sweep runs each configuration in its own process and loses nothing: invalid
// combinations are recorded with their reason, shards cover the product once, a killed sweep
// resumes where it stopped.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <set>

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
}

TEST_CASE("a killed sweep resumes without losing or repeating a configuration") {
  const CliResult whole = run_trainsim("sweep_reference", "sweep " + tiny + varied + " -j 1 -o whole.csv");
  REQUIRE_MESSAGE(whole.status == 0, whole.err);
  const fs::path dir = fresh_dir("sweep_killed");
  // Kill it part-way (SIGKILL: no chance to tidy up), then resume.
  const std::string command = "cd " + dir.string() + " && timeout -s KILL 0.6 " + std::string(TRAINSIM_BINARY) +
                              " sweep " + tiny + varied + " -j 1 -o killed.csv > /dev/null 2>&1";
  std::system(command.c_str());
  REQUIRE(fs::exists(dir / "killed.jsonl"));
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
