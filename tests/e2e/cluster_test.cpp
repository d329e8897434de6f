// Generated platforms load and route as the hardware description says: hand-derived transfer
// times over NVLink, the rail NICs and an oversubscribed fat tree, and the same step as the
// hand-written DGX A100 platform.
#include <doctest/doctest.h>

#include <fstream>

#include "cli.hpp"

using namespace trainsim::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A trace with one program text per rank (empty: the rank idles).
fs::path programs_trace(const std::string& name, const std::vector<std::string>& programs) {
  const fs::path dir = fresh_dir(name + "_trace");
  std::ofstream meta(dir / "workload.txt");
  meta << "format 1\nranks " << programs.size() << '\n';
  for (std::size_t rank = 0; rank < programs.size(); ++rank) {
    const std::string file = "p" + std::to_string(rank) + ".trace";
    std::ofstream(dir / file) << programs[rank];
    meta << "program " << file << ' ' << rank << '\n';
  }
  return dir;
}

// A trace where `from[i]` sends `bytes` to `to[i]`, all at once; other ranks idle.
fs::path transfers(const std::string& name, int ranks, const std::vector<std::pair<int, int>>& pairs, double bytes) {
  std::vector<std::string> programs(static_cast<std::size_t>(ranks));
  for (const auto& [from, to] : pairs) {
    programs[from] += std::to_string(std::count(programs[from].begin(), programs[from].end(), '\n')) + " send peer=" +
                      std::to_string(to) + " bytes=" + std::to_string(bytes) + "\n";
    programs[to] += std::to_string(std::count(programs[to].begin(), programs[to].end(), '\n')) + " recv peer=" +
                    std::to_string(from) + " bytes=" + std::to_string(bytes) + "\n";
  }
  return programs_trace(name, programs);
}

double replay_time(const std::string& name, const fs::path& trace, const fs::path& platform) {
  const CliResult result =
      run_trainsim(name, "replay " + trace.string() + " --platform " + platform.string() +
                                   " --collectives ideal --out out --no-report");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  return read_json(result.dir / "out/summary.json")["step_time_s"].get<double>();
}

fs::path generate(const std::string& name, const std::string& options) {
  const fs::path file = fresh_dir(name + "_platform") / "cluster.xml";
  const CliResult result = run_trainsim(name + "_gen", "platform " + options + " -o " + file.string());
  REQUIRE_MESSAGE(result.status == 0, result.err);
  CHECK(result.out.find("wrote") != std::string::npos);
  return file;
}

} // namespace

TEST_CASE("a generated cluster routes GPUs over NVLink inside a node and over their rail NICs between nodes") {
  const fs::path platform = generate("routes", "--gpu a100-80gb --nodes 2");
  // 25 GB from GPU 0 to GPU 1 of the same node: NVLink 3, 300 GB/s per direction, two 1 us hops.
  CHECK(replay_time("nvlink", transfers("nvlink", 16, {{0, 1}}, 25e9), platform) ==
        doctest::Approx(25e9 / 300e9 + 2e-6).epsilon(1e-6));
  // To GPU 0 of the other node: the 200 Gb/s (25 GB/s) NICs bound it; latency: PCIe 0.5 us, NIC 1 us,
  // switch 0.5 us, NIC 1 us, PCIe 0.5 us.
  CHECK(replay_time("rail", transfers("rail", 16, {{0, 8}}, 25e9), platform) ==
        doctest::Approx(1.0 + 3.5e-6).epsilon(1e-6));
}

