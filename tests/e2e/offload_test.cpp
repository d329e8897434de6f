// Offload end to end: model states on each tier as the ZeRO-Offload table says, the largest
// model a DGX-2 holds on each tier (ZeRO-Infinity's orders of magnitude), and offload traffic
// timed by the simulated PCIe links: faster links, fewer GPUs per switch, the efficiency trend.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "cli.hpp"

using namespace trainsim::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A GPT-style config.json of `hidden` x `layers` (head size 128, 51,200 tokens, tied embeddings):
// about 12 x layers x hidden^2 parameters.
fs::path gpt_config(const fs::path& dir, const std::string& name, int hidden, int layers) {
  const fs::path file = dir / (name + ".json");
  std::ofstream(file) << R"({"model_type": "gpt2", "n_embd": )" << hidden << R"(, "n_layer": )" << layers
                      << R"(, "n_head": )" << hidden / 128
                      << R"(, "n_positions": 2048, "vocab_size": 51200, "tie_word_embeddings": true})";
  return file;
}

// `trainsim memory` of a ZeRO-3 run of `model` over the 16 GPUs of a DGX-2 (fp16, full
// recompute, 1,024 tokens per GPU), with the extra keys `offload`: the memory section of memory.json.
json dgx2_memory(const std::string& name, const fs::path& model, const std::string& offload) {
  const fs::path dir = fresh_dir(name + "_scenario");
  std::ofstream(dir / "dgx2.ini") << "[model]\npath = " << model.string() << "\n[platform]\nfile = dgx2-v100.xml\n"
                                  << "[parallel]\ndp = 16\n[memory]\nzero = 3\nrecompute = full\nprecision = fp16\n"
                                  << "[training]\nseq_len = 1024\nmicro_batch = 1\n";
  const CliResult result = run_trainsim(name, "memory " + (dir / "dgx2.ini").string() + " " + offload + " --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  return read_json(result.dir / "out/memory.json")["memory"];
}

} // namespace

TEST_CASE("offloaded model states: 16M, 4M, 2M on the GPU, the rest in the node's host memory or on its NVMe") {
  // REFERENCES.md (ZeRO-Offload): all on the GPU 16M bytes; fp32 gradients and update on the CPU
  // 4M; fp16 gradients on the CPU too 2M. tiny-gpt has M = 3,683,840 parameters: token and
  // position embeddings 2 x 1024 x 256, 4 layers of 12h^2 + 13h = 789,760, the final norm's 512
  // (the head is tied to the embedding).
  const double m = 2 * 1024 * 256 + 4 * (12.0 * 256 * 256 + 13 * 256) + 512;
  const std::string scenario = project_file("tests/fixtures/tiny-ddp.ini");
  const std::string fp16 = " --set memory.precision=fp16 --set platform.file=dgx-a100-nvme.xml";
  const auto rank0 = [&](const std::string& name, const std::string& extra) {
    const CliResult result = run_trainsim(name, "memory " + scenario + fp16 + extra + " --out out");
    REQUIRE_MESSAGE(result.status == 0, result.err);
    return read_json(result.dir / "out/memory.json")["memory"];
  };
  CHECK(model_state_bytes(rank0("on_gpu", " --set parallel.dp=1 --set training.global_batch=2")["ranks"][0]) == 16 * m);
  const json cpu = rank0("cpu", " --set parallel.dp=1 --set training.global_batch=2 --set memory.offload_optimizer=cpu");
  CHECK(model_state_bytes(cpu["ranks"][0]) == 4 * m);
  // The node's DRAM holds 16 bytes per parameter (fp32 master, momentum, variance, gradients).
  CHECK(cpu["host"]["peak_bytes"].get<double>() == 16 * m);
  CHECK(cpu["host"]["capacity_bytes"].get<double>() == 1e12);  // the DGX A100's 1 TB
  // ZeRO-2 on 8 GPUs of one node: 2M per GPU, and the node's host memory still holds 16M (8 shards).
  const json zero2 = rank0("zero2", " --set parallel.dp=8 --set training.global_batch=16 --set memory.zero=2 "
                                    "--set memory.offload_optimizer=cpu");
  CHECK(model_state_bytes(zero2["ranks"][0]) == 2 * m);
  CHECK(zero2["host"]["peak_bytes"].get<double>() == doctest::Approx(16 * m).epsilon(1e-4));
  CHECK(zero2["host"]["node"] == "node0");
  // On NVMe instead: 16M on the node's drives, the pinned buffers (1 GiB per GPU) in DRAM.
  const json nvme = rank0("nvme", " --set parallel.dp=8 --set training.global_batch=16 --set memory.zero=2 "
                                  "--set memory.offload_optimizer=nvme");
  CHECK(nvme["nvme"]["peak_bytes"].get<double>() == doctest::Approx(16 * m).epsilon(1e-4));
  CHECK(nvme["host"]["peak_bytes"].get<double>() == 8 * std::pow(2.0, 30));
  CHECK(nvme["fits"].get<bool>());
}

