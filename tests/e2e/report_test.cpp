// The files people look at: trace.json (Chrome trace events), the SVG plots and report.html.
// SVG and HTML are read back with an XML parser; the plots' extents are checked against the
// numbers in summary.json.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
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

TEST_CASE("trace.json names the algorithm and protocol of every collective, which ideal collectives have not") {
  // tiny-ddp: its gradients all-reduced over data parallelism, on the dp-comm stream (tid 3).
  const std::string scenario = project_file("tests/fixtures/tiny-ddp.ini");
  for (const bool ideal : {false, true}) {
    CAPTURE(ideal);
    const CliResult result = run_trainsim(ideal ? "trace_ideal" : "trace_nccl",
                                          "run " + scenario + " --out out" + (ideal ? " --set comm.collectives=ideal" : ""));
    REQUIRE_MESSAGE(result.status == 0, result.err);
    const std::string collectives = read_json(result.dir / "out/summary.json")["collectives"];
    CHECK(collectives.rfind(ideal ? "ideal:" : "nccl:", 0) == 0);
    int collective_slices = 0;
    const json trace = read_json(result.dir / "out/trace.json");
    for (const json& event : trace["traceEvents"]) {
      if (event["ph"] != "X" || event["tid"] != 3)
        continue;
      ++collective_slices;
      const json& args = event["args"];
      CHECK(args.contains("algorithm") == !ideal);
      if (!ideal) {
        const std::string algorithm = args["algorithm"];  // across two nodes: rings or trees
        CHECK((algorithm == "ring" || algorithm == "tree"));
        const std::string protocol = args["protocol"];
        CHECK((protocol == "ll" || protocol == "ll128" || protocol == "simple"));
      }
    }
    CHECK(collective_slices > 0);
  }
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

TEST_CASE("the memory plot ends at what a rank holds at the end of the step, not at a fuller moment of its last pixel") {
  // Under ZeRO-3 the step ends with the optimizer's buffers freed within the last pixel column.
  const CliResult result = run_trainsim("report_memory_end", "run " + project_file("scenarios/llama3-8b-zero3.ini") +
                                                                 " --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const pt::ptree svg = xml_tree(result.dir / "out/memory.svg");
  for (const pt::ptree* group : xml_elements(svg, "g")) {
    if (!has_class(*group, "panel"))
      continue;
    const int rank = std::stoi(xml_attribute(*group, "data-rank"));
    CAPTURE(rank);
    const double y_max = std::stod(xml_attribute(*group, "data-y-max"));
    const double top = std::stod(xml_attribute(*group, "data-plot-top"));
    const double bottom = std::stod(xml_attribute(*group, "data-plot-bottom"));
    // What memory.csv's last row of the rank holds on the GPU (after the time, seven categories).
    const std::vector<std::vector<double>> rows = memory_rows(result.dir / "out/memory.csv", rank);
    REQUIRE(!rows.empty());
    double held_at_end = 0;
    for (std::size_t c = 1; c < 8; ++c)
      held_at_end += rows.back()[c];
    // Each band's outline runs along its top left to right, then back along its bottom: the
    // top's last point is at the right edge; the highest of them is the stack's top there.
    double top_at_end = bottom;
    for (const pt::ptree* polygon : xml_elements(*group, "polygon")) {
      std::istringstream points(xml_attribute(*polygon, "points"));
      std::vector<double> ys;
      std::string pair;
      while (points >> pair)
        ys.push_back(std::stod(pair.substr(pair.find(',') + 1)));
      REQUIRE(ys.size() % 2 == 0);
      top_at_end = std::min(top_at_end, ys[ys.size() / 2 - 1]);
    }
    CHECK(std::abs(top_at_end - (bottom - held_at_end / y_max * (bottom - top))) < 0.5);
  }
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

namespace {

const std::string offload_scenarios[] = {project_file("scenarios/llama2-70b-offload-cpu.ini"),
                                         project_file("scenarios/llama2-70b-offload-nvme.ini")};

double number_attribute(const pt::ptree& element, const std::string& name) {
  const std::string value = xml_attribute(element, name);
  REQUIRE_MESSAGE(!value.empty(), name);
  return std::stod(value);
}

struct Box {
  double left, right, top, bottom;
};

// Where a text element's glyphs go, estimated: 0.6 em per character, from the baseline up one em
// and down a third; its anchor says which end x is; rotate(-90 x y) about its own anchor turns it
// upwards.
Box text_box(const pt::ptree& text) {
  const double x = number_attribute(text, "x"), y = number_attribute(text, "y");
  const std::string size = xml_attribute(text, "font-size");
  const double font_size = size.empty() ? 12 : std::stod(size);
  const double width = 0.6 * font_size * static_cast<double>(text.data().size());
  const std::string anchor = xml_attribute(text, "text-anchor");
  const double start = anchor == "middle" ? -width / 2 : anchor == "end" ? -width : 0;
  if (xml_attribute(text, "transform").rfind("rotate(-90", 0) == 0)
    return {x - font_size, x + font_size / 3, y - (start + width), y - start};
  return {x + start, x + start + width, y - font_size, y + font_size / 3};
}

// The legend's entries, (name, colour): a square at the top level of the SVG followed by its name.
std::map<std::string, std::string> legend_of(const pt::ptree& svg) {
  std::map<std::string, std::string> legend;
  std::string colour;
  for (const auto& [name, child] : svg) {
    if (name == "rect" && xml_attribute(child, "width") == "12" && xml_attribute(child, "height") == "12")
      colour = xml_attribute(child, "fill");
    else if (name == "text" && !colour.empty())
      legend[child.data()] = colour;
    if (name != "rect")
      colour.clear();
  }
  return legend;
}

// pipeline.svg of `trainsim <arguments>` run in the folder `name`.
pt::ptree pipeline_chart(const std::string& name, const std::string& arguments) {
  const CliResult result = run_trainsim(name, arguments);
  REQUIRE_MESSAGE(result.status == 0, result.err);
  return xml_tree(result.dir / "out/pipeline.svg");
}

} // namespace

TEST_CASE("every label and axis tick of the plots lies inside its canvas") {
  // The offload scenarios have the longest legends; rank 999 of 1,000 the longest row label.
  const std::string runs[] = {pipeline, offload_scenarios[0], offload_scenarios[1],
                              tiny + " --set platform.file=dgx-a100-128n.xml --set parallel.dp=1000 "
                                     "--set training.global_batch=2000 --set comm.fidelity=fast --trace-ranks 999"};
  for (const std::string& run : runs) {
    const CliResult result = run_trainsim("report_extent", "run " + run + " --out out");
    REQUIRE_MESSAGE(result.status == 0, result.err);
    for (const char* file : {"memory.svg", "pipeline.svg", "breakdown.svg"}) {
      CAPTURE(run);
      CAPTURE(file);
      const pt::ptree tree = xml_tree(result.dir / "out" / file);
      const pt::ptree& svg = tree.get_child("svg");
      const double width = number_attribute(svg, "width"), height = number_attribute(svg, "height");
      for (const pt::ptree* text : xml_elements(svg, "text")) {
        CAPTURE(text->data());
        const Box box = text_box(*text);
        CHECK(box.left >= 0);
        CHECK(box.right <= width);
        CHECK(box.top >= 0);
        CHECK(box.bottom <= height);
      }
      int ticks = 0;
      for (const pt::ptree* line : xml_elements(svg, "line")) {
        if (!has_class(*line, "tick"))
          continue;
        ++ticks;
        for (const char* x : {"x1", "x2"})
          CHECK((number_attribute(*line, x) >= 0 && number_attribute(*line, x) <= width));
        for (const char* y : {"y1", "y2"})
          CHECK((number_attribute(*line, y) >= 0 && number_attribute(*line, y) <= height));
      }
      CHECK(ticks >= (std::string(file) == "breakdown.svg" ? 0 : 3));
    }
  }
}

TEST_CASE("the pipeline chart's legend names every colour it draws, offload kinds included") {
  for (const std::string& scenario : offload_scenarios) {
    CAPTURE(scenario);
    const pt::ptree tree = pipeline_chart("report_legend", "run " + scenario + " --out out");
    const pt::ptree& svg = tree.get_child("svg");
    const std::map<std::string, std::string> legend = legend_of(svg);
    std::set<std::string> legend_colours;
    for (const auto& [name, colour] : legend)
      legend_colours.insert(colour);
    CHECK(legend_colours.size() == legend.size());  // one colour, one meaning
    std::set<std::string> drawn;
    for (const pt::ptree* group : xml_elements(svg, "g"))
      if (has_class(*group, "row"))
        for (const pt::ptree* rect : xml_elements(*group, "rect"))
          drawn.insert(xml_attribute(*rect, "fill"));
    for (const std::string& colour : drawn)
      CHECK_MESSAGE(legend_colours.count(colour) == 1, colour, " is drawn but not in the legend");
    // Both scenarios copy gradients down and parameters up, and step the optimizer on the CPU.
    for (const char* name : {"h2d", "d2h", "optimizer on CPU"})
      CHECK_MESSAGE(legend.count(name) == 1, name);
    if (scenario == offload_scenarios[1])
      for (const char* name : {"nvme_read", "nvme_write"})
        CHECK_MESSAGE(legend.count(name) == 1, name);
  }
}

TEST_CASE("the pipeline chart draws the CPU optimizer step as busy, not idle") {
  for (const std::string& scenario : offload_scenarios) {
    CAPTURE(scenario);
    const CliResult result = run_trainsim("report_cpu_step", "run " + scenario + " --out out --trace-ranks 0");
    REQUIRE_MESSAGE(result.status == 0, result.err);
    const pt::ptree tree = xml_tree(result.dir / "out/pipeline.svg");
    const pt::ptree& svg = tree.get_child("svg");
    const std::string idle = legend_of(svg).at("idle");
    const pt::ptree* chart = nullptr;
    for (const pt::ptree* group : xml_elements(svg, "g"))
      if (has_class(*group, "chart"))
        chart = group;
    REQUIRE(chart != nullptr);
    const double end = number_attribute(*chart, "data-end-s"), x_left = number_attribute(*chart, "data-x-left"),
                 x_right = number_attribute(*chart, "data-x-right"), top = number_attribute(*chart, "data-top"),
                 band = number_attribute(*chart, "data-kernel-height");
    // The kernel band of rank 0's row: rects from the row's top, as high as the band, not idle.
    std::vector<std::pair<double, double>> busy;
    for (const pt::ptree* group : xml_elements(*chart, "g"))
      if (has_class(*group, "row") && xml_attribute(*group, "data-rank") == "0")
        for (const pt::ptree* rect : xml_elements(*group, "rect"))
          if (number_attribute(*rect, "y") == top && number_attribute(*rect, "height") == band &&
              xml_attribute(*rect, "fill") != idle)
            busy.emplace_back(number_attribute(*rect, "x"),
                              number_attribute(*rect, "x") + number_attribute(*rect, "width"));
    // Rank 0's CPU optimizer ops in trace.json (microseconds; with NVMe, one per chunk of the
    // pinned buffer, a fraction of a pixel each): ten points inside each lie on a busy block.
    int steps = 0;
    const json trace = read_json(result.dir / "out/trace.json");
    for (const json& event : trace["traceEvents"]) {
      if (event["ph"] != "X" || event["cat"] != "cpu_optimizer" || event["pid"] != 0)
        continue;
      const double start = event["ts"].get<double>() * 1e-6, duration = event["dur"].get<double>() * 1e-6;
      ++steps;
      for (int k = 1; k <= 10; ++k) {
        const double px = x_left + (start + duration * k / 11.0) / end * (x_right - x_left);
        CAPTURE(px);
        CHECK(std::any_of(busy.begin(), busy.end(),
                          [&](const auto& block) { return block.first <= px && px <= block.second; }));
      }
    }
    CHECK(steps >= 1);
  }
}

namespace {

// Run in the page once it has loaded: for each plot, where the browser laid it out, the extent of
// its widest-reaching text as rendered, and the plot drawn into a canvas by the browser's own SVG
// renderer: the share of pixels that are not white, and the fill colours of its shapes (at least
// 4 x 4 px, so their inside is drawn in the exact colour) that appear in no pixel.
const char* const render_probe = R"(<script>
addEventListener('load', async () => {
  const lines = ['page ' + document.documentElement.clientWidth + ' ' + document.body.scrollHeight];
  for (const svg of document.querySelectorAll('svg')) {
    const box = svg.getBoundingClientRect();
    let textLeft = Infinity, textRight = -Infinity, textTop = Infinity, textBottom = -Infinity;
    for (const text of svg.querySelectorAll('text')) {
      const extent = text.getBBox();
      const corners = [[extent.x, extent.y], [extent.x + extent.width, extent.y + extent.height]].map(([x, y]) => {
        const point = new DOMPoint(x, y).matrixTransform(text.getCTM());
        const origin = svg.getCTM();
        return [point.x - origin.e, point.y - origin.f];
      });
      for (const [x, y] of corners) {
        textLeft = Math.min(textLeft, x); textRight = Math.max(textRight, x);
        textTop = Math.min(textTop, y); textBottom = Math.max(textBottom, y);
      }
    }
    const canvas = document.createElement('canvas');
    canvas.width = Math.round(box.width);
    canvas.height = Math.round(box.height);
    const image = new Image();
    image.src = 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(new XMLSerializer().serializeToString(svg));
    await image.decode();
    const context = canvas.getContext('2d');
    context.fillStyle = '#ffffff';
    context.fillRect(0, 0, canvas.width, canvas.height);
    context.drawImage(image, 0, 0);
    const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
    const seen = new Set();
    let inked = 0;
    for (let i = 0; i < pixels.length; i += 4) {
      const colour = '#' + [0, 1, 2].map(k => pixels[i + k].toString(16).padStart(2, '0')).join('');
      seen.add(colour);
      if (colour !== '#ffffff') ++inked;
    }
    const fills = new Set([...svg.querySelectorAll('rect')]
        .filter(rect => rect.getBBox().width >= 4 && rect.getBBox().height >= 4)
        .map(rect => rect.getAttribute('fill').toLowerCase()).filter(fill => fill.startsWith('#')));
    const missing = [...fills].filter(fill => !seen.has(fill));
    lines.push(['svg', svg.getAttribute('width'), svg.getAttribute('height'), box.left, box.right, box.width,
                box.height, textLeft, textRight, textTop, textBottom, inked / (pixels.length / 4), fills.size,
                missing.join(',') || '-'].join(' '));
  }
  const probe = document.createElement('pre');
  probe.id = 'probe';
  probe.textContent = lines.join('\n');
  document.body.append(probe);
});
</script>
)";

} // namespace

TEST_CASE("report.html renders in Chromium: every plot at full size, not blank, every colour and label drawn") {
  // The test installs what it needs: `bash scripts/bootstrap.sh test` installs Debian's chromium.
  REQUIRE_MESSAGE(std::system("command -v chromium > /dev/null 2>&1") == 0,
                  "chromium is not installed; bash scripts/bootstrap.sh test installs it (Debian package chromium)");
  // The offloading run draws its node's host memory and NVMe too.
  const std::pair<std::string, int> scenarios[] = {{pipeline, 3}, {project_file("scenarios/llama2-70b-offload-nvme.ini"), 4}};
  for (const auto& [scenario, expected_plots] : scenarios) {
    CAPTURE(scenario);
    const CliResult result = run_trainsim("report_render", "run " + scenario + " --out out");
    REQUIRE_MESSAGE(result.status == 0, result.err);
    // The page as written, with the probe added at the end of its body.
    std::string page = read_file(result.dir / "out/report.html");
    const auto body_end = page.rfind("</body>");
    REQUIRE(body_end != std::string::npos);
    page.insert(body_end, render_probe);
    std::ofstream(result.dir / "out/probe.html") << page;
    // As root Chromium needs --no-sandbox; its own profile folder, no GPU; dbus and other complaints
    // on stderr are expected where there is no desktop session and do not count.
    const std::string command = "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
                                "--no-first-run --user-data-dir='" + (result.dir / "profile").string() +
                                "' --window-size=1100,1400 --virtual-time-budget=10000 --dump-dom 'file://" +
                                fs::absolute(result.dir / "out/probe.html").string() + "' > '" +
                                (result.dir / "dom.html").string() + "' 2> '" + (result.dir / "chromium.txt").string() +
                                "'";
    REQUIRE_MESSAGE(std::system(command.c_str()) == 0, read_file(result.dir / "chromium.txt"));
    const std::string dom = read_file(result.dir / "dom.html");
    const auto probe_start = dom.find("<pre id=\"probe\">");
    REQUIRE_MESSAGE(probe_start != std::string::npos, dom.substr(0, 2000));
    std::istringstream probe(dom.substr(probe_start + 16, dom.find("</pre>", probe_start) - probe_start - 16));
    std::string word;
    double page_width = 0, page_height = 0;
    probe >> word >> page_width >> page_height;
    REQUIRE(word == "page");
    CHECK(page_height > 1000);  // the summary and three plots, not an empty page or an error page
    int plots = 0;
    while (probe >> word) {
      REQUIRE(word == "svg");
      double width, height, left, right, box_width, box_height, text_left, text_right, text_top, text_bottom, inked;
      int fills;
      std::string missing;
      probe >> width >> height >> left >> right >> box_width >> box_height >> text_left >> text_right >> text_top >>
          text_bottom >> inked >> fills >> missing;
      ++plots;
      CAPTURE(plots);
      // Laid out at the size it declares, inside the window: nothing cut off at the right.
      CHECK(box_width == doctest::Approx(width));
      CHECK(box_height == doctest::Approx(height));
      CHECK(left >= 0);
      CHECK(right <= page_width);
      // Every label, as the browser measured it, inside the plot's canvas.
      CHECK(text_left >= 0);
      CHECK(text_right <= width);
      CHECK(text_top >= 0);
      CHECK(text_bottom <= height);
      // Not blank: shapes of several colours cover part of it, each colour drawn somewhere.
      CHECK(inked > 0.03);
      CHECK(fills >= (plots == 4 ? 2 : 3));  // the fourth, the node's memory: host and NVMe
      CHECK_MESSAGE(missing == "-", "colours not drawn: ", missing);
    }
    CHECK(plots == expected_plots);
  }
}

TEST_CASE("report.html tables communication by kind, each stage's peak and the settings, and the breakdown's legend gives seconds") {
  const CliResult result = run_trainsim("report_tables", "run " + pipeline + " --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const json summary = read_json(result.dir / "out/summary.json");
  const pt::ptree page = xml_tree(result.dir / "out/report.html");
  std::map<std::string, std::vector<std::vector<std::string>>> tables;
  for (const pt::ptree* table : xml_elements(page, "table")) {
    auto& rows = tables[xml_attribute(*table, "class")];
    for (const pt::ptree* row : xml_elements(*table, "tr")) {
      rows.emplace_back();
      for (const pt::ptree* cell : xml_elements(*row, "td"))
        rows.back().push_back(cell->data());
    }
  }
  // One row per kind of communication in the summary, under its header row.
  REQUIRE(tables.count("communication"));
  CHECK(tables["communication"].size() == summary["time"]["comm"].size() + 1);
  // One row per stage, as in the summary.
  REQUIRE(tables.count("stages"));
  CHECK(tables["stages"].size() == summary["memory"]["stages"].size() + 1);
  // The settings as the summary has them.
  REQUIRE(tables.count("settings"));
  bool pp = false;
  for (const auto& row : tables["settings"])
    pp = pp || (row.size() == 2 && row[0] == "parallel.pp" && row[1] == summary["settings"]["parallel.pp"].get<std::string>());
  CHECK(pp);
  // The step bar's legend: "compute 1.234 s", a part's name and its time.
  const pt::ptree svg = xml_tree(result.dir / "out/breakdown.svg");
  bool compute = false;
  for (const pt::ptree* text : xml_elements(svg, "text")) {
    const std::string label = text->data();
    compute = compute || (label.rfind("compute ", 0) == 0 && label.back() == 's');
  }
  CHECK(compute);
}

TEST_CASE("pipeline.svg zooms into the steady state when there are 32 micro-batches or more") {
  // Llama 3 70B on 4 interleaved stages runs 32 micro-batches per pipeline: the middle eight
  // micro-batches' worth of time (a quarter of the step) is drawn again, one zoomed row per rank.
  const CliResult many = run_trainsim("report_zoom", "run " + project_file("scenarios/llama3-70b-pp4-interleaved.ini") +
                                                         " --out out");
  REQUIRE_MESSAGE(many.status == 0, many.err);
  const json summary = read_json(many.dir / "out/summary.json");
  const double step = summary["step_time_s"].get<double>();
  const auto svg = xml_tree(many.dir / "out/pipeline.svg");
  int rows = 0, zoom_rows = 0;
  double from = -1, to = -1;
  for (const auto* group : xml_elements(svg, "g")) {
    rows += has_class(*group, "row");
    zoom_rows += has_class(*group, "zoom-row");
    if (has_class(*group, "zoom")) {
      from = std::stod(xml_attribute(*group, "data-from-s"));
      to = std::stod(xml_attribute(*group, "data-to-s"));
    }
  }
  CHECK(zoom_rows == rows);
  CHECK(to - from == doctest::Approx(step / 4));
  CHECK((from + to) / 2 == doctest::Approx(step / 2));
  // Eight micro-batches (the pipeline fixture) are drawn once.
  const CliResult few = run_trainsim("report_no_zoom", "run " + pipeline + " --out out");
  REQUIRE_MESSAGE(few.status == 0, few.err);
  const auto once = xml_tree(few.dir / "out/pipeline.svg");
  for (const auto* group : xml_elements(once, "g"))
    CHECK_FALSE(has_class(*group, "zoom"));
}
