#include "cli/options.hpp"

#include <iostream>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "config/option_errors.hpp"
#include "config/scenario.hpp"

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
  return true;
}

} // namespace trainsim::cli