TEST_CASE("a DGX-2 holds about 20B parameters on its GPUs, 70B with CPU offload, 1T with NVMe offload") {
  // ZeRO-Infinity (REFERENCES.md): on one DGX-2 (16 V100-32GB, 1.5 TB DRAM, NVMe) the largest
  // trainable model is about 20B on GPU memory, 70B with CPU offload, 1T with NVMe offload.
  // Checked within a factor of 2 either way: a model half that size fits and one twice it does
  // not. The factor covers what the published figures leave open: the models' shapes, sequence
  // length and batch, the framework's buffers. Why each bound holds here: ZeRO-3 over 16 GPUs
  // keeps 16 bytes/16 = 1 byte per parameter on each 32 GB GPU plus activations; with the
  // optimizer and parameters in DRAM the node holds 18 bytes per parameter in 1.5 TB (83B);
  // on its 8 x 3.84 TB of NVMe, 18 bytes per parameter in 30.7 TB (1.7T).
  const fs::path dir = fresh_dir("dgx2_models");
  const std::string cpu = "--set memory.offload_optimizer=cpu --set memory.offload_params=cpu "
                          "--set memory.offload_activations=cpu";
  const std::string nvme = "--set memory.offload_optimizer=nvme --set memory.offload_params=nvme "
                           "--set memory.offload_activations=cpu --set memory.prefetch_depth=0";
  // About 10B and 40B: 12 x 32 x 5120^2 = 10.1B, 12 x 50 x 8192^2 = 40.3B.
  CHECK(dgx2_memory("gpu_10b", gpt_config(dir, "gpt-10b", 5120, 32), "")["fits"].get<bool>());
  const json gpu_40b = dgx2_memory("gpu_40b", gpt_config(dir, "gpt-40b", 8192, 50), "");
  CHECK_FALSE(gpu_40b["gpu_fits"].get<bool>());
  // About 35B and 140B: 12 x 57 x 7168^2 = 35.1B, 12 x 77 x 12288^2 = 139.5B.
  const json cpu_35b = dgx2_memory("cpu_35b", gpt_config(dir, "gpt-35b", 7168, 57), cpu);
  CHECK(cpu_35b["fits"].get<bool>());
  CHECK(cpu_35b["host"]["used"].get<bool>());
  const json cpu_140b = dgx2_memory("cpu_140b", gpt_config(dir, "gpt-140b", 12288, 77), cpu);
  CHECK(cpu_140b["gpu_fits"].get<bool>());  // the GPUs are not the limit any more: DRAM is
  CHECK_FALSE(cpu_140b["host"]["fits"].get<bool>());
  // About 500B and 2T: 12 x 155 x 16384^2 = 499B, 12 x 254 x 25600^2 = 2.0T.
  const json nvme_500b = dgx2_memory("nvme_500b", gpt_config(dir, "gpt-500b", 16384, 155), nvme);
  CHECK(nvme_500b["fits"].get<bool>());
  const json nvme_2t = dgx2_memory("nvme_2t", gpt_config(dir, "gpt-2t", 25600, 254), nvme);
  CHECK(nvme_2t["gpu_fits"].get<bool>());
  CHECK(nvme_2t["host"]["fits"].get<bool>());
  CHECK_FALSE(nvme_2t["nvme"]["fits"].get<bool>());
  CHECK_FALSE(nvme_2t["fits"].get<bool>());
}

