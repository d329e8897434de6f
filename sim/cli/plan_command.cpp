// trainsim plan: the fastest strategy that fits, for a model on a cluster. Candidates come
// from the planner's search space; a memory check from program order (no simulation) keeps,
// per layout, the cheapest memory technique that fits; the survivors are simulated in worker
// processes and ranked by throughput.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <iostream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/workers.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "config/scenario.hpp"
#include "plan/planner.hpp"
#include "report/metrics.hpp"
#include "report/sweep_views.hpp"
#include "platform/platform_loader.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace trainsim::cli {
namespace {

// "64..256": 64, 128, 256 (doubling, and the upper end); "128": just 128.
std::vector<int> gpu_counts(const std::string& text, int available) {
  const auto dots = text.find("..");
  long long low = 0, high = 0;
  const bool range = dots != std::string::npos;
  if (!parse_integer(range ? text.substr(0, dots) : text, low) ||
      (range && !parse_integer(text.substr(dots + 2), high)))
    throw InputError("--gpus " + text + ": expected N or N..M, e.g. --gpus 64..256");
  if (!range)
    high = low;
  if (low < 1 || high < low || high > available)
    throw InputError("--gpus " + text + ": accepted: 1 <= N <= M <= " + std::to_string(available) +
                     " (the GPUs of the cluster)");
  std::vector<int> counts;
  for (long long n = low; n <= high; n *= 2)
    counts.push_back(static_cast<int>(n));
  if (counts.back() != high)
    counts.push_back(static_cast<int>(high));
  return counts;
}

std::string line_of(const std::string& rank, const std::string& gpus, const std::string& layout, const std::string& memory,
                    const std::string& tokens, const std::string& step, const std::string& mfu, const std::string& peak,
                    const std::string& train, const std::string& gpu_hours) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, "%-4s %5s  %-22s %-16s %10s %11s %6s  %-24s %11s %8s\n", rank.c_str(), gpus.c_str(),
                layout.c_str(), memory.c_str(), tokens.c_str(), step.c_str(), mfu.c_str(), peak.c_str(), train.c_str(),
                gpu_hours.c_str());
  return buffer;
}

} // namespace

