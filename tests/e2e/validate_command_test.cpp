// trainsim validate: each published row simulated as `trainsim run` would simulate it, compared
// in the source's quantity; bad tables refused with one line; and the published table's error
// kept under the figure this version reaches.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "cli.hpp"

using namespace trainsim::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The regression bound on mean |error| per set, over the rows of validation/published.csv of at
// most 64 GPUs (48 rows, about 25 s on two cores; the whole table, up to 3,360 GPUs, takes far
// longer than a test should: `trainsim validate` runs it). Each bound is the figure this version
// of the defaults reaches on those rows (December 2026, with the framework profiles: 19.5 %,
// 11.4 %, 16.1 %; Megatron-Core's Mixtral row 0.9 %; Qi et al.'s pipeline schedules 6.7 %) plus
// one point, so that a change that makes the predictions worse fails here.
// It is a regression bound measured on this version, not the goal: the goal is 3 % mean |error| (6 % max) on every set. The compute
// model is being replaced: a change that improves the figures should lower these bounds.
const std::map<std::string, double> mean_error_bound = {
    {"megatron-2021-t1", 0.205},
    {"korthikanti-2022", 0.124},
    {"llm-foundry", 0.171},
    {"megatron-moe-2024", 0.019},
    {"zero-bubble-2024", 0.077},
};
constexpr int bounded_rows_max_gpus = 64;

const std::string fixture = project_file("tests/fixtures/validation-rows.csv");

std::size_t lines_in(const std::string& text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')); }

} // namespace

