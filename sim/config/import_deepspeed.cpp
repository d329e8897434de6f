// trainsim import deepspeed: a DeepSpeed config JSON as scenario keys.
#include "config/import_support.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace trainsim {
namespace {

using namespace import_detail;

// DeepSpeed's batch arithmetic (DeepSpeedConfig._set_batch_related_parameters): any two of the
// three sizes give the third; one alone means no accumulation.
void import_batch(const FieldReader& in, ImportWorld world, ImportedScenario& out) {
  const bool has_batch = in.find("train_batch_size"), has_micro = in.find("train_micro_batch_size_per_gpu"),
             has_steps = in.find("gradient_accumulation_steps");
  if (!has_batch && !has_micro)
    in.fail("train_batch_size", "missing, and so is train_micro_batch_size_per_gpu; accepted: either or both");
  const long long batch = has_batch ? in.whole("train_batch_size", 1) : 0;
  const long long micro = has_micro ? in.whole("train_micro_batch_size_per_gpu", 1) : 0;
  const long long steps = has_steps ? in.whole("gradient_accumulation_steps", 1) : 0;
  int implied = 0;
  if (has_batch && has_micro && has_steps) {
    if (batch % (micro * steps) != 0)
      in.fail("train_batch_size", std::to_string(batch) + " is not train_micro_batch_size_per_gpu " +
                                      std::to_string(micro) + " x gradient_accumulation_steps " +
                                      std::to_string(steps) + " x a number of GPUs");
    implied = static_cast<int>(std::min<long long>(batch / (micro * steps), 1 << 30));
  }
  const int gpus = job_world(world, implied,
                             in.find("train_batch_size") && implied
                                 ? "train_batch_size " + std::to_string(batch) + " = " + std::to_string(micro) +
                                       " x " + std::to_string(steps) + " accumulation steps x GPUs"
                                 : std::string());
  long long micro_batch = micro, global = batch;
  if (has_batch && has_micro && !has_steps && batch % (micro * gpus) != 0)
    in.fail("train_batch_size", std::to_string(batch) + " is not train_micro_batch_size_per_gpu " +
                                    std::to_string(micro) + " x " + std::to_string(gpus) +
                                    " GPUs x the accumulation steps; give --gpus, or gradient_accumulation_steps");
  if (has_batch && !has_micro) {
    const long long per_step = (has_steps ? steps : 1) * gpus;
    if (batch % per_step != 0)
      in.fail("train_batch_size", std::to_string(batch) + " does not split into " + std::to_string(per_step) +
                                      " micro-batches (gradient_accumulation_steps x " + std::to_string(gpus) +
                                      " GPUs)");
    micro_batch = batch / per_step;
  }
  if (!has_batch)
    global = product({micro, has_steps ? steps : 1, gpus});
  if (global > max_count)
    in.fail("train_micro_batch_size_per_gpu", "gives a global batch of more than " + std::to_string(max_count) +
                                                  " sequences");
  out.set("parallel.dp", std::to_string(gpus),
          world.requested ? "--gpus" : implied ? "train_batch_size / (micro-batch x accumulation steps)" : "the cluster's GPUs");
  out.set("training.micro_batch", std::to_string(micro_batch),
          has_micro ? "train_micro_batch_size_per_gpu" : "train_batch_size / (accumulation steps x GPUs)");
  out.set("training.global_batch", std::to_string(global),
          has_batch ? "train_batch_size" : "train_micro_batch_size_per_gpu x accumulation steps x GPUs");
}

// fp16 / bf16 and the gradients' precision (DeepSpeedEngine.get_data_types: gradients are
// accumulated in the model's dtype, except under bf16 without ZeRO, where BF16_Optimizer keeps them
// in fp32, unless data_types.grad_accum_dtype says otherwise).
std::string import_precision(const FieldReader& in, int zero, ImportedScenario& out) {
  const bool fp16 = in.flag("fp16.enabled", false);
  const bool bf16 = in.flag("bf16.enabled", false) || in.flag("bfloat16.enabled", false);
  if (fp16 && bf16)
    in.fail("bf16.enabled", "true together with fp16.enabled; accepted: one of them");
  if (in.flag("amp.enabled", false))
    in.fail("amp.enabled", "NVIDIA Apex AMP is not simulated; accepted: false, with fp16 or bf16 instead");
  const std::string precision = fp16 ? "fp16" : bf16 ? "bf16" : "fp32";
  out.set("memory.precision", precision, fp16 ? "fp16.enabled" : bf16 ? "bf16.enabled" : "neither fp16 nor bf16 enabled");
  std::string grad = precision == "bf16" && zero == 0 ? "fp32" : precision;
  std::string source = "DeepSpeed accumulates gradients in the model's dtype" +
                       std::string(grad != precision ? " (bf16 without ZeRO: fp32)" : "");
  if (in.find("data_types.grad_accum_dtype")) {
    grad = in.text("data_types.grad_accum_dtype", "");
    if (grad != "fp32" && grad != "fp16" && grad != "bf16")
      in.fail("data_types.grad_accum_dtype", "\"" + grad + "\"; accepted: fp32, fp16, bf16");
    source = "data_types.grad_accum_dtype";
  }
  out.set("memory.grad_precision", grad, source);
  return grad;
}

// An offload target: none, cpu or nvme.
std::string offload_device(const FieldReader& in, const std::string& field) {
  const std::string device = in.text(field, "none");
  if (device != "none" && device != "cpu" && device != "nvme")
    in.fail(field, "\"" + device + "\"; accepted: none, cpu, nvme");
  return device;
}

void import_zero(const FieldReader& in, int zero, ImportedScenario& out) {
  if (in.find("zero_optimization") && in.find("zero_optimization")->is_boolean()) {
    out.set("memory.zero", std::to_string(zero), "zero_optimization: true|false (DeepSpeed's old form: stage 1 or none)");
    return;
  }
  out.set("memory.zero", std::to_string(zero), in.find("zero_optimization.stage") ? "zero_optimization.stage"
                                                                                   : "no zero_optimization.stage");
  for (const char* field : {"zero_optimization.zero_quantized_weights", "zero_optimization.zero_quantized_gradients",
                            "zero_optimization.zero_quantized_nontrainable_weights"})
    if (in.flag(field, false))
      in.fail(field, "ZeRO++'s quantized communication is not simulated; accepted: false");
  if (in.whole_or("zero_optimization.zero_hpz_partition_size", 1, 1) > 1)
    in.fail("zero_optimization.zero_hpz_partition_size",
            "ZeRO++'s hierarchical partitioning is not simulated; accepted: 1");
  if (in.whole_or("zero_optimization.mics_shard_size", -1, -1) > 0)
    in.fail("zero_optimization.mics_shard_size", "MiCS sharding groups are not simulated; accepted: -1");
  std::string optimizer_device = offload_device(in, "zero_optimization.offload_optimizer.device");
  std::string source = "zero_optimization.offload_optimizer.device";
  if (optimizer_device == "none" && in.flag("zero_optimization.cpu_offload", false)) {
    optimizer_device = "cpu";
    source = "zero_optimization.cpu_offload";
  }
  if (in.find("zero_optimization.offload_optimizer.ratio") && in.number("zero_optimization.offload_optimizer.ratio") != 1)
    in.fail("zero_optimization.offload_optimizer.ratio", "partial offload of the optimizer is not simulated; accepted: 1");
  if (optimizer_device != "none")
    out.set("memory.offload_optimizer", optimizer_device, source);
  const std::string param_device = offload_device(in, "zero_optimization.offload_param.device");
  if (param_device != "none")
    out.set("memory.offload_params", param_device, "zero_optimization.offload_param.device");
  if (param_device == "nvme") {
    // ZeRO-Infinity's parameter swapper stages NVMe reads through buffer_count pinned buffers of
    // buffer_size elements of the 16-bit (or fp32) parameters.
    const long long count = in.whole_or("zero_optimization.offload_param.buffer_count", 5, 1);
    const long long size = in.whole_or("zero_optimization.offload_param.buffer_size", 100'000'000, 1);
    const int element = element_bytes(out.value_of("memory.precision"));
    out.set("memory.pinned_buffer_bytes", bytes_text(static_cast<double>(count) * size * element),
            "offload_param.buffer_count " + std::to_string(count) + " x buffer_size " + std::to_string(size) + " x " +
                std::to_string(element) + " bytes");
  }
  if (in.find("zero_optimization.overlap_comm"))
    out.set("comm.overlap_grad_reduce", in.flag("zero_optimization.overlap_comm", false) ? "true" : "false",
            "zero_optimization.overlap_comm");
  if (in.find("zero_optimization.reduce_bucket_size")) {
    const long long elements = in.whole("zero_optimization.reduce_bucket_size", 1);
    const int element = element_bytes(out.value_of("memory.grad_precision"));
    out.set("comm.bucket_size", bytes_text(static_cast<double>(elements) * element),
            "zero_optimization.reduce_bucket_size " + std::to_string(elements) + " elements x " +
                std::to_string(element) + " bytes");
  }
}

// activation_checkpointing configures deepspeed.checkpointing, which the model calls around each
// layer: a section with settings is taken as every layer checkpointed.
void import_checkpointing(const FieldReader& in, ImportedScenario& out) {
  const json* section = in.find("activation_checkpointing");
  if (!section)
    return;
  if (!section->is_object() || section->empty()) {
    out.left_out.push_back("activation_checkpointing: " + section->dump() +
                           " configures nothing: simulated without recompute (memory.recompute sets it)");
    return;
  }
  out.set("memory.recompute", "full", "activation_checkpointing (the layers the model wraps: taken as all)");
  if (in.flag("activation_checkpointing.cpu_checkpointing", false))
    out.set("memory.offload_activations", "cpu", "activation_checkpointing.cpu_checkpointing");
  if (in.flag("activation_checkpointing.partition_activations", false))
    out.left_out.push_back("activation_checkpointing.partition_activations: splits checkpoints over tensor-parallel "
                           "ranks; a DeepSpeed job here has none");
}

// Adam's two fp32 moments are what trainsim keeps and steps; other optimizers would be wrong.
void import_optimizer(const FieldReader& in, ImportedScenario& out) {
  if (!in.find("optimizer")) {
    out.left_out.push_back("optimizer: none in the config (the script's own): simulated as Adam(W)");
    return;
  }
  std::string type = in.text("optimizer.type", "");
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
  static const std::set<std::string> adams = {"adam", "adamw", "fusedadam", "cpuadam", "deepspeedcpuadam"};
  if (!adams.count(type))
    in.fail("optimizer.type", "\"" + in.text("optimizer.type", "") +
                                  "\": its states and step are not simulated; accepted: Adam, AdamW (also FusedAdam, "
                                  "CPUAdam)");
}

// Why a setting is not carried over, by its full path: its own entry, else its nearest enclosing
// section's ("" for none: unknown to the importer).
std::string deepspeed_reason(const std::string& path) {
  static const std::string no_effect = "no effect on a step's time or memory";
  static const std::string logging = "logging";
  static const std::string checkpoint_files = "checkpoint files: not part of a step";
  static const std::string prefetch = "ZeRO-3 prefetches memory.prefetch_depth layers (default 1)";
  static const std::string persistence = "small parameters are gathered with their layer";
  static const std::string live = "ZeRO-3 keeps memory.prefetch_depth + 1 layers gathered";
  static const std::string reuse = "parameters are released after their layer";
  static const std::string as_they_come = "the optimizer's NVMe reads and writes are simulated as they come";
  static const std::string divided = "where gradients are divided: same time";
  static const std::string drives = "where the drives are mounted: they are simulated at the platform's bandwidth";
  static const std::map<std::string, std::string> reasons = {
      {"gradient_clipping", no_effect},
      {"scheduler", no_effect},
      {"seed", no_effect},
      {"bf16", no_effect},
      {"optimizer.params", no_effect},
      {"activation_checkpointing", no_effect},
      {"fp16", "loss scaling: " + no_effect},
      {"steps_per_print", logging}, {"wall_clock_breakdown", logging}, {"dump_state", logging},
      {"memory_breakdown", logging}, {"tensorboard", logging}, {"wandb", logging}, {"csv_monitor", logging},
      {"comet", logging}, {"comms_logger", logging}, {"flops_profiler", "profiling"},
      {"checkpoint", checkpoint_files},
      {"zero_allow_untested_optimizer", "a safety check"},
      {"zero_force_ds_cpu_optimizer", "a safety check"},
      {"prescale_gradients", divided},
      {"gradient_predivide_factor", divided},
      {"communication_data_type", "trainsim reduces gradients in their own precision (memory.grad_precision)"},
      {"aio", "the NVMe library's queue settings: drives are simulated at their bandwidth"},
      {"elasticity", "batch sizes for other cluster sizes: the one given here is simulated"},
      {"pipeline", "DeepSpeed's pipeline engine needs the script's PipelineModule: give parallel.pp in the scenario"},
      {"data_efficiency", "data sampling: no effect on a step's time"},
      {"curriculum_learning", "changes the sequence length during training: the full length is simulated"},
      {"autotuning", "a search for these settings, not a setting"},
      {"activation_checkpointing.contiguous_memory_optimization", "memory is simulated without fragmentation"},
      {"zero_optimization.contiguous_gradients", "memory is simulated without fragmentation"},
      {"zero_optimization.allgather_bucket_size", "ZeRO-1/2 gather the updated parameters at once, ZeRO-3 layer by layer"},
      {"zero_optimization.allgather_partitions", "gathered as one all-gather"},
      {"zero_optimization.reduce_scatter", "gradients are reduce-scattered (ZeRO-2/3) or all-reduced"},
      {"zero_optimization.stage3_prefetch_bucket_size", prefetch},
      {"zero_optimization.prefetch_bucket_size", prefetch},
      {"zero_optimization.stage3_param_persistence_threshold", persistence},
      {"zero_optimization.param_persistence_threshold", persistence},
      {"zero_optimization.stage3_max_live_parameters", live},
      {"zero_optimization.max_live_parameters", live},
      {"zero_optimization.stage3_max_reuse_distance", reuse},
      {"zero_optimization.max_reuse_distance", reuse},
      {"zero_optimization.stage3_gather_16bit_weights_on_model_save", checkpoint_files},
      {"zero_optimization.gather_16bit_weights_on_model_save", checkpoint_files},
      {"zero_optimization.elastic_checkpoint", checkpoint_files},
      {"zero_optimization.load_from_fp32_weights", checkpoint_files},
      {"zero_optimization.sub_group_size", "the optimizer steps the whole shard"},
      {"zero_optimization.round_robin_gradients", "no effect on simulated time"},
      {"zero_optimization.use_multi_rank_bucket_allreduce", "no effect on simulated time"},
      {"zero_optimization.ignore_unused_parameters", "a safety check"},
      {"zero_optimization.memory_efficient_linear", "no effect on simulated memory"},
      {"zero_optimization.log_trace_cache_warnings", logging},
      {"zero_optimization.offload_param.nvme_path", drives},
      {"zero_optimization.offload_optimizer.nvme_path", drives},
      {"zero_optimization.offload_param.max_in_cpu", "every offloaded parameter is streamed from NVMe"},
      {"zero_optimization.offload_optimizer.buffer_count", "the optimizer's NVMe traffic is staged through memory.pinned_buffer_bytes"},
      {"zero_optimization.offload_optimizer.fast_init", "initialisation: not part of a step"},
      {"zero_optimization.offload_optimizer.pipeline_read", as_they_come},
      {"zero_optimization.offload_optimizer.pipeline_write", as_they_come},
      {"zero_optimization.offload_optimizer.pipeline", as_they_come}};
  for (std::string at = path;; at = at.substr(0, at.rfind('.'))) {
    if (const auto found = reasons.find(at); found != reasons.end())
      return found->second;
    if (at.find('.') == std::string::npos)
      return "";
  }
}

void list_left_out(const FieldReader& in, ImportedScenario& out) {
  for (const char* field : {"sparse_attention", "compression_training"})
    if (in.find(field))
      in.fail(field, "changes the model's kernels, which is not simulated; accepted: without it");
  if (in.flag("fp16.fp16_master_weights_and_grads", false))
    in.fail("fp16.fp16_master_weights_and_grads", "fp16 master weights and gradients are not simulated; accepted: false");
  const json* zero = in.find("zero_optimization");
  for (const char* tier : {"offload_optimizer", "offload_param"})
    if (zero && zero->is_object() && in.find(std::string("zero_optimization.") + tier) &&
        !in.flag(std::string("zero_optimization.") + tier + ".pin_memory", true))
      out.left_out.push_back(std::string("zero_optimization.") + tier +
                             ".pin_memory false: host copies are simulated at pinned memory's speed");
  if (out.value_of("memory.offload_optimizer") == "nvme" && out.value_of("memory.offload_params") != "nvme")
    out.left_out.push_back("zero_optimization.offload_optimizer buffers: the optimizer's NVMe traffic is staged "
                           "through memory.pinned_buffer_bytes (trainsim's default)");
  for (const std::string& line : in.unread(deepspeed_reason))
    out.left_out.push_back(line);
}

} // namespace

ImportedScenario import_deepspeed(const json& config, const std::string& name, ImportWorld world) {
  if (!config.is_object())
    throw InputError(name + ": the top level is not a JSON object; accepted: a DeepSpeed config");
  const FieldReader in(config, name);
  ImportedScenario out;
  // DeepSpeed's old form "zero_optimization": true means stage 1 (read_zero_config_deprecated).
  const json* section = in.find("zero_optimization");
  const long long zero = section && section->is_boolean() ? (section->get<bool>() ? 1 : 0)
                                                          : in.whole_or("zero_optimization.stage", 0, 0, 3);
  out.set("training.framework", "deepspeed", "DeepSpeed");
  import_batch(in, world, out);
  import_precision(in, static_cast<int>(zero), out);
  import_zero(in, static_cast<int>(zero), out);
  import_checkpointing(in, out);
  import_optimizer(in, out);
  list_left_out(in, out);
  return out;
}

} // namespace trainsim
