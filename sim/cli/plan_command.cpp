// trainsim plan: the fastest strategy that fits, for a model on a cluster. Candidates come
// from the planner's search space; a memory check from program order (no simulation) keeps,
// per layout, the cheapest memory technique that fits; the survivors are simulated in worker
// processes and ranked by the objective: throughput, time to train, GPU-hours or cost.
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
#include "cli/progress.hpp"
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

// What the plan ranks by: throughput (the same order as time to train), or what the training
// costs, in GPU-hours or in money at --gpu-hour-price.
enum class Objective { tokens_per_s, time_to_train, gpu_hours, cost };
const std::vector<std::pair<std::string, Objective>>& objective_names() {
  static const std::vector<std::pair<std::string, Objective>> names = {{"tokens_per_s", Objective::tokens_per_s},
                                                                       {"time_to_train", Objective::time_to_train},
                                                                       {"gpu_hours", Objective::gpu_hours},
                                                                       {"cost", Objective::cost}};
  return names;
}

struct PlanOptions {
  CommonOptions common;
  std::string scenario;  // a base scenario; empty: --model and the cluster
  std::string model_name, platform, gpus_text, precision, fidelity = "fast", out, reserve, calibration;
  // Empty: the scenario's, or without one the plan's defaults below.
  std::string global_batch_text, seq_len_text, tokens_text;
  double timeout = 0;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int simulate = 24;
  std::map<std::string, std::string> cluster_values;
  std::vector<std::string> settings, fixes, excludes;  // --set, --fix, --exclude
  std::string rank_by = "tokens_per_s", price_text, deadline_text;
  Objective objective = Objective::tokens_per_s;
  double deadline_s = 0;  // 0: none
};

// Without a scenario, what the plan trains.
constexpr const char* default_precision = "bf16";
constexpr long long default_global_batch = 512, default_seq_len = 4096;
constexpr const char* default_tokens = "1e9";

