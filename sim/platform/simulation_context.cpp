#include "platform/simulation_context.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include <sys/wait.h>
#include <unistd.h>

#include <simgrid/s4u.hpp>
#include <xbt/log.h>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"

namespace sg4 = simgrid::s4u;

namespace trainsim {

namespace {

// The process's engine and the argc/argv it was given, which it may keep pointers into.
struct StartedEngine {
  std::string program = "trainsim";
  std::vector<char*> argv{program.data(), nullptr};
  int argc = 1;
  std::unique_ptr<sg4::Engine> engine;
};

} // namespace

struct SimulationContext::Impl : StartedEngine {};

const std::vector<std::string>& default_network_config() {
  // SimGrid's default LV08 model is calibrated for TCP over Ethernet: its latency factor,
  // bandwidth factor, cross-traffic and TCP window would distort NVLink and InfiniBand. Its lazy
  // update of network actions made the sharing depend on the order in which flows start at one
  // instant (ranks settling ops ahead of the clock post them in another order than when every op
  // is simulated: two sends on one node ended 0.1 ms apart); the full update does not, and was
  // no slower here (GPT-3 175B on 1,024 GPUs, fast fidelity: 28 s of replay against 36 s).
  static const std::vector<std::string> settings = {"network/model:CM02", "network/crosstraffic:0",
                                                    "network/TCP-gamma:0", "network/optim:Full"};
  return settings;
}

namespace {

// A size or bandwidth property of a host or disk; InputError naming it when malformed.
double quantity_property(const std::string& file, const std::string& owner, const char* key, const char* value,
                         double (*parse)(std::string_view)) {
  try {
    const double quantity = parse(value);
    if (!(quantity > 0))
      throw UnitError("not positive");
    return quantity;
  } catch (const UnitError& error) {
    throw InputError(file + ": " + owner + ": " + key + " '" + value + "': " + error.what());
  }
}

// Each GPU's node CPU (role=cpu, same node), the NVMe drive that serves it and the node's DRAM
// and NVMe capacities.
void attach_node_hosts(const std::string& file, const std::vector<sg4::Host*>& hosts, std::vector<GpuInfo>& gpus) {
  std::map<std::string, const sg4::Host*> cpu_of_node;
  for (const sg4::Host* host : hosts) {
    const char* role = host->get_property("role");
    if (role == nullptr || std::string(role) != "cpu")
      continue;
    const char* node = host->get_property("node");
    cpu_of_node.emplace(node ? node : host->get_englobing_zone()->get_name(), host);
  }
  std::map<std::string, int> seen_in_node;
  for (GpuInfo& gpu : gpus) {
    const int local = seen_in_node[gpu.node]++;
    const auto found = cpu_of_node.find(gpu.node);
    if (found == cpu_of_node.end())
      continue;
    const sg4::Host* cpu = found->second;
    if (!(cpu->get_speed() > 0))
      throw InputError(file + ": host " + cpu->get_name() + " (the CPU of node " + gpu.node +
                       "): speed must be positive; accepted: a speed such as 2Tf");
    gpu.cpu_host = cpu->get_name();
    if (const char* dram = cpu->get_property("dram_capacity"))
      gpu.host_memory_capacity = quantity_property(file, "host " + cpu->get_name(), "dram_capacity", dram, parse_bytes);
    const std::vector<sg4::Disk*> disks = cpu->get_disks();
    if (disks.empty())
      continue;
    gpu.nvme_disk = disks[static_cast<std::size_t>(local) % disks.size()]->get_name();
    for (const sg4::Disk* disk : disks) {
      if (!(disk->get_read_bandwidth() > 0) || !(disk->get_write_bandwidth() > 0))
        throw InputError(file + ": disk " + disk->get_name() + " of host " + cpu->get_name() +
                         ": read_bw and write_bw must be positive; accepted: bandwidths such as 6.8GBps");
      if (const char* size = disk->get_property("size"))
        gpu.nvme_capacity += quantity_property(file, "disk " + disk->get_name(), "size", size, parse_bytes);
    }
  }
}

} // namespace

namespace {

void apply_log_setting(const std::string& setting) { xbt_log_control_set(setting.c_str()); }

void apply_config_setting(const std::string& setting) {
  if (setting.find(':') == std::string::npos)
    throw InputError("--sg-cfg " + setting + ": expected key:value, e.g. --sg-cfg network/model:LV08");
  try {
    sg4::Engine::set_config(setting);
  } catch (const std::exception& error) {
    const std::string message = error.what();
    throw InputError("--sg-cfg " + setting + ": " + message.substr(0, message.find('\n')) +
                     " (see SimGrid's --help-cfg for the accepted keys)");
  }
}

// Starts the engine and applies the settings in the order a run needs them, announcing each
// user setting before it is tried.
void start_engine(StartedEngine& started, const SimulationOptions& options,
                  const std::function<void(const std::string&)>& announce) {
  started.engine = std::make_unique<sg4::Engine>(&started.argc, started.argv.data());
  // Configuration messages would clutter every run, and the replay reports a deadlock in one
  // line where SimGrid's engine lists the blocked actors (its levels cannot be turned off, so it
  // writes nowhere); --sg-log can turn them back on (ker_engine.app:file:/dev/stderr).
  apply_log_setting("xbt_cfg.thres:warning");
  apply_log_setting("ker_engine.app:file:/dev/null");
  for (const std::string& setting : options.sg_log) {
    announce("--sg-log " + setting);
    apply_log_setting(setting);
  }
  for (const std::string& setting : default_network_config())
    sg4::Engine::set_config(setting);
  for (const std::string& setting : options.sg_cfg) {
    announce("--sg-cfg " + setting);
    apply_config_setting(setting);
  }
}

// What SimGrid said before it gave up: its first line, without the source location, time and
// category ("./src/xbt/log.cpp:368: [root/CRITICAL] Invalid control string 'x'").
std::string simgrid_reason(const std::string& output) {
  for (std::string line : split(output, '\n')) {
    const auto category = line.find("/CRITICAL] ");
    if (category != std::string::npos)
      line = line.substr(category + 11);
    line = trim(line);
    if (!line.empty())
      return line;
  }
  return "refused by SimGrid";
}

} // namespace

void check_simulation_options(const SimulationOptions& options) {
  if (options.sg_cfg.empty() && options.sg_log.empty())
    return;
  int output[2];
  if (::pipe(output) != 0)
    throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
  const pid_t child = ::fork();
  if (child < 0)
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (child == 0) {
    // Each setting is announced before it is tried: the last announced is the one refused.
    ::close(output[0]);
    ::dup2(output[1], STDERR_FILENO);
    const auto announce = [](const std::string& option) {
      const std::string line = "\x1e" + option + "\n";
      if (::write(STDERR_FILENO, line.data(), line.size()) < 0)
        ::_exit(4);
    };
    try {
      StartedEngine started;
      start_engine(started, options, announce);
    } catch (const std::exception& error) {
      const std::string line = std::string(error.what()) + "\n";
      if (::write(STDERR_FILENO, line.data(), line.size()) < 0)
        ::_exit(4);
      ::_exit(1);
    }
    ::_exit(0);
  }
  ::close(output[1]);
  std::string said;
  char buffer[4096];
  for (ssize_t n; (n = ::read(output[0], buffer, sizeof buffer)) != 0;)
    if (n > 0)
      said.append(buffer, static_cast<std::size_t>(n));
    else if (errno != EINTR)
      break;
  ::close(output[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return;
  const auto last = said.rfind('\x1e');
  if (last == std::string::npos)
    throw std::runtime_error("SimGrid could not start: " + simgrid_reason(said));
  const auto end = said.find('\n', last);
  const std::string option = said.substr(last + 1, end - last - 1);
  const std::string reason = simgrid_reason(said.substr(end + 1));
  // apply_config_setting's own message names the option already.
  if (reason.rfind(option + ": ", 0) == 0)
    throw InputError(reason);
  throw InputError(option + ": " + reason + " (see SimGrid's " +
                   (option.rfind("--sg-log", 0) == 0 ? "--help-logs" : "--help-cfg") + ")");
}

SimulationContext::SimulationContext(const SimulationOptions& options) : impl_(std::make_unique<Impl>()) {
  start_engine(*impl_, options, [](const std::string&) {});
}

SimulationContext::~SimulationContext() = default;

std::vector<GpuInfo> SimulationContext::load_platform(const std::filesystem::path& file) {
  const std::string name = file.string();
  if (!std::filesystem::is_regular_file(file))
    throw InputError(name + ": no such platform file");
  try {
    impl_->engine->load_platform(name);
  } catch (const std::exception& error) {
    const std::string message = error.what();
    throw InputError(name + ": " + message.substr(0, message.find('\n')));
  }
  platform_file_ = file;

  for (const sg4::Link* link : impl_->engine->get_all_links()) {
    if (!(link->get_bandwidth() > 0) || !std::isfinite(link->get_bandwidth()))
      throw InputError(name + ": link " + link->get_name() + " has bandwidth " + format_double(link->get_bandwidth()) +
                       " B/s; accepted: a positive bandwidth such as 25GBps");
    if (!(link->get_latency() >= 0) || !std::isfinite(link->get_latency()))
      throw InputError(name + ": link " + link->get_name() + " has a negative latency; accepted: 0 or more, e.g. 1us");
  }
  std::vector<sg4::Host*> hosts = impl_->engine->get_all_hosts();
  std::sort(hosts.begin(), hosts.end(),
            [](const sg4::Host* a, const sg4::Host* b) { return natural_less(a->get_name(), b->get_name()); });
  std::vector<GpuInfo> gpus;
  for (const sg4::Host* host : hosts) {
    const char* model = host->get_property("gpu");
    if (model == nullptr)
      continue;
    // A GPU's node is its zone, unless a `node` property says otherwise (platforms that give each
    // GPU its own zone to route it by rail).
    const char* node = host->get_property("node");
    GpuInfo gpu = gpu_from_properties(name, host->get_name(), node ? node : host->get_englobing_zone()->get_name(),
                                      host->get_speed(), [host](const char* key) { return host->get_property(key); });
    gpus.push_back(std::move(gpu));
  }
  attach_node_hosts(name, hosts, gpus);
  if (gpus.empty())
    throw InputError(name + ": no GPU hosts; a GPU is a <host> with a <prop id=\"gpu\" value=\"MODEL\"/> "
                            "and the properties hbm_capacity, hbm_bandwidth, peak_fp32, peak_tf32, peak_fp16, peak_bf16");
  spdlog::info("platform {}: {} GPUs ({}), {} hosts in all", name, gpus.size(), gpus.front().model, hosts.size());
  return gpus;
}

} // namespace trainsim
