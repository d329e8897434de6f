#include "run/prepared_run.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <numeric>

#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "model/routing.hpp"
#include "program/workload_builder.hpp"

namespace trainsim {
namespace {

std::string work_note;  // see work_in_progress()

// The layout as the reports name it: "dp=2 tp=4+sp pp=2x2 cp=1 (interleaved), ZeRO-1".
std::string layout_label(const Scenario& scenario, const ModelStatePlan& states) {
  const ParallelSizes sizes{scenario.dp, scenario.tp, scenario.pp, scenario.vpp, scenario.cp, scenario.sp, scenario.ep, scenario.etp};
  return sizes.label() + (scenario.pp > 1 ? " (" + std::string(to_string(scenario.schedule)) + ")" : "") +
         (states.label().empty() ? "" : ", " + states.label());
}

// "megatron: gradients reduced all at once after the schedule's last backward; kernels 18.9% slower
// beside communication".
std::string framework_label(const Scenario& scenario) {
  std::string label = std::string(to_string(scenario.framework)) + ": ";
  const bool all_at_once = scenario.bucket_bytes == std::numeric_limits<double>::max();
  if (scenario.bucket_per_layer)
    label += "each layer's gradients reduced";
  else if (all_at_once)
    label += "gradients reduced all at once";
  else
    label += "gradients reduced in buckets of " + format_bytes(scenario.bucket_bytes);
  if (scenario.overlap_grad_reduce)
    label += " during backward";
  else if (scenario.pp > 1)
    label += " after the pipeline schedule's last backward";
  else
    label += all_at_once ? " after backward" : ", the compute stream waiting for each";
  if (scenario.overlap_param_gather)
    label += "; updated parameters gathered during the next forward";
  if (scenario.tp_comm_overlap)
    label += "; tensor-parallel communication in chunks beside the GEMMs";
  char slowdown[64];
  std::snprintf(slowdown, sizeof slowdown, "; kernels %.1f%% slower beside communication", 100 * scenario.comm_slowdown);
  return label + slowdown;
}

// "zipf:1.2, dropless: the experts of ep rank 0 of each group compute 3.43x an even share of the
// token copies (the busiest)" (under a routing file of a row per layer, the busiest place of the
// busiest layer, and the copies dropped over all layers); empty under even routing.
std::string routing_label(const Scenario& scenario, const ModelSpec& model) {
  if (!model.moe() || scenario.routing.uniform())
    return "";
  const long long layers = routing_per_layer(scenario.routing) ? static_cast<long long>(scenario.routing.layer_loads.size()) : 1;
  double kept = 0, busiest_load = -1;
  long long busiest = 0, busiest_layer = 0;
  for (long long layer = 0; layer < layers; ++layer) {
    const std::vector<double> shares = expert_shares(scenario.routing, model.experts, model.experts_per_token, layer);
    const std::vector<double> load = place_shares(shares, scenario.ep);
    kept += std::accumulate(shares.begin(), shares.end(), 0.0) / static_cast<double>(layers);
    const auto place = std::max_element(load.begin(), load.end()) - load.begin();
    if (load[static_cast<std::size_t>(place)] > busiest_load * (1 + 1e-12)) {
      busiest_load = load[static_cast<std::size_t>(place)];
      busiest = place;
      busiest_layer = layer;
    }
  }
  std::string label = !scenario.routing.layer_loads.empty() ? "file:" + scenario.routing.file.filename().string()
                      : scenario.routing.zipf > 0          ? "zipf:" + format_double(scenario.routing.zipf)
                                                            : "uniform";
  char text[160];
  if (scenario.routing.capacity_factor > 0)
    std::snprintf(text, sizeof text, ", capacity %sx: %.1f%% of the token copies dropped",
                  format_double(scenario.routing.capacity_factor).c_str(), 100 * (1 - kept));
  else
    std::snprintf(text, sizeof text, ", dropless");
  label += text;
  if (scenario.ep > 1) {
    std::snprintf(text, sizeof text, "; the experts of place %d of each ep group compute %.2fx an even share (the busiest)",
                  static_cast<int>(busiest), busiest_load * scenario.ep);
    label += text;
    if (layers > 1) {
      long long layer = -1;  // the model's layer: the busiest_layer-th with experts
      for (long long expert_layer = -1; expert_layer < busiest_layer;)
        if (std::find(model.dense_layers.begin(), model.dense_layers.end(), ++layer) == model.dense_layers.end())
          ++expert_layer;
      label += " in layer " + std::to_string(layer);
    }
  }
  return label;
}

RunInfo run_info(const Scenario& scenario, const WorkloadBuild& build) {
  RunInfo run;
  run.name = scenario.name;
  run.platform = scenario.cluster ? "generated " + describe(*scenario.cluster) : scenario.platform_file.filename().string();
  run.settings = scenario.settings;
  run.layout = layout_label(scenario, build.states);
  run.framework = framework_label(scenario);
  if (!scenario.calibration.file.empty()) {
    run.calibration = scenario.calibration.file.string() + " (fitted on " + scenario.calibration.gpu + ")";
    for (const std::string& key : scenario.calibration.keys)
      run.calibration += (key == scenario.calibration.keys.front() ? ": " : ", ") + key + " " + scenario.settings.at(key);
  }
  run.coords = build.coords;
  run.micro_batch = scenario.micro_batch;
  run.grad_accum = scenario.grad_accum;
  run.global_batch = scenario.global_batch;
  run.seq_len = scenario.seq_len;
  run.training_tokens = scenario.tokens;
  run.recompute = build.recompute;
  run.recompute_flops_per_step = build.recompute_flops * static_cast<double>(scenario.grad_accum);
  return run;
}

void require_fp8_support(const Scenario& scenario, const GpuInfo& gpu) {
  if (scenario.precision == Precision::fp8 && gpu.peak_fp8 <= 0)
    throw InputError(scenario.platform_file.string() + ": memory.precision = fp8 needs GPUs with a 'peak_fp8' property; " +
                     gpu.host + " (" + gpu.model + ") has none");
}

} // namespace

const std::string& work_in_progress() { return work_note; }

void note_work(const std::string& doing) { work_note = " " + doing; }

std::string program_scale(const Workload& workload) {
  std::size_t most_ops = 0;
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank)
    most_ops = std::max(most_ops, workload.program(rank).ops.size());
  return std::to_string(workload.ranks()) + " ranks of up to " + std::to_string(most_ops) + " ops";
}

