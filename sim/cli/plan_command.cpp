// trainsim plan: the fastest strategy that fits, for a model on a cluster. Candidates come
// from the planner's search space; a memory check from program order (no simulation) keeps,
// per layout, the cheapest memory technique that fits; the survivors are simulated in worker
// processes and ranked by throughput.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
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
#include "config/scenario_options.hpp"
#include "plan/planner.hpp"
#include "program/model_states.hpp"
#include "report/metrics.hpp"
#include "report/writers.hpp"
#include "report/sweep_views.hpp"
#include "platform/simulation_context.hpp"

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

struct PlanOptions {
  CommonOptions common;
  std::string model_name, platform, gpus_text, precision = "bf16", fidelity = "fast", out, reserve, calibration;
  long long global_batch = 512, seq_len = 4096;
  std::string tokens_text = "1e9";
  double tokens = 0;               // tokens_text read
  double timeout = 0;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int simulate = 24;
  std::map<std::string, std::string> cluster_values;
  std::vector<std::string> settings;  // --set
};

// What plan --set may not fix: what the planner searches (and what has an effect only with a
// value it does not try), and what its own options set.
std::string planned_elsewhere(const std::string& key) {
  for (const char* searched : {"parallel.dp", "parallel.tp", "parallel.pp", "parallel.vpp", "parallel.cp", "parallel.sp",
                               "parallel.ep", "parallel.etp", "parallel.schedule", "parallel.last_stage_layers",
                               "parallel.first_stage_layers", "memory.zero", "memory.recompute",
                               "memory.offload_optimizer", "memory.offload_params", "training.micro_batch"})
    if (key == searched)
      return "the planner searches it";
  if (key == "memory.activation_budget")
    return "it applies to memory.recompute = optimal, which the planner does not try";
  static const std::map<std::string, std::string> options = {
      {"memory.precision", "--precision"},        {"memory.reserve", "--reserve"},
      {"training.global_batch", "--global-batch"}, {"training.seq_len", "--seq-len"},
      {"training.tokens", "--tokens"},             {"comm.fidelity", "--fidelity"},
      {"platform.calibration", "--calibration"}};
  if (const auto option = options.find(key); option != options.end())
    return "plan sets it from " + option->second;
  if (key.rfind("platform.", 0) == 0)
    return "plan sets the cluster from --platform or --gpu and its options";
  if (key.rfind("model.", 0) == 0)
    return "plan sets the model from --model";
  return "";
}

// The --set settings as plan.csv and plan.json record them: "key=value key=value".
std::string fixed_label(const PlanRequest& request) {
  std::string label;
  for (const auto& [key, value] : request.fixed)
    label += (label.empty() ? "" : " ") + key + "=" + value;
  return label;
}

// --set KEY=VALUE, each a scenario key that plan does not set itself, once. Their values are
// checked with each candidate (a setting some layouts cannot take leaves those out).
Settings fixed_settings(const std::vector<std::string>& settings) {
  Settings fixed;
  for (const std::string& setting : settings) {
    const auto [key, value] = parse_setting(setting);
    if (const std::string why = planned_elsewhere(key); !why.empty())
      throw InputError("--set " + setting + ": " + why + "; accepted: keys the planner does not vary, e.g. "
                       "comm.overlap_grad_reduce, moe.dispatcher, compute.model, training.framework");
    for (const auto& given : fixed)
      if (given.first == key)
        throw InputError("--set " + setting + ": " + key + " is already set to " + given.second +
                         "; accepted: each key once");
    fixed.emplace_back(key, value);
  }
  return fixed;
}