TEST_CASE("an oversubscribed fat tree slows traffic between leaves, not inside one") {
  // 4 nodes, 2 per leaf, uplinks at a quarter of the leaf's NIC bandwidth: 2 x 8 x 25 GB/s / 4 = 100 GB/s.
  const fs::path platform =
      generate("fattree", "--gpu a100-80gb --nodes 4 --topology fat-tree --nodes-per-leaf 2 --oversubscription 4");
  std::vector<std::pair<int, int>> same_leaf, across;
  for (int g = 0; g < 8; ++g) {
    same_leaf.emplace_back(g, 8 + g);  // node 0 -> node 1, one leaf
    across.emplace_back(g, 16 + g);    // node 0 -> node 2, through the spine
  }
  // Inside a leaf each GPU has its 25 GB/s NIC: 25 GB in 1 s. Across leaves 8 flows share the
  // 100 GB/s uplink: 12.5 GB/s each, 2 s.
  CHECK(replay_time("leaf", transfers("leaf", 32, same_leaf, 25e9), platform) == doctest::Approx(1.0).epsilon(1e-4));
  CHECK(replay_time("spine", transfers("spine", 32, across, 25e9), platform) == doctest::Approx(2.0).epsilon(1e-4));
  // One byte shows the latency: PCIe 0.5 us, NIC 1 us, then 0.5 us per switch crossed and per
  // uplink, NIC 1 us, PCIe 0.5 us. Inside a leaf: its switch, 3.5 us. Across leaves: the leaf,
  // its uplink, the spine, the other uplink and leaf, 5.5 us.
  CHECK(replay_time("leaf_latency", transfers("leaf_latency", 32, {{0, 8}}, 1), platform) ==
        doctest::Approx(3.5e-6).epsilon(1e-3));
  CHECK(replay_time("spine_latency", transfers("spine_latency", 32, {{0, 16}}, 1), platform) ==
        doctest::Approx(5.5e-6).epsilon(1e-3));
}

TEST_CASE("a three-tier fat tree slows traffic between pods by the pods' oversubscription, not inside one") {
  // 4 nodes, a leaf each, 2 leaves per pod: leaf uplinks 8 x 25 GB/s (non-blocking), a pod's
  // uplink 2 x 200 / 4 = 100 GB/s.
  const fs::path platform = generate("pods", "--gpu a100-80gb --nodes 4 --topology fat-tree --nodes-per-leaf 1 "
                                             "--leaves-per-pod 2 --pod-oversubscription 4");
  std::vector<std::pair<int, int>> same_pod, across;
  for (int g = 0; g < 8; ++g) {
    same_pod.emplace_back(g, 8 + g);  // node 0 -> node 1: leaf, pod spine, leaf
    across.emplace_back(g, 16 + g);   // node 0 -> node 2: up to the core and down the other pod
  }
  // In a pod each GPU has its 25 GB/s NIC: 25 GB in 1 s. Across pods 8 flows share the 100 GB/s
  // uplink: 12.5 GB/s each, 2 s.
  CHECK(replay_time("pod", transfers("pod", 32, same_pod, 25e9), platform) == doctest::Approx(1.0).epsilon(1e-4));
  CHECK(replay_time("core", transfers("core", 32, across, 25e9), platform) == doctest::Approx(2.0).epsilon(1e-4));
  // Latency, 0.5 us per switch and uplink crossed between the NICs' 3 us: in a pod leaf, uplink,
  // pod spine, uplink, leaf (5.5 us); across pods also the pods' uplinks and the core (7.5 us).
  CHECK(replay_time("pod_latency", transfers("pod_latency", 32, {{0, 8}}, 1), platform) ==
        doctest::Approx(5.5e-6).epsilon(1e-3));
  CHECK(replay_time("core_latency", transfers("core_latency", 32, {{0, 16}}, 1), platform) ==
        doctest::Approx(7.5e-6).epsilon(1e-3));
}

TEST_CASE("a described DGX A100 pair simulates the default scenario like the hand-written platform") {
  const std::string scenario = project_file("scenarios/default.ini");
  const CliResult file = run_trainsim("described_file", "run " + scenario + " --out out --no-report");
  const CliResult described = run_trainsim(
      "described_keys", "run " + scenario + " --out out --no-report --set platform.gpu=a100-80gb --set platform.nodes=2");
  REQUIRE_MESSAGE(file.status == 0, file.err);
  REQUIRE_MESSAGE(described.status == 0, described.err);
  const json a = read_json(file.dir / "out/summary.json"), b = read_json(described.dir / "out/summary.json");
  CHECK(b["step_time_s"].get<double>() == doctest::Approx(a["step_time_s"].get<double>()).epsilon(1e-9));
  CHECK(b["time"]["comm"]["dp"]["total_s"].get<double>() ==
        doctest::Approx(a["time"]["comm"]["dp"]["total_s"].get<double>()).epsilon(1e-6));
  CHECK(b["platform"]["file"].get<std::string>().find("generated 2 x 8 A100-SXM4-80GB") == 0);
}