PreparedRun read_scenario(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  PreparedRun prepared;
  prepared.scenario = load_scenario(file, overrides);
  prepared.model = load_model(prepared.scenario.model_file, prepared.scenario.vocab_multiple, prepared.scenario.mtp_layers);
  return prepared;
}

std::vector<GpuInfo> gpus_for(std::vector<GpuInfo> gpus, const std::filesystem::path& platform, std::size_t ranks) {
  if (gpus.size() < ranks)
    throw InputError(platform.string() + ": the layout needs " + std::to_string(ranks) + " GPUs but the platform has " +
                     std::to_string(gpus.size()));
  gpus.resize(ranks);
  return gpus;
}

// Under expert parallelism, the experts each rank holds and, on the rank holding most of them
// (a pipeline's stages differ), their model states: "4 of 256 per expert layer on each rank, each
// also on 1 other rank; rank 16 holds the most: weights 1.32 GiB, gradients 2.64 GiB, optimizer
// 3.97 GiB" (with etp > 1 "(each split over 2 ranks by etp)" after "rank"); empty without expert
// parallelism.
std::string experts_label(const Scenario& scenario, const ModelSpec& model, const Workload& workload) {
  if (scenario.ep <= 1)
    return "";
  std::map<std::string, double> most;
  std::size_t rank_of_most = 0;
  double most_total = -1;
  std::set<const Program*> seen;  // each distinct program once (ranks share them)
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    const Program& program = workload.program(rank);
    if (!seen.insert(&program).second)
      continue;
    std::map<std::string, double> held;
    double total = 0;
    for (const Op& op : program.ops)
      if (op.kind == OpKind::alloc && op.device == Device::gpu && op.tensor.rfind("expert-", 0) == 0) {
        held[op.tensor.substr(7)] += op.bytes;
        total += op.bytes;
      }
    if (total > most_total) {
      most_total = total;
      most = held;
      rank_of_most = rank;
    }
  }
  const long long others = scenario.expert_data_parallel() - 1;  // ranks holding the same experts
  std::string label = std::to_string(model.experts / scenario.ep) + " of " + std::to_string(model.experts) +
                      " per expert layer on each rank" +
                      (scenario.etp > 1 ? " (each split over " + std::to_string(scenario.etp) + " ranks by etp)" : "") +
                      ", " +
                      (others == 0 ? std::string("on no other rank")
                                   : "each also on " + std::to_string(others) + " other rank" + (others > 1 ? "s" : "")) +
                      "; rank " + std::to_string(rank_of_most) + " holds the most:";
  const char* separator = " ";
  for (const char* state : {"weights", "gradients", "optimizer"}) {
    label += separator + std::string(state) + " " + format_bytes(most[state]);
    separator = ", ";
  }
  return label;
}

void build_programs(PreparedRun& prepared, std::vector<GpuInfo> platform_gpus) {
  const Scenario& scenario = prepared.scenario;
  prepared.platform_gpus = std::move(platform_gpus);
  prepared.gpus = gpus_for(prepared.platform_gpus, scenario.platform_file,
                           static_cast<std::size_t>(layout_of(scenario).world()));
  note_work("while building the programs of " + std::to_string(prepared.gpus.size()) + " ranks");
  require_fp8_support(scenario, prepared.gpus.front());
  require_calibration_for(scenario, prepared.gpus.front().model);
  double capacity = prepared.gpus.front().hbm_capacity;
  for (const GpuInfo& gpu : prepared.gpus)
    capacity = std::min(capacity, gpu.hbm_capacity);
  WorkloadBuild build = build_workload(scenario, prepared.model, capacity, node_numbers(prepared.gpus));
  prepared.workload = std::move(build.workload);
  validate_workload(prepared.workload, scenario.file.string());
  try {
    check_node_targets(prepared.workload, prepared.gpus);
  } catch (const InputError& error) {
    throw InputError(scenario.platform_file.string() + ": " + error.what());
  }
  note_work("with " + program_scale(prepared.workload));
  prepared.run = run_info(scenario, build);
  prepared.run.routing = routing_label(scenario, prepared.model);
  prepared.run.experts = experts_label(scenario, prepared.model, prepared.workload);
  spdlog::info("{}: {} ranks, {} ops per rank", scenario.name, prepared.workload.ranks(),
               prepared.workload.program(0).ops.size());
}

} // namespace trainsim
