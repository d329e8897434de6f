// trainsim compare: two runs of the same scenario, plain data parallelism and ZeRO-1, side by side.
#include <doctest/doctest.h>

#include <algorithm>

#include "cli.hpp"

using namespace trainsim::test;
namespace fs = std::filesystem;

TEST_CASE("compare shows ZeRO-1's sharded optimizer against plain data parallelism, and writes compare.html") {
  const fs::path dir = fresh_dir("compare_runs");
  const std::string tiny = project_file("tests/fixtures/tiny-ddp.ini");
  for (const auto& [name, setting] : {std::pair{"ddp", "memory.zero=0"}, std::pair{"zero1", "memory.zero=1"}}) {
    const CliResult run = run_trainsim(std::string("compare_run_") + name,
                                       "run " + tiny + " --no-report --set " + setting + " -o " + (dir / name).string());
    REQUIRE_MESSAGE(run.status == 0, run.err);
  }
  const CliResult compared = run_trainsim("compare", "compare " + (dir / "ddp").string() + " " + (dir / "zero1").string() +
                                                         " -o " + (dir / "compared").string());
  REQUIRE_MESSAGE(compared.status == 0, compared.err);
  // ZeRO-1 keeps 1/dp of the optimizer states: dp = 16, so 1/16 of them, 93.75 % less; marked as
  // a large change.
  const auto line_of = [&](const std::string& start) {
    const auto at = compared.out.find("\n" + start);
    return at == std::string::npos ? std::string() : compared.out.substr(at + 1, compared.out.find('\n', at + 1) - at - 1);
  };
  CHECK_MESSAGE(line_of("  optimizer").find("(-93.8 %) *") != std::string::npos, compared.out);
  CHECK(line_of("  weights").find('%') == std::string::npos);  // the same weights: no change shown
  CHECK(compared.out.find("settings that differ:\n") != std::string::npos);
  CHECK(compared.out.find("  memory.zero: 0 | 1\n") != std::string::npos);
  CHECK(compared.out.find("zero1's step is ") != std::string::npos);
  // Without a pipeline there is no bubble to compare.
  CHECK(line_of("step: pipeline bubble").empty());
  const auto page = xml_tree(dir / "compared" / "compare.html");
  CHECK(xml_elements(page, "svg").size() == 2);
  CHECK(xml_elements(page, "polyline").size() == 2);  // one memory line per run
  bool better = false;
  for (const auto* cell : xml_elements(page, "td"))
    better = better || xml_attribute(*cell, "class") == "better";
  CHECK(better);  // less optimizer memory
  const CliResult one = run_trainsim("compare_one", "compare " + (dir / "ddp").string());
  CHECK(one.status == 2);
  CHECK(one.err.find("1 run given; accepted: two or more") != std::string::npos);
}
