// trainsim collectives against published nccl-tests tables: the simulated flows, NCCL's choices
// and the calibration together must reproduce measured curves over six orders of magnitude of
// message size. The calibration (program/nccl_model.cpp) was fitted to these tables from 16 MB
// up; the smaller sizes and the two-node curve test its structure.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "cli.hpp"

using namespace trainsim::test;

namespace {

struct Row {
  double microseconds = 0;
  double busbw = 0;
  std::string algorithm, protocol;
};

// The table's rows by size in bytes.
std::map<double, Row> collectives(const std::string& name, const std::string& arguments) {
  const CliResult result = run_trainsim(name, "collectives " + arguments);
  REQUIRE_MESSAGE(result.status == 0, result.err);
  std::map<double, Row> rows;
  std::istringstream lines(result.out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    double size = 0;
    Row row;
    double algbw = 0;
    if (fields >> size >> row.microseconds >> algbw >> row.busbw >> row.algorithm >> row.protocol)
      rows[size] = row;
  }
  REQUIRE(!rows.empty());
  return rows;
}

// Each measured (size, microseconds) within `each` of the simulated time, and on average within `mean`.
void check_curve(const std::map<double, Row>& simulated, const std::vector<std::pair<double, double>>& measured,
                 double each, double mean) {
  double total = 0;
  for (const auto& [size, microseconds] : measured) {
    CAPTURE(size);
    REQUIRE(simulated.count(size) == 1);
    const double error = simulated.at(size).microseconds / microseconds - 1;
    CHECK(std::abs(error) < each);
    total += std::abs(error);
  }
  CHECK(total / static_cast<double>(measured.size()) < mean);
}

} // namespace

TEST_CASE("collectives: all_reduce on 8 A100s follows Oracle's all_reduce_perf from 64 B to 4 GB") {
  // oracle-japan/ocitutorials, tutorials/_intermediates/spinup-gpu-cluster.md: all_reduce_perf
  // -b 64 -e 10G -f 2 -g 8 on 8 A100-SXM4-40GB (NVSwitch), out-of-place time in us.
  const auto rows = collectives("a100", "--platform dgx-a100.xml -b 64B -e 4GiB -f 4");
  check_curve(rows,
              {{64, 32.01},
               {1024, 32.03},
               {65536, 35.40},
               {1048576, 76.71},
               {4194304, 134.5},
               {16777216, 245.1},
               {67108864, 589.5},
               {268435456, 2121.9},
               {1073741824, 8166.8},
               {4294967296, 32097}},
              0.16, 0.08);
  // The simulated flows give what the calibration says a lone call takes: at 1 GiB, Simple's
  // 8.4 + 14 x 8.26 = 124.04 us, then 2 x 7/8 GiB through each GPU's 300 GB/s port at .734.
  CHECK(rows.at(1073741824).microseconds ==
        doctest::Approx(124.04 + 2 * 7.0 / 8 * 1073741824 / (0.734 * 300e9) * 1e6).epsilon(1e-3));
  // Small messages take LL, large ones Simple, as NCCL's tuner does.
  CHECK(rows.at(64).protocol == "ll");
  CHECK(rows.at(4294967296).protocol == "simple");
  CHECK(rows.at(4294967296).algorithm == "ring");
}

TEST_CASE("collectives: all_reduce on 8 H100s runs NVLink SHARP at the bus bandwidth Azure measured") {
  // Azure/AI-benchmarking-guide, "Azure Results/ND_H100_v5_results.md": NCCL_ALGO=NVLS
  // all_reduce_perf on 8 H100 (NCCL 2.18.5), in-place bus bandwidth in GB/s.
  const auto rows = collectives("h100", "--platform dgx-h100.xml -b 16MiB -e 4GiB -f 4 --algorithm nvls");
  const std::pair<double, double> measured[] = {
      {16777216, 234.45}, {67108864, 361.78}, {268435456, 423.38}, {1073741824, 466.35}, {4294967296, 475.54}};
  for (const auto& [size, busbw] : measured) {
    CAPTURE(size);
    CHECK(rows.at(size).algorithm == "nvls");
    CHECK(rows.at(size).busbw == doctest::Approx(busbw).epsilon(0.06));
  }
  // Simulated as ring flows each carrying 9/14 of a ring's bytes, so that each port moves 9/8 GiB
  // at .664 x 450 GB/s, after NVLS's 66 us.
  CHECK(rows.at(1073741824).microseconds ==
        doctest::Approx(66 + 9.0 / 8 * 1073741824 / (0.664 * 450e9) * 1e6).epsilon(1e-3));
  // Without NVLS, rings: about 370 GB/s (NVIDIA/nccl-tests issue 212), the calibration's own
  // figure: the simulated flows reproduce it.
  const auto ring = collectives("h100_ring", "--platform dgx-h100.xml -b 4GiB -e 4GiB --algorithm ring");
  CHECK(ring.at(4294967296).busbw == doctest::Approx(370).epsilon(0.06));
}

