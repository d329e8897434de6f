// trainsim collectives: nccl-tests on a simulated platform. One group of the platform's first N
// GPUs runs one collective per size, one after the other, as all_reduce_perf does; each call's
// time runs from the moment every member has arrived to its end on the first rank, and the table
// gives nccl-tests' algorithm and bus bandwidths beside the algorithm and protocol chosen.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "config/scenario.hpp"
#include "engine/replay.hpp"
#include "program/collective_plan.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace trainsim::cli {
namespace {

// The first rank's calls: when each one's data moved and how it ran.
class CallRecorder : public ReplayObserver {
public:
  struct Call {
    Transfer transfer;
    CommChoice choice;
  };
  void op_started(int, OpId, double) override {}
  void op_finished(int, OpId, double) override {}
  void op_transferred(int rank, OpId op, const Transfer& transfer) override {
    if (rank == 0)
      calls[op].transfer = transfer;
  }
  void collective_chosen(int rank, OpId op, const CommChoice& choice) override {
    if (rank == 0)
      calls[op].choice = choice;
  }
  std::map<OpId, Call> calls;
};

Collective collective_option(const std::string& text) {
  static const std::map<std::string, Collective> names = {{"all_reduce", Collective::all_reduce},
                                                          {"all_gather", Collective::all_gather},
                                                          {"reduce_scatter", Collective::reduce_scatter},
                                                          {"broadcast", Collective::broadcast},
                                                          {"all_to_all", Collective::all_to_all}};
  const auto found = names.find(text);
  if (found == names.end())
    throw InputError("--collective " + text + ": accepted: all_reduce, all_gather, reduce_scatter, broadcast, all_to_all");
  return found->second;
}

double size_option(const std::string& option, const std::string& text) {
  double bytes = 0;
  try {
    bytes = parse_bytes(text);
  } catch (const std::exception&) {  // parse_bytes says what is wrong with a unit; this says which option
    bytes = -1;
  }
  // Beyond a terabyte no collective of a training step; its flows' byte counts would overflow.
  constexpr double largest = 1024.0 * 1024 * 1024 * 1024;
  if (!(bytes >= 1) || !(bytes <= largest))
    throw InputError(option + " " + text + ": accepted: a size from 1 byte to 1TiB with its unit, such as 8B or 8GiB");
  return bytes;
}

// One program for every rank: the calls in order, each after the last.
Workload collectives_workload(Collective collective, int ranks, const std::vector<double>& sizes) {
  Workload workload;
  Group group{"all", "dp", {}};
  for (int rank = 0; rank < ranks; ++rank)
    group.ranks.push_back(rank);
  workload.groups.push_back(group);
  auto program = std::make_shared<Program>();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Op op;
    op.kind = OpKind::collective;
    op.stream = Stream::dp_comm;
    op.collective = collective;
    op.group = 0;
    op.bytes = sizes[i];
    op.name = format_bytes(sizes[i]);
    if (i > 0)
      op.deps.push_back(static_cast<OpId>(i - 1));
    program->add(op);
  }
  workload.programs.assign(static_cast<std::size_t>(ranks), program);
  return workload;
}

// "auto" is what a call without an NCCL algorithm or protocol has.
std::string shown(const std::string& name) { return name == "auto" ? "-" : name; }

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

} // namespace

