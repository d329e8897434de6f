// trainsim sweep: each configuration in its own worker process (SimGrid holds one simulation
// per process), -j at a time; a row appended to the CSV and JSON-lines files as each finishes.
// Each worker runs `trainsim run SCENARIO --set ... --no-report` with stdout discarded and
// stderr kept for the reason of a refusal (exit 2: invalid) or a crash or time limit (failed).
// The parent polls waitpid, kills workers past --timeout, and appends and flushes a row per
// finished worker (a failed append is an error). Workers get PR_SET_PDEATHSIG; SIGINT, SIGTERM
// and SIGHUP make the parent reap them and remove its scratch folder, which is held locked
// (flock) while its sweep lives, so a sweep removes the unlocked ones killed sweeps left.
// --resume reads the JSON-lines rows (a last line cut short is dropped), refuses rows that are
// not the same index's configuration, and skips them except the failed ones.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "cli/workers.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "report/sweep_views.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "config/scenario.hpp"
#include "config/scenario_options.hpp"
#include "sweep/sweep.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace trainsim::cli {
namespace {

struct Worker {
  SweepConfig config;
  pid_t pid = -1;
  fs::path dir;                       // its output directory and stderr file
  Clock::time_point started;
  bool timed_out = false;
};

std::string self_executable() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (error)
    throw std::runtime_error("cannot find the trainsim executable (/proc/self/exe): " + error.message());
  return self.string();
}

