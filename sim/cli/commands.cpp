#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/workers.hpp"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <boost/program_options.hpp>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "config/scenario.hpp"
#include "program/trace_io.hpp"
#include "report/kernel_report.hpp"
#include "report/plots.hpp"
#include "report/trace_events.hpp"
#include "report/writers.hpp"
#include "run/memory_estimate.hpp"
#include "run/run.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace trainsim::cli {
namespace {

po::options_description scenario_command_options(CommonOptions& options, const char* out_help,
                                                 const std::string& command) {
  po::options_description description("Options");
  description.add_options()("set", po::value(&options.overrides)->composing(),
                            "override a scenario key: --set section.key=value (repeatable)")(
      "out,o", po::value(&options.out), out_help)("show-config", po::bool_switch(&options.show_config),
                                                  "print the effective scenario keys and exit");
  if (command == "kernels")
    description.add_options()("piece", po::value(&options.piece),
                              "only the pieces whose name starts with this, e.g. layer.fwd or head");
  if (command == "memory")
    description.add_options()("compare", po::value(&options.compare),
                              "KEY=V1,V2,...: a markdown table of memory at peak for each value of a scenario key");
  return description;
}

po::options_description report_options(CommonOptions& options) {
  po::options_description description("Report");
  description.add_options()("no-report", po::bool_switch(&options.no_report),
                            "write only summary.json and memory.csv (no trace.json, SVG plots, report.html)")(
      "no-routing-baseline", po::bool_switch(&options.no_routing_baseline),
      "under uneven routing (moe.routing), skip simulating the same step with uniform routing, which the summary's "
      "imbalance line compares with (a second simulation, in a worker process)")(
      "trace-ranks", po::value(&options.trace_ranks),
      "ranks shown in trace.json and the plots, e.g. 0,8-11 (default: the first rank of each pipeline stage)");
  return description;
}

// A scenario prepared on its platform: the process's SimGrid engine, platform loaded, and the run.
struct LoadedScenario {
  std::unique_ptr<SimulationContext> context;
  PreparedRun prepared;
};

void print_config(const Scenario& scenario) {
  std::string section;
  for (const auto& [key, value] : scenario.settings) {
    const std::string this_section = key.substr(0, key.find('.'));
    if (this_section != section) {
      std::cout << (section.empty() ? "" : "\n") << '[' << this_section << "]\n";
      section = this_section;
    }
    std::cout << key.substr(key.find('.') + 1) << " = " << value << '\n';
  }
}

// Parses a command that takes a scenario and prepares it; nothing when --help or
// --show-config already answered.
std::optional<LoadedScenario> scenario_command(const std::string& command, const std::vector<std::string>& arguments,
                                              const char* out_help, CommonOptions& options,
                                              std::string* scenario_path = nullptr) {
  std::string scenario_file;
  po::options_description visible = scenario_command_options(options, out_help, command);
  if (command == "run")
    visible.add(report_options(options));
  visible.add(common_options(options));
  po::options_description all = visible;
  all.add_options()("scenario", po::value(&scenario_file)->required(), "scenario INI file");
  po::positional_options_description positional;
  positional.add("scenario", 1);
  if (!parse_arguments(command, arguments, visible, all, positional, "trainsim " + command + " SCENARIO [options]",
                       options, true))
    return std::nullopt;
  if (scenario_path)
    *scenario_path = scenario_file;
  PreparedRun prepared = read_scenario(scenario_file, options.overrides);
  if (options.show_config) {
    print_config(prepared.scenario);
    return std::nullopt;
  }
  auto context = std::make_unique<SimulationContext>(options.simulation);
  load_platform_and_build(*context, prepared);
  return LoadedScenario{std::move(context), std::move(prepared)};
}

// The ranks the trace and the plots show: the user's list, or the first rank of each stage.
std::vector<int> shown_ranks(const std::string& list, const std::vector<int>& stage_of_rank) {
  const std::size_t ranks = stage_of_rank.size();
  if (list.empty()) {
    std::vector<int> shown;
    const std::vector<bool> first = first_rank_of_each_stage(stage_of_rank);
    for (std::size_t rank = 0; rank < ranks; ++rank)
      if (first[rank])
        shown.push_back(static_cast<int>(rank));
    return shown;
  }
  std::vector<int> shown;
  try {
    shown = parse_rank_list(list);
  } catch (const std::invalid_argument& error) {
    throw InputError("--trace-ranks " + list + ": " + error.what() + "; accepted: a list such as 0,8-11");
  }
  for (int rank : shown)
    if (rank < 0 || static_cast<std::size_t>(rank) >= ranks)
      throw InputError("--trace-ranks " + list + ": rank " + std::to_string(rank) + " does not exist; accepted: 0 to " +
                       std::to_string(ranks - 1));
  std::sort(shown.begin(), shown.end());
  shown.erase(std::unique(shown.begin(), shown.end()), shown.end());
  return shown;
}

// Each rank's pipeline stage (0 without a pipeline).
std::vector<int> stage_of_rank(const PreparedRun& prepared) {
  std::vector<int> stages;
  for (std::size_t rank = 0; rank < prepared.workload.ranks(); ++rank)
    stages.push_back(prepared.run.coords.empty() ? 0 : prepared.run.coords[rank].pp);
  return stages;
}

// Simulates a prepared run and writes its outputs: summary.json and memory.csv, and unless
// --no-report the report page, trace.json and the plots; prints the summary.
int simulate_and_report(SimulationContext& context, const PreparedRun& prepared, const ReplaySettings& settings,
                        const fs::path& out, const CommonOptions& options) {
  const Workload& workload = prepared.workload;
  const std::vector<GpuInfo>& gpus = prepared.gpus;
  RunInfo run = prepared.run;
  run.fidelity = settings.fast_collectives ? "fast" : "flows";
  run.collectives = describe(settings.tuning);
  const std::vector<int> stages = stage_of_rank(prepared);
  const std::vector<int> shown = shown_ranks(options.trace_ranks, stages);
  OutputDirectory directory(out);
  std::vector<bool> timeline_ranks = default_timeline_ranks(stages);
  for (int rank : shown)
    timeline_ranks[rank] = true;
  const SimulatedRun simulated =
      simulate(context, prepared, settings, timeline_ranks, options.no_report ? std::vector<int>{} : shown,
               options.log_level != "error" && options.log_level != "off");
  const StepMetrics& metrics = simulated.metrics;
  const SpanRecorder& spans = simulated.spans;
  note_work("while writing the outputs of " + program_scale(workload) +
            (options.no_report ? "" : " (" + std::to_string(shown.size()) + " traced)"));
  // Files first, all or none: a run whose outputs cannot be written prints no summary that looks
  // complete and leaves no file of its own.
  OutputSet outputs(out, {"summary.json", "memory.csv", "report.html", "trace.json", "memory.svg", "pipeline.svg",
                          "breakdown.svg", "node-memory.svg"});
  std::vector<std::string> written;
  const auto write = [&](const std::string& name, const std::string& content) {
    outputs.write(name, content);
    written.push_back((out / name).string());
  };
  write("summary.json", summary_json(metrics, workload, gpus, run).dump(2) + "\n");
  write("memory.csv", memory_csv(metrics));
  if (!options.no_report) {
    ReportPage page;
    page.title = run.name;
    page.facts = report_facts(metrics, workload, gpus, run);
    page.bottleneck = bottleneck_line(metrics);
    page.memory_svg = memory_svg(metrics, shown, gpus, run.coords);
    page.pipeline_svg = pipeline_svg(workload, spans, metrics, run.coords);
    page.breakdown_svg = breakdown_svg(metrics);
    page.node_memory_svg = node_memory_svg(metrics, gpus);
    page.tables = report_tables(metrics, run);
    write("report.html", report_html(page));
    write("trace.json", chrome_trace(workload, gpus, run.coords, spans, metrics));
    write("memory.svg", page.memory_svg);
    write("pipeline.svg", page.pipeline_svg);
    write("breakdown.svg", page.breakdown_svg);
    if (!page.node_memory_svg.empty())
      write("node-memory.svg", page.node_memory_svg);
  }
  outputs.commit();
  directory.keep();
  print_summary(std::cout, metrics, workload, gpus, run);
  std::string listed;
  for (const std::string& file : written)
    listed += (listed.empty() ? "" : ", ") + file;
  std::cout << "  outputs          " << listed << '\n';
  return 0;
}

} // namespace