TEST_CASE("bad cluster descriptions get one line and status 2") {
  const CliResult unknown = run_trainsim("platform_bad_gpu", "platform --gpu h100x -o x.xml");
  CHECK(unknown.status == 2);
  CHECK(unknown.err.find("unknown GPU 'h100x'; accepted:") != std::string::npos);
  CHECK(!fs::exists(unknown.dir / "x.xml"));
  const CliResult both = run_trainsim("platform_both", "run " + project_file("scenarios/default.ini") +
                                                            " --set platform.nodes=4 --out out");
  CHECK(both.status == 2);
  CHECK(both.err.find("needs platform.gpu instead of platform.file") != std::string::npos);
}

TEST_CASE("a rail-optimised network keeps each rail to itself and sends cross-rail traffic over the spine") {
  // 2 nodes; rail switch uplinks at a quarter of the rail's ports: 2 x 25 GB/s / 4 = 12.5 GB/s.
  const fs::path platform = generate("rails", "--gpu a100-80gb --nodes 2 --topology rail-optimized --oversubscription 4");
  std::vector<std::pair<int, int>> same_rail, cross_rail;
  for (int g = 0; g < 8; ++g) {
    same_rail.emplace_back(g, 8 + g);               // GPU g to GPU g of the other node: rail switch g only
    cross_rail.emplace_back(g, 8 + (g + 1) % 8);    // up rail g's uplink, over the spine, down rail g+1's
  }
  // Same rail: each GPU's 25 GB/s NIC, 25 GB in 1 s. Cross rail: each flow alone on its uplink
  // direction at 12.5 GB/s: 2 s.
  CHECK(replay_time("same_rail", transfers("same_rail", 16, same_rail, 25e9), platform) ==
        doctest::Approx(1.0).epsilon(1e-4));
  CHECK(replay_time("cross_rail", transfers("cross_rail", 16, cross_rail, 25e9), platform) ==
        doctest::Approx(2.0).epsilon(1e-4));
  // Rings cross between nodes on one rail, so the gradient all-reduce of the default scenario
  // does not touch the oversubscribed spine: the same step as on one non-blocking switch.
  const std::string scenario = project_file("scenarios/default.ini");
  const CliResult railed = run_trainsim("rails_run", "run " + scenario + " --set platform.file=" + platform.string() +
                                                         " --out out --no-report");
  const CliResult flat = run_trainsim("rails_flat", "run " + scenario + " --out out --no-report");
  REQUIRE_MESSAGE(railed.status == 0, railed.err);
  REQUIRE_MESSAGE(flat.status == 0, flat.err);
  CHECK(read_json(railed.dir / "out/summary.json")["step_time_s"].get<double>() ==
        doctest::Approx(read_json(flat.dir / "out/summary.json")["step_time_s"].get<double>()).epsilon(1e-9));
}

namespace {

json replay_summary(const std::string& name, const fs::path& trace, const fs::path& platform) {
  const CliResult result =
      run_trainsim(name, "replay " + trace.string() + " --platform " + platform.string() +
                                   " --collectives ideal --out out --no-report");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  return read_json(result.dir / "out/summary.json");
}

} // namespace