namespace {

// One A100 streaming Llama 3.2 1B's parameters from host memory layer by layer, one layer at a
// time (no prefetch), with the CPU step delayed and made fast so that parameter traffic is the
// only thing besides compute: ZeRO-Infinity's setting for its efficiency formula. Gradient
// buckets hold two layers' gradients (2 x 121.6 MB of bf16), so that their copies to the host
// hide behind backward: smaller ones make the compute stream wait for their buffers, larger ones
// leave more of the copies after backward. The GPU computes at a fixed 0.55 of its peak (the
// roofline) so that its time is the hand count below.
json streaming_run(const std::string& name, int pcie_gen) {
  const fs::path dir = fresh_dir(name + "_scenario");
  std::ofstream(dir / "stream.ini")
      << "[model]\nname = llama3.2-1b\n[platform]\ngpu = a100-80gb\ngpus_per_node = 1\npcie_gen = " << pcie_gen
      << "\ncpu_speed = 1000Tf\nhost_memory_bandwidth = 100TBps\n[parallel]\ndp = 1\n"
      << "[memory]\nzero = 3\nrecompute = full\ngrad_precision = bf16\noffload_optimizer = cpu\noffload_params = cpu\n"
      << "prefetch_depth = 0\ndelayed_update = true\n[comm]\nbucket_size = 256MiB\n[training]\nseq_len = 1024\nmicro_batch = 1\n"
      << "[compute]\nmodel = roofline\n";
  return run_summary(name, (dir / "stream.ini").string() + " --no-report");
}

} // namespace

TEST_CASE("parameter streaming follows ZeRO-Infinity's efficiency ait x bw / (ait x bw + peak)") {
  // REFERENCES.md: efficiency = ait·bw / (ait·bw + peak), so (1/efficiency - 1) x bw = peak / ait
  // is the same at every bandwidth. Efficiency here is GPU compute time over the step. PCIe x16
  // per direction: gen3 15.75, gen4 31.5, gen5 63, gen6 126 GB/s.
  const std::vector<std::pair<int, double>> links = {{3, 15.754e9}, {4, 31.508e9}, {5, 63.015e9}, {6, 126.03e9}};
  std::vector<double> efficiency, peak_over_ait;
  for (const auto& [generation, bandwidth] : links) {
    const json summary = streaming_run("stream_gen" + std::to_string(generation), generation);
    efficiency.push_back(summary["time"]["compute_s"].get<double>() / summary["step_time_s"].get<double>());
    peak_over_ait.push_back((1 / efficiency.back() - 1) * bandwidth);
  }
  for (std::size_t i = 1; i < links.size(); ++i) {
    CHECK(efficiency[i] > efficiency[i - 1]);
    CHECK(peak_over_ait[i] == doctest::Approx(peak_over_ait[0]).epsilon(0.02));
  }
  // peak / ait by hand: the step moves 2 bytes x (1.236B parameters + the 262.7M tied embedding
  // gathered again for the head) forward and again backward = 5.99 GB; the GPU computes ~9.6
  // TFLOP (8 FLOPs per token and parameter with full recompute for the 0.973B outside the
  // embedding, 6 for the head's matmul, 1,024 tokens) at 0.55 x 312 TFLOP/s: 0.056 s. 5.99 GB /
  // 0.056 s = 107 GB/s; 10% covers attention and memory-bound kernels the count leaves out.
  CHECK(peak_over_ait[0] == doctest::Approx(107e9).epsilon(0.10));
}

TEST_CASE("faster PCIe shortens exposed offload time, and GPUs sharing a switch slow each other's copies") {
  // The streaming run is offload-bound: doubling the link halves the time ranks wait on it.
  const json gen4 = streaming_run("exposed_gen4", 4);
  const json gen5 = streaming_run("exposed_gen5", 5);
  const double exposed4 = gen4["time"]["offload"]["h2d"]["exposed_s"].get<double>();
  const double exposed5 = gen5["time"]["offload"]["h2d"]["exposed_s"].get<double>();
  CHECK(exposed5 == doctest::Approx(exposed4 / 2).epsilon(0.01));
  CHECK(gen5["step_time_s"].get<double>() < gen4["step_time_s"].get<double>());
  CHECK(gen4["bottleneck"].get<std::string>().rfind("offload-bound: ", 0) == 0);
  CHECK(gen4["bottleneck"].get<std::string>().find("PCIe host-to-device") != std::string::npos);

  // Eight A100s streaming parameters at once: behind switches of two GPUs each pair shares an
  // uplink to the CPU and each GPU's copies take twice as long as with a switch each.
  const std::string scenario = project_file("tests/fixtures/tiny-ddp.ini") +
                               " --set platform.gpu=a100-80gb --set parallel.dp=8 --set training.global_batch=16"
                               " --set memory.zero=3 --set memory.offload_optimizer=cpu --set memory.offload_params=cpu";
  const json paired = run_summary("paired", scenario + " --set platform.gpus_per_pcie_switch=2 --no-report");
  const json alone = run_summary("alone", scenario + " --set platform.gpus_per_pcie_switch=1 --no-report");
  const double paired_h2d = paired["time"]["offload"]["h2d"]["total_s"].get<double>();
  const double alone_h2d = alone["time"]["offload"]["h2d"]["total_s"].get<double>();
  CHECK(paired_h2d == doctest::Approx(2 * alone_h2d).epsilon(0.05));
  CHECK(paired["resources"]["pcie-uplink"]["busy_s"].get<double>() ==
        doctest::Approx(2 * alone["resources"]["pcie-uplink"]["busy_s"].get<double>()).epsilon(1e-6));
}