void print_usage(std::ostream& out) {
  out << "trainsim — simulate LLM training on GPU clusters (SimGrid)\n\n"
               "Usage: trainsim COMMAND [options]\n\n"
               "Commands:\n"
               "  run SCENARIO       simulate one training step, print a summary, write summary.json, memory.csv\n"
               "                     and the report (report.html, trace.json, SVG plots)\n"
               "  memory SCENARIO    memory per rank from program order, no simulation\n"
               "  kernels SCENARIO   the kernels of each layer, embedding and head on the GPU, timed one by one\n"
               "  trace SCENARIO     write the per-rank programs as trace files (docs/trace-format.md)\n"
               "  replay DIR         simulate trace files on a platform (--platform FILE)\n"
               "  platform           write the SimGrid platform of a described cluster (--gpu, --nodes, ... -o FILE)\n"
               "  sweep SCENARIO     simulate every combination of --vary KEY=V1,V2,... in parallel worker processes\n"
               "  sweep merge FILES  merge the JSON-lines results of sweep shards (-o MERGED.csv)\n"
               "  plan [SCENARIO]    the best strategy that fits (--rank-by tokens_per_s | time_to_train | gpu_hours | cost):\n"
               "                     a scenario, or --model M (--platform FILE | --gpu G ...); [--gpus N..M] [--fix KEY=V,...]\n"
               "  import FORMAT SRC  a scenario from a DeepSpeed config (deepspeed ds_config.json --model M --seq-len S),\n"
               "                     a Megatron-LM command line (megatron \"ARGUMENTS\" or SCRIPT) or a torchtitan job\n"
               "                     (torchtitan job.toml), for a cluster (--platform FILE | --gpu G ...)\n"
               "  compare RUNS...    runs side by side (their output folders): step, throughput, MFU, memory,\n"
               "                     the step's parts and communication, the settings that differ (-o DIR: compare.html)\n"
               "  validate [TABLE]   simulate published measurements (validation/published.csv), print the errors\n"
               "  calibrate SCENARIO fit the efficiencies to a run measured on your machine (--step-time T | --profile\n"
               "                     TRACE.json) and write a calibration file for platform.calibration\n"
               "  collectives        nccl-tests on a simulated platform (--platform FILE): time and bus bandwidth of a\n"
               "                     collective per size, with the algorithm and protocol NCCL would choose\n"
               "  help [COMMAND]     this text, or a command's options (the same as COMMAND --help)\n\n"
               "Examples:\n"
               "  trainsim run scenarios/default.ini\n"
               "  trainsim run scenarios/default.ini --set parallel.dp=8 --set memory.zero=1 -o results/zero1\n"
               "  trainsim memory scenarios/default.ini --compare memory.zero=0,1,2,3\n"
               "  trainsim sweep scenarios/default.ini --vary memory.zero=0,1,2,3 --vary comm.bucket_size=25MiB,100MiB\n"
               "  trainsim plan --model llama3-8b --gpu h100-sxm --gpus 8..64\n"
               "  trainsim plan scenarios/default.ini --gpus 4..16 --rank-by gpu_hours --deadline 2h\n"
               "  trainsim import deepspeed ds_config.json --model llama2-7b --seq-len 4096 --gpu a100-80gb -o ds.ini\n\n"
               "Every command takes --help, --log-level, --sg-log and --sg-cfg. Exit status: 0 done,\n"
               "2 input error (one line naming the file and key), 3 internal error, 4 out of memory.\n";
}