// What plan --set may not fix: what the planner searches (and what has an effect only with a
// value it does not try), and what its own options set.
std::string planned_elsewhere(const std::string& key) {
  const std::vector<std::string>& searched = planner_keys();
  if (std::find(searched.begin(), searched.end(), key) != searched.end())
    return "the planner searches it (constrain it with --fix or --exclude)";
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
    return "plan sets the cluster from the scenario, --platform or --gpu and its options";
  if (key.rfind("model.", 0) == 0)
    return "plan sets the model from the scenario or --model";
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

// A positive whole number given as `option`, or `fallback` when not given.
long long positive_option(const std::string& option, const std::string& text, long long fallback) {
  long long value = fallback;
  if (!text.empty() && (!parse_integer(text, value) || value < 1))
    throw InputError(option + " " + text + ": accepted: a positive whole number");
  return value;
}

// The plan's options, checked; nothing when --help answered.
std::optional<PlanOptions> parse_plan_options(const std::vector<std::string>& arguments) {
  PlanOptions o;
  po::options_description visible("Options");
  visible.add_options()("model", po::value(&o.model_name), "a model in models/ or a config.json path (without a scenario: required)")(
      "platform", po::value(&o.platform), "a platform XML (or describe the cluster with --gpu ...)")(
      "gpus", po::value(&o.gpus_text), "GPU counts to consider: N or N..M (doubling); default: the whole cluster")(
      "global-batch", po::value(&o.global_batch_text), "sequences per optimizer step (default: the scenario's, else 512)")(
      "seq-len", po::value(&o.seq_len_text), "sequence length (default: the scenario's, else 4096)")(
      "tokens", po::value(&o.tokens_text), "tokens to train, for time, GPU-hours and cost: 1e9, 300B, 2T (default: the scenario's, else 1e9)")(
      "precision", po::value(&o.precision), "fp32 | fp16 | bf16 | fp8 (default: the scenario's, else bf16)")(
      "rank-by", po::value(&o.rank_by)->default_value(o.rank_by),
      "what the best minimises or maximises: tokens_per_s | time_to_train | gpu_hours | cost (needs --gpu-hour-price)")(
      "gpu-hour-price", po::value(&o.price_text),
      "price of one GPU-hour, e.g. 2.49, or per GPU type: h100-sxm=2.49,a100-80gb=1.29 (adds a cost column)")(
      "deadline", po::value(&o.deadline_text),
      "the longest the training may take, e.g. 30d or 12h: slower candidates are left out of the ranking")(
      "fix", po::value(&o.fixes)->composing(),
      "KEY=V1,V2: the search keeps only these values of a key it varies, e.g. parallel.tp=4,8, parallel.pp=1..4, "
      "memory.zero=1, parallel.schedule=1f1b,zb-h1 (repeatable)")(
      "exclude", po::value(&o.excludes)->composing(), "KEY=V1,V2: the search leaves these values out, e.g. memory.recompute=full")(
      "simulate", po::value(&o.simulate)->default_value(o.simulate), "how many of the fitting candidates to simulate, best estimate first")(
      "fidelity", po::value(&o.fidelity)->default_value(o.fidelity), "comm.fidelity of the simulations: fast | flows")(
      "calibration", po::value(&o.calibration),
      "a calibration file from trainsim calibrate: every candidate takes its efficiencies (platform.calibration)")(
      "reserve", po::value(&o.reserve), "memory.reserve of every candidate, the headroom kept: the caching allocator's "
                                        "fragmentation (0 to 0.5) or a size such as 4GiB (default: memory.reserve's)")(
      "jobs,j", po::value(&o.jobs)->default_value(o.jobs), "simulations at a time")(
      "timeout", po::value(&o.timeout)->default_value(0), "seconds a simulation may take; 0: no limit")(
      "out,o", po::value(&o.out), "directory for plan.csv and plan.json (default: results/plan-<scenario or model>)")(
      "set", po::value(&o.settings)->composing(),
      "a setting every candidate takes, section.key=value (repeatable): a key the planner does not search, e.g. "
      "moe.dispatcher=deepep or comm.overlap_grad_reduce=true");
  visible.add(cluster_options(o.cluster_values));
  visible.add(common_options(o.common));
  po::options_description all = visible;
  all.add_options()("scenario", po::value(&o.scenario), "a scenario whose model, cluster and settings the plan starts from");
  po::positional_options_description positional;
  positional.add("scenario", 1);
  if (!parse_arguments("plan", arguments, visible, all, positional,
                       "trainsim plan [SCENARIO] [--model M] [--platform FILE | --gpu G [--nodes N ...]] [--gpus N..M] "
                       "[--fix KEY=V,...] [--rank-by OBJECTIVE] [--deadline 30d]\n\n"
                       "A SCENARIO gives the model, the cluster, the batch and every setting the planner does not search;\n"
                       "its own layout and memory techniques are what the plan chooses. Without one, --model and a cluster.",
                       o.common, false))
    return std::nullopt;
  positive_option("--global-batch", o.global_batch_text, 1);
  positive_option("--seq-len", o.seq_len_text, 1);
  if (!o.tokens_text.empty())
    tokens_option(o.tokens_text);
  if (!o.precision.empty() && o.precision != "fp32" && o.precision != "fp16" && o.precision != "bf16" && o.precision != "fp8")
    throw InputError("--precision " + o.precision + ": accepted: fp32, fp16, bf16, fp8");
  if (o.jobs < 1 || o.jobs > 1024)
    throw InputError("--jobs: accepted: 1 to 1024");
  if (o.simulate < 1)
    throw InputError("--simulate: accepted: 1 or more");
  if (o.fidelity != "fast" && o.fidelity != "flows")
    throw InputError("--fidelity " + o.fidelity + ": accepted: fast, flows");
  bool known = false;
  for (const auto& [name, objective] : objective_names())
    if (name == o.rank_by && (known = true))
      o.objective = objective;
  if (!known)
    throw InputError("--rank-by " + o.rank_by + ": accepted: tokens_per_s, time_to_train, gpu_hours, cost");
  if (o.objective == Objective::cost && o.price_text.empty())
    throw InputError("--rank-by cost: needs --gpu-hour-price, the price of one GPU-hour (e.g. --gpu-hour-price 2.49)");
  if (!o.deadline_text.empty()) {
    long long bare = 0;
    if (parse_integer(o.deadline_text, bare))
      throw InputError("--deadline " + o.deadline_text + ": needs a unit; accepted: a duration such as 30d, 12h or 90min");
    try {
      o.deadline_s = parse_seconds(o.deadline_text);
    } catch (const UnitError& error) {
      throw InputError("--deadline " + o.deadline_text + ": " + error.what());
    }
    if (!(o.deadline_s > 0))
      throw InputError("--deadline " + o.deadline_text + ": accepted: a positive duration such as 30d or 12h");
  }
  if (o.scenario.empty() && o.model_name.empty())
    throw InputError("trainsim plan: give a SCENARIO or --model (and a cluster); see trainsim plan --help");
  return o;
}

// --gpu-hour-price for `gpu` (the platform's `gpu` property, e.g. H100-SXM5-80GB): a plain price,
// or the one of its catalog key or model in a list KEY=PRICE,...; 0 without the option.
double gpu_hour_price(const std::string& text, const std::string& gpu) {
  if (text.empty())
    return 0;
  const GpuSpec* spec = find_gpu_model(gpu);
  const auto price = [&](const std::string& value) {
    double number = 0;
    try {
      std::size_t used = 0;
      number = std::stod(value, &used);
      if (used != value.size())
        number = -1;
    } catch (const std::exception&) {
      number = -1;
    }
    if (!(number > 0) || !std::isfinite(number))
      throw InputError("--gpu-hour-price " + text + ": '" + value + "' is not a price; accepted: a positive number, "
                       "or GPU=PRICE pairs separated by commas (e.g. h100-sxm=2.49,a100-80gb=1.29)");
    return number;
  };
  if (text.find('=') == std::string::npos)
    return price(trim(text));
  std::vector<std::string> named;
  for (const std::string& pair : split(text, ',')) {
    const auto equals = pair.find('=');
    const std::string name = trim(pair.substr(0, equals));
    if (equals == std::string::npos)
      throw InputError("--gpu-hour-price " + text + ": '" + pair + "' is not GPU=PRICE; accepted: a price, or GPU=PRICE "
                       "pairs separated by commas");
    const double value = price(trim(pair.substr(equals + 1)));
    if (name == gpu || (spec && name == spec->key))
      return value;
    named.push_back(name);
  }
  throw InputError("--gpu-hour-price " + text + ": no price for the cluster's GPU, " +
                   (spec ? spec->key + " (" + gpu + ")" : gpu) + "; it names " + join(named, ", "));
}

// The cluster's facts the request holds (GPUs per node, capacities, peak), and its size.
struct PlanCluster {
  int available = 0;  // GPUs in the cluster
  std::string gpu_model;
};

// The platform.* lines of a cluster described by --gpu and its options; without --nodes, enough
// nodes for the largest --gpus, and where neither the options nor the scenario name a topology, a
// network that can join them (a fat tree beyond what a single switch joins). Without a scenario
// the options are checked here, naming them, rather than in the scenario written from them; a
// scenario's own platform lines complete the options later.
std::map<std::string, std::pair<std::string, std::string>> described_cluster_keys(const PlanOptions& o) {
  auto given = cluster_keys_given(o.cluster_values);
  const bool whole = o.scenario.empty();  // the options describe the whole cluster
  std::map<std::string, std::string> scenario_keys;  // the scenario's own lines
  if (!whole)
    for (const auto& [key, value] : settings_in(read_scenario_file(o.scenario), o.scenario))
      scenario_keys[key] = value;
  const bool topology_set = given.count("platform.topology") > 0 || scenario_keys.count("platform.topology") > 0;
  bool chose_topology = false;
  if (!given.count("platform.nodes")) {
    long long wanted = 0;
    const std::string upper = o.gpus_text.substr(o.gpus_text.find("..") == std::string::npos ? 0 : o.gpus_text.find("..") + 2);
    if (o.gpus_text.empty())
      throw InputError("trainsim plan: a described cluster needs --nodes or --gpus");
    if (!parse_integer(upper, wanted) || wanted < 1)
      throw InputError("--gpus " + o.gpus_text + ": expected N or N..M, e.g. --gpus 64..256");
    std::map<std::string, std::pair<std::string, std::string>> node_keys;
    for (const char* key : {"platform.gpu", "platform.gpus_per_node"})
      if (given.count(key))
        node_keys[key] = given.at(key);
      else if (scenario_keys.count(key))
        node_keys[key] = {scenario_keys.at(key), o.scenario};
    const long long per_node = parse_cluster(node_keys).gpus_per_node;
    const long long nodes = (wanted + per_node - 1) / per_node;
    given["platform.nodes"] = {std::to_string(nodes), "--gpus " + o.gpus_text};
    if (!topology_set && nodes > max_pairwise_routed) {
      given["platform.topology"] = {"fat-tree", "--gpus " + o.gpus_text};
      chose_topology = true;
    }
  }
  if (whole)
    parse_cluster(given);
  if (chose_topology)
    std::cerr << "trainsim plan: " << given.at("platform.nodes").first
              << " nodes, described as a fat tree (a single switch joins at most " << max_pairwise_routed
              << "; --topology to choose)\n";
  return given;
}

// A described cluster's facts.
PlanCluster described_cluster(const ClusterSpec& cluster, Precision precision, PlanRequest& request) {
  request.gpus_per_node = cluster.gpus_per_node;
  request.described_cluster = true;
  request.gpu_capacity = cluster.gpu.hbm_capacity;
  request.host_capacity = cluster.host_memory;
  request.gpu_peak = precision == Precision::fp8    ? cluster.gpu.peak_fp8
                     : precision == Precision::fp32 ? cluster.gpu.peak_tf32
                     : precision == Precision::fp16 ? cluster.gpu.peak_fp16
                                                    : cluster.gpu.peak_bf16;
  return {cluster.nodes * cluster.gpus_per_node, cluster.gpu.model};
}

// The same from a platform file, loaded to read its GPUs.
PlanCluster platform_file_cluster(const fs::path& file, Precision precision, const SimulationOptions& simulation,
                                  PlanRequest& request) {
  SimulationContext context(simulation);
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
  request.gpu_peak = matmul_peak(gpus.front(), precision, true);
  return {static_cast<int>(gpus.size()), gpus.front().model};
}

// The base scenario: a given one, its keys replaced by the plan's options; or one written from
// --model, the cluster and the options.
void base_scenario(const PlanOptions& o, PlanRequest& request) {
  const bool described = !o.cluster_values.at("gpu").empty();
  if (described && !o.platform.empty())
    throw InputError("trainsim plan: give either --platform FILE or a described cluster (--gpu ...), one of them");
  Settings given;  // what the options set
  if (!o.model_name.empty())
    given.emplace_back("model.path", fs::absolute(resolve_model_file(o.model_name, ".", "--model")).string());
  if (!o.platform.empty())
    given.emplace_back("platform.file",
                       fs::absolute(resolve_data_file(o.platform, "platforms", ".xml", ".", "--platform")).string());
  if (described)
    for (const auto& [key, value] : described_cluster_keys(o))
      given.emplace_back(key, value.first);
  std::error_code error;
  if (!o.calibration.empty() && !fs::is_regular_file(o.calibration, error))
    throw InputError("--calibration " + o.calibration + ": no such file; accepted: a file written by trainsim calibrate");
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"platform.calibration", o.calibration.empty() ? "" : fs::absolute(o.calibration).string()},
           {"memory.precision", o.precision},
           {"memory.reserve", o.reserve},
           {"training.global_batch", o.global_batch_text},
           {"training.seq_len", o.seq_len_text},
           {"training.tokens", o.tokens_text},
           {"comm.fidelity", o.fidelity}})
    if (!value.empty())
      given.emplace_back(key, value);
  for (const std::string& key : planner_keys())
    request.base_settings.emplace_back(key, default_of(key));
  if (!o.scenario.empty()) {
    request.base_file = o.scenario;
    request.base_ini = read_scenario_file(o.scenario);
    request.base_settings.insert(request.base_settings.end(), given.begin(), given.end());
    // The scenario's own layout is a starting point the search replaces: say so.
    std::vector<std::string> replaced;
    for (const auto& [key, value] : settings_in(request.base_ini, request.base_file))
      if (std::find(planner_keys().begin(), planner_keys().end(), key) != planner_keys().end())
        replaced.push_back(key);
    if (!replaced.empty())
      std::cerr << "trainsim plan: the planner chooses " << join(replaced, ", ") << " (set in " << o.scenario
                << "); --fix keeps a value\n";
    return;
  }
  if (!described && o.platform.empty())
    throw InputError("trainsim plan: give either --platform FILE or a described cluster (--gpu ...), one of them");
  // Without a scenario the options write a whole one: plan-scenario.ini reruns any candidate.
  std::map<std::string, std::string> sections = {
      {"memory.precision", default_precision}, {"training.seq_len", std::to_string(default_seq_len)},
      {"training.global_batch", std::to_string(default_global_batch)}, {"training.tokens", default_tokens}};
  for (const auto& [key, value] : given)
    sections[key] = value;
  std::string ini, section;
  for (const auto& [key, value] : sections) {
    const std::string head = key.substr(0, key.find('.'));
    if (head != section)
      ini += "[" + (section = head) + "]\n";
    ini += key.substr(head.size() + 1) + " = " + value + "\n";
  }
  request.base_ini = ini;
  request.base_file = "plan-" + fs::path(o.model_name).stem().string() + ".ini";
}