pid_t spawn(const std::vector<std::string>& arguments, const fs::path& err_file) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error("fork failed");
  if (pid == 0) {
    // A worker dies with the sweep, however the sweep ends (SIGKILL included).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(127);
    const int null = ::open("/dev/null", O_WRONLY);
    const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(null, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    std::vector<char*> argv;
    for (const std::string& argument : arguments)
      argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// The workers' output folders, in $TMPDIR. The folder is locked while its sweep lives, so that
// the folders of sweeps killed before they could remove theirs are told apart from those of
// running sweeps, and removed by the next sweep. (The name differs from the unlocked
// trainsim-sweep-* folders of earlier versions, which a running sweep may still be using.)
constexpr const char* scratch_prefix = "trainsim-workers-";

class WorkersScratch {
public:
  WorkersScratch() {
    const fs::path temporary = scratch_directory();
    remove_stale(temporary);
    // Created under a name the cleaning skips and renamed once locked: never seen unlocked.
    std::string pattern = (temporary / ("." + std::string(scratch_prefix) + "XXXXXX")).string();
    if (!::mkdtemp(pattern.data()))
      throw InputError(temporary.string() + ": cannot create a scratch folder for the workers (" +
                       std::strerror(errno) + "; set TMPDIR to a writable folder)");
    lock_ = ::open(pattern.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    path_ = temporary / fs::path(pattern).filename().string().substr(1);
    if (lock_ < 0 || ::flock(lock_, LOCK_EX | LOCK_NB) != 0 || ::rename(pattern.c_str(), path_.c_str()) != 0) {
      const std::string why = std::strerror(errno);
      if (lock_ >= 0)
        ::close(lock_);
      std::error_code ignored;
      fs::remove_all(pattern, ignored);
      throw std::runtime_error("cannot lock the scratch folder " + pattern + ": " + why);
    }
  }
  ~WorkersScratch() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
    ::close(lock_);
  }
  WorkersScratch(const WorkersScratch&) = delete;
  WorkersScratch& operator=(const WorkersScratch&) = delete;

  const fs::path& path() const { return path_; }

private:
  static void remove_stale(const fs::path& temporary) {
    std::error_code error;
    for (const fs::directory_entry& entry : fs::directory_iterator(temporary, error)) {
      if (entry.path().filename().string().rfind(scratch_prefix, 0) != 0 || !entry.is_directory(error))
        continue;
      const int fd = ::open(entry.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0)
        continue;  // another user's
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0)
        fs::remove_all(entry.path(), error);
      ::close(fd);
    }
  }

  fs::path path_;
  int lock_ = -1;
};

// SIGINT, SIGTERM and SIGHUP stop the sweep between two polls, so that it can end its workers
// and remove its scratch folder before it dies of the signal.
volatile std::sig_atomic_t stop_signal = 0;

class StopSignals {
public:
  StopSignals() {
    struct sigaction action {};
    action.sa_handler = [](int signal) { stop_signal = signal; };
    sigemptyset(&action.sa_mask);
    for (std::size_t i = 0; i < signals_.size(); ++i) {
      ::sigaction(signals_[i], nullptr, &previous_[i]);
      if (previous_[i].sa_handler != SIG_IGN)  // nohup's SIGHUP stays ignored
        ::sigaction(signals_[i], &action, nullptr);
    }
  }
  ~StopSignals() {
    for (std::size_t i = 0; i < signals_.size(); ++i)
      ::sigaction(signals_[i], &previous_[i], nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

private:
  const std::array<int, 3> signals_ = {SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> previous_{};
};

// The workers in flight; whatever ends the sweep early (a signal, a full disk) ends them too.
struct RunningWorkers {
  std::map<pid_t, Worker> by_pid;
  ~RunningWorkers() {
    for (const auto& [pid, worker] : by_pid)
      ::kill(pid, SIGKILL);
    for (const auto& [pid, worker] : by_pid)
      ::waitpid(pid, nullptr, 0);
  }
};

// The line a failed worker left: trainsim's "error: ..." line, else its last line.
std::string reason_from(const fs::path& err_file) {
  std::ifstream in(err_file);
  std::string line, last, error;
  while (std::getline(in, line)) {
    if (!trim(line).empty())
      last = trim(line);
    const auto at = line.find("trainsim: error: ");
    if (at != std::string::npos)
      error = trim(line.substr(at + 17));
  }
  return error.empty() ? last : error;
}

// A varied key that the scenario's calibration file sets would make every row invalid. The base
// scenario alone may be invalid where every configuration changes it: then the rows say why.
void refuse_calibrated_keys(const std::string& scenario, const std::vector<std::string>& overrides,
                            const std::vector<std::string>& keys) {
  Calibration calibration;
  try {
    calibration = load_scenario(scenario, overrides).calibration;
  } catch (const InputError&) {
    return;
  }
  for (const std::string& key : keys)
    if (std::find(calibration.keys.begin(), calibration.keys.end(), key) != calibration.keys.end())
      throw InputError("--vary " + key + ": set by platform.calibration (" + calibration.file.string() +
                       "); accepted: keys the calibration does not set, or the sweep without platform.calibration");
}

SweepRow finish(const Worker& worker, int status) {
  SweepRow row;
  row.index = worker.config.index;
  row.settings = worker.config.settings;
  const fs::path err_file = worker.dir / "stderr.txt";
  if (worker.timed_out) {
    row.status = "failed";
    row.reason = "time limit reached";
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    try {
      std::ifstream in(worker.dir / "out" / "summary.json");
      row = row_from_summary(worker.config, nlohmann::json::parse(in));
    } catch (const std::exception& error) {
      row.status = "failed";
      row.reason = std::string("unreadable summary.json: ") + error.what();
    }
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
    row.status = "invalid";
    row.reason = reason_from(err_file);
  } else {
    row.status = "failed";
    const std::string why = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                                : "exit status " + std::to_string(WEXITSTATUS(status));
    const std::string detail = reason_from(err_file);
    row.reason = why + (detail.empty() ? "" : ": " + detail);
  }
  std::error_code ignored;
  fs::remove_all(worker.dir, ignored);
  return row;
}

// The plot and the page beside the CSV (rows sorted by index), the points coloured by `colour_by`,
// else by the first varied key with 2 to 10 values; "SVG and HTML" as the last line names them.
std::string write_plots(const fs::path& csv, const std::string& scenario, const std::vector<SweepRow>& rows,
                        const std::string& colour_by) {
  const std::string colour_key = colour_by.empty() ? sweep_colour_key(rows) : colour_by;
  const fs::path svg = fs::path(csv).replace_extension(".svg"), html = fs::path(csv).replace_extension(".html");
  write_file_atomically(svg, sweep_svg(rows, colour_key));
  write_file_atomically(html, sweep_html("sweep of " + scenario, rows, colour_key));
  return svg.string() + " and " + html.string();
}

int merge(const std::vector<std::string>& arguments) {
  CommonOptions options;
  std::vector<std::string> inputs;
  std::string colour_by;
  po::options_description visible("Options");
  visible.add_options()("out,o", po::value(&options.out)->required(), "merged CSV (the JSON-lines file goes beside it)");
  visible.add_options()("colour-by", po::value(&colour_by), "colour the plot's points by this varied key");
  visible.add(common_options(options));
  po::options_description all = visible;
  all.add_options()("inputs", po::value(&inputs)->required(), "the shards' JSON-lines files");
  po::positional_options_description positional;
  positional.add("inputs", -1);
  if (!parse_arguments("sweep merge", arguments, visible, all, positional,
                       "trainsim sweep merge SHARD.jsonl... -o MERGED.csv [--colour-by KEY]", options, false))
    return 0;
  std::map<std::size_t, SweepRow> by_index;
  for (const std::string& input : inputs)
    for (SweepRow& row : read_rows(input)) {
      const SweepRow& first = by_index.empty() ? row : by_index.begin()->second;
      if (keys_of(row.settings) != keys_of(first.settings))
        throw InputError(input + ": configuration " + std::to_string(row.index) + " varies other keys than configuration " +
                         std::to_string(first.index) + " ('" + row.label() + "', '" + first.label() +
                         "'); the shards come from different sweeps");
      const auto [it, fresh] = by_index.emplace(row.index, row);
      if (!fresh && it->second.label() != row.label())
        throw InputError(input + ": configuration " + std::to_string(row.index) + " is '" + row.label() +
                         "' here but '" + it->second.label() + "' in an earlier input; the shards come from different sweeps");
    }
  std::vector<SweepRow> rows;
  for (auto& [index, row] : by_index)
    rows.push_back(std::move(row));
  const std::vector<std::string> keys = rows.empty() ? std::vector<std::string>{} : keys_of(rows.front().settings);
  if (!colour_by.empty() && std::find(keys.begin(), keys.end(), colour_by) == keys.end())
    throw InputError("--colour-by " + colour_by + ": not a varied key; accepted: " + join(keys, ", "));
  write_rows(options.out, jsonl_beside(options.out), keys, rows);
  // The page is titled with the scenario as the first shard's sweep named it.
  std::string scenario;
  for (const SweepRow& row : rows)
    if (scenario.empty())
      scenario = row.scenario;
  const std::string plots = write_plots(options.out, scenario, rows, colour_by);
  std::cout << "trainsim: merged " << rows.size() << " configurations from " << inputs.size() << " file(s) into "
            << options.out << " and " << jsonl_beside(options.out).string() << ", plots in " << plots << '\n';
  return 0;
}

} // namespace

void run_workers(const std::string& scenario, const std::vector<std::string>& fixed, const std::vector<SweepConfig>& todo,
                 int jobs, double timeout, const SimulationOptions& simulation,
                 const std::function<void(SweepRow)>& on_row) {
  {
    // Destroyed in reverse order: workers ended, then the scratch folder removed, then the
    // signals restored.
    const StopSignals signals;
    const WorkersScratch scratch;
    RunningWorkers running;
    const std::string self = self_executable();
    std::size_t next = 0;
    while ((next < todo.size() || !running.by_pid.empty()) && !stop_signal) {
      while (next < todo.size() && running.by_pid.size() < static_cast<std::size_t>(jobs)) {
        Worker worker;
        worker.config = todo[next++];
        worker.dir = scratch.path() / std::to_string(worker.config.index);
        std::error_code error;
        if (!fs::create_directories(worker.dir, error) && error)
          throw InputError(worker.dir.string() + ": cannot create a worker's scratch folder (" + error.message() +
                           "; set TMPDIR to a folder with room)");
        std::vector<std::string> command = {self, "run", scenario, "--out", (worker.dir / "out").string(),
                                            "--no-report", "--no-routing-baseline", "--log-level", "error"};
        for (const std::string& setting : fixed)
          command.insert(command.end(), {"--set", setting});
        for (const auto& [key, value] : worker.config.settings)
          command.insert(command.end(), {"--set", key + "=" + value});
        for (const std::string& setting : simulation.sg_cfg)
          command.insert(command.end(), {"--sg-cfg", setting});
        worker.started = Clock::now();
        worker.pid = spawn(command, worker.dir / "stderr.txt");
        running.by_pid.emplace(worker.pid, std::move(worker));
      }
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) {
        if (timeout > 0)
          for (auto& [id, worker] : running.by_pid)
            if (!worker.timed_out && std::chrono::duration<double>(Clock::now() - worker.started).count() > timeout) {
              worker.timed_out = true;
              ::kill(id, SIGKILL);
            }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      const auto it = running.by_pid.find(pid);
      if (it == running.by_pid.end())
        continue;
      const Worker worker = std::move(it->second);
      running.by_pid.erase(it);
      if (!stop_signal)  // a Ctrl-C reaches the workers too: they did not fail
        on_row(finish(worker, status));
    }
  }
  if (stop_signal)
    std::raise(stop_signal);  // the default action again: the sweep ends as the signal asked
}

SweepRow run_one_worker(const std::string& scenario, const std::vector<std::string>& fixed, const SweepConfig& config,
                        const SimulationOptions& simulation) {
  SweepRow result;
  run_workers(scenario, fixed, {config}, 1, 0, simulation, [&](SweepRow row) { result = std::move(row); });
  return result;
}

int sweep_command(const std::vector<std::string>& arguments) {
  if (!arguments.empty() && arguments.front() == "merge")
    return merge(std::vector<std::string>(arguments.begin() + 1, arguments.end()));
  CommonOptions options;
  std::string scenario, shard_text = "1/1", colour_by;
  std::vector<std::string> varied, zipped;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double timeout = 0;
  bool resume = false;
  po::options_description visible("Options");
  visible.add_options()("vary", po::value(&varied)->composing(),
                        "KEY=V1,V2,...: a scenario key and its values (repeatable; the product is swept)")(
      "zip", po::value(&zipped)->composing(),
      "KEY=V1,V2,...: keys whose values vary together, the i-th with the i-th (repeatable, as many values each; "
      "one dimension of the product, e.g. --zip platform.nodes=1,2,4 --zip training.global_batch=64,128,256)")(
      "set", po::value(&options.overrides)->composing(), "a fixed override for every configuration: section.key=value")(
      "jobs,j", po::value(&jobs)->default_value(jobs), "worker processes at a time (default: the number of cores)")(
      "shard", po::value(&shard_text)->default_value("1/1"), "K/N: run the K-th of N deterministic parts of the sweep")(
      "timeout", po::value(&timeout)->default_value(0), "seconds a configuration may take; 0: no limit")(
      "out,o", po::value(&options.out), "results CSV, JSON-lines beside it (default: results/sweep-<scenario>.csv)")(
      "resume", po::bool_switch(&resume), "keep the rows already in the output files and run only the others")(
      "colour-by", po::value(&colour_by),
      "a varied key whose values colour sweep.svg's points (default: the first with 2 to 10 values)");
  visible.add(common_options(options));
  po::options_description all = visible;
  all.add_options()("scenario", po::value(&scenario)->required(), "scenario INI file");
  po::positional_options_description positional;
  positional.add("scenario", 1);
  if (!parse_arguments("sweep", arguments, visible, all, positional,
                       "trainsim sweep SCENARIO --vary KEY=V1,V2 [--vary ...] [--zip KEY=V1,V2 ...] [-j N] [--shard K/N] [--out FILE.csv] "
                       "[--resume]\n"
                       "       trainsim sweep merge SHARD.jsonl... -o MERGED.csv",
                       options, false))
    return 0;
  if (jobs < 1 || jobs > 1024)
    throw InputError("--jobs " + std::to_string(jobs) + ": accepted: 1 to 1024");
  if (!(timeout >= 0))
    throw InputError("--timeout: accepted: seconds >= 0");
  if (!fs::is_regular_file(scenario))
    throw InputError(scenario + ": no such scenario file");
  if (varied.empty() && zipped.empty())
    throw InputError("trainsim sweep: nothing varies; accepted: --vary KEY=V1,V2,... or --zip KEY=V1,V2,...");
  std::vector<Variation> variations;
  for (const std::string& text : varied)
    variations.push_back(parse_variation(text));
  for (const std::string& text : zipped)
    variations.push_back(parse_variation(text, "--zip"));
  const Shard shard = parse_shard(shard_text);
  const fs::path csv = options.out.empty() ? fs::path("results") / ("sweep-" + fs::path(scenario).stem().string() + ".csv")
                                           : fs::path(options.out);
  const fs::path jsonl = jsonl_beside(csv);

  // A key no configuration can have would make every row invalid: refused once, here.
  const std::vector<std::string> keys = keys_of(variations);
  for (const Variation& variation : variations)
    require_scenario_key(variation.key, (variation.zipped ? "--zip " : "--vary ") + variation.key);
  if (!colour_by.empty() && std::find(keys.begin(), keys.end(), colour_by) == keys.end())
    throw InputError("--colour-by " + colour_by + ": not a varied key; accepted: " + join(keys, ", "));
  for (const std::string& assignment : options.overrides)
    parse_setting(assignment);
  refuse_calibrated_keys(scenario, options.overrides, keys);
  std::vector<SweepConfig> configs = expand(variations);

  std::vector<SweepRow> rows;
  if (fs::exists(jsonl) || fs::exists(csv)) {
    if (!resume)
      throw InputError(csv.string() + ": results already exist; --resume continues that sweep, or choose another --out");
    if (fs::exists(jsonl))
      rows = rows_to_keep(read_rows(jsonl), configs, jsonl.string());
    for (SweepRow& row : rows)  // rows of earlier versions name no scenario
      row.scenario = scenario;
  }
  std::set<std::size_t> done;
  for (const SweepRow& row : rows)
    done.insert(row.index);
  std::vector<SweepConfig> todo;
  std::size_t in_shard = 0;
  for (SweepConfig& config : configs) {
    if (!shard.holds(config.index))
      continue;
    ++in_shard;
    if (!done.count(config.index))
      todo.push_back(std::move(config));
  }
  fs::create_directories(csv.parent_path().empty() ? fs::path(".") : csv.parent_path());
  // Rows go to disk as soon as they exist: a killed sweep keeps every finished configuration.
  write_rows(csv, jsonl, keys, rows);
  std::ofstream csv_out(csv, std::ios::app), jsonl_out(jsonl, std::ios::app);
  if (!csv_out || !jsonl_out)
    throw InputError(csv.string() + ": cannot write the results");
  std::cerr << "trainsim: sweep of " << in_shard << " configurations" << (shard.count > 1 ? " (shard " + shard_text + ")" : "")
            << ", " << todo.size() << " to run, " << jobs << " at a time\n";

  Progress progress("sweep", todo.size(), "invalid or failed");
  std::size_t finished = 0, unsuccessful = 0;
  run_workers(scenario, options.overrides, todo, jobs, timeout, options.simulation, [&](SweepRow row) {
    row.scenario = scenario;
    append_row(csv_out, csv, jsonl_out, jsonl, row);
    unsuccessful += row.status != "ok";
    rows.push_back(std::move(row));
    progress.update(++finished, unsuccessful);
  });
  csv_out.close();
  jsonl_out.close();
  // Complete: the same rows, sorted, so that a sweep's files do not depend on finishing order.
  write_rows(csv, jsonl, keys, rows);
  std::sort(rows.begin(), rows.end(), [](const SweepRow& a, const SweepRow& b) { return a.index < b.index; });
  const std::string plots = write_plots(csv, scenario, rows, colour_by);
  std::size_t ok = 0, invalid = 0, failed = 0, fit = 0;
  for (const SweepRow& row : rows) {
    ok += row.status == "ok";
    invalid += row.status == "invalid";
    failed += row.status == "failed";
    fit += row.status == "ok" && row.fits;
  }
  std::cout << "trainsim: " << rows.size() << " configurations: " << ok << " simulated (" << fit << " fit), " << invalid
            << " invalid, " << failed << " failed; results in " << csv.string() << " and " << jsonl.string() << ", plots in "
            << plots << '\n';
  return 0;
}

} // namespace trainsim::cli
