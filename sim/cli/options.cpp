#include "cli/options.hpp"

#include <algorithm>
#include <iostream>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "common/units.hpp"
#include "config/option_errors.hpp"
#include "config/scenario.hpp"
#include "config/scenario_options.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {
namespace {

void configure_logging(const std::string& level_name) {
  const auto level = spdlog::level::from_str(level_name);
  if (level == spdlog::level::off && level_name != "off")
    throw InputError("--log-level " + level_name + ": accepted: trace, debug, info, warn, error, off");
  auto logger = spdlog::stderr_color_mt("trainsim");
  logger->set_pattern("[trainsim %l] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(level);
}

} // namespace

po::options_description common_options(CommonOptions& options) {
  po::options_description description("Logging and SimGrid");
  description.add_options()("help,h", po::bool_switch(&options.help), "show this help")(
      "log-level", po::value(&options.log_level)->default_value("warn"),
      "trainsim log level: trace, debug, info, warn, error, off")(
      "sg-log", po::value(&options.simulation.sg_log)->composing(),
      "SimGrid log setting passed through, e.g. root.thres:info (repeatable)")(
      "sg-cfg", po::value(&options.simulation.sg_cfg)->composing(),
      "SimGrid configuration key:value applied after trainsim's network defaults (repeatable)");
  return description;
}

// Parses a command's arguments; returns false when help was printed.
bool parse_arguments(const std::string& command, const std::vector<std::string>& arguments,
                     const po::options_description& visible, const po::options_description& all,
                     const po::positional_options_description& positional, const std::string& usage,
                     CommonOptions& common, bool show_scenario_keys) {
  po::variables_map values;
  try {
    po::store(po::command_line_parser(arguments).options(all).positional(positional).run(), values);
    common.help = values.count("help") && values["help"].as<bool>();
    if (!common.help)
      po::notify(values);
  } catch (const po::error& error) {
    // A missing positional argument is named as the usage line names it, not by the hidden option
    // that carries it (--scenario, --trace-dir).
    if (dynamic_cast<const po::required_option*>(&error))
      for (unsigned position = 0; position < std::min(positional.max_total_count(), 8u); ++position)
        if (static_cast<const po::required_option&>(error).get_option_name() == "--" + positional.name_for_position(position))
          throw InputError("trainsim " + command + ": an argument is missing; usage: " + usage);
    throw InputError("trainsim " + command + ": " + describe_option_error(error) + "; see trainsim " + command +
                     " --help");
  }
  if (common.help) {
    std::cout << "Usage: " << usage << "\n\n" << visible << '\n';
    if (show_scenario_keys)
      print_scenario_keys(std::cout);
    return false;
  }
  configure_logging(common.log_level);
  check_simulation_options(common.simulation);
  return true;
}

po::options_description collective_options(CollectiveOptions& options) {
  po::options_description collectives("Collectives");
  collectives.add_options()("collectives", po::value(&options.collectives)->default_value(options.collectives),
                            "nccl: NCCL's algorithm and protocol per call | ideal: full link bandwidth, route "
                            "latency (as comm.collectives)")(
      "algorithm", po::value(&options.algorithm)->default_value(options.algorithm),
      "auto | ring | tree | nvls (as comm.algorithm)")(
      "protocol", po::value(&options.protocol)->default_value(options.protocol),
      "auto | ll | ll128 | simple (as comm.protocol)");
  return collectives;
}

namespace {
template <typename Value>
Value named_option(const std::string& option, const std::string& text,
                   const std::vector<std::pair<std::string, Value>>& names) {
  std::string accepted;
  for (const auto& [name, value] : names) {
    if (name == text)
      return value;
    accepted += (accepted.empty() ? "" : ", ") + name;
  }
  throw InputError(option + " " + text + ": accepted: " + accepted);
}
} // namespace

CommTuning comm_tuning_option(const CollectiveOptions& options) {
  CommTuning tuning;
  tuning.ideal = named_option("--collectives", options.collectives, comm_collectives_names());
  tuning.algorithm = named_option("--algorithm", options.algorithm, comm_algorithm_names());
  tuning.protocol = named_option("--protocol", options.protocol, comm_protocol_names());
  const auto [key, problem] = comm_tuning_conflict(tuning);
  if (!key.empty())
    throw InputError("--" + key.substr(key.find('.') + 1) + ": " + problem);
  return tuning;
}

int count_option(const std::string& option, const std::string& text, int low, int high) {
  std::size_t used = 0;
  long value = -1;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < low || value > high)
    throw InputError(option + " " + text + ": accepted: a whole number from " + std::to_string(low) + " to " +
                     std::to_string(high));
  return static_cast<int>(value);
}

double tokens_option(const std::string& text) {
  try {
    return parse_tokens(text);
  } catch (const UnitError& error) {
    throw InputError("--tokens " + text + ": " + error.what());
  }
}

po::options_description cluster_options(std::map<std::string, std::string>& values) {
  static const std::vector<std::pair<std::string, std::string>> keys = {
      {"gpu", "GPU from the catalog: " + gpu_keys(", ")},
      {"nodes", "number of nodes (default 1)"},
      {"gpus-per-node", "GPUs per node (default 8)"},
      {"fabric", "nvswitch | nvlink-pairs | mesh | pcie (default: the GPU's usual)"},
      {"nics-per-node", "NICs per node (default: one per GPU on NVSwitch)"},
      {"nic-speed", "NIC speed, e.g. 400Gbps (default: the GPU generation's usual)"},
      {"topology", "single-switch | fat-tree | rail-optimized (default single-switch)"},
      {"nodes-per-leaf", "fat tree: nodes per leaf switch"},
      {"oversubscription", "fat tree, rail-optimized: switch downlink / uplink bandwidth (default 1)"},
      {"leaves-per-pod", "fat tree: leaves per pod, pods under a core (default: one pod up to 64 leaves, else 32)"},
      {"pod-oversubscription", "fat tree with pods: a pod's downlink / uplink bandwidth to the core (default 1)"},
      {"pcie-gen", "PCIe generation 3 to 6 (default: the GPU's usual)"},
      {"nvme-per-node", "NVMe drives per node (default 0)"},
      {"gpus-per-pcie-switch", "GPUs behind one PCIe switch (default 2; 1: each on its own root port)"},
      {"host-memory", "host DRAM per node (default 2TiB)"},
      {"host-memory-bandwidth", "host DRAM bandwidth per node (default 200GBps)"},
      {"cpu-speed", "FLOP/s of a node's CPUs (default 2Tf)"}};
  po::options_description description("Cluster (the platform.* scenario keys)");
  for (const auto& [name, help] : keys)
    description.add_options()(name.c_str(), po::value(&values[name]), help.c_str());
  return description;
}

std::map<std::string, std::pair<std::string, std::string>> cluster_keys_given(const std::map<std::string, std::string>& values) {
  std::map<std::string, std::pair<std::string, std::string>> given;
  for (const auto& [name, value] : values) {
    if (value.empty())
      continue;
    std::string key = name;
    std::replace(key.begin(), key.end(), '-', '_');
    given["platform." + key] = {value, "--" + name + " " + value};
  }
  return given;
}

} // namespace trainsim::cli