// Under uneven routing, the step time of the same scenario with uniform, dropless routing: the
// imbalance's cost. Simulated in a worker process (one simulation per process); 0 when it fails.
double uniform_routing_step(const std::string& scenario_file, const CommonOptions& options) {
  std::vector<std::string> fixed = options.overrides;
  fixed.insert(fixed.end(), {"moe.routing=uniform", "moe.capacity_factor=none"});
  SweepRow result;
  try {
    result = run_one_worker(scenario_file, fixed, SweepConfig{0, {}}, options.simulation);
  } catch (const std::exception& error) {  // e.g. no scratch folder for the worker
    result.reason = error.what();
  }
  if (result.status == "ok")
    return result.step_time_s;
  spdlog::warn("the same step with uniform routing did not run ({}): no imbalance line", result.reason);
  return 0;
}

int run_command(const std::vector<std::string>& arguments) {
  CommonOptions options;
  std::string scenario_file;
  auto parsed = scenario_command("run", arguments, "output directory for summary.json, memory.csv and the report (default: results/<scenario>)", options, &scenario_file);
  if (!parsed)
    return 0;
  PreparedRun& prepared = parsed->prepared;
  const Scenario& scenario = prepared.scenario;
  // An imbalance makes the ep group wait for its busiest rank; without expert parallelism every
  // rank computes every expert's copies.
  if (prepared.model.moe() && !scenario.routing.uniform() && scenario.ep > 1 && !options.no_routing_baseline) {
    shown_ranks(options.trace_ranks, stage_of_rank(prepared));  // refused before the baseline's simulation
    prepared.run.uniform_routing_step_s = uniform_routing_step(scenario_file, options);
  }
  const fs::path out = options.out.empty() ? fs::path("results") / scenario.name : fs::path(options.out);
  return simulate_and_report(*parsed->context, prepared, replay_settings(scenario), out, options);
}

