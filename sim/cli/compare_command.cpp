// trainsim compare RUN_A RUN_B [...]: finished runs side by side, and compare.html with -o.
#include "cli/commands.hpp"
#include "cli/options.hpp"

#include <fstream>
#include <iostream>

#include <boost/program_options.hpp>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "report/compare.hpp"
#include "sweep/sweep.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace trainsim::cli {
namespace {

// The peak rank's GPU memory over the step from a run's memory.csv: each row's categories summed,
// host and NVMe left out; empty when the file is missing.
std::vector<std::pair<double, double>> peak_rank_memory(const fs::path& csv, int rank) {
  std::ifstream stream(csv);
  std::string line;
  if (!stream || !std::getline(stream, line))
    return {};
  const std::vector<std::string> columns = split(trim(line), ',');
  std::vector<std::pair<double, double>> memory;
  while (std::getline(stream, line)) {
    const std::vector<std::string> cells = split(trim(line), ',');
    if (cells.size() != columns.size() || cells.front() != std::to_string(rank))
      continue;
    double bytes = 0;
    for (std::size_t c = 2; c < cells.size(); ++c)
      if (columns[c] != "host" && columns[c] != "nvme")
        bytes += std::strtod(cells[c].c_str(), nullptr);
    memory.emplace_back(std::strtod(cells[1].c_str(), nullptr), bytes);
  }
  return memory;
}

ComparedRun read_run(const std::string& input) {
  std::error_code error;
  const fs::path given(input);
  const fs::path summary_file = fs::is_directory(given, error) ? given / "summary.json" : given;
  if (!fs::is_regular_file(summary_file, error))
    throw InputError(input + ": no summary.json; accepted: a run's output folder (trainsim run -o DIR) or its "
                             "summary.json");
  std::ifstream stream(summary_file);
  ComparedRun run;
  run.summary = nlohmann::json::parse(stream, nullptr, false);
  if (!run.summary.is_object() || !run.summary.contains("step_time_s"))
    throw InputError(summary_file.string() + ": not a trainsim summary.json (no step_time_s)");
  const fs::path folder = fs::absolute(summary_file).lexically_normal().parent_path();
  run.name = folder.filename().string();
  const int peak_rank = run.summary.contains("memory") ? run.summary["memory"].value("peak_rank", 0) : 0;
  run.memory = peak_rank_memory(folder / "memory.csv", peak_rank);
  try {
    run.parts = step_parts_of(run.summary);
  } catch (const nlohmann::json::exception&) {
    // A summary without the parts' figures compares without them.
  }
  return run;
}

} // namespace

int compare_command(const std::vector<std::string>& arguments) {
  CommonOptions options;
  std::vector<std::string> inputs;
  po::options_description visible("Options");
  visible.add_options()("out,o", po::value(&options.out), "also write compare.html into this directory");
  visible.add(common_options(options));
  po::options_description all = visible;
  all.add_options()("runs", po::value(&inputs)->required(), "runs' output folders or summary.json files");
  po::positional_options_description positional;
  positional.add("runs", -1);
  if (!parse_arguments("compare", arguments, visible, all, positional, "trainsim compare RUN_A RUN_B [...] [-o DIR]",
                       options, false))
    return 0;
  if (inputs.size() < 2)
    throw InputError("trainsim compare: " + std::to_string(inputs.size()) +
                     " run given; accepted: two or more (their output folders or summary.json files)");
  std::vector<ComparedRun> runs;
  for (const std::string& input : inputs) {
    runs.push_back(read_run(input));
    // Runs in folders of the same name are told apart by their place on the command line.
    for (std::size_t r = 0; r + 1 < runs.size(); ++r)
      if (runs[r].name == runs.back().name)
        runs.back().name += " (" + std::to_string(runs.size()) + ")";
  }
  std::cout << compare_text(runs);
  if (!options.out.empty()) {
    const fs::path file = fs::path(options.out) / "compare.html";
    std::error_code error;
    fs::create_directories(options.out, error);
    write_file_atomically(file, compare_html(runs));
    std::cout << "  outputs          " << file.string() << '\n';
  }
  return 0;
}

} // namespace trainsim::cli