TEST_CASE("host memory has a timeline in memory.csv and trace.json, and the report draws every tier") {
  const CliResult result = run_trainsim("offload_outputs", "run " + project_file("scenarios/llama2-70b-offload-nvme.ini") +
                                                               " --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const json summary = read_json(result.dir / "out/summary.json");
  double host = 0, nvme = 0;
  for (const auto& row : memory_rows(result.dir / "out/memory.csv", 0)) {
    host = std::max(host, row[8]);  // after time and the seven GPU categories
    nvme = std::max(nvme, row[9]);
  }
  CHECK(host == summary["memory"]["ranks"][0]["host_peak_bytes"].get<double>());
  CHECK(nvme == summary["memory"]["ranks"][0]["nvme_peak_bytes"].get<double>());
  // Eight GPUs with the same share: the node holds eight times rank 0's.
  CHECK(summary["memory"]["nvme"]["peak_bytes"].get<double>() == doctest::Approx(8 * nvme).epsilon(1e-12));
  const json trace = read_json(result.dir / "out/trace.json");
  bool counter = false;
  for (const json& event : trace["traceEvents"])
    counter = counter || (event["ph"] == "C" && event["name"] == "offloaded memory (bytes)");
  CHECK(counter);
  const auto svg = xml_tree(result.dir / "out/breakdown.svg");
  bool host_bar = false, nvme_bar = false;
  for (const auto* group : xml_elements(svg, "g")) {
    host_bar = host_bar || xml_attribute(*group, "class") == "host-bar";
    nvme_bar = nvme_bar || xml_attribute(*group, "class") == "nvme-bar";
  }
  CHECK(host_bar);
  CHECK(nvme_bar);
  // The drives are the busiest resource, and the line says so.
  CHECK(summary["bottleneck"].get<std::string>().find("nvme") != std::string::npos);
  CHECK(summary["resources"]["nvme"]["count"].get<int>() == 4);
  // The GPUs' compute is a resource too: the busiest GPU computed at least as long as the rank
  // that finished last, and no resource is busy longer than the step.
  CHECK(summary["resources"]["gpu"]["count"].get<int>() == 8);
  CHECK(summary["resources"]["gpu"]["busy_s"].get<double>() >= summary["time"]["compute_s"].get<double>());
  for (const auto& [kind, use] : summary["resources"].items())
    CHECK_MESSAGE(use["utilisation"].get<double>() <= 1.0 + 1e-9, kind);
}

TEST_CASE("report.html draws the node's host memory and NVMe over the step when a run offloads, and not otherwise") {
  // As in the ZeRO-Offload case above: ZeRO-2 over a node's 8 GPUs with the optimizer on NVMe
  // holds 16M bytes on the node's drives (M = 3,683,840 parameters of tiny-gpt) and the eight
  // ranks' 1 GiB pinned buffers in its DRAM.
  const double m = 2 * 1024 * 256 + 4 * (12.0 * 256 * 256 + 13 * 256) + 512;
  const std::string scenario = project_file("tests/fixtures/tiny-ddp.ini") +
                               " --set memory.precision=fp16 --set platform.file=dgx-a100-nvme.xml --set parallel.dp=8"
                               " --set training.global_batch=16 --set memory.zero=2";
  const CliResult result = run_trainsim("node_memory", "run " + scenario + " --set memory.offload_optimizer=nvme --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  const auto html = xml_tree(result.dir / "out/report.html");
  std::map<std::string, const boost::property_tree::ptree*> panels;
  for (const auto* group : xml_elements(html, "g"))
    if (xml_attribute(*group, "class") == "node-panel") {
      CHECK(xml_attribute(*group, "data-node") == "node0");
      panels[xml_attribute(*group, "data-tier")] = group;
    }
  REQUIRE(panels.size() == 2);
  const auto peak = [&](const std::string& tier) { return std::stod(xml_attribute(*panels[tier], "data-peak-bytes")); };
  CHECK(peak("nvme") == doctest::Approx(16 * m).epsilon(1e-4));
  CHECK(peak("host") == 8 * std::pow(2.0, 30));
  CHECK(std::stod(xml_attribute(*panels["host"], "data-capacity-bytes")) == 1e12);  // the DGX A100's 1 TB
  // The drawn area reaches the peak and no higher: its top pixel is the peak's height, to half a
  // pixel. (Each panel spans its peak: the 1 TB and the drives' 15 TB are over four times it.)
  for (const auto& [tier, group] : panels) {
    const double y_max = std::stod(xml_attribute(*group, "data-y-max"));
    const double top = std::stod(xml_attribute(*group, "data-plot-top"));
    const double bottom = std::stod(xml_attribute(*group, "data-plot-bottom"));
    double highest = bottom;
    for (const auto* polygon : xml_elements(*group, "polygon")) {
      std::istringstream points(xml_attribute(*polygon, "points"));
      double x = 0, y = 0;
      char comma = 0;
      while (points >> x >> comma >> y)
        highest = std::min(highest, y);
    }
    CHECK(y_max < 2 * peak(tier));
    CHECK_MESSAGE(std::abs(highest - (bottom - (bottom - top) * peak(tier) / y_max)) < 0.5, tier);
  }
  CHECK(fs::exists(result.dir / "out/node-memory.svg"));
  // Without offloading the section and its file are absent, and a rerun into the same folder
  // removes the file the offloading run left.
  const CliResult plain =
      run_trainsim("node_memory_plain", "run " + scenario + " --out '" + (result.dir / "out").string() + "'");
  REQUIRE_MESSAGE(plain.status == 0, plain.err);
  const auto plain_html = xml_tree(result.dir / "out/report.html");
  for (const auto* group : xml_elements(plain_html, "g"))
    CHECK(xml_attribute(*group, "class") != "node-panel");
  CHECK_FALSE(fs::exists(result.dir / "out/node-memory.svg"));
}

TEST_CASE("memory --compare adds host and NVMe columns when a row offloads") {
  const CliResult result = run_trainsim("offload_compare", "memory " + project_file("scenarios/llama2-70b-offload-cpu.ini") +
                                                               " --compare memory.offload_optimizer=none,cpu,nvme");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  std::istringstream table(result.out);
  std::vector<std::string> lines;
  for (std::string line; std::getline(table, line);)
    lines.push_back(line);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0].find("| peak | reserve | host per node | nvme per node | fits |") != std::string::npos);
  // Without offload ZeRO-3 keeps 16 bytes x 69B / 8 = 138 GB per GPU: no fit on 80 GB. Offloaded,
  // the node holds 16 bytes per parameter (1.10e12 B = 1.00 TiB) in DRAM or on NVMe, and with
  // NVMe 8 x 1 GiB of pinned buffers in DRAM.
  CHECK(lines[2].rfind("| none |", 0) == 0);
  CHECK(lines[2].find("| 0 B | 0 B | no |") != std::string::npos);
  CHECK(lines[3].find("| 1.00 TiB | 0 B | yes |") != std::string::npos);
  CHECK(lines[4].find("| 8.00 GiB | 1.00 TiB | yes |") != std::string::npos);
}

