// trainsim validate: every row of a table of published measurements (validation/published.csv)
// simulated with the defaults, each in its own worker process as a sweep runs them, and compared
// with what the source measured. Prints the error table and writes validation.csv and
// validation.json; rows that cannot be simulated are listed with the reason.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/workers.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "config/scenario.hpp"
#include "config/scenario_options.hpp"
#include "validate/validation.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace trainsim::cli {
namespace {

// Rows of this many GPUs or more are simulated with comm.fidelity = fast under --fidelity auto:
// collectives inside an NVSwitch node timed from their ring give the same times as their flows
// (a test holds it) and make thousand-GPU steps about three times faster to simulate.
constexpr int fast_fidelity_from_gpus = 1000;

// The worker's scenario: every setting comes from --set, so it is empty; a file because
// `trainsim run` reads one. Removed when the command ends.
class EmptyScenario {
public:
  EmptyScenario() : folder_("validate"), path_(folder_.path() / "empty.ini") {
    write_file_atomically(path_, "");
  }
  const std::filesystem::path& path() const { return path_; }

private:
  ScratchFolder folder_;
  std::filesystem::path path_;
};

std::vector<PublishedRow> selected_rows(std::vector<PublishedRow> rows, const std::vector<std::string>& only,
                                        const std::string& file) {
  std::vector<std::string> sets;
  for (const PublishedRow& row : rows)
    if (std::find(sets.begin(), sets.end(), row.set) == sets.end())
      sets.push_back(row.set);
  for (const std::string& set : only)
    if (std::find(sets.begin(), sets.end(), set) == sets.end()) {
      std::string accepted;
      for (const std::string& name : sets)
        accepted += (accepted.empty() ? "" : ", ") + name;
      throw InputError("--only " + set + ": no such set in " + file + "; accepted: " + accepted);
    }
  if (!only.empty())
    rows.erase(std::remove_if(rows.begin(), rows.end(),
                              [&](const PublishedRow& row) { return std::find(only.begin(), only.end(), row.set) == only.end(); }),
               rows.end());
  return rows;
}

} // namespace

int validate_command(const std::vector<std::string>& arguments) {
  CommonOptions options;
  std::string file;
  std::vector<std::string> only;
  std::string fidelity = "auto";
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double timeout = 0;
  po::options_description visible("Options");
  visible.add_options()("jobs,j", po::value(&jobs)->default_value(jobs), "worker processes at a time (default: the number of cores)")(
      "out,o", po::value(&options.out), "folder for validation.csv and validation.json (default: results/validation)")(
      "only", po::value(&only)->composing(), "simulate only this set of rows (repeatable)")(
      "fidelity", po::value(&fidelity)->default_value("auto"),
      "comm.fidelity of every row: flows | fast | auto (fast for rows of 1,000 GPUs or more, flows below)")(
      "timeout", po::value(&timeout)->default_value(0), "seconds a row may take; 0: no limit")(
      "set", po::value(&options.overrides)->composing(),
      "a setting for every row, over the row's own: section.key=value, e.g. compute.model=kernels (repeatable)");
  visible.add(common_options(options));
  po::options_description all = visible;
  all.add_options()("table", po::value(&file), "CSV of published measurements (default: validation/published.csv)");
  po::positional_options_description positional;
  positional.add("table", 1);
  if (!parse_arguments("validate", arguments, visible, all, positional,
                       "trainsim validate [TABLE.csv] [--only SET] [--set KEY=VALUE] [-j N] [--fidelity flows|fast|auto] [--out DIR]", options,
                       false))
    return 0;
  if (jobs < 1 || jobs > 1024)
    throw InputError("--jobs " + std::to_string(jobs) + ": accepted: 1 to 1024");
  if (!(timeout >= 0))
    throw InputError("--timeout: accepted: seconds >= 0");
  if (fidelity != "flows" && fidelity != "fast" && fidelity != "auto")
    throw InputError("--fidelity " + fidelity + ": accepted: flows, fast, auto");
  Settings overrides;
  for (const std::string& setting : options.overrides)
    overrides.push_back(parse_setting(setting));
  if (file.empty())
    file = (data_dir() / "validation" / "published.csv").string();
  const std::vector<PublishedRow> rows = selected_rows(read_published(file), only, file);
  const fs::path out_dir = options.out.empty() ? fs::path("results") / "validation" : fs::path(options.out);
  OutputDirectory out_folder(out_dir);  // one that cannot be made fails before the simulations

  std::vector<SweepConfig> todo;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].not_simulated.empty())
      continue;
    Settings settings = scenario_settings(rows[i]);
    const bool fast = fidelity == "fast" || (fidelity == "auto" && rows[i].gpus() >= fast_fidelity_from_gpus);
    settings.emplace_back("comm.fidelity", fast ? "fast" : "flows");
    settings.insert(settings.end(), overrides.begin(), overrides.end());
    todo.push_back({i, settings});
  }
  std::cerr << "trainsim: validating " << rows.size() << " published measurements, " << todo.size() << " to simulate, "
            << jobs << " at a time\n";
  std::vector<SweepRow> simulated(rows.size());
  std::size_t finished = 0;
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  {
    const EmptyScenario scenario;
    run_workers(scenario.path().string(), {}, todo, jobs, timeout, options.simulation, [&](SweepRow row) {
      if (terminal)
        std::cerr << "\rtrainsim: simulated " << ++finished << "/" << todo.size() << std::flush;
      simulated[row.index] = std::move(row);
    });
  }
  if (terminal)
    std::cerr << '\n';
  std::vector<ValidationResult> results;
  for (std::size_t i = 0; i < rows.size(); ++i)
    results.push_back(rows[i].not_simulated.empty() ? compare(rows[i], simulated[i])
                                                    : ValidationResult{rows[i], "not simulated", rows[i].not_simulated});

  OutputSet outputs(out_dir, {"validation.csv", "validation.json"});
  outputs.write("validation.csv", validation_csv(results));
  outputs.write("validation.json", validation_json(results).dump(2) + "\n");
  outputs.commit();
  out_folder.keep();
  std::cout << validation_table(results);
  std::cout << "outputs: " << (out_dir / "validation.csv").string() << ", " << (out_dir / "validation.json").string() << '\n';
  return 0;
}

} // namespace trainsim::cli