TEST_CASE("validate simulates each row as trainsim run does and compares it in the source's quantity") {
  const CliResult result = run_trainsim("validate_fixture", "validate " + fixture + " -j 2 --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const json table = read_json(result.dir / "out" / "validation.json");
  REQUIRE(table["rows"].size() == 3);
  const json& ddp = table["rows"][0];
  const json& tp2 = table["rows"][1];
  const json& listed = table["rows"][2];
  REQUIRE(ddp["status"] == "ok");
  REQUIRE(tp2["status"] == "ok");

  // The same settings given to trainsim run by hand: the same step time.
  const fs::path scenario_dir = fresh_dir("validate_fixture_scenario");
  std::ofstream(scenario_dir / "ddp.ini") << "[model]\nname = tiny-gpt\n[platform]\ngpu = a100-80gb\nnodes = 1\ngpus_per_node = 2\n"
                                            "[parallel]\ndp = 2\n[memory]\nflash_attention = false\n[training]\nseq_len = 512\n"
                                            "micro_batch = 2\nglobal_batch = 8\n[comm]\nbucket_size = 10MiB\n";
  const json by_hand = run_summary("validate_fixture_run", (scenario_dir / "ddp.ini").string() + " --no-report");
  CHECK(ddp["step_time_s"].get<double>() == by_hand["step_time_s"].get<double>());
  CHECK(ddp["predicted"].get<double>() == ddp["step_time_s"].get<double>());
  CHECK(ddp["error"].get<double>() == doctest::Approx(ddp["step_time_s"].get<double>() / 0.01 - 1));
  // tokens/s per GPU: 8 sequences of 512 tokens per step on 2 GPUs.
  const double tokens = 8.0 * 512 / (2 * tp2["step_time_s"].get<double>());
  CHECK(tp2["predicted"].get<double>() == doctest::Approx(tokens));
  CHECK(tp2["error"].get<double>() == doctest::Approx(tokens / 100000 - 1));
  // Listed with its reason, not dropped.
  CHECK(listed["status"] == "not simulated");
  CHECK(listed["reason"] == "too big, for the test");
  CHECK(result.out.find("not simulated:\n  fixture listed (16 GPUs): too big, for the test\n") != std::string::npos);
  const json& all = table["sets"][1];
  CHECK(all["set"] == "all");
  CHECK(all["rows"] == 3);
  CHECK(all["simulated"] == 2);
  CHECK(all["mean_abs_error"].get<double>() ==
        doctest::Approx((std::abs(ddp["error"].get<double>()) + std::abs(tp2["error"].get<double>())) / 2));
  CHECK(lines_in(read_file(result.dir / "out" / "validation.csv")) == 4);
  CHECK(result.out.find("set      rows  simulated  mean |error|  max |error|\n") != std::string::npos);
}

TEST_CASE("validate --set gives every row a setting over the row's own, as trainsim run --set would") {
  const CliResult result = run_trainsim(
      "validate_override", "validate " + fixture + " -j 2 --out out --set compute.matmul_efficiency=0.275 "
                           "--set comm.bucket_size=20MiB");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const json table = read_json(result.dir / "out" / "validation.json");
  const json& ddp = table["rows"][0];
  REQUIRE(ddp["status"] == "ok");
  // The row's own comm.bucket_size = 10MiB gives way to the override.
  const fs::path scenario_dir = fresh_dir("validate_override_scenario");
  std::ofstream(scenario_dir / "ddp.ini") << "[model]\nname = tiny-gpt\n[platform]\ngpu = a100-80gb\nnodes = 1\n"
                                            "gpus_per_node = 2\n[parallel]\ndp = 2\n[memory]\nflash_attention = false\n"
                                            "[training]\nseq_len = 512\nmicro_batch = 2\nglobal_batch = 8\n[compute]\n"
                                            "matmul_efficiency = 0.275\n[comm]\nbucket_size = 20MiB\n";
  const json by_hand = run_summary("validate_override_run", (scenario_dir / "ddp.ini").string() + " --no-report");
  CHECK(ddp["step_time_s"].get<double>() == by_hand["step_time_s"].get<double>());
  // The tp=2 row is Megatron's, which has no bucket size without overlap: refused for that row.
  const json& tp2 = table["rows"][1];
  CHECK(tp2["status"] != "ok");
  CHECK(result.out.find("fixture tp2 (2 GPUs): invalid: --set comm.bucket_size=20MiB") != std::string::npos);
}

TEST_CASE("validate refuses a bad table or option with one line and writes nothing") {
  const auto refused = [](const std::string& name, const std::string& arguments, const std::string& part) {
    const CliResult result = run_trainsim(name, arguments);
    CHECK(result.status == 2);
    CHECK_MESSAGE(lines_in(result.err) == 1, result.err);
    CHECK_MESSAGE(result.err.find(part) != std::string::npos, part, " not in: ", result.err);
    CHECK_FALSE(fs::exists(result.dir / "out"));
  };
  refused("validate_missing", "validate no-such.csv --out out",
          "trainsim: error: no-such.csv: no such file; expected a CSV of published measurements");
  const fs::path dir = fresh_dir("validate_bad_input");
  std::string text = read_file(fixture);
  const std::string tp2 = "a100-80gb,1,2,tiny-gpt,512,2,8,2,1,1";
  text.replace(text.find(tp2), tp2.size(), "a100-80gb,1,2,tiny-gpt,512,2,8,x,1,1");
  std::ofstream(dir / "bad.csv") << text;
  refused("validate_bad_field", "validate " + (dir / "bad.csv").string() + " --out out",
          "bad.csv:4: column 'tp' = 'x': accepted: a whole number from 1 to 1048576");
  refused("validate_bad_set", "validate " + fixture + " --only nope --out out", "--only nope: no such set in ");
  refused("validate_bad_override", "validate " + fixture + " --set nosuch.key=1 --out out",
          "--set nosuch.key=1: unknown key 'nosuch.key'");
  refused("validate_malformed_override", "validate " + fixture + " --set dp=2 --out out",
          "--set dp=2: expected section.key=value");
  refused("validate_bad_fidelity", "validate " + fixture + " --fidelity exact --out out",
          "--fidelity exact: accepted: flows, fast, auto");
}

TEST_CASE("the published table's mean error up to 64 GPUs stays under this version's figure") {
  // The published rows of at most 64 GPUs, copied with the header into a table of their own.
  std::istringstream published(read_file(project_file("validation/published.csv")));
  std::string line, header, subset;
  std::getline(published, header);
  const auto column = [&](const std::string& name) {
    std::size_t index = 0;
    for (std::size_t at = 0; at < header.find(name); ++at)
      index += header[at] == ',';
    return index;
  };
  const std::size_t nodes = column(",nodes,") + 1, per_node = column(",gpus_per_node,") + 1, set = 0;
  std::size_t rows = 0;
  while (std::getline(published, line)) {
    std::vector<std::string> fields;
    std::istringstream split(line);
    for (std::string field; std::getline(split, field, ',');)
      fields.push_back(field);
    if (mean_error_bound.count(fields[set]) && std::stoi(fields[nodes]) * std::stoi(fields[per_node]) <= bounded_rows_max_gpus) {
      subset += line + "\n";
      ++rows;
    }
  }
  REQUIRE(rows == 48);
  const fs::path dir = fresh_dir("validate_published_input");
  std::ofstream(dir / "up-to-64-gpus.csv") << header << "\n" << subset;
  const CliResult result = run_trainsim("validate_published", "validate " + (dir / "up-to-64-gpus.csv").string() + " -j 2 --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  MESSAGE(result.out);
  const json table = read_json(result.dir / "out" / "validation.json");
  for (const json& summary : table["sets"]) {
    if (summary["set"] == "all")
      continue;
    CAPTURE(summary["set"].get<std::string>());
    CHECK(summary["simulated"] == summary["rows"]);
    CHECK(summary["mean_abs_error"].get<double>() <= mean_error_bound.at(summary["set"].get<std::string>()));
  }
}
