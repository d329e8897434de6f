#pragma once
// What every command shares: logging and SimGrid options, and parsing a command's arguments
// with Boost.Program_options into one-line input errors.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>

#include "config/comm_tuning.hpp"
#include "platform/simulation_context.hpp"

namespace trainsim::cli {

struct CommonOptions {
  std::string log_level = "warn";
  bool no_report = false;      // run, replay: skip trace.json, the SVG plots and report.html
  bool no_routing_baseline = false;  // run: under uneven routing, skip the uniform-routing step beside it
  std::string trace_ranks;     // run, replay: ranks in trace.json and the plots; empty: one per stage
  SimulationOptions simulation;
  std::vector<std::string> overrides;
  std::string out;
  std::string compare;
  std::string piece;  // kernels: only the pieces whose name starts with this
  bool show_config = false;
  bool help = false;
};

boost::program_options::options_description common_options(CommonOptions& options);

// Parses a command's arguments; returns false when help was printed. Sets up logging.
bool parse_arguments(const std::string& command, const std::vector<std::string>& arguments,
                     const boost::program_options::options_description& visible,
                     const boost::program_options::options_description& all,
                     const boost::program_options::positional_options_description& positional,
                     const std::string& usage, CommonOptions& common, bool show_scenario_keys);


// --collectives, --algorithm, --protocol: the comm.collectives, comm.algorithm and comm.protocol
// of commands without a scenario.
struct CollectiveOptions {
  std::string collectives = "nccl", algorithm = "auto", protocol = "auto";
};
boost::program_options::options_description collective_options(CollectiveOptions& options);
CommTuning comm_tuning_option(const CollectiveOptions& options);

// A whole number option from `low` to `high`: InputError naming it otherwise.
int count_option(const std::string& option, const std::string& text, int low, int high);

// --tokens as the scenario key reads it (1e9, 300B, 2T), refused out of range.
double tokens_option(const std::string& text);

// The options that describe a cluster (--gpu, --nodes, ...: the platform.* scenario keys), stored
// by option name in `values`; and those given, as platform.* keys with where they were given.
boost::program_options::options_description cluster_options(std::map<std::string, std::string>& values);
std::map<std::string, std::pair<std::string, std::string>> cluster_keys_given(const std::map<std::string, std::string>& values);

} // namespace trainsim::cli
