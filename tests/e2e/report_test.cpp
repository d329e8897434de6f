// The files people look at: trace.json (Chrome trace events), the SVG plots and report.html.
// SVG and HTML are read back with an XML parser; the plots' extents are checked against the
// numbers in summary.json.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "cli.hpp"

using namespace trainsim::test;
using nlohmann::json;
namespace fs = std::filesystem;
namespace pt = boost::property_tree;

namespace {

const std::string pipeline = project_file("tests/fixtures/pipeline.ini");
const std::string tiny = project_file("tests/fixtures/tiny-ddp.ini");

bool has_class(const pt::ptree& element, const std::string& name) { return xml_attribute(element, "class") == name; }

} // namespace

TEST_CASE("run writes trace.json, three plots and report.html, and --no-report leaves them out") {
  const CliResult with = run_trainsim("report_files", "run " + tiny + " --out out");
  REQUIRE_MESSAGE(with.status == 0, with.err);
  for (const char* file : {"trace.json", "memory.svg", "pipeline.svg", "breakdown.svg", "report.html"})
    CHECK_MESSAGE(fs::exists(with.dir / "out" / file), file);
  const CliResult without = run_trainsim("report_none", "run " + tiny + " --out out --no-report");
  REQUIRE_MESSAGE(without.status == 0, without.err);
  CHECK(fs::exists(without.dir / "out/summary.json"));
  for (const char* file : {"trace.json", "memory.svg", "pipeline.svg", "breakdown.svg", "report.html"})
    CHECK_MESSAGE(!fs::exists(without.dir / "out" / file), file);
}

TEST_CASE("the SVG plots and the HTML report parse as XML and the report is self-contained") {
  const CliResult result = run_trainsim("report_xml", "run " + pipeline + " --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  for (const char* file : {"memory.svg", "pipeline.svg", "breakdown.svg"}) {
    CAPTURE(file);
    const pt::ptree svg = xml_tree(result.dir / "out" / file);
    CHECK(svg.count("svg") == 1);
    CHECK(xml_attribute(svg.get_child("svg"), "xmlns") == "http://www.w3.org/2000/svg");
  }
  const pt::ptree html = xml_tree(result.dir / "out/report.html");
  REQUIRE(html.count("html") == 1);
  CHECK(xml_elements(html, "svg").size() == 3);
  // Nothing to fetch: no scripts, no external links, no images by address.
  CHECK(xml_elements(html, "script").empty());
  CHECK(xml_elements(html, "link").empty());
  CHECK(xml_elements(html, "img").empty());
  const std::string text = read_file(result.dir / "out/report.html");
  CHECK(text.find("http://www.w3.org") != std::string::npos);  // namespaces only
  CHECK(text.find("https://") == std::string::npos);
  const json summary = read_json(result.dir / "out/summary.json");
  CHECK(text.find(summary["bottleneck"].get<std::string>()) != std::string::npos);
}