// The plan's options, checked; nothing when --help answered.
std::optional<PlanOptions> parse_plan_options(const std::vector<std::string>& arguments) {
  PlanOptions o;
  po::options_description visible("Options");
  visible.add_options()("model", po::value(&o.model_name)->required(), "a model in models/ or a config.json path")(
      "platform", po::value(&o.platform), "a platform XML (or describe the cluster with --gpu ...)")(
      "gpus", po::value(&o.gpus_text), "GPU counts to consider: N or N..M (doubling); default: the whole cluster")(
      "global-batch", po::value(&o.global_batch)->default_value(o.global_batch), "sequences per optimizer step")(
      "seq-len", po::value(&o.seq_len)->default_value(o.seq_len), "sequence length")(
      "tokens", po::value(&o.tokens_text)->default_value(o.tokens_text), "tokens to train, for time and GPU-hours (1e9, 300B, 2T)")(
      "precision", po::value(&o.precision)->default_value(o.precision), "fp32 | fp16 | bf16 | fp8")(
      "simulate", po::value(&o.simulate)->default_value(o.simulate), "how many of the fitting candidates to simulate, best estimate first")(
      "fidelity", po::value(&o.fidelity)->default_value(o.fidelity), "comm.fidelity of the simulations: fast | flows")(
      "calibration", po::value(&o.calibration),
      "a calibration file from trainsim calibrate: every candidate takes its efficiencies (platform.calibration)")(
      "reserve", po::value(&o.reserve), "memory.reserve of every candidate, the headroom kept: the caching allocator's "
                                        "fragmentation (0 to 0.5) or a size such as 4GiB (default: memory.reserve's)")(
      "jobs,j", po::value(&o.jobs)->default_value(o.jobs), "simulations at a time")(
      "timeout", po::value(&o.timeout)->default_value(0), "seconds a simulation may take; 0: no limit")(
      "out,o", po::value(&o.out), "directory for plan.csv and plan.json (default: results/plan-<model>)")(
      "set", po::value(&o.settings)->composing(),
      "a setting every candidate takes, section.key=value (repeatable): a key the planner does not search, e.g. "
      "moe.dispatcher=deepep or comm.overlap_grad_reduce=true");
  visible.add(cluster_options(o.cluster_values));
  visible.add(common_options(o.common));
  if (!parse_arguments("plan", arguments, visible, visible, po::positional_options_description(),
                       "trainsim plan --model M (--platform FILE | --gpu G [--nodes N ...]) [--gpus N..M] [--global-batch B] [--tokens T]",
                       o.common, false))
    return std::nullopt;
  o.tokens = tokens_option(o.tokens_text);
  if (o.jobs < 1 || o.jobs > 1024)
    throw InputError("--jobs: accepted: 1 to 1024");
  if (o.simulate < 1)
    throw InputError("--simulate: accepted: 1 or more");
  if (o.global_batch < 1 || o.seq_len < 1)
    throw InputError("--global-batch and --seq-len: accepted: positive whole numbers");
  if (o.fidelity != "fast" && o.fidelity != "flows")
    throw InputError("--fidelity " + o.fidelity + ": accepted: fast, flows");
  return o;
}

// The cluster beside the facts the request holds (GPUs per node, capacities, peak).
struct PlanCluster {
  std::string platform_lines;  // the [platform] section of the base scenario
  int available = 0;           // GPUs in the cluster
  std::string gpu_model;
};

// A cluster described by --gpu and its options; sets the request's cluster facts.
PlanCluster describe_cluster(const PlanOptions& o, PlanRequest& request) {
  auto given = cluster_keys_given(o.cluster_values);
  if (!given.count("platform.nodes")) {
    // Enough nodes for the largest count asked for.
    long long wanted = 0;
    const std::string upper = o.gpus_text.substr(o.gpus_text.find("..") == std::string::npos ? 0 : o.gpus_text.find("..") + 2);
    if (o.gpus_text.empty())
      throw InputError("trainsim plan: a described cluster needs --nodes or --gpus");
    if (!parse_integer(upper, wanted) || wanted < 1)
      throw InputError("--gpus " + o.gpus_text + ": expected N or N..M, e.g. --gpus 64..256");
    const ClusterSpec probe = parse_cluster(given);
    given["platform.nodes"] = {std::to_string((wanted + probe.gpus_per_node - 1) / probe.gpus_per_node),
                               "--gpus " + o.gpus_text};
  }
  const ClusterSpec cluster = parse_cluster(given);
  PlanCluster described;
  for (const auto& [key, value] : given)
    described.platform_lines += key.substr(9) + " = " + value.first + "\n";
  described.available = cluster.nodes * cluster.gpus_per_node;
  described.gpu_model = cluster.gpu.model;
  request.gpus_per_node = cluster.gpus_per_node;
  request.described_cluster = true;
  request.gpu_capacity = cluster.gpu.hbm_capacity;
  request.host_capacity = cluster.host_memory;
  request.gpu_peak = o.precision == "fp8" ? cluster.gpu.peak_fp8 : o.precision == "fp32" ? cluster.gpu.peak_tf32
                                                                                        : cluster.gpu.peak_bf16;
  return described;
}