TEST_CASE("pipeline stages offload their optimizer to the CPU too") {
  // tiny-gpt over 2 pipeline stages on one node, fp16, the optimizer on the CPU: each rank keeps
  // its stage's 16-bit weights and gradients; the host keeps 16 bytes per parameter (fp32
  // master, momentum, variance, gradients), 8 times the 2-byte weights, and the node both stages'.
  const json summary = run_summary(
      "pipeline_offload", project_file("tests/fixtures/tiny-ddp.ini") +
                              " --set platform.gpu=a100-80gb --set parallel.dp=1 --set parallel.pp=2"
                              " --set training.global_batch=8 --set memory.precision=fp16"
                              " --set memory.offload_optimizer=cpu --no-report");
  double node = 0;
  for (const json& rank : summary["memory"]["ranks"]) {
    const double weights = rank["model_states"]["weights"].get<double>();
    CHECK(rank["model_states"]["optimizer"].get<double>() == 0);
    CHECK(rank["model_states"]["gradients"].get<double>() == weights);
    CHECK(rank["host_peak_bytes"].get<double>() == 8 * weights);
    node += rank["host_peak_bytes"].get<double>();
  }
  CHECK(summary["memory"]["host"]["peak_bytes"].get<double>() == node);
  CHECK(summary["time"]["offload"]["cpu_optimizer"]["total_s"].get<double>() > 0);
  CHECK(summary["time"]["offload"]["h2d"]["bytes"].get<double>() ==
        summary["memory"]["ranks"][summary["time"]["critical_rank"].get<int>()]["model_states"]["weights"].get<double>());
}

