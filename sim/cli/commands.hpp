#pragma once
// The trainsim subcommands. Each returns the process exit status; input errors
// propagate as InputError and become status 2 in main.
#include <ostream>
#include <string>
#include <vector>

namespace trainsim::cli {

int run_command(const std::vector<std::string>& arguments);
int memory_command(const std::vector<std::string>& arguments);
int kernels_command(const std::vector<std::string>& arguments);
int trace_command(const std::vector<std::string>& arguments);
int replay_command(const std::vector<std::string>& arguments);
int platform_command(const std::vector<std::string>& arguments);
int sweep_command(const std::vector<std::string>& arguments);
int plan_command(const std::vector<std::string>& arguments);
int import_command(const std::vector<std::string>& arguments);
int compare_command(const std::vector<std::string>& arguments);
int validate_command(const std::vector<std::string>& arguments);
int calibrate_command(const std::vector<std::string>& arguments);
int collectives_command(const std::vector<std::string>& arguments);
void print_usage(std::ostream& out);

} // namespace trainsim::cli
