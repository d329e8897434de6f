// The pure pieces of the report: the SVG writer's helpers and the bottleneck line.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <sstream>

#include "report/run_progress.hpp"
#include "report/svg.hpp"
#include "report/writers.hpp"

using namespace trainsim;

TEST_CASE("axis ticks are 1, 2 or 5 times a power of ten and reach the maximum") {
  // 0..93 in about 5 steps: 93 / 5 = 18.6, the next of 10, 20, 50 is 20: 0, 20, ..., 100.
  CHECK(nice_ticks(93, 5) == std::vector<double>{0, 20, 40, 60, 80, 100});
  // 3.483 s in 8 steps: 0.435 -> 0.5, and 3.5 is the first multiple at or above 3.483.
  const auto seconds = nice_ticks(3.483, 8);
  CHECK(seconds.size() == 8);
  CHECK(seconds[1] == doctest::Approx(0.5));
  CHECK(seconds.back() == doctest::Approx(3.5));
  CHECK(nice_ticks(80, 5).back() == 80);  // an exact multiple is its own last tick
  CHECK(nice_ticks(0, 5) == std::vector<double>{0, 1});
}

TEST_CASE("a scale maps data to pixels, y downwards included") {
  const Scale y{0, 100, 200, 20};  // 0 at the bottom (pixel 200), 100 at the top (pixel 20)
  CHECK(y(0) == 200);
  CHECK(y(100) == 20);
  CHECK(y(50) == 110);
}