TEST_CASE("collectives: all_reduce across two DGX A100s follows Oracle's all_reduce_perf from 8 B to 8 GB") {
  // oracle-quickstart/oci-hpc-oke README: all_reduce_perf -b 8 -e 8G on 2 x 8 A100-SXM4-40GB,
  // 16 x 100 GbE RoCE per node (the aggregate of 8 x 200 Gb/s), out-of-place time in us. Its
  // 8 GB bus bandwidth (238 GB/s) is above the NICs' 200: a tree across two nodes moves half a
  // ring's bytes through them. Small messages take the tree's logarithmic latency.
  const auto rows = collectives("a100_2n_oci", "--platform dgx-a100-2n.xml -b 8B -e 8GiB -f 2");
  check_curve(rows,
              {{8, 36.47},
               {1024, 41.97},
               {8192, 48.16},
               {65536, 51.69},
               {1048576, 85.58},
               {4194304, 127.0},
               {16777216, 282.7},
               {67108864, 821.7},
               {268435456, 3042.7},
               {1073741824, 9187.8},
               {4294967296, 34176},
               {8589934592, 67689}},
              0.25, 0.12);
  CHECK(rows.at(8).algorithm == "tree");
  CHECK(rows.at(8).protocol == "ll");
  CHECK(rows.at(8589934592).algorithm == "tree");
  CHECK(rows.at(8589934592).protocol == "simple");  // a tree's LL128 reaches 120/128 of its Simple
}

TEST_CASE("collectives: all_reduce across four H100 nodes follows NVIDIA/nccl-tests issue 309") {
  // 4 x 8 H100 with 8 x 400 Gb/s InfiniBand per node, NCCL 2.26 (its default across nodes is
  // NVLS-Tree, which trainsim runs as a tree), out-of-place time in us. The generated cluster
  // has the same NICs.
  const CliResult platform = run_trainsim("h100_4n_platform", "platform --gpu h100-sxm --nodes 4 -o h100-4n.xml");
  REQUIRE_MESSAGE(platform.status == 0, platform.err);
  const auto rows = collectives("h100_4n", "--platform " + (platform.dir / "h100-4n.xml").string() + " -b 16B -e 16GiB -f 4");
  check_curve(rows,
              {{16, 34.82},
               {1024, 39.79},
               {65536, 50.83},
               {1048576, 82.17},
               {16777216, 259.6},
               {67108864, 579.1},
               {268435456, 1768.0},
               {1073741824, 5808.8},
               {4294967296, 22890},
               {17179869184, 90986}},
              0.30, 0.13);
}

TEST_CASE("collectives: rings across two DGX A100s follow a measured InfiniBand curve") {
  // facebookresearch/gcm's sample all_reduce_perf output on 2 x 8 A100-SXM4-80GB over 8 x 200
  // Gb/s InfiniBand (NCCL 2.12.12), out-of-place time in us: from 32 MB up a ring's slope, so
  // compared with rings. At 32 MB that NCCL took 16 % longer than this model's LL128 ring.
  const auto rows = collectives("a100_2n", "--platform dgx-a100-2n.xml -b 32MiB -e 1GiB -f 2 --algorithm ring");
  check_curve(rows,
              {{33554432, 650.2},
               {67108864, 956.9},
               {134217728, 1740.3},
               {268435456, 2966.1},
               {536870912, 5693.6},
               {1073741824, 11013}},
              0.17, 0.06);
}

TEST_CASE("collectives: ideal collectives run at the links' full bandwidth") {
  // 1 GiB over 8 A100s at 300 GB/s: 2 x 7/8 GiB / 300 GB/s plus 2 x 7 steps of 2 us = 6291.5 us,
  // bus bandwidth just under 300 GB/s.
  const auto rows = collectives("a100_ideal", "--platform dgx-a100.xml -b 1GiB -e 1GiB --collectives ideal");
  CHECK(rows.at(1073741824).microseconds == doctest::Approx(2 * 7.0 / 8 * 1073741824 / 300e9 * 1e6 + 28).epsilon(1e-3));
  CHECK(rows.at(1073741824).algorithm == "-");
}