int plan_command(const std::vector<std::string>& arguments) {
  CommonOptions options;
  std::string model_name, platform, gpus_text, precision = "bf16", fidelity = "fast", out;
  long long global_batch = 512, seq_len = 4096;
  std::string tokens_text = "1e9";
  double timeout = 0;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int simulate = 24;
  std::map<std::string, std::string> cluster_values;
  po::options_description visible("Options");
  visible.add_options()("model", po::value(&model_name)->required(), "a model in models/ or a config.json path")(
      "platform", po::value(&platform), "a platform XML (or describe the cluster with --gpu ...)")(
      "gpus", po::value(&gpus_text), "GPU counts to consider: N or N..M (doubling); default: the whole cluster")(
      "global-batch", po::value(&global_batch)->default_value(global_batch), "sequences per optimizer step")(
      "seq-len", po::value(&seq_len)->default_value(seq_len), "sequence length")(
      "tokens", po::value(&tokens_text)->default_value(tokens_text), "tokens to train, for time and GPU-hours (1e9, 300B, 2T)")(
      "precision", po::value(&precision)->default_value(precision), "fp32 | fp16 | bf16 | fp8")(
      "simulate", po::value(&simulate)->default_value(simulate), "how many of the fitting candidates to simulate, best estimate first")(
      "fidelity", po::value(&fidelity)->default_value(fidelity), "comm.fidelity of the simulations: fast | flows")(
      "jobs,j", po::value(&jobs)->default_value(jobs), "simulations at a time")(
      "timeout", po::value(&timeout)->default_value(0), "seconds a simulation may take; 0: no limit")(
      "out,o", po::value(&out), "directory for plan.csv and plan.json (default: results/plan-<model>)");
  visible.add(cluster_options(cluster_values));
  visible.add(common_options(options));
  if (!parse_arguments("plan", arguments, visible, visible, po::positional_options_description(),
                       "trainsim plan --model M (--platform FILE | --gpu G [--nodes N ...]) [--gpus N..M] [--global-batch B] [--tokens T]",
                       options, false))
    return 0;
  const double tokens = tokens_option(tokens_text);
  if (jobs < 1 || jobs > 1024)
    throw InputError("--jobs: accepted: 1 to 1024");
  if (simulate < 1)
    throw InputError("--simulate: accepted: 1 or more");
  if (global_batch < 1 || seq_len < 1)
    throw InputError("--global-batch and --seq-len: accepted: positive whole numbers");
  if (fidelity != "fast" && fidelity != "flows")
    throw InputError("--fidelity " + fidelity + ": accepted: fast, flows");

  PlanRequest request;
  const fs::path model_file = resolve_data_file(model_name, "models", ".json", ".", "--model");
  request.model = load_model(model_file, 128);
  request.global_batch = global_batch;
  request.seq_len = seq_len;
  std::string platform_lines;
  int available = 0;
  const bool described = !cluster_values["gpu"].empty();
  if (described == !platform.empty())
    throw InputError("trainsim plan: give either --platform FILE or a described cluster (--gpu ...), one of them");
  if (described) {
    auto given = cluster_keys_given(cluster_values);
    if (!given.count("platform.nodes")) {
      // Enough nodes for the largest count asked for.
      long long wanted = 0;
      const std::string upper = gpus_text.substr(gpus_text.find("..") == std::string::npos ? 0 : gpus_text.find("..") + 2);
      if (gpus_text.empty())
        throw InputError("trainsim plan: a described cluster needs --nodes or --gpus");
      if (!parse_integer(upper, wanted) || wanted < 1)
        throw InputError("--gpus " + gpus_text + ": expected N or N..M, e.g. --gpus 64..256");
      const ClusterSpec probe = parse_cluster(given);
      given["platform.nodes"] = {std::to_string((wanted + probe.gpus_per_node - 1) / probe.gpus_per_node),
                                 "--gpus " + gpus_text};
    }
    const ClusterSpec cluster = parse_cluster(given);
    for (const auto& [key, value] : given)
      platform_lines += key.substr(9) + " = " + value.first + "\n";
    available = cluster.nodes * cluster.gpus_per_node;
    request.gpus_per_node = cluster.gpus_per_node;
    request.described_cluster = true;
    request.gpu_capacity = cluster.gpu.hbm_capacity;
    request.host_capacity = cluster.host_memory;
    request.gpu_peak = precision == "fp8" ? cluster.gpu.peak_fp8 : precision == "fp32" ? cluster.gpu.peak_tf32
                                                                                        : cluster.gpu.peak_bf16;
  } else {
    const fs::path file = resolve_data_file(platform, "platforms", ".xml", ".", "--platform");
    SimulationContext context(options.simulation);
    const std::vector<GpuInfo> gpus = context.load_platform(file);
    if (gpus.empty())
      throw InputError(file.string() + ": no GPU hosts");
    available = static_cast<int>(gpus.size());
    std::map<std::string, int> per_node;
    for (const GpuInfo& gpu : gpus)
      ++per_node[gpu.node];
    request.gpus_per_node = per_node.begin()->second;
    request.gpu_capacity = gpus.front().hbm_capacity;
    request.host_capacity = gpus.front().cpu_host.empty() ? 0.0 : gpus.front().host_memory_capacity;
    request.gpu_peak = matmul_peak(gpus.front(), precision == "fp8"    ? Precision::fp8
                                                 : precision == "fp32" ? Precision::fp32
                                                 : precision == "fp16" ? Precision::fp16
                                                                       : Precision::bf16,
                                   true);
    platform_lines = "file = " + fs::absolute(file).string() + "\n";
  }
  request.gpu_counts = gpu_counts(gpus_text.empty() ? std::to_string(available) : gpus_text, available);
  request.base_name = "plan-" + request.model.name;
  request.base_ini = "[model]\npath = " + fs::absolute(model_file).string() + "\n[platform]\n" + platform_lines +
                     "[memory]\nprecision = " + precision + "\n[training]\nseq_len = " + std::to_string(seq_len) +
                     "\nglobal_batch = " + std::to_string(global_batch) + "\ntokens = " + format_double(tokens) +
                     "\n[comm]\nfidelity = " + fidelity + "\n";
  // The base scenario itself must be sound (model, platform, precision): checked once, here.
  parse_scenario(request.base_ini, request.base_name + ".ini", {});

  // Phase 1: memory from program order.
  const auto phase_start = std::chrono::steady_clock::now();
  const std::vector<Candidate> candidates = enumerate_candidates(request);
  if (candidates.empty())
    throw InputError("trainsim plan: no layout of " + std::to_string(available) + " GPUs divides model " +
                     request.model.name + " and a global batch of " + std::to_string(global_batch) +
                     " (check --gpus and --global-batch)");
  const std::vector<MemoryCheck> checks = check_candidates(request, candidates);
  const double memory_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - phase_start).count();
  std::vector<LayoutChoice> choices = choose_per_layout(candidates, checks);
  std::cerr << "trainsim: memory check of " << candidates.size() << " candidates in " << format_double(std::round(memory_seconds * 100) / 100)
            << " s (" << format_double(std::round(static_cast<double>(candidates.size()) / std::max(memory_seconds, 1e-9))) << " per second): "
            << choices.size() << " layouts fit\n";
  const fs::path out_dir = out.empty() ? fs::path("results") / ("plan-" + request.model.name) : fs::path(out);
  if (choices.empty()) {
    std::cout << "trainsim plan: " << request.model.name << " on " << available << " GPUs: "
              << nothing_fits(candidates, checks, request) << '\n';
    return 0;
  }

  // Phase 2: simulate the most promising, best estimate first.
  std::stable_sort(choices.begin(), choices.end(),
                   [](const LayoutChoice& a, const LayoutChoice& b) { return a.memory.estimate_s < b.memory.estimate_s; });
  const std::size_t simulated = std::min(choices.size(), static_cast<std::size_t>(simulate));
  std::vector<SweepConfig> configs;
  for (std::size_t i = 0; i < simulated; ++i)
    configs.push_back({i, choices[i].chosen.settings(request)});
  fs::create_directories(out_dir);
  const fs::path base_file = out_dir / "plan-scenario.ini";
  write_file_atomically(base_file, request.base_ini);
  std::vector<SweepRow> rows(simulated);
  std::size_t finished = 0;
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  const auto simulation_start = std::chrono::steady_clock::now();
  run_workers(base_file.string(), {}, configs, jobs, timeout, options.simulation, [&](SweepRow row) {
    if (terminal)
      std::cerr << "\rtrainsim: simulated " << ++finished << "/" << simulated << std::flush;
    rows[row.index] = std::move(row);
  });
  std::cerr << (terminal ? "\n" : "") << "trainsim: " << simulated << " simulations in "
            << format_double(std::round(std::chrono::duration<double>(std::chrono::steady_clock::now() - simulation_start).count() * 10) / 10)
            << " s, " << jobs << " at a time\n";

  // Rank: fitting simulations by throughput.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < simulated; ++i)
    if (rows[i].status == "ok" && rows[i].fits)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return rows[a].tokens_per_s > rows[b].tokens_per_s; });
  nlohmann::json plan = nlohmann::json::array();
  std::string csv = "rank,gpus,dp,tp,pp,vpp,cp,micro_batch,zero,recompute,offload,tokens_per_s,step_time_s,mfu,peak_bytes,"
                    "headroom_bytes,time_to_train_s,gpu_hours,bottleneck\n";
  // Printed once the files are in place: a plan whose files cannot be written shows no table.
  std::ostringstream shown;
  shown << "trainsim plan: " << request.model.name << ", global batch " << global_batch << " x " << seq_len
            << " tokens, " << format_count(tokens) << " tokens to train; " << candidates.size() << " candidates, "
            << choices.size() << " layouts fit, " << simulated << " simulated (" << fidelity << ")\n\n";
  shown << line_of("rank", "GPUs", "layout", "memory", "tokens/s", "step", "MFU", "peak (headroom)", "to train", "GPU-h");
  for (std::size_t place = 0; place < order.size(); ++place) {
    const SweepRow& row = rows[order[place]];
    const Candidate& c = choices[order[place]].chosen;
    const double to_train = time_to_train(tokens, static_cast<double>(global_batch * seq_len), row.step_time_s);
    const double gpu_hours = to_train * c.gpus / 3600.0;
    const std::string layout = "dp" + std::to_string(c.dp) + " tp" + std::to_string(c.tp) + " pp" + std::to_string(c.pp) +
                               (c.vpp > 1 ? "x" + std::to_string(c.vpp) : "") + (c.cp > 1 ? " cp" + std::to_string(c.cp) : "") +
                               " mb" + std::to_string(c.micro_batch);
    const std::string memory = "ZeRO-" + std::to_string(c.zero) + (c.recompute == "none" ? "" : ", " + c.recompute) +
                               (c.offload == "none" ? "" : ", offload " + c.offload);
    if (place < 15)
      shown << line_of(std::to_string(place + 1), std::to_string(c.gpus), layout, memory,
                           format_count(row.tokens_per_s), format_seconds(row.step_time_s),
                           format_double(std::round(row.mfu * 1000) / 10) + "%",
                           format_bytes(row.peak_bytes) + " (" + format_bytes(row.capacity_bytes - row.peak_bytes) + ")",
                           format_seconds(to_train), format_double(std::round(gpu_hours)));
    csv += std::to_string(place + 1) + "," + std::to_string(c.gpus) + "," + std::to_string(c.dp) + "," + std::to_string(c.tp) +
           "," + std::to_string(c.pp) + "," + std::to_string(c.vpp) + "," + std::to_string(c.cp) + "," +
           std::to_string(c.micro_batch) + "," + std::to_string(c.zero) + "," + c.recompute + "," + c.offload + "," +
           format_double(row.tokens_per_s) + "," + format_double(row.step_time_s) + "," + format_double(row.mfu) + "," +
           csv_byte_count(row.peak_bytes) + "," + csv_byte_count(row.capacity_bytes - row.peak_bytes) + "," +
           format_double(to_train) + "," + format_double(gpu_hours) + "," + csv_field(row.bottleneck) + "\n";
    plan.push_back({{"rank", place + 1}, {"gpus", c.gpus}, {"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}, {"vpp", c.vpp},
                    {"cp", c.cp}, {"micro_batch", c.micro_batch}, {"zero", c.zero}, {"recompute", c.recompute},
                    {"offload", c.offload},
                    {"tokens_per_s", row.tokens_per_s}, {"step_time_s", row.step_time_s}, {"mfu", row.mfu},
                    {"peak_bytes", row.peak_bytes}, {"capacity_bytes", row.capacity_bytes},
                    {"time_to_train_s", to_train}, {"gpu_hours", gpu_hours}, {"bottleneck", row.bottleneck},
                    {"decisions", decision_chain(choices[order[place]], request)}});
  }
  if (order.empty()) {
    shown << "no simulated candidate fits once simulated; see " << (out_dir / "plan.json").string() << '\n';
  } else {
    shown << "\nhow the best got there (memory techniques in the order engineers apply them):\n";
    for (std::size_t place = 0; place < std::min<std::size_t>(3, order.size()); ++place) {
      shown << "  " << place + 1 << ". " << decision_chain(choices[order[place]], request) << '\n';
      shown << "     bottleneck: " << rows[order[place]].bottleneck << '\n';
    }
  }
  for (std::size_t i = 0; i < simulated; ++i)
    if (rows[i].status != "ok")
      shown << "  not simulated: " << choices[i].chosen.layout_label() << " (" << rows[i].status << ": "
                << rows[i].reason << ")\n";
  OutputSet outputs(out_dir, {"sweep.svg", "sweep.html", "plan.csv", "plan.json"});
  outputs.write("sweep.svg", sweep_svg(rows));
  outputs.write("sweep.html", sweep_html("plan for " + request.model.name, rows));
  outputs.write("plan.csv", csv);
  outputs.write("plan.json", plan.dump(2) + "\n");
  outputs.commit();
  std::cout << shown.str();
  std::cout << "  outputs          " << (out_dir / "plan.csv").string() << ", " << (out_dir / "plan.json").string() << ", "
            << (out_dir / "sweep.svg").string() << ", " << (out_dir / "sweep.html").string() << '\n';
  return 0;
}

} // namespace trainsim::cli