namespace {

// One A100 with its optimizer states on one PCIe 4 NVMe drive, the CPU made fast so that the
// drive alone times the swap: seconds from the first optimizer-state read to the last write-back
// on rank 0, read from trace.json; and the drive's busy time from summary.json.
struct Swap {
  double seconds = 0;
  double drive_busy_s = 0;
};
Swap optimizer_swap(const std::string& name, const std::string& pinned_buffer) {
  const CliResult result = run_trainsim(
      name, "run " + project_file("tests/fixtures/tiny-ddp.ini") +
                " --set platform.gpu=a100-80gb --set platform.gpus_per_node=1 --set platform.pcie_gen=4"
                " --set platform.nvme_per_node=1 --set platform.cpu_speed=1000Tf"
                " --set platform.host_memory_bandwidth=100TBps --set parallel.dp=1 --set training.global_batch=2"
                " --set memory.precision=fp16 --set memory.offload_optimizer=nvme"
                " --set memory.pinned_buffer_bytes=" + pinned_buffer + " --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  double first_read = std::numeric_limits<double>::infinity(), last_write = 0;
  const json trace = read_json(result.dir / "out/trace.json");
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] != "X" || event["pid"] != 0)
      continue;
    const std::string op = event["name"];
    if (op.rfind("nvme-read.optimizer", 0) == 0)
      first_read = std::min(first_read, event["ts"].get<double>());
    if (op.rfind("nvme-write.optimizer", 0) == 0)
      last_write = std::max(last_write, event["ts"].get<double>() + event["dur"].get<double>());
  }
  return {(last_write - first_read) / 1e6,
          read_json(result.dir / "out/summary.json")["resources"]["nvme"]["busy_s"].get<double>()};
}

} // namespace

TEST_CASE("optimizer states stream through the pinned buffer with reads and write-backs on the drive at once") {
  // tiny-gpt, M = 3,683,840 parameters (above), fp16: each parameter's fp32 master weight,
  // momentum, variance and gradient are read (16 bytes) and the first three written back (12).
  // A described PCIe 4 drive reads at R = 6.8 GB/s and writes at W = 4.0 GB/s; SimGrid 3.32
  // bounds a disk's reads and writes together by the larger of the two (DiskImpl::seal), R here.
  const double m = 2 * 1024 * 256 + 4 * (12.0 * 256 * 256 + 13 * 256) + 512;
  const double read = 6.8e9, write = 4.0e9;
  const double one_after_the_other = 16 * m / read + 12 * m / write;  // 19.7 ms
  // A 1 GiB buffer holds the whole shard in one chunk: read, update, write back in turn.
  const double whole = optimizer_swap("swap_one_chunk", "1GiB").seconds;
  CHECK(whole == doctest::Approx(one_after_the_other).epsilon(0.01));
  // An 8 MiB buffer: chunks of 4 MiB / 16 bytes = 262,144 parameters (15 chunks). Chunk k + 1 is
  // read while chunk k is written back, so the drive is busy with both until the last chunk's
  // write, which runs alone: the swap takes at least all the bytes at the combined rate R, and
  // at most that plus one chunk's write at W. One I/O stream for both would take 19.7 ms.
  const double chunk = 262144;
  const Swap chunks = optimizer_swap("swap_chunks", "8MiB");
  const double streamed = chunks.seconds;
  CHECK(streamed >= 28 * m / read * (1 - 1e-3));         // 15.2 ms
  CHECK(streamed <= 28 * m / read + 12 * chunk / write);  // 16.0 ms
  CHECK(streamed < 0.85 * one_after_the_other);
  // The drive's busy time is the least time its traffic needs: backward wrote the 4-byte
  // gradients (4M), the step read 16M and wrote 12M; 16M / W for the writes alone is less than
  // 32M at the combined rate R.
  CHECK(chunks.drive_busy_s == doctest::Approx(32 * m / read).epsilon(1e-9));
}