namespace {

// `trainsim memory --compare key=v1,v2`: one row per value, the platform loaded once.
void print_memory_comparison(const PreparedRun& base, const std::string& scenario_file,
                             const CommonOptions& options) {
  const auto equals = options.compare.find('=');
  const std::string key = options.compare.substr(0, equals);
  if (equals == std::string::npos || equals + 1 == options.compare.size())
    throw InputError("--compare " + options.compare + ": expected KEY=V1,V2,..., e.g. --compare memory.zero=0,1,2,3");
  if (key.rfind("platform.", 0) == 0)
    throw InputError("--compare " + options.compare + ": a platform is loaded once per process; compare platforms "
                                                      "with separate runs");
  std::vector<ComparisonRow> rows;
  for (const auto& value : split(options.compare.substr(equals + 1), ',')) {
    std::vector<std::string> overrides = options.overrides;
    overrides.push_back(key + "=" + value);
    PreparedRun variant = read_scenario(scenario_file, overrides);
    variant.scenario.platform_file = base.scenario.platform_file;  // names a described cluster in errors
    build_programs(variant, base.platform_gpus);
    rows.push_back({value, estimate_memory(variant.workload, variant.gpus, variant.scenario.reserve), variant.gpus});
  }
  print_memory_comparison_table(std::cout, key, rows);
}

} // namespace

int memory_command(const std::vector<std::string>& arguments) {
  CommonOptions options;
  std::string scenario_file;
  const auto parsed = scenario_command("memory", arguments,
                                       "also write memory.json into this directory (default: print only)", options,
                                       &scenario_file);
  if (!parsed)
    return 0;
  const PreparedRun& prepared = parsed->prepared;
  if (!options.compare.empty()) {
    print_memory_comparison(prepared, scenario_file, options);
    return 0;
  }
  const auto& gpus = prepared.gpus;
  const std::vector<RankMemory> ranks = estimate_memory(prepared.workload, gpus, prepared.scenario.reserve);
  print_memory(std::cout, ranks, prepared.workload, gpus, prepared.run);
  if (!options.out.empty()) {
    fs::create_directories(options.out);
    const fs::path file = fs::path(options.out) / "memory.json";
    write_file_atomically(file, memory_json(ranks, prepared.workload, gpus, prepared.run).dump(2) + "\n");
    std::cout << "  outputs          " << file.string() << '\n';
  }
  return 0;
}

int kernels_command(const std::vector<std::string>& arguments) {
  CommonOptions options;
  const auto parsed =
      scenario_command("kernels", arguments, "also write kernels.json into this directory (default: print only)", options);
  if (!parsed)
    return 0;
  const PreparedRun& prepared = parsed->prepared;
  // Rank 0's GPU, and each other kind of GPU the platform mixes in.
  std::set<std::string> shown;
  nlohmann::json all = nlohmann::json::array();
  for (std::size_t rank = 0; rank < prepared.workload.ranks(); ++rank) {
    const GpuInfo& gpu = prepared.gpus[rank];
    if (!shown.insert(gpu.model).second)
      continue;
    std::cout << (rank ? "\n" : "") << kernel_table(prepared.workload, gpu, options.piece);
    all.push_back(kernel_json(prepared.workload, gpu, options.piece));
  }
  if (!options.out.empty()) {
    fs::create_directories(options.out);
    const fs::path file = fs::path(options.out) / "kernels.json";
    write_file_atomically(file, all.dump(2) + "\n");
    std::cout << "  outputs          " << file.string() << '\n';
  }
  return 0;
}

