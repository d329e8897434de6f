#pragma once
// The trainsim subcommands. Each returns the process exit status; input errors
// propagate as InputError and become status 2 in main.
#include <ostream>
#include <string>
#include <vector>

namespace trainsim::cli {

int run_command(const std::vector<std::string>& arguments);
int memory_command(const std::vector<std::string>& arguments);
int trace_command(const std::vector<std::string>& arguments);
int replay_command(const std::vector<std::string>& arguments);
int platform_command(const std::vector<std::string>& arguments);
int sweep_command(const std::vector<std::string>& arguments);
int plan_command(const std::vector<std::string>& arguments);
void print_usage(std::ostream& out);

// What the command was building or simulating, for the message when memory runs out: " while
// building the programs of 1024 ranks", " while simulating 1024 ranks, 19312640 ops"; empty before
// a layout is known. Written before the work starts, so reading it allocates nothing.
const std::string& work_in_progress();

} // namespace trainsim::cli