// What the planner searches: the model, the cluster, the batch and the base scenario every
// candidate adds its layout to (checked once, here, with the planner's keys at their defaults).
PlanRequest plan_request(const PlanOptions& o, PlanCluster& cluster) {
  PlanRequest request;
  base_scenario(o, request);
  // A scenario's other settings may need a layout (tensor-parallel overlap needs tp > 1): here
  // only what the search needs is read; each candidate checks the rest.
  std::string facts;
  for (const auto& [key, value] : settings_in(request.base_ini, request.base_file)) {
    const std::string section = key.substr(0, key.find('.'));
    if (section == "model" || section == "platform" || key == "training.seq_len" || key == "training.global_batch" ||
        key == "training.tokens" || key == "memory.precision")
      facts += "[" + section + "]\n" + key.substr(section.size() + 1) + " = " + value + "\n";
  }
  std::vector<std::string> overrides;
  for (const auto& [key, value] : request.base_settings)
    overrides.push_back(key + "=" + value);
  const Scenario base = parse_scenario(facts, request.base_file, overrides);
  request.model = load_model(base.model_file, base.vocab_multiple, base.mtp_layers);
  request.global_batch = base.global_batch;
  request.seq_len = base.seq_len;
  request.tokens = base.tokens;
  cluster = base.cluster ? described_cluster(*base.cluster, base.precision, request)
                         : platform_file_cluster(base.platform_file, base.precision, o.common.simulation, request);
  request.gpu_counts = gpu_counts(o.gpus_text.empty() ? std::to_string(cluster.available) : o.gpus_text, cluster.available);
  request.fixed = fixed_settings(o.settings);
  for (const auto& [texts, exclude] : {std::pair{&o.fixes, false}, std::pair{&o.excludes, true}})
    for (const std::string& text : *texts)
      request.constraints.push_back(parse_constraint(text, exclude));
  require_calibration_for(base, cluster.gpu_model);
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
  Progress progress("plan: memory check", phase.candidates.size(), "fit", 2.0);
  phase.checks = check_candidates(request, phase.candidates,
                                  [&](std::size_t checked, std::size_t fitting) { progress.update(checked, fitting); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  phase.choices = choose_per_layout(phase.candidates, phase.checks);
  // What --set or the scenario's settings leave out is said: some layouts cannot take them.
  std::size_t refused = 0;
  const MemoryCheck* first = nullptr;
  for (const MemoryCheck& check : phase.checks)
    if (!check.valid && check.reason.rfind("skipped", 0) != 0 && ++refused == 1)
      first = &check;
  if (first)
    std::cerr << "trainsim: " << refused << " candidates refused"
              << (request.fixed.empty() ? "" : " with " + fixed_label(request)) << " (the first: " << first->reason
              << ")\n";
  std::cerr << "trainsim: memory check of " << phase.candidates.size() << " candidates in "
            << format_double(std::round(seconds * 100) / 100) << " s ("
            << format_double(std::round(static_cast<double>(phase.candidates.size()) / std::max(seconds, 1e-9)))
            << " per second): " << phase.choices.size() << " layouts fit\n";
  return phase;
}

// GPU-hours as the table shows them: to a tenth below 100.
std::string gpu_hours_text(double hours) {
  return format_double(hours < 100 ? std::round(hours * 10) / 10 : std::round(hours));
}

// What a step costs under the objective, the smaller the better: seconds per step for the
// throughput objectives (the batch is the same for all), GPU-seconds for GPU-hours and cost.
double step_cost(Objective objective, int gpus, double step_s) {
  return objective == Objective::gpu_hours || objective == Objective::cost ? gpus * step_s : step_s;
}

// The order to simulate in: the candidates whose estimate meets the deadline first, each group
// by the objective's estimate.
void order_by_estimate(std::vector<LayoutChoice>& choices, const PlanOptions& o, const PlanRequest& request) {
  const double steps = request.tokens / static_cast<double>(request.global_batch * request.seq_len);
  const auto key = [&](const LayoutChoice& choice) {
    const bool late = o.deadline_s > 0 && choice.memory.estimate_s * steps > o.deadline_s;
    return std::pair{late, step_cost(o.objective, choice.chosen.gpus, choice.memory.estimate_s)};
  };
  std::stable_sort(choices.begin(), choices.end(),
                   [&](const LayoutChoice& a, const LayoutChoice& b) { return key(a) < key(b); });
}

// Phase 2: the first `simulated` choices, each in a worker process running `scenario` with the
// base settings; their rows in the same order.
std::vector<SweepRow> simulate_choices(const PlanOptions& o, const PlanRequest& request,
                                       const std::vector<LayoutChoice>& choices, std::size_t simulated,
                                       const std::string& scenario) {
  std::vector<SweepConfig> configs;
  for (std::size_t i = 0; i < simulated; ++i)
    configs.push_back({i, choices[i].chosen.settings(request)});
  std::vector<std::string> base;
  for (const auto& [key, value] : request.base_settings)
    base.push_back(key + "=" + value);
  std::vector<SweepRow> rows(simulated);
  std::size_t finished = 0, unsuccessful = 0;
  Progress progress("plan: simulated", simulated, "invalid or failed", 2.0);
  const auto start = std::chrono::steady_clock::now();
  run_workers(scenario, base, configs, o.jobs, o.timeout, o.common.simulation, [&](SweepRow row) {
    unsuccessful += row.status != "ok";
    rows[row.index] = std::move(row);
    progress.update(++finished, unsuccessful);
  });
  std::cerr << "trainsim: " << simulated << " simulations in "
            << format_double(std::round(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 10) / 10)
            << " s, " << o.jobs << " at a time\n";
  return rows;
}

PlanEntry plan_entry(const LayoutChoice& choice, const SweepRow& row, const PlanRequest& request, double price) {
  const Candidate& c = choice.chosen;
  const double to_train = time_to_train(request.tokens, static_cast<double>(request.global_batch * request.seq_len), row.step_time_s);
  const double gpu_hours = to_train * c.gpus / 3600.0;
  return {c.gpus, c.dp, c.tp, c.pp, c.vpp, c.cp, c.micro_batch, c.zero, c.recompute, c.offload, c.schedule, row,
          to_train, gpu_hours, decision_chain(choice, request), c.sizes_label(), c.ep,
          c.expert_tp(), c.ep > 1 ? c.dispatcher : "", fixed_label(request), price > 0 ? gpu_hours * price : -1};
}

// The simulated candidates that ran and fit, best first under the objective; those past the
// deadline are counted apart.
struct Ranking {
  std::vector<PlanEntry> entries;
  std::vector<PlanEntry> late;  // past --deadline, fastest first
};

Ranking rank(const MemoryPhase& phase, const std::vector<SweepRow>& rows, const PlanOptions& o,
             const PlanRequest& request, double price) {
  Ranking ranking;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].status != "ok" || !rows[i].fits)
      continue;
    PlanEntry entry = plan_entry(phase.choices[i], rows[i], request, price);
    entry.within_deadline = !(o.deadline_s > 0 && entry.time_to_train_s > o.deadline_s);
    (entry.within_deadline ? ranking.entries : ranking.late).push_back(std::move(entry));
  }
  std::stable_sort(ranking.entries.begin(), ranking.entries.end(), [&](const PlanEntry& a, const PlanEntry& b) {
    return step_cost(o.objective, a.gpus, a.simulated.step_time_s) < step_cost(o.objective, b.gpus, b.simulated.step_time_s);
  });
  std::stable_sort(ranking.late.begin(), ranking.late.end(),
                   [](const PlanEntry& a, const PlanEntry& b) { return a.time_to_train_s < b.time_to_train_s; });
  return ranking;
}