int trace_command(const std::vector<std::string>& arguments) {
  CommonOptions options;
  const auto parsed = scenario_command("trace", arguments, "directory for workload.txt and program files (default: results/<scenario>/trace)", options);
  if (!parsed)
    return 0;
  const PreparedRun& prepared = parsed->prepared;
  const fs::path out =
      options.out.empty() ? fs::path("results") / prepared.scenario.name / "trace" : fs::path(options.out);
  std::string platform = prepared.scenario.platform_file.filename().string();
  std::vector<std::pair<std::string, std::string>> beside;
  if (prepared.scenario.cluster) {
    // A described cluster has no file: the trace carries it, so that the replay finds the same platform.
    platform = (out / "platform.xml").string();
    beside.emplace_back("platform.xml", platform_xml(*prepared.scenario.cluster));
  }
  write_trace(prepared.workload, out, beside);
  std::cout << "trainsim: wrote " << prepared.workload.ranks() << " ranks' programs to " << out.string()
            << " (replay with: trainsim replay " << out.string() << " --platform " << platform << ")\n";
  return 0;
}

int platform_command(const std::vector<std::string>& arguments) {
  CommonOptions options;
  std::string out;
  std::map<std::string, std::string> values;
  po::options_description visible = cluster_options(values);
  visible.add_options()("out,o", po::value(&out)->required(), "the platform XML file to write");
  visible.add(common_options(options));
  if (!parse_arguments("platform", arguments, visible, visible, po::positional_options_description(),
                       "trainsim platform --gpu GPU [--nodes N ...] -o FILE", options, false))
    return 0;
  const auto given = cluster_keys_given(values);
  const ClusterSpec cluster = parse_cluster(given);
  write_file_atomically(out, platform_xml(cluster));
  std::cout << "trainsim: wrote " << out << ": " << describe(cluster) << ", " << cluster.nodes * cluster.gpus_per_node
            << " GPUs\n";
  return 0;
}

int replay_command(const std::vector<std::string>& arguments) {
  CommonOptions options;
  std::string directory, platform, channels_text = "auto", fidelity = "flows", tokens_text = "1e9",
                                   slowdown_text = default_comm_slowdown;
  po::options_description visible("Options");
  visible.add_options()("platform,p", po::value(&platform)->required(),
                        "SimGrid platform XML (a path or a file in platforms/)")(
      "out,o", po::value(&options.out), "output directory (default: results/replay-<trace directory name>)")(
      "channels", po::value(&channels_text)->default_value("auto"),
      "rings per collective (auto: GPUs of the group on its fullest node)")(
      "tokens", po::value(&tokens_text)->default_value(tokens_text), "tokens to train, for time-to-train (1e9, 300B, 2T)")(
      "fidelity", po::value(&fidelity)->default_value("flows"),
      "flows | fast: collectives' NVLink edges timed from their ring (a node's collectives wholly), even all-to-alls from their links' load, instead of simulated")(
      "comm-slowdown", po::value(&slowdown_text)->default_value(slowdown_text),
      "how much longer kernels take while a collective or send runs beside them, 0 to 1 (as compute.comm_slowdown)");
  CollectiveOptions collectives;
  visible.add(collective_options(collectives));
  visible.add(report_options(options));
  visible.add(common_options(options));
  po::options_description all = visible;
  all.add_options()("trace-dir", po::value(&directory)->required(), "trace directory");
  po::positional_options_description positional;
  positional.add("trace-dir", 1);
  if (!parse_arguments("replay", arguments, visible, all, positional, "trainsim replay DIR --platform FILE [options]", options,
                       false))
    return 0;
  const int channels = channels_text == "auto" ? 0 : count_option("--channels", channels_text, 1, 64);
  const double tokens = tokens_option(tokens_text);
  char* end = nullptr;
  const double comm_slowdown = std::strtod(slowdown_text.c_str(), &end);
  if (slowdown_text.empty() || *end != '\0' || !(comm_slowdown >= 0 && comm_slowdown <= 1))
    throw InputError("--comm-slowdown " + slowdown_text + ": accepted: a number from 0 to 1, such as " +
                     default_comm_slowdown);
  if (fidelity != "flows" && fidelity != "fast")
    throw InputError("--fidelity " + fidelity + ": accepted: flows, fast");
  Workload workload = read_trace(directory);
  const fs::path platform_file = resolve_data_file(platform, "platforms", ".xml", ".", "--platform");
  SimulationContext context(options.simulation);
  const PreparedRun prepared = prepare_trace(context, std::move(workload), directory, platform_file, tokens);
  const fs::path out =
      options.out.empty() ? fs::path("results") / ("replay-" + prepared.run.name) : fs::path(options.out);
  ReplaySettings settings;
  settings.channels = channels;
  settings.fast_collectives = fidelity == "fast";
  settings.comm_slowdown = comm_slowdown;
  settings.tuning = comm_tuning_option(collectives);
  return simulate_and_report(context, prepared, settings, out, options);
}

} // namespace trainsim::cli
