// trainsim import torchtitan: a torchtitan job TOML as scenario keys.
#include "config/import_support.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <vector>

namespace trainsim {
namespace {

using namespace import_detail;

// torchtitan's pipeline schedules (torch.distributed.pipelining names) that trainsim runs, with
// their stages per rank (multi-stage schedules take two unless layers per stage are given).
struct TorchtitanSchedule {
  const char* name;
  const char* schedule;
  bool multi_stage;
};
constexpr TorchtitanSchedule torchtitan_schedules[] = {{"1F1B", "1f1b", false},
                                                       {"GPipe", "gpipe", false},
                                                       {"Interleaved1F1B", "interleaved", true},
                                                       {"ZBVZeroBubble", "zb-v", true},
                                                       {"DualPipeV", "dualpipev", true}};

// The layers of each of `stages` pipeline stages as torchtitan splits them
// (generate_llm_fqn_per_model_part): the embedding and the head count as `first_less` and
// `last_less` layers of the first and last stage, the total spread evenly, the first stages taking
// one more when it does not divide.
std::vector<long long> torchtitan_stage_layers(long long layers, long long stages, long long first_less,
                                               long long last_less) {
  const long long effective = layers + first_less + last_less;
  std::vector<long long> split;
  for (long long stage = 0; stage < stages; ++stage)
    split.push_back(effective / stages + (stage < effective % stages ? 1 : 0) - (stage == 0 ? first_less : 0) -
                    (stage == stages - 1 ? last_less : 0));
  return split;
}

void import_torchtitan_parallelism(const FieldReader& in, ImportWorld world, long long model_layers,
                                   ImportedScenario& out) {
  const std::string p = "parallelism.";
  const long long most = max_ranks;
  const long long replicate = in.whole_or(p + "data_parallel_replicate_degree", 1, 1, most),
                  tp = in.whole_or(p + "tensor_parallel_degree", 1, 1, most),
                  pp = in.whole_or(p + "pipeline_parallel_degree", 1, 1, most),
                  cp = in.whole_or(p + "context_parallel_degree", 1, 1, most),
                  ep = in.whole_or(p + "expert_parallel_degree", 1, 1, most);
  long long shard = in.whole_or(p + "data_parallel_shard_degree", -1, -1, most);
  if (shard == 0)
    in.fail(p + "data_parallel_shard_degree", "0; accepted: -1 (the GPUs left over) or a degree >= 1");
  const int gpus = job_world(world, 0, "");
  const long long others = product({replicate, tp, pp, cp});
  if (shard == -1) {
    if (others > gpus || gpus % others != 0)
      in.fail(p + "data_parallel_replicate_degree", std::to_string(replicate) + " x tensor " + std::to_string(tp) +
                                                       " x pipeline " + std::to_string(pp) + " x context " +
                                                       std::to_string(cp) + " does not divide the " +
                                                       std::to_string(gpus) + " GPUs");
    shard = gpus / others;
  } else if (product({shard, others}) != gpus) {
    in.fail(p + "data_parallel_shard_degree", "the degrees multiply to " + std::to_string(product({shard, others})) +
                                                  ", not the " + std::to_string(gpus) + " GPUs; accepted: -1, or --gpus " +
                                                  "as their product");
  }
  // torchtitan shards over the data-parallel and context-parallel ranks together.
  if (replicate > 1 && (shard > 1 || cp > 1))
    in.fail(p + "data_parallel_replicate_degree", "HSDP (shards replicated) is not simulated; accepted: 1 with "
                                                  "sharding or context parallelism, or > 1 alone (DDP)");
  if (replicate > 1 && (tp > 1 || pp > 1))
    in.fail(p + "data_parallel_replicate_degree", "torchtitan's DDP runs without other parallelism; accepted: 1 with "
                                                  "tensor or pipeline parallelism");
  out.set("parallel.dp", std::to_string(replicate * shard), shard > 1 ? "data_parallel_shard_degree" : "data_parallel_replicate_degree");
  if (tp > 1) {
    out.set("parallel.tp", std::to_string(tp), "tensor_parallel_degree");
    out.set("parallel.sp", "true", "torchtitan's tensor-parallel plan splits the norms' sequence");
  }
  if (cp > 1)
    out.set("parallel.cp", std::to_string(cp), "context_parallel_degree");
  if (ep > 1)
    out.set("parallel.ep", std::to_string(ep), "expert_parallel_degree");
  if (ep > 1)
    out.set("parallel.etp", std::to_string(in.whole_or(p + "expert_tensor_parallel_degree", 1, 1, most)),
            in.find(p + "expert_tensor_parallel_degree") ? "expert_tensor_parallel_degree" : "torchtitan's default, 1");
  // FSDP2 over the sharding (and context-parallel) ranks; DDP when only replicated.
  const bool fsdp = shard > 1 || cp > 1;
  out.set("training.framework", fsdp ? "fsdp2" : "ddp",
          shard > 1 ? "data_parallel_shard_degree > 1: FSDP2"
          : fsdp    ? "context_parallel_degree > 1: FSDP2 over the context-parallel ranks"
                    : "data_parallel_shard_degree = 1: DDP");
  out.set("memory.zero", fsdp ? "3" : "0", fsdp ? "FSDP2 shards parameters, gradients and optimizer states" : "DDP");
  const std::string reshard = in.text(p + "fsdp_reshard_after_forward", "default");
  if (reshard == "never" || (reshard != "default" && reshard != "always"))
    in.fail(p + "fsdp_reshard_after_forward", "\"" + reshard + "\"" +
                                                  (reshard == "never" ? ": parameters kept gathered from forward to backward "
                                                                        "are not simulated"
                                                                      : "") +
                                                  "; accepted: default, always");
  if (in.flag(p + "enable_async_tensor_parallel", false))
    out.left_out.push_back("parallelism.enable_async_tensor_parallel: async tensor parallelism is not simulated: its "
                           "communication is as without it");
  if (cp > 1)
    out.left_out.push_back("parallelism.context_parallel_rotate_method: trainsim passes K/V around a ring");
  if (pp == 1)
    return;
  out.set("parallel.pp", std::to_string(pp), "pipeline_parallel_degree");
  const std::string name = in.text(p + "pipeline_parallel_schedule", "1F1B");
  const auto* schedule = std::find_if(std::begin(torchtitan_schedules), std::end(torchtitan_schedules),
                                      [&](const TorchtitanSchedule& s) { return name == s.name; });
  if (schedule == std::end(torchtitan_schedules))
    in.fail(p + "pipeline_parallel_schedule", "\"" + name + "\" is not simulated; accepted: 1F1B, GPipe, Interleaved1F1B, "
                                                            "ZBVZeroBubble, DualPipeV");
  out.set("parallel.schedule", schedule->schedule, "pipeline_parallel_schedule " + name);
  if (in.find(p + "pipeline_parallel_split_points") && !in.find(p + "pipeline_parallel_split_points")->empty())
    in.fail(p + "pipeline_parallel_split_points", "split points by module name are not read; accepted: "
                                                  "pipeline_parallel_layers_per_stage, or neither");
  long long stages = pp * (schedule->multi_stage ? 2 : 1);
  std::string stages_source = schedule->multi_stage ? "two stages per rank (torchtitan's default)" : "one stage per rank";
  const long long first_less = in.whole_or(p + "pipeline_parallel_first_stage_less_layers", 1, 0),
                  last_less = in.whole_or(p + "pipeline_parallel_last_stage_less_layers", 1, 0);
  if (in.find(p + "pipeline_parallel_layers_per_stage")) {
    const long long per_stage = in.whole(p + "pipeline_parallel_layers_per_stage", 1);
    stages = (model_layers + first_less + last_less + per_stage - 1) / per_stage;
    stages_source = "pipeline_parallel_layers_per_stage";
    if (stages % pp != 0 || (!schedule->multi_stage && stages != pp))
      in.fail(p + "pipeline_parallel_layers_per_stage", "gives " + std::to_string(stages) + " stages for " +
                                                            std::to_string(pp) + " pipeline ranks, which " + name +
                                                            " cannot run");
  }
  if (stages > pp)
    out.set("parallel.vpp", std::to_string(stages / pp), stages_source);
  std::vector<std::string> split;
  for (long long layers : torchtitan_stage_layers(model_layers, stages, first_less, last_less))
    split.push_back(std::to_string(layers));
  out.set("parallel.layers_per_stage", join(split, ","),
          "torchtitan's split: the embedding and the head count as a layer each");
}

void import_torchtitan_training(const FieldReader& in, ImportedScenario& out) {
  const long long dp = std::stoll(out.value_of("parallel.dp"));
  const bool pipelined = !out.value_of("parallel.pp").empty();
  // Older torchtitan says training.batch_size for the local batch.
  const std::string local_field = in.find("training.local_batch_size") ? "training.local_batch_size" : "training.batch_size";
  const bool local_given = in.find(local_field);
  const long long local = in.whole_or(local_field, 8, 1);
  long long global = in.whole_or("training.global_batch_size", -1, -1);
  if (product({local, dp}) > max_count)
    in.fail(local_field, "x the data-parallel degree is more than " + std::to_string(max_count) + " sequences");
  if (global == -1 || global == 0)
    global = local * dp;
  else if (global % (local * dp) != 0)
    in.fail("training.global_batch_size", std::to_string(global) + " is not a multiple of " + local_field + " " +
                                              std::to_string(local) + " x data-parallel degree " + std::to_string(dp));
  long long micro = local;
  std::string micro_source = local_given ? local_field : "torchtitan's default local batch, 8";
  if (pipelined) {
    micro = in.whole_or("parallelism.pipeline_parallel_microbatch_size", 1, 1);
    micro_source = "parallelism.pipeline_parallel_microbatch_size";
    if (local % micro != 0)
      in.fail("parallelism.pipeline_parallel_microbatch_size", std::to_string(micro) + " does not divide " + local_field +
                                                                   " " + std::to_string(local));
    if (global > local * dp)
      out.left_out.push_back("training.global_batch_size: torchtitan drains the pipeline after each local batch; "
                             "trainsim runs the step's micro-batches through one pipeline");
  }
  out.set("training.micro_batch", std::to_string(micro), micro_source);
  out.set("training.global_batch", std::to_string(global),
          in.find("training.global_batch_size") && global != local * dp ? "training.global_batch_size"
                                                                         : micro_source + " x data-parallel degree");
  const long long seq = in.whole_or("training.seq_len", 2048, 1);
  out.set("training.seq_len", std::to_string(seq), in.find("training.seq_len") ? "training.seq_len" : "torchtitan's default");
  const long long steps = in.whole_or("training.steps", 10000, 1);
  out.set("training.tokens", format_double(static_cast<double>(steps) * global * seq), "training.steps x global batch x seq_len");
  if (in.flag("training.enable_cpu_offload", false))
    in.fail("training.enable_cpu_offload", "FSDP2's CPU offload is not simulated (offload is DeepSpeed's); accepted: false");
  // Older torchtitan says training.compile; newer a [compile] table.
  if (in.flag("training.compile", false) || in.flag("compile.enable", false))
    out.left_out.push_back(std::string(in.find("compile.enable") ? "compile.enable" : "training.compile") +
                           ": torch.compile's kernel fusion is not simulated: elementwise kernels are timed as in "
                           "eager mode");
  if (in.text("training.dtype", "float32") != "float32")
    in.fail("training.dtype", "\"" + in.text("training.dtype", "") + "\": parameters kept in 16 bits without fp32 master "
                                                                       "weights are not simulated; accepted: float32");
  const std::string optimizer = in.text("optimizer.name", "AdamW");
  if (optimizer != "AdamW" && optimizer != "Adam")
    in.fail("optimizer.name", "\"" + optimizer + "\": its states and step are not simulated; accepted: AdamW, Adam");
}

// Precision: the model's converters (float8 swaps the linear layers for fp8 GEMMs), the parameters'
// mixed precision, the reductions' (fp32).
void import_torchtitan_precision(const FieldReader& in, ImportedScenario& out) {
  std::vector<std::string> converters;
  if (const json* listed = in.find("model.converters")) {
    if (listed->is_string())
      converters = split(listed->get<std::string>(), ',');
    else if (listed->is_array())
      for (const json& item : *listed)
        converters.push_back(item.is_string() ? item.get<std::string>() : item.dump());
    else
      in.fail("model.converters", listed->dump() + " is not a list of names");
  }
  bool float8 = false;
  for (const std::string& converter : converters) {
    if (trim(converter) == "float8")
      float8 = true;
    else if (!trim(converter).empty())
      in.fail("model.converters", "\"" + trim(converter) + "\" is not simulated; accepted: float8");
  }
  const std::string param = in.text("training.mixed_precision_param", "bfloat16");
  if (param != "bfloat16" && param != "float32")
    in.fail("training.mixed_precision_param", "\"" + param + "\"; accepted: bfloat16, float32");
  // Mixed precision comes with FSDP (fully_shard's policy) or, alone, DDP (autocast); with tensor
  // or pipeline parallelism and neither, torchtitan trains in fp32 (maybe_enable_amp).
  const bool fsdp = out.value_of("training.framework") == "fsdp2";
  const bool plain = !out.value_of("parallel.tp").empty() || !out.value_of("parallel.pp").empty();
  const bool mixed = param == "bfloat16" && (fsdp || !plain);
  out.set("memory.precision", float8 ? "fp8" : mixed ? "bf16" : "fp32",
          float8  ? "model.converters float8"
          : mixed || param == "float32" ? "training.mixed_precision_param " + param
                                        : "no mixed precision without FSDP under tensor or pipeline parallelism");
  const std::string reduce = in.text("training.mixed_precision_reduce", "float32");
  if (reduce != "float32" && reduce != "bfloat16")
    in.fail("training.mixed_precision_reduce", "\"" + reduce + "\"; accepted: float32, bfloat16");
  out.set("memory.grad_precision", reduce == "float32" ? "fp32" : "bf16", "training.mixed_precision_reduce " + reduce);
  if (out.value_of("training.framework") == "ddp" && param == "bfloat16")
    out.left_out.push_back("training.mixed_precision_param: under DDP torchtitan autocasts fp32 parameters; simulated "
                           "as bf16 weights beside fp32 master weights");
}

// activation_checkpoint: none, full, or selective by op or every Nth layer (torchtitan's default:
// selective, every second layer).
void import_torchtitan_recompute(const FieldReader& in, ImportedScenario& out) {
  const std::string mode = in.text("activation_checkpoint.mode", "selective");
  const bool given = in.find("activation_checkpoint.mode");
  if (mode == "none" || mode == "full") {
    out.set("memory.recompute", mode, "activation_checkpoint.mode");
    return;
  }
  if (mode != "selective")
    in.fail("activation_checkpoint.mode", "\"" + mode + "\"; accepted: none, selective, full");
  std::string option = "2";
  if (const json* value = in.find("activation_checkpoint.selective_ac_option"))
    option = value->is_string() ? value->get<std::string>() : value->dump();
  const bool option_given = in.find("activation_checkpoint.selective_ac_option");
  const std::string source = (given ? "activation_checkpoint.mode selective" : "torchtitan's default mode, selective") +
                             std::string(", ") +
                             (option_given ? "selective_ac_option " + option : "selective_ac_option 2 (the default)");
  if (option == "op") {
    out.set("memory.recompute", "op", source);
    return;
  }
  long long period = 0;
  if (!parse_integer(option, period) || period < 1)
    in.fail("activation_checkpoint.selective_ac_option", "\"" + option + "\"; accepted: op or a whole number of layers");
  out.set("memory.recompute", period == 1 ? "full" : "nth:" + std::to_string(period), source);
}

// The sections and keys with no effect on a step, and why; the rest of what is not read is listed
// as unknown.
const std::map<std::string, std::string>& torchtitan_fields_left_out() {
  static const std::string no_effect = "no effect on a step's time or memory";
  static const std::map<std::string, std::string> fields = {
      {"job", no_effect},  {"profiling", no_effect},  {"metrics", no_effect},
      {"lr_scheduler", no_effect}, {"comm", "timeouts and the flight recorder: " + no_effect},
      {"checkpoint", "checkpoint files: not part of a step"}, {"memory_estimation", no_effect},
      {"validation", "validation runs between steps: not part of a step"}, {"experimental", no_effect},
      {"float8", "float8's options (model.converters turns it on): FSDP gathers in the parameters' precision"},
      {"model.tokenizer_path", no_effect}, {"model.hf_assets_path", no_effect},
      {"model.print_after_conversion", no_effect}, {"optimizer.lr", no_effect}, {"optimizer.beta1", no_effect},
      {"optimizer.beta2", no_effect}, {"optimizer.eps", no_effect}, {"optimizer.weight_decay", no_effect},
      {"optimizer.implementation", "the optimizer step is timed as fused"},
      {"optimizer.early_step_in_backward", "the optimizer steps after backward"},
      {"training.dataset", no_effect}, {"training.dataset_path", no_effect}, {"training.max_norm", no_effect},
      {"training.gc_freq", no_effect}, {"training.gc_debug", no_effect}, {"training.seed", no_effect},
      {"training.deterministic", no_effect}, {"parallelism.disable_loss_parallel", no_effect},
      {"activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns", no_effect},
      {"compile.components", "what torch.compile compiles: its fusion is not simulated"}};
  return fields;
}

// Why a setting is not carried over: its own entry, else its table's ("" for none).
std::string torchtitan_reason(const std::string& path) {
  const auto& reasons = torchtitan_fields_left_out();
  for (std::string at = path;; at = at.substr(0, at.rfind('.'))) {
    if (const auto found = reasons.find(at); found != reasons.end())
      return found->second;
    if (at.find('.') == std::string::npos)
      return "";
  }
}

} // namespace

std::string torchtitan_model(const nlohmann::json& config, const std::string& name) {
  if (!config.is_object())
    throw InputError(name + ": not a table of settings; accepted: a torchtitan job TOML");
  const FieldReader in(config, name, true);
  static const std::map<std::string, std::string> catalog = {
      {"llama3 8B", "llama3-8b"}, {"llama3 70B", "llama3-70b"}, {"llama3 405B", "llama3-405b"},
      {"deepseek_v3 671B", "deepseek-v3"}};
  const auto found = catalog.find(in.text("model.name", "llama3") + " " + in.text("model.flavor", "debugmodel"));
  return found == catalog.end() ? "" : found->second;
}

ImportedScenario import_torchtitan(const nlohmann::json& config, const std::string& name, ImportWorld world,
                                   long long model_layers) {
  if (!config.is_object())
    throw InputError(name + ": not a table of settings; accepted: a torchtitan job TOML");
  const FieldReader in(config, name, true);
  ImportedScenario out;
  in.text("model.name", "");  // read by torchtitan_model
  in.text("model.flavor", "");
  import_torchtitan_parallelism(in, world, model_layers, out);
  import_torchtitan_precision(in, out);
  import_torchtitan_recompute(in, out);
  import_torchtitan_training(in, out);
  for (const std::string& line : in.unread(torchtitan_reason))
    out.left_out.push_back(line);
  return out;
}

} // namespace trainsim
