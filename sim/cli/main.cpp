// trainsim: simulate LLM training on GPU clusters (see README.md).
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "common/error.hpp"
#include "run/prepared_run.hpp"

int main(int argc, char** argv) {
  using namespace trainsim;
  std::vector<std::string> arguments(argv + 1, argv + argc);
  try {
    // Options given before the command apply to it, so move them after it.
    std::vector<std::string> leading;
    std::size_t i = 0;
    while (i < arguments.size() && arguments[i].rfind("-", 0) == 0) {
      const std::string& option = arguments[i];
      if (option == "--help" || option == "-h") {
        cli::print_usage(std::cout);
        return 0;
      }
      if (option == "--version") {
        std::cout << "trainsim " << TRAINSIM_VERSION << '\n';
        return 0;
      }
      leading.push_back(arguments[i++]);
      const bool takes_value = leading.back() == "--log-level" || leading.back() == "--sg-log" ||
                               leading.back() == "--sg-cfg";
      if (takes_value && i < arguments.size())
        leading.push_back(arguments[i++]);
    }
    if (i == arguments.size()) {
      cli::print_usage(std::cerr);
      return 2;
    }
    std::string command = arguments[i];
    std::vector<std::string> rest(arguments.begin() + static_cast<long>(i) + 1, arguments.end());
    rest.insert(rest.end(), leading.begin(), leading.end());
    if (command == "help") {
      if (rest.empty() || rest.front().rfind("-", 0) == 0 || rest.front() == "help") {
        cli::print_usage(std::cout);
        return 0;
      }
      // trainsim help run [merge] = trainsim run [merge] --help
      command = rest.front();
      rest.erase(rest.begin());
      rest.push_back("--help");
    }
    if (command == "run")
      return cli::run_command(rest);
    if (command == "memory")
      return cli::memory_command(rest);
    if (command == "kernels")
      return cli::kernels_command(rest);
    if (command == "trace")
      return cli::trace_command(rest);
    if (command == "replay")
      return cli::replay_command(rest);
    if (command == "platform")
      return cli::platform_command(rest);
    if (command == "sweep")
      return cli::sweep_command(rest);
    if (command == "plan")
      return cli::plan_command(rest);
    if (command == "compare")
      return cli::compare_command(rest);
    if (command == "import")
      return cli::import_command(rest);
    if (command == "validate")
      return cli::validate_command(rest);
    if (command == "calibrate")
      return cli::calibrate_command(rest);
    if (command == "collectives")
      return cli::collectives_command(rest);
    std::cerr << "trainsim: error: unknown command '" << command << "'; accepted: run, memory, kernels, trace, replay, platform, sweep, plan, import, compare, validate, calibrate, collectives, help\n";
    return 2;
  } catch (const InputError& error) {
    std::cerr << "trainsim: error: " << error.what() << '\n';
    return 2;
  } catch (const std::bad_alloc&) {
    // A limit, not a bug: say at what scale, and what makes the simulation smaller (measured:
    // memory grows with the ops, so with ranks and micro-batches, and with the ranks traced).
    std::cerr << "trainsim: error: out of memory" << work_in_progress()
              << "; to need less: fewer micro-batches per step (training.global_batch), fewer ranks (a "
                 "smaller layout), fewer --trace-ranks or --no-report\n";
    return 4;
  } catch (const std::exception& error) {
    std::cerr << "trainsim: internal error (a bug, please report it): " << error.what() << '\n';
    return 3;
  }
}