TEST_CASE("collectives: fast fidelity times an all_to_all across two nodes from its links' load, as its flows run") {
  // 16 H100s on two nodes, each GPU with its own 50 GB/s NIC: half of each GPU's bytes leave the
  // node through it, at Simple's network efficiency .94 (program/nccl_model.cpp): 1 GiB takes
  // 2^29 / 47e9 s = 11,422.8 us plus the routes' few microseconds of latency, the same whether
  // its 240 flows are simulated or the load is divided out.
  const auto flows = collectives("a2a_flows", "--platform dgx-h100-2n.xml -c all_to_all -b 1KiB -e 1GiB -f 32");
  const auto fast = collectives("a2a_fast", "--platform dgx-h100-2n.xml -c all_to_all -b 1KiB -e 1GiB -f 32 --fidelity fast");
  REQUIRE(flows.size() == fast.size());
  for (const auto& [size, row] : flows) {
    CAPTURE(size);
    CHECK(fast.at(size).microseconds == doctest::Approx(row.microseconds).epsilon(1e-3));
  }
  const double gib = 1073741824;
  CHECK(fast.at(gib).microseconds > gib / 2 / 47e9 * 1e6);
  CHECK(fast.at(gib).microseconds < gib / 2 / 47e9 * 1e6 + 5);
}

TEST_CASE("collectives: fast fidelity times a collective across nodes as its simulated flows run") {
  // The NVLink edges of a ring over several nodes are timed (each from its own NVSwitch port's
  // load, at the choice's NVLink efficiency) and end when their flows would have; with nothing
  // else on NVLink the times are those of simulating every flow, for trees (small sizes) and
  // rings (large), every collective.
  for (const std::string platform : {"dgx-h100-2n.xml", "dgx-a100-8n.xml"})
    for (const std::string collective : {"all_reduce", "all_gather", "reduce_scatter", "broadcast"}) {
      CAPTURE(collective);
      CAPTURE(platform);
      const std::string arguments = "--platform " + platform + " -c " + collective + " -b 1KiB -e 1GiB -f 32";
      const auto flows = collectives("across_flows", arguments);
      const auto fast = collectives("across_fast", arguments + " --fidelity fast");
      REQUIRE(flows.size() == fast.size());
      for (const auto& [size, row] : flows) {
        CAPTURE(size);
        CHECK(fast.at(size).microseconds == doctest::Approx(row.microseconds).epsilon(1e-6));
        CHECK(fast.at(size).algorithm == row.algorithm);
      }
    }
}

namespace {

// When each op of every rank ends, by (rank, stream, name), from a replay's trace.json.
std::map<std::string, double> op_ends(const std::filesystem::path& trace) {
  std::map<std::string, double> ends;
  const nlohmann::json events = read_json(trace)["traceEvents"];
  for (const nlohmann::json& event : events)
    if (event["ph"] == "X")
      ends[event["pid"].dump() + "/" + event["tid"].dump() + "/" + event["name"].get<std::string>()] =
          event["ts"].get<double>() + event["dur"].get<double>();
  return ends;
}

// Replays `programs` (file name -> ranks, text) on `platform` with both fidelities; every op of
// every rank must end at the same time.
void check_fast_like_flows(const std::string& name, const std::string& platform, int ranks, const std::string& options,
                           const std::vector<std::pair<std::string, std::pair<std::string, std::string>>>& programs) {
  const std::filesystem::path trace = fresh_dir(name + "_trace");
  std::ofstream workload(trace / "workload.txt");
  workload << "format 3\nranks " << ranks << "\ngroup world dp 0-" << ranks - 1 << "\n";
  for (const auto& [file, program] : programs) {
    workload << "program " << file << " " << program.first << "\n";
    std::ofstream(trace / file) << program.second;
  }
  workload.close();
  std::map<std::string, double> ends[2];
  for (int fast = 0; fast < 2; ++fast) {
    const CliResult result =
        run_trainsim(name + (fast ? "_fast" : "_flows"), "replay " + trace.string() + " --platform " + platform +
                                                             " --trace-ranks 0-" + std::to_string(ranks - 1) + " " +
                                                             options + " --fidelity " + (fast ? "fast" : "flows") + " -o out");
    REQUIRE_MESSAGE(result.status == 0, result.err);
    ends[fast] = op_ends(result.dir / "out/trace.json");
  }
  REQUIRE(ends[0].size() == ends[1].size());
  CHECK(ends[0].size() >= static_cast<std::size_t>(ranks));
  for (const auto& [op, end] : ends[0]) {
    CAPTURE(op);
    REQUIRE(ends[1].count(op) == 1);
    CHECK(ends[1].at(op) == doctest::Approx(end).epsilon(1e-6));
  }
}

} // namespace