int collectives_command(const std::vector<std::string>& arguments) {
  CommonOptions options;
  std::string platform, collective_text = "all_reduce", min_text = "8B", max_text = "8GiB", gpus_text = "all",
                        channels_text = "auto", fidelity = "flows";
  double factor = 2;
  CollectiveOptions collectives;
  po::options_description visible("Options");
  visible.add_options()("platform,p", po::value(&platform)->required(),
                        "SimGrid platform XML (a path or a file in platforms/)")(
      "gpus,g", po::value(&gpus_text)->default_value(gpus_text), "the platform's first N GPUs take part (all: every GPU)")(
      "collective,c", po::value(&collective_text)->default_value(collective_text),
      "all_reduce | all_gather | reduce_scatter | broadcast | all_to_all")(
      "min-bytes,b", po::value(&min_text)->default_value(min_text), "smallest size (all_gather: the gathered size, as nccl-tests)")(
      "max-bytes,e", po::value(&max_text)->default_value(max_text), "largest size")(
      "step-factor,f", po::value(&factor)->default_value(factor), "each size is the last times this")(
      "channels", po::value(&channels_text)->default_value(channels_text), "rings per collective (as comm.channels)")(
      "fidelity", po::value(&fidelity)->default_value(fidelity),
      "flows: every flow simulated | fast: timed analytically where comm.fidelity = fast would (as comm.fidelity)");
  visible.add(collective_options(collectives));
  visible.add(common_options(options));
  po::positional_options_description positional;
  if (!parse_arguments("collectives", arguments, visible, visible, positional,
                       "trainsim collectives --platform FILE [options]", options, false))
    return 0;
  const Collective collective = collective_option(collective_text);
  const double smallest = size_option("--min-bytes", min_text), largest = size_option("--max-bytes", max_text);
  if (largest < smallest)
    throw InputError("--max-bytes " + max_text + ": accepted: at least --min-bytes (" + min_text + ")");
  if (!(factor > 1) || !std::isfinite(factor))
    throw InputError("--step-factor: accepted: a number above 1, such as 2");
  const CommTuning tuning = comm_tuning_option(collectives);
  const int channels = channels_text == "auto" ? 0 : count_option("--channels", channels_text, 1, 64);
  if (fidelity != "flows" && fidelity != "fast")
    throw InputError("--fidelity " + fidelity + ": accepted: flows, fast");

  std::vector<double> sizes;
  for (double size = smallest; size <= largest * (1 + 1e-12); size *= factor)
    sizes.push_back(std::round(size));
  const fs::path platform_file = resolve_data_file(platform, "platforms", ".xml", ".", "--platform");
  SimulationContext context(options.simulation);
  const std::vector<GpuInfo> gpus = context.load_platform(platform_file);
  if (gpus.size() < 2)
    throw InputError(platform_file.string() + ": a collective needs at least 2 GPUs; the platform has " +
                     std::to_string(gpus.size()));
  const int ranks = gpus_text == "all" ? static_cast<int>(gpus.size())
                                       : count_option("--gpus", gpus_text, 2, static_cast<int>(gpus.size()));
  const Workload workload = collectives_workload(collective, ranks, sizes);
  ReplaySettings settings;
  settings.channels = channels;
  settings.tuning = tuning;
  settings.fast_collectives = fidelity == "fast";
  CallRecorder recorder;
  replay(context, workload, gpus, settings, recorder);

  std::set<std::string> nodes;
  for (int rank = 0; rank < ranks; ++rank)
    nodes.insert(gpus[rank].node);
  std::cout << collective_text << " on " << ranks << " " << gpus.front().model << " GPUs (" << nodes.size()
            << (nodes.size() == 1 ? " node" : " nodes") << ") of " << platform_file.filename().string()
            << (tuning.ideal ? ", ideal collectives" : ", NCCL's choices")
            << (settings.fast_collectives ? ", fast fidelity" : "") << "\n";
  std::vector<std::vector<std::string>> rows = {
      {"size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "algorithm", "protocol"}};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const CallRecorder::Call& call = recorder.calls.at(static_cast<OpId>(i));
    const double seconds = call.transfer.end - call.transfer.start;
    const double algbw = seconds > 0 ? sizes[i] / seconds / 1e9 : 0;
    rows.push_back({fixed(sizes[i], 0), fixed(seconds * 1e6, 1), fixed(algbw, 2),
               // nccl-tests' bus bandwidth: the algorithm bandwidth times the share of the data each rank
               // sends in an ideal ring.
               fixed(algbw * bytes_sent_per_rank(collective, 1.0, ranks), 2),
               shown(to_string(call.choice.algorithm)), shown(to_string(call.choice.protocol))});
  }
  std::cout << aligned_columns(rows, {true, true, true, true, false, false});
  return 0;
}

} // namespace trainsim::cli