// The same from a platform file, loaded to read its GPUs.
PlanCluster read_platform_file(const PlanOptions& o, PlanRequest& request) {
  const fs::path file = resolve_data_file(o.platform, "platforms", ".xml", ".", "--platform");
  SimulationContext context(o.common.simulation);
  const std::vector<GpuInfo> gpus = context.load_platform(file);
  if (gpus.empty())
    throw InputError(file.string() + ": no GPU hosts");
  std::map<std::string, int> per_node;
  for (const GpuInfo& gpu : gpus)
    ++per_node[gpu.node];
  request.node_of_gpu = node_numbers(gpus);
  request.gpus_per_node = per_node.begin()->second;
  request.gpu_capacity = gpus.front().hbm_capacity;
  request.host_capacity = gpus.front().cpu_host.empty() ? 0.0 : gpus.front().host_memory_capacity;
  request.gpu_peak = matmul_peak(gpus.front(), o.precision == "fp8"    ? Precision::fp8
                                               : o.precision == "fp32" ? Precision::fp32
                                               : o.precision == "fp16" ? Precision::fp16
                                                                       : Precision::bf16,
                                 true);
  return {"file = " + fs::absolute(file).string() + "\n", static_cast<int>(gpus.size()), gpus.front().model};
}

// What the planner searches: the model, the cluster, the batch and the base scenario every
// candidate adds its layout to (checked once, here).
PlanRequest plan_request(const PlanOptions& o, PlanCluster& cluster) {
  PlanRequest request;
  const fs::path model_file = resolve_data_file(o.model_name, "models", ".json", ".", "--model");
  request.model = load_model(model_file, 128);
  request.global_batch = o.global_batch;
  request.seq_len = o.seq_len;
  const bool described = !o.cluster_values.at("gpu").empty();
  if (described == !o.platform.empty())
    throw InputError("trainsim plan: give either --platform FILE or a described cluster (--gpu ...), one of them");
  cluster = described ? describe_cluster(o, request) : read_platform_file(o, request);
  const int available = cluster.available;
  request.gpu_counts = gpu_counts(o.gpus_text.empty() ? std::to_string(available) : o.gpus_text, available);
  request.base_name = "plan-" + request.model.name;
  std::error_code error;
  if (!o.calibration.empty() && !fs::is_regular_file(o.calibration, error))
    throw InputError("--calibration " + o.calibration + ": no such file; accepted: a file written by trainsim calibrate");
  request.base_ini = "[model]\npath = " + fs::absolute(model_file).string() + "\n[platform]\n" + cluster.platform_lines +
                     (o.calibration.empty() ? "" : "calibration = " + fs::absolute(o.calibration).string() + "\n") +
                     "[memory]\nprecision = " + o.precision + "\n" + (o.reserve.empty() ? "" : "reserve = " + o.reserve + "\n") +
                     "[training]\nseq_len = " + std::to_string(o.seq_len) +
                     "\nglobal_batch = " + std::to_string(o.global_batch) + "\ntokens = " + format_double(o.tokens) +
                     "\n[comm]\nfidelity = " + o.fidelity + "\n";
  request.fixed = fixed_settings(o.settings);
  require_calibration_for(parse_scenario(request.base_ini, request.base_name + ".ini", {}), cluster.gpu_model);
  return request;
}

// Phase 1, memory from program order: every candidate, and per layout the cheapest that fits.
struct MemoryPhase {
  std::vector<Candidate> candidates;
  std::vector<MemoryCheck> checks;
  std::vector<LayoutChoice> choices;
};