TEST_CASE("collectives: under fast fidelity each member of a collective across nodes ends when its flows would") {
  // A timed NVLink edge moves data once both its ends have started the phase, as its flow does
  // once matched: a member arriving 1.8 s late holds up its neighbours as the flows do (rank 5,
  // which computes after the all-reduce, cannot leave before rank 3 came), on NVSwitch with one
  // ring or the default eight.
  const std::string all_reduce = "1 collective name=grads op=allreduce group=world bytes=1e9 stream=dp-comm deps=0\n";
  const auto program = [&](const char* ranks, const char* flops) {
    return std::make_pair(std::string(ranks), std::string("0 compute name=before flops=") + flops + " bytes=1e6\n" +
                                                  all_reduce + "2 compute name=after flops=1e12 bytes=1e6 deps=1\n");
  };
  for (const char* channels : {"--channels 1", "--channels auto"}) {
    CAPTURE(channels);
    check_fast_like_flows("across_late", "dgx-h100-2n.xml", 16, channels,
                          {{"late.trace", program("3", "1e15")}, {"on.trace", program("0-2,4-15", "1e9")}});
  }
  // Three rings over 8 GPUs load the NVSwitch ports unevenly (a member's edge in may carry two
  // thirds of what its edge out does): each edge goes at its own pace from when both its ends
  // started, two members late.
  check_fast_like_flows("across_late_rings", "dgx-h100-2n.xml", 16, "--channels 3",
                        {{"late.trace", program("0-1", "1e15")}, {"on.trace", program("2-15", "1e9")}});
  // Uneven nodes (8 + 2 GPUs, then 8 + 3) in a full NVLink mesh: each member's edges go at the
  // pace of their own links, not of the group's busiest; and a broadcast, whose root receives
  // nothing and whose last member sends nothing.
  const CliResult mesh = run_trainsim("across_mesh", "platform --gpu mi300x --nodes 2 -o mesh.xml");
  REQUIRE_MESSAGE(mesh.status == 0, mesh.err);
  const std::string collectives = "1 collective name=grads op=allreduce group=world bytes=1073741824 deps=0\n"
                                  "2 collective name=bc op=broadcast group=world bytes=1073741824 deps=1\n";
  for (const int ranks : {10, 11}) {
    CAPTURE(ranks);
    check_fast_like_flows("across_uneven", (mesh.dir / "mesh.xml").string(), ranks, "",
                          {{"p.trace", {"0-" + std::to_string(ranks - 1), "0 compute name=before flops=1e9\n" + collectives}}});
  }
  // The same with a member of the smaller node late: its neighbours' other edges are not held up.
  check_fast_like_flows("across_uneven_late", (mesh.dir / "mesh.xml").string(), 11, "",
                        {{"late.trace", {"8", "0 compute name=before flops=1e15\n" + collectives}},
                         {"on.trace", {"0-7,9-10", "0 compute name=before flops=1e9\n" + collectives}}});
}

TEST_CASE("collectives: bad options get one line and status 2") {
  const std::pair<std::string, std::string> cases[] = {
      {"--platform dgx-a100.xml --collective allreduce", "--collective allreduce: accepted: all_reduce"},
      {"--platform dgx-a100.xml -b 1GiB -e 1MiB", "--max-bytes 1MiB: accepted: at least --min-bytes"},
      {"--platform dgx-a100.xml -b 8", "--min-bytes 8: accepted: a size from 1 byte to 1TiB with its unit"},
      {"--platform dgx-a100.xml -e 1e30B", "--max-bytes 1e30B: accepted: a size from 1 byte to 1TiB"},
      {"--platform dgx-a100.xml --gpus 9", "--gpus 9: accepted: a whole number from 2 to 8"},
      {"--platform dgx-a100.xml --algorithm nvls", "comm.algorithm = nvls: the platform's A100-SXM4-80GB GPUs have no NVLink SHARP"},
      {"--platform dgx-h100.xml --algorithm nvls --protocol ll", "--protocol: NVLS runs the Simple protocol only"},
      {"--platform dgx-a100.xml --collectives ideal --protocol ll", "--collectives: ideal collectives have no algorithm"},
      {"--platform workstation-4x-rtx4090.xml --algorithm nvls", "GPUs have no NVLink SHARP"},
      {"--platform dgx-a100.xml --fidelity exact", "--fidelity exact: accepted: flows, fast"},
  };
  for (const auto& [arguments, message] : cases) {
    CAPTURE(arguments);
    const CliResult result = run_trainsim("collectives_bad", "collectives " + arguments);
    CHECK(result.status == 2);
    CHECK(result.err.find(message) != std::string::npos);
    CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
  }
}