TEST_CASE("copies to and from host memory cross the GPU's PCIe link and its switch's uplink") {
  // One DGX-A100-like node: PCIe gen4 x16 = 16 lanes x 16 GT/s x 128/130 / 8 = 31.5077 GB/s per
  // direction; GPUs 0 and 1 share switch 0, GPU 2 sits behind switch 1.
  const fs::path platform = generate("pcie", "--gpu a100-80gb");
  const double pcie = 16 * 16e9 * 128 / 130 / 8;
  const std::string down = "0 copy target=node0-cpu bytes=" + std::to_string(pcie) + "\n";
  const std::string up = "0 copy source=node0-cpu bytes=" + std::to_string(pcie) + "\n";
  // Alone: 1 s (plus two 0.5 us hops), in either direction, reported as d2h / h2d time.
  const json alone = replay_summary("d2h", programs_trace("d2h", {down}), platform);
  CHECK(alone["step_time_s"].get<double>() == doctest::Approx(1.0 + 1e-6).epsilon(1e-6));
  CHECK(alone["time"]["offload"]["d2h"]["total_s"].get<double>() == doctest::Approx(1.0).epsilon(1e-5));
  CHECK(alone["time"]["offload"]["d2h"]["bytes"].get<double>() == doctest::Approx(pcie).epsilon(1e-6));
  // The copy crossed the GPU's PCIe link and its switch's uplink, each busy the whole second.
  CHECK(alone["resources"]["pcie-gpu"]["busy_s"].get<double>() == doctest::Approx(1.0).epsilon(1e-5));
  CHECK(alone["resources"]["pcie-uplink"]["busiest"] == "node0-pcie-up0_UP");
  CHECK(alone["resources"]["pcie-uplink"]["utilisation"].get<double>() == doctest::Approx(1.0).epsilon(1e-5));
  CHECK_FALSE(alone["resources"].contains("nvlink"));
  // "@cpu" names the rank's own node's CPU: the same copy as naming node0-cpu.
  const std::string to_own_cpu = "0 copy target=@cpu bytes=" + std::to_string(pcie) + "\n";
  CHECK(replay_summary("own_cpu", programs_trace("own_cpu", {to_own_cpu}), platform)["step_time_s"].get<double>() ==
        doctest::Approx(1.0 + 1e-6).epsilon(1e-6));
  const json inbound = replay_summary("h2d", programs_trace("h2d", {up}), platform);
  CHECK(inbound["time"]["offload"]["h2d"]["total_s"].get<double>() == doctest::Approx(1.0).epsilon(1e-5));
  // Two GPUs behind one switch share its uplink: 2 s each. Behind two switches: 1 s each.
  const json shared = replay_summary("shared", programs_trace("shared", {down, down}), platform);
  CHECK(shared["step_time_s"].get<double>() == doctest::Approx(2.0).epsilon(1e-5));
  CHECK(shared["resources"]["pcie-uplink"]["bytes"].get<double>() == doctest::Approx(2 * pcie).epsilon(1e-6));
  CHECK(shared["resources"]["pcie-uplink"]["busy_s"].get<double>() == doctest::Approx(2.0).epsilon(1e-5));
  CHECK(replay_summary("apart", programs_trace("apart", {down, "", down}), platform)["step_time_s"].get<double>() ==
        doctest::Approx(1.0).epsilon(1e-5));
}

TEST_CASE("an offload copy and a send to another node share the GPU's PCIe link") {
  // GPU 0 copies C bytes to its CPU (its PCIe link, then its switch's uplink) while sending S bytes
  // to GPU 0 of node 1 (its PCIe link, then its 25 GB/s NIC), C = S = P/2 with P = 31.5 GB/s, the
  // PCIe gen4 rate. Alone the copy takes C / P = 0.5 s, the send S / 25 GB/s = 0.63 s. Together
  // the GPU's link carries C + S = P bytes, so the step lasts at least 1 s, however SimGrid's
  // model splits the link between the two flows (CM02 weighs flows by their route).
  const fs::path platform = generate("pcie_nic", "--gpu a100-80gb --nodes 2");
  const double pcie = 16 * 16e9 * 128 / 130 / 8;
  const std::string bytes = std::to_string(pcie / 2);
  std::vector<std::string> both(9), copy_only(9), send_only(9);
  both[0] = "0 copy target=@cpu bytes=" + bytes + "\n1 send peer=8 bytes=" + bytes + "\n";
  both[8] = send_only[8] = "0 recv peer=0 bytes=" + bytes + "\n";
  copy_only[0] = "0 copy target=@cpu bytes=" + bytes + "\n";
  send_only[0] = "0 send peer=8 bytes=" + bytes + "\n";
  const json together = replay_summary("pcie_nic_both", programs_trace("pcie_nic_both", both), platform);
  CHECK(together["step_time_s"].get<double>() >= 1.0);
  CHECK(together["resources"]["pcie-gpu"]["busy_s"].get<double>() == doctest::Approx(1.0).epsilon(1e-9));
  CHECK(together["resources"]["pcie-gpu"]["busiest"] == "node0-pcie0_UP");
  CHECK(replay_summary("pcie_nic_copy", programs_trace("pcie_nic_copy", copy_only), platform)["step_time_s"]
            .get<double>() == doctest::Approx(0.5).epsilon(1e-4));
  CHECK(replay_summary("pcie_nic_send", programs_trace("pcie_nic_send", send_only), platform)["step_time_s"]
            .get<double>() == doctest::Approx(pcie / 2 / 25e9).epsilon(1e-4));
}