MemoryPhase check_memory_of_candidates(const PlanRequest& request, int available) {
  MemoryPhase phase;
  const auto start = std::chrono::steady_clock::now();
  phase.candidates = enumerate_candidates(request);
  if (phase.candidates.empty())
    throw InputError("trainsim plan: no layout of " + std::to_string(available) + " GPUs divides model " +
                     request.model.name + " and a global batch of " + std::to_string(request.global_batch) +
                     " (check --gpus and --global-batch)");
  phase.checks = check_candidates(request, phase.candidates);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  phase.choices = choose_per_layout(phase.candidates, phase.checks);
  // What --set leaves out is said: some layouts cannot take a fixed setting.
  if (!request.fixed.empty()) {
    std::size_t refused = 0;
    const MemoryCheck* first = nullptr;
    for (const MemoryCheck& check : phase.checks)
      if (!check.valid && check.reason.rfind("skipped", 0) != 0 && ++refused == 1)
        first = &check;
    if (first)
      std::cerr << "trainsim: " << refused << " candidates refused with " << fixed_label(request)
                << " (the first: " << first->reason << ")\n";
  }
  std::cerr << "trainsim: memory check of " << phase.candidates.size() << " candidates in "
            << format_double(std::round(seconds * 100) / 100) << " s ("
            << format_double(std::round(static_cast<double>(phase.candidates.size()) / std::max(seconds, 1e-9)))
            << " per second): " << phase.choices.size() << " layouts fit\n";
  return phase;
}

// Phase 2: the first `simulated` choices, each in a worker process; their rows in the same order.
std::vector<SweepRow> simulate_choices(const PlanOptions& o, const PlanRequest& request,
                                       const std::vector<LayoutChoice>& choices, std::size_t simulated,
                                       const fs::path& out_dir) {
  std::vector<SweepConfig> configs;
  for (std::size_t i = 0; i < simulated; ++i)
    configs.push_back({i, choices[i].chosen.settings(request)});
  fs::create_directories(out_dir);
  const fs::path base_file = out_dir / "plan-scenario.ini";
  write_file_atomically(base_file, request.base_ini);
  std::vector<SweepRow> rows(simulated);
  std::size_t finished = 0;
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  run_workers(base_file.string(), {}, configs, o.jobs, o.timeout, o.common.simulation, [&](SweepRow row) {
    if (terminal)
      std::cerr << "\rtrainsim: simulated " << ++finished << "/" << simulated << std::flush;
    rows[row.index] = std::move(row);
  });
  std::cerr << (terminal ? "\n" : "") << "trainsim: " << simulated << " simulations in "
            << format_double(std::round(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 10) / 10)
            << " s, " << o.jobs << " at a time\n";
  return rows;
}

// The simulations that ran and fit, fastest first: indices into `rows`.
std::vector<std::size_t> ranked_by_throughput(const std::vector<SweepRow>& rows) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i].status == "ok" && rows[i].fits)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return rows[a].tokens_per_s > rows[b].tokens_per_s; });
  return order;
}

PlanEntry plan_entry(const LayoutChoice& choice, const SweepRow& row, const PlanOptions& o, const PlanRequest& request) {
  const Candidate& c = choice.chosen;
  const double to_train = time_to_train(o.tokens, static_cast<double>(o.global_batch * o.seq_len), row.step_time_s);
  return {c.gpus, c.dp, c.tp, c.pp, c.vpp, c.cp, c.micro_batch, c.zero, c.recompute, c.offload, c.schedule, row,
          to_train, to_train * c.gpus / 3600.0, decision_chain(choice, request), c.sizes_label(), c.ep,
          c.expert_tp(), fixed_label(request)};
}