TEST_CASE("trace.json follows the trace-event format: slices, counters and paired flows") {
  const CliResult result = run_trainsim("report_trace", "run " + pipeline + " --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const json summary = read_json(result.dir / "out/summary.json");
  const json trace = read_json(result.dir / "out/trace.json");
  REQUIRE(trace["traceEvents"].is_array());
  double last_end_us = 0;
  std::map<long long, int> starts, finishes;
  std::set<int> processes;
  int slices = 0, counters = 0;
  for (const json& event : trace["traceEvents"]) {
    REQUIRE(event.contains("ph"));
    REQUIRE(event.contains("pid"));
    const std::string ph = event["ph"];
    if (ph == "X") {
      ++slices;
      for (const char* key : {"name", "ts", "dur", "pid", "tid", "args"})
        CHECK_MESSAGE(event.contains(key), key);
      CHECK(event["dur"].get<double>() >= 0);
      last_end_us = std::max(last_end_us, event["ts"].get<double>() + event["dur"].get<double>());
    } else if (ph == "C") {
      ++counters;
      for (const auto& [category, bytes] : event["args"].items())
        CHECK_MESSAGE(bytes.get<double>() >= 0, category);
    } else if (ph == "s") {
      ++starts[event["id"].get<long long>()];
    } else if (ph == "f") {
      ++finishes[event["id"].get<long long>()];
    } else if (ph == "M" && event["name"] == "process_name") {
      processes.insert(event["pid"].get<int>());
    }
  }
  CHECK(slices > 0);
  CHECK(counters > 0);
  // Microseconds: the last slice ends when the step does.
  CHECK(last_end_us == doctest::Approx(summary["step_time_s"].get<double>() * 1e6).epsilon(1e-9));
  // Four stages, one rank each by default; activations and gradients flow between them.
  CHECK(processes == std::set<int>{0, 1, 2, 3});
  REQUIRE(!starts.empty());
  CHECK(starts == finishes);
  for (const auto& [id, count] : starts)
    CHECK(count == 1);
  // Between 4 stages, 8 micro-batches: 3 boundaries x 8 x 2 directions.
  CHECK(starts.size() == 3 * 8 * 2);
}

TEST_CASE("the memory plot reaches each rank's peak and ends at the step time") {
  const CliResult result = run_trainsim("report_memory", "run " + pipeline + " --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const json summary = read_json(result.dir / "out/summary.json");
  const pt::ptree svg = xml_tree(result.dir / "out/memory.svg");
  int panels = 0;
  for (const pt::ptree* group : xml_elements(svg, "g")) {
    if (!has_class(*group, "panel"))
      continue;
    ++panels;
    const int rank = std::stoi(xml_attribute(*group, "data-rank"));
    CAPTURE(rank);
    const double peak = std::stod(xml_attribute(*group, "data-peak-bytes"));
    CHECK(peak == summary["memory"]["ranks"][rank]["peak_bytes"].get<double>());
    CHECK(std::stod(xml_attribute(*group, "data-end-s")) == summary["step_time_s"].get<double>());
    const double y_max = std::stod(xml_attribute(*group, "data-y-max"));
    const double top = std::stod(xml_attribute(*group, "data-plot-top"));
    const double bottom = std::stod(xml_attribute(*group, "data-plot-bottom"));
    REQUIRE(peak <= y_max);
    // The stacked bands' highest point is the peak: the smallest pixel y of any band outline.
    double highest = bottom;
    for (const pt::ptree* polygon : xml_elements(*group, "polygon")) {
      std::istringstream points(xml_attribute(*polygon, "points"));
      std::string pair;
      while (points >> pair)
        highest = std::min(highest, std::stod(pair.substr(pair.find(',') + 1)));
    }
    CHECK(highest == doctest::Approx(bottom - peak / y_max * (bottom - top)).epsilon(0.001));
  }
  CHECK(panels == 4);  // one rank per stage
}

TEST_CASE("the pipeline chart has one row per rank shown, and --trace-ranks chooses them") {
  const CliResult result = run_trainsim("report_rows", "run " + pipeline + " --out out --trace-ranks 1,3");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const pt::ptree svg = xml_tree(result.dir / "out/pipeline.svg");
  std::vector<int> rows;
  for (const pt::ptree* group : xml_elements(svg, "g"))
    if (has_class(*group, "row"))
      rows.push_back(std::stoi(xml_attribute(*group, "data-rank")));
  CHECK(rows == std::vector<int>{1, 3});
  const json trace = read_json(result.dir / "out/trace.json");
  std::set<int> processes;
  for (const json& event : trace["traceEvents"])
    processes.insert(event["pid"].get<int>());
  CHECK(processes == std::set<int>{1, 3});

  const CliResult bad = run_trainsim("report_bad_ranks", "run " + pipeline + " --out out --trace-ranks 2,9");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--trace-ranks 2,9: rank 9 does not exist; accepted: 0 to 3") != std::string::npos);
  CHECK(!fs::exists(bad.dir / "out/summary.json"));
}

TEST_CASE("the breakdown bar adds up to the step time") {
  const CliResult result = run_trainsim("report_breakdown", "run " + pipeline + " --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const json summary = read_json(result.dir / "out/summary.json");
  const pt::ptree svg = xml_tree(result.dir / "out/breakdown.svg");
  double parts = 0, total = -1;
  for (const pt::ptree* group : xml_elements(svg, "g")) {
    if (!has_class(*group, "time-bar"))
      continue;
    total = std::stod(xml_attribute(*group, "data-total"));
    for (const pt::ptree* rect : xml_elements(*group, "rect"))
      if (!xml_attribute(*rect, "data-value").empty())
        parts += std::stod(xml_attribute(*rect, "data-value"));
  }
  CHECK(total == summary["step_time_s"].get<double>());
  CHECK(parts == doctest::Approx(total).epsilon(1e-9));
}

TEST_CASE("report.html renders in a headless browser (when Chromium is installed)") {
  if (std::system("command -v chromium > /dev/null 2>&1") != 0) {
    WARN_MESSAGE(false, "skipped: the Debian package chromium is not installed, so report.html is not rendered");
    return;
  }
  const CliResult result = run_trainsim("report_render", "run " + tiny + " --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const fs::path png = result.dir / "report.png";
  const std::string command = "chromium --headless --no-sandbox --disable-gpu --window-size=1100,1400 --screenshot=" +
                              png.string() + " file://" + fs::absolute(result.dir / "out/report.html").string() +
                              " > /dev/null 2>&1";
  REQUIRE(std::system(command.c_str()) == 0);
  REQUIRE(fs::exists(png));
  // A blank 1100 x 1400 page compresses to a few kilobytes; text and plots do not.
  CHECK(fs::file_size(png) > 20000);
}