TEST_CASE("an NVMe drive behind a PCIe switch shares the switch's uplink with the GPUs' copies") {
  // Drive 0 hangs on switch 0, like GPU 0. GPU 0 copies P bytes to the CPU (P = 31.5 GB/s, the
  // gen4 x16 rate: 1 s alone) while reading D = 6.8 GB from the drive (its read rate: 1 s alone).
  // Both cross uplink 0 upwards: for the first second the read takes its 6.8 GB/s and the copy
  // the rest, P - D per second; the copy's last D bytes then go at P: 1 + D / P seconds.
  const fs::path platform = generate("nvme_uplink", "--gpu a100-80gb --nvme-per-node 1");
  const double pcie = 16 * 16e9 * 128 / 130 / 8, drive = 6.8e9;
  const std::string copy = "0 copy target=@cpu bytes=" + std::to_string(pcie) + "\n";
  const std::string read = "0 read target=@nvme bytes=" + std::to_string(drive) + "\n";
  CHECK(replay_summary("nvme_alone", programs_trace("nvme_alone", {read}), platform)["step_time_s"].get<double>() ==
        doctest::Approx(1.0).epsilon(1e-5));
  const json both = replay_summary("nvme_and_copy", programs_trace("nvme_and_copy", {copy + "1 read target=@nvme bytes=" +
                                                                                      std::to_string(drive) + "\n"}),
                                   platform);
  CHECK(both["step_time_s"].get<double>() == doctest::Approx(1 + drive / pcie).epsilon(1e-4));
  CHECK(both["resources"]["pcie-uplink"]["bytes"].get<double>() == doctest::Approx(pcie + drive).epsilon(1e-9));
  CHECK(both["resources"]["nvme"]["busy_s"].get<double>() == doctest::Approx(1.0).epsilon(1e-9));
  // GPU 2 sits behind switch 1: its copy does not meet the drive's traffic.
  CHECK(replay_summary("nvme_apart", programs_trace("nvme_apart", {read, "", copy}), platform)["step_time_s"]
            .get<double>() == doctest::Approx(1.0).epsilon(1e-4));
}

TEST_CASE("work on the CPU host is timed by its speed and memory bandwidth, shared by the node's GPUs") {
  // The generated CPU host: 2 TFLOP/s, 200 GB/s of DRAM.
  const fs::path platform = generate("cpu", "--gpu a100-80gb");
  const std::string adam = "0 compute name=adam flops=2e12 bytes=0 phase=optimizer host=node0-cpu\n";
  const json one = replay_summary("cpu_one", programs_trace("cpu_one", {adam}), platform);
  CHECK(one["step_time_s"].get<double>() == doctest::Approx(1.0).epsilon(1e-9));
  CHECK(one["time"]["offload"]["cpu_optimizer"]["total_s"].get<double>() == doctest::Approx(1.0).epsilon(1e-9));
  CHECK(one["resources"]["cpu"]["busy_s"].get<double>() == doctest::Approx(1.0).epsilon(1e-9));
  CHECK(one["time"]["compute_s"].get<double>() == 0);  // not GPU time
  // Two ranks' steps at once share the CPU: 2 s; 400 GB of DRAM traffic alone: 2 s.
  CHECK(replay_summary("cpu_two", programs_trace("cpu_two", {adam, adam}), platform)["step_time_s"].get<double>() ==
        doctest::Approx(2.0).epsilon(1e-9));
  const std::string streaming = "0 compute flops=0 bytes=400e9 host=node0-cpu\n";
  CHECK(replay_summary("cpu_bytes", programs_trace("cpu_bytes", {streaming}), platform)["step_time_s"].get<double>() ==
        doctest::Approx(2.0).epsilon(1e-9));
}