// The printed plan: the ranking's first 15 rows, how the best three got there, what did not run.
std::string plan_table(const std::vector<PlanEntry>& entries, const std::vector<SweepRow>& rows, const MemoryPhase& phase, const PlanOptions& o,
                       const PlanRequest& request, const fs::path& out_dir) {
  std::ostringstream shown;
  shown << "trainsim plan: " << request.model.name << ", global batch " << o.global_batch << " x " << o.seq_len
        << " tokens, " << format_count(o.tokens) << " tokens to train";
  for (const auto& [key, value] : request.fixed)
    shown << ", " << key << "=" << value;
  shown << "; " << phase.candidates.size() << " candidates, "
        << phase.choices.size() << " layouts fit, " << rows.size() << " simulated (" << o.fidelity << ")\n\n";
  std::vector<std::vector<std::string>> table = {
      {"rank", "GPUs", "layout", "memory", "tokens/s", "step", "MFU", "peak + reserve (headroom)", "to train", "GPU-h"}};
  for (std::size_t place = 0; place < std::min<std::size_t>(15, entries.size()); ++place) {
    const PlanEntry& e = entries[place];
    const SweepRow& row = e.simulated;
    const std::string layout =
        e.sizes + " mb=" + std::to_string(e.micro_batch);
    const std::string memory = zero_stage_label(e.zero) + (e.recompute == "none" ? "" : ", " + e.recompute) +
                               (e.offload == "none" ? "" : ", offload " + e.offload);
    table.push_back({std::to_string(place + 1), std::to_string(e.gpus), layout, memory, format_count(row.tokens_per_s),
                     format_seconds(row.step_time_s), format_double(std::round(row.mfu * 1000) / 10) + "%",
                     format_bytes(row.peak_bytes) + " + " + format_bytes(row.reserve_bytes) + " (" +
                         format_bytes(row.headroom_bytes()) + ")",
                     format_seconds(e.time_to_train_s), format_double(std::round(e.gpu_hours))});
  }
  shown << aligned_columns(table, {false, true, false, false, true, true, true, false, true, true});
  if (entries.empty()) {
    shown << "no simulated candidate fits once simulated; see " << (out_dir / "plan.json").string() << '\n';
  } else {
    shown << "\nhow the best got there (memory techniques in the order engineers apply them):\n";
    for (std::size_t place = 0; place < std::min<std::size_t>(3, entries.size()); ++place) {
      shown << "  " << place + 1 << ". " << entries[place].decisions << '\n';
      shown << "     bottleneck: " << entries[place].simulated.bottleneck << '\n';
    }
  }
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i].status != "ok")
      shown << "  not simulated: " << phase.choices[i].chosen.layout_label() << " (" << rows[i].status << ": "
            << rows[i].reason << ")\n";
  return shown.str();
}

} // namespace

int plan_command(const std::vector<std::string>& arguments) {
  const std::optional<PlanOptions> parsed = parse_plan_options(arguments);
  if (!parsed)
    return 0;
  const PlanOptions& o = *parsed;
  PlanCluster cluster;
  const PlanRequest request = plan_request(o, cluster);
  const int available = cluster.available;
  MemoryPhase phase = check_memory_of_candidates(request, available);
  const fs::path out_dir = o.out.empty() ? fs::path("results") / ("plan-" + request.model.name) : fs::path(o.out);
  if (phase.choices.empty()) {
    std::cout << "trainsim plan: " << request.model.name << " on " << available << " GPUs: "
              << nothing_fits(phase.candidates, phase.checks, request) << '\n';
    return 0;
  }

  // The most promising simulated, best estimate first, then ranked by throughput.
  std::stable_sort(phase.choices.begin(), phase.choices.end(),
                   [](const LayoutChoice& a, const LayoutChoice& b) { return a.memory.estimate_s < b.memory.estimate_s; });
  const std::size_t simulated = std::min(phase.choices.size(), static_cast<std::size_t>(o.simulate));
  const std::vector<SweepRow> rows = simulate_choices(o, request, phase.choices, simulated, out_dir);
  const std::vector<std::size_t> order = ranked_by_throughput(rows);
  std::vector<PlanEntry> entries;
  for (std::size_t index : order)
    entries.push_back(plan_entry(phase.choices[index], rows[index], o, request));

  // Printed once the files are in place: a plan whose files cannot be written shows no table.
  const std::string shown = plan_table(entries, rows, phase, o, request, out_dir);
  OutputSet outputs(out_dir, {"sweep.svg", "sweep.html", "plan.csv", "plan.json"});
  outputs.write("sweep.svg", sweep_svg(rows));
  outputs.write("sweep.html", sweep_html("plan for " + request.model.name, rows));
  outputs.write("plan.csv", plan_csv(entries));
  outputs.write("plan.json", plan_json(entries).dump(2) + "\n");
  outputs.commit();
  std::cout << shown;
  std::cout << "  outputs          " << (out_dir / "plan.csv").string() << ", " << (out_dir / "plan.json").string() << ", "
            << (out_dir / "sweep.svg").string() << ", " << (out_dir / "sweep.html").string() << '\n';
  return 0;
}

} // namespace trainsim::cli
