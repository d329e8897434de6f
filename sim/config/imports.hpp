#pragma once
// Scenarios from the configurations people already have: a DeepSpeed config JSON, a Megatron-LM
// command line. Each setting becomes scenario keys, noted with where it came from; whatever is not
// carried over is listed with the reason, never dropped silently. Pure: the CLI adds the model and
// the cluster, checks the whole scenario and writes it.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainsim {

struct ImportedScenario {
  // Scenario keys and values, in order, each with the setting it came from.
  struct Line {
    std::string key, value, source;
  };
  std::vector<Line> lines;
  std::vector<std::string> left_out;  // "gradient_clipping: no effect on a step's time or memory"
  // What was left out, the settings left out for the same reason on one line: "--lr, --min-lr: ...".
  std::vector<std::string> left_out_lines() const;
  // The model's dimensions when the command line gives them and no --model does: a Hugging Face
  // config.json (null otherwise).
  nlohmann::json model_config;

  void set(const std::string& key, const std::string& value, const std::string& source);
  // The value set for `key`, or "" when none is.
  std::string value_of(const std::string& key) const;
  // The setting `key` came from, or "" when none.
  std::string source_of(const std::string& key) const;
  // The scenario as an INI: the header as comments, what was left out as comments, then the
  // sections, each key with its source beside it.
  std::string ini(const std::vector<std::string>& header) const;
};

// How many GPUs the imported job runs on: `requested` (the user's --gpus; 0 when not given) out of
// the cluster's `available`.
struct ImportWorld {
  int requested = 0;
  int available = 0;
};

// A DeepSpeed config (its documented keys: batch sizes, fp16/bf16, zero_optimization with its
// offload targets and buffers, activation_checkpointing, data_types, optimizer) trained with data
// parallelism alone. Without --gpus the batch sizes, when all three are given, decide the GPUs;
// otherwise the whole cluster. `name` names the file in errors. InputError for what cannot be
// simulated as written ("auto" values, inconsistent batch sizes, ZeRO++ quantization, an optimizer
// other than Adam).
ImportedScenario import_deepspeed(const nlohmann::json& config, const std::string& name, ImportWorld world);

// pretrain_gpt.py's arguments (one command line or a launch script: the launcher, the script name,
// line continuations and comments are skipped; a torchrun --nproc_per_node x --nnodes decides the
// GPUs without --gpus). Parallel sizes, schedule, recompute, precision, distributed optimizer,
// overlap flags, batch, sequence, training length, MoE dispatch and, without `model_given`, the
// model's dimensions as a config.json. InputError for what cannot be simulated.
ImportedScenario import_megatron(const std::string& command_line, const std::string& name, ImportWorld world,
                                 bool model_given);

// A torchtitan job TOML's [model] name and flavor as a model in models/ ("" when there is none:
// the user gives --model).
std::string torchtitan_model(const nlohmann::json& config, const std::string& name);

// A torchtitan job config (as parse_toml reads it): [parallelism] degrees (FSDP2 over the sharding
// degree, DDP when only replicated, tensor with its sequence-parallel norms, context, expert,
// pipeline with its schedule and torchtitan's split of the layers), [training] batch sizes,
// sequence, steps and mixed precision, [model] converters (float8), [activation_checkpoint].
// `model_layers` splits the pipeline. InputError for what cannot be simulated (HSDP, CPU offload,
// parameters kept gathered after forward, other schedules or optimizers).
ImportedScenario import_torchtitan(const nlohmann::json& config, const std::string& name, ImportWorld world,
                                   long long model_layers);

} // namespace trainsim