TEST_CASE("text in SVG is escaped, and the document is one svg element") {
  CHECK(xml_escape("a<b & \"c\" 'd'>") == "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  Svg svg(100, 50);
  svg.text(1, 2, "L0 & <attn>");
  const std::string text = svg.str();
  CHECK(text.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(text.find("L0 &amp; &lt;attn&gt;") != std::string::npos);
  CHECK(text.find("</svg>") == text.size() - 7);
}

namespace {

StepMetrics one_rank(double step, double compute, double exposed_tp, double bubble) {
  StepMetrics metrics;
  metrics.step_time_s = step;
  RankMetrics rank;
  rank.breakdown.compute_s = compute;
  rank.breakdown.exposed_comm_s["tp"] = exposed_tp;
  rank.breakdown.bubble_s = bubble;
  metrics.ranks.push_back(rank);
  return metrics;
}

} // namespace

TEST_CASE("the bottleneck line names what limits the step") {
  // 9 of 10 s computing: compute-bound; of the rest, 0.6 s exposed tp beats 0.4 s idle.
  CHECK(bottleneck_line(one_rank(10, 9, 0.6, 0.4)) ==
        "compute-bound: 90.0% of the step computes; the largest overhead is exposed tp communication, 6.0% (rank 0)");
  // 5 s computing, 3 s exposed tp, 2 s idle: tensor-parallel communication is the bound.
  CHECK(bottleneck_line(one_rank(10, 5, 3, 2)) ==
        "tp-communication-bound: 30.0% of the step is exposed tp communication, computing 50.0% (rank 0)");
  CHECK(bottleneck_line(one_rank(10, 5, 1, 4)).rfind("idle-bound: 40.0%", 0) == 0);
  StepMetrics overflow = one_rank(10, 9, 0, 1);
  overflow.memory.gpu_fits = overflow.memory.fits = false;
  overflow.memory.capacity_bytes = 80.0 * 1024 * 1024 * 1024;
  overflow.ranks[0].memory.devices[0].peak = 90.0 * 1024 * 1024 * 1024;
  CHECK(bottleneck_line(overflow).rfind("does not fit: rank 0 needs 90.00 GiB of 80.00 GiB; compute-bound", 0) == 0);
}

TEST_CASE("a pipeline rank idling in its bubble names the stage that paces it") {
  // Rank 0 (finishing last) computes 4 of 10 s and idles 5; rank 1 computes 4 and spends 5 s in
  // exposed all-to-alls, idling 1 s: under half of rank 0's bubble, so rank 1's step says why.
  StepMetrics metrics = one_rank(10, 4, 1, 5);
  RankMetrics pacing;
  pacing.rank = 1;
  pacing.breakdown.compute_s = 4;
  pacing.breakdown.exposed_comm_s["ep"] = 5;
  pacing.breakdown.bubble_s = 1;
  metrics.ranks.push_back(pacing);
  CHECK(bottleneck_line(metrics) == "ep-communication-bound: 50.0% of the step is exposed ep communication, computing "
                                    "40.0% (rank 1); rank 0 idles 50.0% of the step waiting for that rank's stage");
  // Stages that idle about as long (a balanced pipeline's bubble): the rank's own idle time.
  metrics.ranks[1].breakdown.bubble_s = 3;
  CHECK(bottleneck_line(metrics).rfind("idle-bound: 50.0% of the step is idle", 0) == 0);
}

TEST_CASE("an offload overhead makes the step offload-bound, naming the busiest resource behind it") {
  // 10 s step: 3 s computing, 6 s waiting on host-to-device copies, 1 s on tp. The PCIe uplinks
  // carried copies for 9.6 s, the GPUs' own links 5 s, the CPU 2 s: the uplink is named.
  StepMetrics metrics = one_rank(10, 3, 1, 0);
  metrics.ranks[0].breakdown.exposed_comm_s["h2d"] = 6;
  metrics.resources = {{"cpu", 1, "node0-cpu", 2, 0},
                       {"pcie-gpu", 8, "node0-pcie3_DOWN", 5, 0},
                       {"pcie-uplink", 4, "node0-pcie-up1_DOWN", 9.6, 0}};
  CHECK(bottleneck_line(metrics) == "offload-bound: 60.0% of the step waits on PCIe host-to-device copies, computing "
                                    "30.0% (rank 0); pcie-uplink 96.0% busy (node0-pcie-up1_DOWN)");
  // Waiting on the CPU's Adam step names the CPU.
  StepMetrics cpu_bound = one_rank(10, 3, 1, 0);
  cpu_bound.ranks[0].breakdown.exposed_comm_s["cpu_optimizer"] = 6;
  cpu_bound.resources = metrics.resources;
  CHECK(bottleneck_line(cpu_bound).find("waits on the CPU optimizer step") != std::string::npos);
  CHECK(bottleneck_line(cpu_bound).find("cpu 20.0% busy (node0-cpu)") != std::string::npos);
  // Mostly computing, the overhead is still named in offload terms.
  StepMetrics computing = one_rank(10, 8, 0, 0);
  computing.ranks[0].breakdown.exposed_comm_s["nvme_read"] = 2;
  CHECK(bottleneck_line(computing) ==
        "compute-bound: 80.0% of the step computes; the largest overhead is waiting on NVMe reads, 20.0% (rank 0)");
  // A node's host memory that overflows is named like a GPU that does.
  StepMetrics overflow = one_rank(10, 9, 0, 1);
  overflow.memory.fits = overflow.memory.host.fits = false;
  overflow.memory.host.used = true;
  overflow.memory.host.node = "node3";
  overflow.memory.host.peak_bytes = 3.0 * 1024 * 1024 * 1024 * 1024;
  overflow.memory.host.capacity_bytes = 2.0 * 1024 * 1024 * 1024 * 1024;
  CHECK(bottleneck_line(overflow).rfind("does not fit: node3 host memory needs 3.00 TiB of 2.00 TiB; compute-bound", 0) == 0);
}

TEST_CASE("a legend that would pass the canvas's right edge goes on to a new line") {
  // 0.6 em x 12 px = 7.2 px per character: "abcdefghij" is 72 px, an entry 12 + 4 + 72 = 88 px and
  // 14 px apart. From x = 10 on a 200-px canvas with a 10-px margin: the first entry ends at 98,
  // the second would end at 112 + 88 = 200 > 190: it starts a line 18 px lower, at x = 10.
  Svg svg(200, 100);
  const double last_line = svg.legend(10, 20, {{"abcdefghij", "#111111"}, {"klmnopqrst", "#222222"}});
  CHECK(last_line == 38);
  const std::string text = svg.str();
  CHECK(text.find("<text x=\"26\" y=\"20\">abcdefghij</text>") != std::string::npos);
  CHECK(text.find("<text x=\"26\" y=\"38\">klmnopqrst</text>") != std::string::npos);
  CHECK(text_width("abcdefghij") == doctest::Approx(72));
}

TEST_CASE("axis ticks beyond the scale's data are left out") {
  // Data to 1.01 s in about 6 steps: 1.01 / 6 = 0.168, so every 0.2 s up to 1.2, which would sit
  // 19% past the end of the plot.
  Svg svg(300, 100);
  const Scale x{0, 1.01, 20, 280};
  svg.x_axis(x, 80, nice_ticks(1.01, 6), seconds_label, "time");
  const std::string text = svg.str();
  CHECK(text.find(">1 s</text>") != std::string::npos);
  CHECK(text.find(">1.2 s</text>") == std::string::npos);
  std::size_t ticks = 0;
  for (auto at = text.find("class=\"tick\""); at != std::string::npos; at = text.find("class=\"tick\"", at + 1))
    ++ticks;
  CHECK(ticks == 6);  // 0, 0.2, 0.4, 0.6, 0.8, 1
}

TEST_CASE("a long replay tells how many ops are done of how many, the simulated time, the rate and the time left") {
  // Two ranks sharing a program of 10,240 ops: 20,480 in all. Lines come every 4,096 finished ops
  // once the delay is over (none here), a new one only after the interval (30 s off a terminal).
  Workload workload;
  auto program = std::make_shared<Program>();
  program->ops.resize(10240);
  workload.programs = {program, program};
  std::ostringstream out;
  {
    RunProgress progress(workload, out, false, 0);
    for (OpId op = 0; op < 4095; ++op)
      progress.op_finished(0, op, 1.5);
    CHECK(out.str().empty());
    progress.op_finished(0, 4095, 1.5);
    CHECK(out.str().rfind("trainsim: simulating, 4.10K of 20.48K ops (20 %), 1.500 s simulated, ", 0) == 0);
    for (OpId op = 0; op < 4096; ++op)
      progress.op_finished(1, op, 2.0);
    const std::string printed = out.str();
    CHECK(std::count(printed.begin(), printed.end(), '\n') == 1);  // within 30 s of the first line
  }
  // 10,240 of 20,480 ops in 100 s: 102.4 ops/s (counts under a thousand shown whole), 100 s left.
  RunProgress progress(workload, out, false, 0);
  CHECK(progress.line(10240, 3, 100) ==
        "trainsim: simulating, 10.24K of 20.48K ops (50 %), 3.000 s simulated, 102 ops/s, about 1m40s left");
}