// Why the best ranks above the runner-up: the objective's two values, and the parts of the
// step that differ most (a part under 1 % of the step is left out).
std::string why_first(const PlanEntry& best, const PlanEntry& second, const PlanOptions& o) {
  const SweepRow& a = best.simulated;
  const SweepRow& b = second.simulated;
  std::string why;
  if (o.objective == Objective::gpu_hours || o.objective == Objective::cost)
    why = gpu_hours_text(best.gpu_hours) + " GPU-hours against " + gpu_hours_text(second.gpu_hours) +
          " (" + std::to_string(best.gpus) + " GPUs x " + format_seconds(a.step_time_s) + " per step against " +
          std::to_string(second.gpus) + " x " + format_seconds(b.step_time_s) + ")";
  else
    why = "a step of " + format_seconds(a.step_time_s) + " against " + format_seconds(b.step_time_s);
  // Under GPU-hours and cost a step's parts count on every GPU.
  const bool per_gpu = o.objective == Objective::gpu_hours || o.objective == Objective::cost;
  std::map<std::string, double> difference;
  for (const auto& [part, seconds] : a.step_parts)
    difference[part] += seconds * (per_gpu ? best.gpus : 1);
  for (const auto& [part, seconds] : b.step_parts)
    difference[part] -= seconds * (per_gpu ? second.gpus : 1);
  std::vector<std::pair<std::string, double>> parts(difference.begin(), difference.end());
  std::stable_sort(parts.begin(), parts.end(),
                   [](const auto& x, const auto& y) { return std::abs(x.second) > std::abs(y.second); });
  const double first = step_cost(o.objective, best.gpus, a.step_time_s);
  const double runner_up = step_cost(o.objective, second.gpus, b.step_time_s);
  std::string listed;
  for (const auto& [part, seconds] : parts)
    if (std::abs(seconds) >= 0.01 * runner_up)
      listed += (listed.empty() ? "" : ", ") + part + " " + (seconds < 0 ? "-" : "+") + format_seconds(std::abs(seconds));
  if (runner_up - first < 0.01 * runner_up)
    why += ", less than 1 % apart: as good as each other";
  return why + (listed.empty() ? "" : std::string(per_gpu ? "; GPU-time per step: " : "; per step: ") + listed);
}

// The printed plan: the ranking's first 15 rows, how the best three got there, what did not run.
std::string plan_table(const Ranking& ranking, const std::vector<SweepRow>& rows, const MemoryPhase& phase,
                       const PlanOptions& o, const PlanRequest& request, const fs::path& out_dir) {
  const std::vector<PlanEntry>& entries = ranking.entries;
  std::ostringstream shown;
  shown << "trainsim plan: " << request.model.name << ", global batch " << request.global_batch << " x "
        << request.seq_len << " tokens, " << format_count(request.tokens) << " tokens to train";
  for (const auto& [key, value] : request.fixed)
    shown << ", " << key << "=" << value;
  for (const SearchConstraint& constraint : request.constraints)
    shown << ", " << constraint.option;
  shown << "; " << phase.candidates.size() << " candidates, " << phase.choices.size() << " layouts fit, " << rows.size()
        << " simulated (" << o.fidelity << "); ranked by " << o.rank_by
        << (o.deadline_s > 0 ? ", at most " + format_seconds(o.deadline_s) + " to train" : "") << "\n\n";
  const bool priced = !entries.empty() && entries.front().cost >= 0;
  std::vector<std::vector<std::string>> table = {
      {"rank", "GPUs", "layout", "memory", "tokens/s", "step", "MFU", "peak + reserve (headroom)", "to train", "GPU-h"}};
  if (priced)
    table.front().push_back("cost");
  for (std::size_t place = 0; place < std::min<std::size_t>(15, entries.size()); ++place) {
    const PlanEntry& e = entries[place];
    const SweepRow& row = e.simulated;
    const std::string layout = e.sizes + " mb=" + std::to_string(e.micro_batch);
    const std::string memory = zero_stage_label(e.zero) + (e.recompute == "none" ? "" : ", " + e.recompute) +
                               (e.offload == "none" ? "" : ", offload " + e.offload);
    table.push_back({std::to_string(place + 1), std::to_string(e.gpus), layout, memory, format_count(row.tokens_per_s),
                     format_seconds(row.step_time_s), format_double(std::round(row.mfu * 1000) / 10) + "%",
                     format_bytes(row.peak_bytes) + " + " + format_bytes(row.reserve_bytes) + " (" +
                         format_bytes(row.headroom_bytes()) + ")",
                     format_seconds(e.time_to_train_s), gpu_hours_text(e.gpu_hours)});
    if (priced)
      table.back().push_back(format_double(e.cost < 100 ? std::round(e.cost * 100) / 100 : std::round(e.cost)));
  }
  shown << aligned_columns(table, {false, true, false, false, true, true, true, false, true, true, true});
  if (entries.empty()) {
    if (!ranking.late.empty())
      shown << "no simulated candidate trains " << format_count(request.tokens) << " tokens within "
            << format_seconds(o.deadline_s) << "; the fastest, " << ranking.late.front().sizes << " on "
            << ranking.late.front().gpus << " GPUs, takes " << format_seconds(ranking.late.front().time_to_train_s)
            << " (more GPUs, fewer tokens or a later deadline)\n";
    else
      shown << "no simulated candidate fits once simulated; see " << (out_dir / "plan.json").string() << '\n';
  } else {
    if (!ranking.late.empty())
      shown << ranking.late.size() << " simulated candidates fit but take longer than " << format_seconds(o.deadline_s)
            << " to train (the fastest of them: " << format_seconds(ranking.late.front().time_to_train_s) << ")\n";
    shown << "\nhow the best got there (memory techniques in the order engineers apply them):\n";
    for (std::size_t place = 0; place < std::min<std::size_t>(3, entries.size()); ++place) {
      shown << "  " << place + 1 << ". " << entries[place].decisions << '\n';
      shown << "     bottleneck: " << entries[place].simulated.bottleneck << '\n';
    }
    if (entries.size() > 1)
      shown << "why 1 ranks above 2: " << why_first(entries[0], entries[1], o) << '\n';
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
  const double price = gpu_hour_price(o.price_text, cluster.gpu_model);
  const int available = cluster.available;
  MemoryPhase phase = check_memory_of_candidates(request, available);
  const std::string name = o.scenario.empty() ? request.model.name : fs::path(o.scenario).stem().string();
  const fs::path out_dir = o.out.empty() ? fs::path("results") / ("plan-" + name) : fs::path(o.out);
  if (phase.choices.empty()) {
    std::cout << "trainsim plan: " << request.model.name << " on " << available << " GPUs: "
              << nothing_fits(phase.candidates, phase.checks, request) << '\n';
    return 0;
  }

  // The most promising simulated, best estimate first, then ranked by the objective.
  order_by_estimate(phase.choices, o, request);
  const std::size_t simulated = std::min(phase.choices.size(), static_cast<std::size_t>(o.simulate));
  fs::create_directories(out_dir);
  std::string scenario = o.scenario;
  if (scenario.empty()) {
    scenario = (out_dir / "plan-scenario.ini").string();
    write_file_atomically(scenario, request.base_ini);
  }
  const std::vector<SweepRow> rows = simulate_choices(o, request, phase.choices, simulated, scenario);
  const Ranking ranking = rank(phase, rows, o, request, price);

  // Printed once the files are in place: a plan whose files cannot be written shows no table.
  const std::string shown = plan_table(ranking, rows, phase, o, request, out_dir);
  OutputSet outputs(out_dir, {"sweep.svg", "sweep.html", "plan.csv", "plan.json"});
  outputs.write("sweep.svg", sweep_svg(rows, sweep_colour_key(rows)));
  outputs.write("sweep.html", sweep_html("plan for " + request.model.name, rows, sweep_colour_key(rows)));
  std::vector<PlanEntry> listed = ranking.entries;
  listed.insert(listed.end(), ranking.late.begin(), ranking.late.end());
  outputs.write("plan.csv", plan_csv(listed));
  outputs.write("plan.json", plan_json(listed).dump(2) + "\n");
  outputs.commit();
  std::cout << shown;
  std::cout << "  outputs          " << (out_dir / "plan.csv").string() << ", " << (out_dir / "plan.json").string() << ", "
            << (out_dir / "sweep.svg").string() << ", " << (out_dir / "sweep.html").string() << '\n';
  return 0;
}

} // namespace trainsim::cli
