// trainsim import deepspeed|megatron|torchtitan: a scenario INI from a DeepSpeed config, a
// Megatron-LM command line or a torchtitan job TOML, checked as `trainsim run` would read it before anything is written.
#include "cli/commands.hpp"
#include "cli/options.hpp"

#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include <boost/program_options.hpp>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "common/toml.hpp"
#include "config/imports.hpp"
#include "config/scenario.hpp"
#include "model/model.hpp"
#include "run/prepared_run.hpp"
#include "run/run.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace trainsim::cli {
namespace {

struct ImportOptions {
  std::string format, source, model, platform, gpus_text, seq_len_text, tokens_text;
  std::string model_source = "--model";  // where the model came from
  std::map<std::string, std::string> cluster_values;
  CommonOptions common;
};

std::string read_text(const fs::path& file, const std::string& what) {
  std::error_code error;
  if (!fs::is_regular_file(file, error))
    throw InputError(file.string() + ": no such " + what);
  std::ifstream stream(file);
  std::stringstream buffer;
  buffer << stream.rdbuf();
  if (!stream)
    throw InputError(file.string() + ": cannot read the " + what);
  return buffer.str();
}

// A file the scenario names (--model, --platform): a catalog name as given, a path relative to the
// scenario's folder.
std::string path_for_scenario(const std::string& given, const std::string& folder, const std::string& extension,
                              const fs::path& scenario_dir, const std::string& option) {
  const fs::path file = resolve_data_file(given, folder, extension, ".", option);
  std::error_code error;
  if (given.find_first_of("/\\") == std::string::npos && !fs::exists(given, error))
    return given;  // found in the catalog (models/, platforms/)
  return fs::relative(fs::absolute(file), fs::absolute(scenario_dir)).generic_string();
}

// The cluster's keys and its GPU count; a platform file's GPUs, loaded to count them, are kept in
// `platform_gpus` for the check (a process loads one platform).
int add_cluster(const ImportOptions& o, const fs::path& scenario_dir, ImportedScenario& scenario,
                std::unique_ptr<SimulationContext>& context, std::vector<GpuInfo>& platform_gpus) {
  const auto given = cluster_keys_given(o.cluster_values);
  if (!o.platform.empty() && !given.empty())
    throw InputError("trainsim import: give either --platform FILE or a described cluster (--gpu ...), not both");
  if (!o.platform.empty()) {
    scenario.set("platform.file", path_for_scenario(o.platform, "platforms", ".xml", scenario_dir, "--platform"),
                 "--platform");
    context = std::make_unique<SimulationContext>(o.common.simulation);
    platform_gpus = context->load_platform(resolve_data_file(o.platform, "platforms", ".xml", ".", "--platform"));
    if (platform_gpus.empty())
      throw InputError("--platform " + o.platform + ": no GPU hosts");
    return static_cast<int>(platform_gpus.size());
  }
  if (given.empty())
    throw InputError("trainsim import: the cluster is missing; accepted: --platform FILE or --gpu GPU [--nodes N ...]");
  const ClusterSpec cluster = parse_cluster(given);
  for (const auto& [key, value] : given)
    scenario.set(key, value.first, value.second.substr(0, value.second.find(' ')));
  return cluster.nodes * cluster.gpus_per_node;
}

// A torchtitan job: its model from --model or from [model] name and flavor, whose layers the
// pipeline split needs.
ImportedScenario imported_torchtitan(ImportOptions& o, ImportWorld world) {
  if (!o.seq_len_text.empty())
    throw InputError("--seq-len: a torchtitan job gives its own (training.seq_len)");
  const std::string name = fs::path(o.source).filename().string();
  const nlohmann::json config = parse_toml(read_text(o.source, "torchtitan job file"), name);
  if (o.model.empty()) {
    o.model = torchtitan_model(config, name);
    o.model_source = "[model] name and flavor";
  }
  if (o.model.empty())
    throw InputError("trainsim import torchtitan: --model is missing, and " + name +
                     "'s [model] name and flavor are not among models/ (llama3 8B, 70B, 405B; deepseek_v3 671B); "
                     "accepted: --model with a name in models/ or a Hugging Face config.json");
  const ModelSpec model = load_model(resolve_model_file(o.model, ".", "--model"), 1);
  return import_torchtitan(config, name, world, model.layers);
}

ImportedScenario imported(ImportOptions& o, ImportWorld world) {
  if (o.format == "torchtitan")
    return imported_torchtitan(o, world);
  if (o.format == "deepspeed") {
    if (o.model.empty())
      throw InputError("trainsim import deepspeed: --model is missing (a DeepSpeed config holds no model); accepted: "
                       "a name in models/ or a Hugging Face config.json");
    if (o.seq_len_text.empty())
      throw InputError("trainsim import deepspeed: --seq-len is missing (a DeepSpeed config holds no sequence length); "
                       "accepted: the tokens per sequence, e.g. --seq-len 4096");
    nlohmann::json config;
    try {
      config = nlohmann::json::parse(read_text(o.source, "DeepSpeed config"));
    } catch (const nlohmann::json::parse_error& error) {
      throw InputError(o.source + ": not JSON (" + error.what() + "); accepted: a DeepSpeed config");
    }
    return import_deepspeed(config, fs::path(o.source).filename().string(), world);
  }
  if (o.format == "megatron") {
    if (!o.seq_len_text.empty())
      throw InputError("--seq-len: a Megatron command line gives its own (--seq-length)");
    std::error_code error;
    const bool file = fs::is_regular_file(o.source, error);
    if (!file && o.source.find_first_of(" \t\n") == std::string::npos &&
        (o.source.find('/') != std::string::npos || fs::path(o.source).extension() == ".sh"))
      throw InputError(o.source + ": no such launch script; accepted: a script's path, or the arguments in quotes");
    return import_megatron(file ? read_text(o.source, "launch script") : o.source,
                           file ? fs::path(o.source).filename().string() : "the command line", world, !o.model.empty());
  }
  throw InputError("trainsim import " + o.format + ": unknown format; accepted: deepspeed, megatron, torchtitan");
}

// A refusal of the checked scenario as the user can act on it: the output's name for the scratch
// file's, the command line's flags for the fields of the model written from them, and the setting
// the refused key came from.
std::string refusal(std::string message, const ImportedScenario& scenario, const fs::path& scratch_file,
                    const fs::path& scratch_model, const fs::path& out) {
  for (const auto& [from, to] : {std::pair{scratch_file.string(), out.empty() ? std::string("the imported scenario") : out.string()},
                                 std::pair{scratch_model.string(), std::string("the model from the command line's dimensions")}})
    for (auto at = message.find(from); !from.empty() && at != std::string::npos; at = message.find(from))
      message.replace(at, from.size(), to);
  static const std::pair<const char*, const char*> model_flags[] = {
      {"'hidden_size'", "--hidden-size"}, {"'n_embd'", "--hidden-size"}, {"'num_hidden_layers'", "--num-layers"},
      {"'n_layer'", "--num-layers"}, {"'num_attention_heads'", "--num-attention-heads"}, {"'n_head'", "--num-attention-heads"},
      {"'num_key_value_heads'", "--num-query-groups"}, {"'intermediate_size'", "--ffn-hidden-size"},
      {"'n_inner'", "--ffn-hidden-size"}, {"'vocab_size'", "--vocab-size"}, {"'head_dim'", "--kv-channels"}};
  if (!scenario.model_config.is_null())
    for (const auto& [field, flag] : model_flags)
      if (message.find(field) != std::string::npos)
        return message + " (" + field + " comes from " + flag + ")";
  for (const auto& line : scenario.lines)
    if (message.find(line.key) != std::string::npos && !line.source.empty())
      return message + " (" + line.key + " comes from " + line.source + ")";
  return message;
}

// The scenario as run would read it and build its programs on the cluster, checked in a scratch
// folder (with its model, and its files found from the output's folder) before anything is
// written; an error names the setting the refused key came from.
void check_scenario(ImportedScenario scenario, const std::string& source, const std::vector<std::string>& header,
                    const fs::path& scenario_dir, const fs::path& out, std::unique_ptr<SimulationContext>& context,
                    const std::vector<GpuInfo>& platform_gpus) {
  const ScratchFolder scratch("import");
  const fs::path file = scratch.path() / (out.empty() ? fs::path("imported.ini") : out.filename());
  const fs::path model = scratch.path() / "model.json";
  for (const char* key : {"model.path", "platform.file"}) {
    const std::string value = scenario.value_of(key);
    std::error_code error;
    if (!value.empty() && fs::exists(scenario_dir / value, error))
      scenario.set(key, fs::absolute(scenario_dir / value).lexically_normal().string(), scenario.source_of(key));
  }
  try {
    if (!scenario.model_config.is_null()) {
      write_file_atomically(model, scenario.model_config.dump(2) + "\n");
      scenario.set("model.path", model.string(), scenario.source_of("model.path"));
    }
    write_file_atomically(file, scenario.ini(header));
    PreparedRun prepared = read_scenario(file, {});
    if (context) {
      build_programs(prepared, platform_gpus);
    } else {
      context = std::make_unique<SimulationContext>(SimulationOptions());
      load_platform_and_build(*context, prepared);
    }
  } catch (const InputError& error) {
    throw InputError("the scenario imported from " + source + " is refused: " +
                     refusal(error.what(), scenario, file, model, out));
  }
}

} // namespace

int import_command(const std::vector<std::string>& arguments) {
  ImportOptions o;
  po::options_description visible("Options");
  visible.add_options()("model", po::value(&o.model),
                        "the model: a name in models/ or a Hugging Face config.json (deepspeed: required; megatron: "
                        "instead of the command line's dimensions; torchtitan: instead of [model] name and flavor)")(
      "platform", po::value(&o.platform), "SimGrid platform XML (a path or a file in platforms/), or describe the cluster")(
      "gpus", po::value(&o.gpus_text),
      "GPUs the job runs on (default: what the configuration implies, else the whole cluster)")(
      "seq-len", po::value(&o.seq_len_text), "deepspeed: tokens per sequence (its config has none)")(
      "tokens", po::value(&o.tokens_text), "tokens to train, for time-to-train (1e9, 300B, 2T)")(
      "out,o", po::value(&o.common.out),
      "the scenario INI to write (a Megatron model's config.json is written beside it as NAME-model.json); "
      "default: print the scenario");
  visible.add(cluster_options(o.cluster_values));
  visible.add(common_options(o.common));
  po::options_description all = visible;
  all.add_options()("format", po::value(&o.format)->required(), "deepspeed | megatron | torchtitan")(
      "source", po::value(&o.source), "the DeepSpeed config, Megatron's arguments (text or a script), or the torchtitan job TOML");
  po::positional_options_description positional;
  positional.add("format", 1).add("source", 1);
  // Megatron's arguments in one quoted word start with "--" like an option of ours, but hold
  // spaces, which no option name does: that word is the source.
  std::vector<std::string> rest;
  for (const std::string& argument : arguments) {
    const std::string name = argument.substr(argument.find_first_not_of('-') == std::string::npos ? 0 : argument.find_first_not_of('-'),
                                             argument.find('=') == std::string::npos ? std::string::npos
                                                                                      : argument.find('=') - argument.find_first_not_of('-'));
    const bool ours = argument.rfind("--", 0) == 0 && argument.find('=') != std::string::npos &&
                      all.find_nothrow(name, false) != nullptr;  // --out=my dir/x.ini
    const bool command_line =
        !ours && argument.rfind("-", 0) == 0 && argument.find_first_of(" \t\n") != std::string::npos;
    if (command_line && !o.source.empty())
      throw InputError("trainsim import: two command lines given; accepted: one, in quotes");
    if (command_line)
      o.source = argument;
    else
      rest.push_back(argument);
  }
  if (!parse_arguments("import", rest, visible, all, positional,
                       "trainsim import deepspeed ds_config.json --model M --seq-len S (--platform F | --gpu G ...) "
                       "[-o FILE]\n       trainsim import megatron \"ARGUMENTS\"|SCRIPT (--platform F | --gpu G ...) "
                       "[--model M] [-o FILE]\n       trainsim import torchtitan job.toml (--platform F | --gpu G ...) "
                       "[--model M] [-o FILE]",
                       o.common, false))
    return 0;
  if (o.source.empty())
    throw InputError("trainsim import " + o.format + ": the " +
                     (o.format == "megatron" ? "command line (or launch script)" : "config file") + " is missing");
  const fs::path out = o.common.out;
  std::error_code out_error;
  if (!out.empty() && fs::is_directory(out, out_error))
    throw InputError("-o " + out.string() + ": is a folder; accepted: the scenario file to write, e.g. " +
                     (out / "imported.ini").string());
  const fs::path scenario_dir = out.empty() ? fs::path(".") : out.parent_path().empty() ? fs::path(".") : out.parent_path();
  ImportedScenario cluster_keys;
  ImportWorld world;
  std::unique_ptr<SimulationContext> context;
  std::vector<GpuInfo> platform_gpus;
  world.available = add_cluster(o, scenario_dir, cluster_keys, context, platform_gpus);
  if (!o.gpus_text.empty())
    world.requested = count_option("--gpus", o.gpus_text, 1, 1 << 20);
  ImportedScenario scenario = imported(o, world);
  if (!o.model.empty() && names_hub_model(o.model, ".")) {
    resolve_hub_model(o.model, "--model");  // refuses a hub name no config in models/ has
    scenario.set("model.name", o.model, o.model_source);
  } else if (!o.model.empty()) {
    const std::string model = path_for_scenario(o.model, "models", ".json", scenario_dir, "--model");
    scenario.set(model.find_first_of("/\\") == std::string::npos && fs::path(model).extension() != ".json"
                     ? "model.name"
                     : "model.path",
                 model, o.model_source);
  }
  for (const auto& line : cluster_keys.lines)
    scenario.set(line.key, line.value, line.source);
  if (!o.seq_len_text.empty())
    scenario.set("training.seq_len", o.seq_len_text, "--seq-len");
  if (!o.tokens_text.empty())
    scenario.set("training.tokens", format_double(tokens_option(o.tokens_text)), "--tokens");
  const fs::path model_file = out.empty() ? fs::path() : fs::path(out).replace_extension().concat("-model.json");
  if (!scenario.model_config.is_null()) {
    if (out.empty())
      throw InputError("trainsim import megatron: the model's config.json is written beside the scenario; accepted: "
                       "-o FILE, or --model");
    scenario.set("model.path", model_file.filename().string(), "the command line's model dimensions");
  }
  const std::string source_name = o.format == "megatron" && !fs::is_regular_file(o.source, out_error)
                                      ? "a Megatron-LM command line"
                                      : o.source;
  const std::vector<std::string> header = {"Imported by trainsim import " + o.format + " from " + source_name + ".",
                                          "Each key names the setting it came from."};
  check_scenario(scenario, source_name, header, scenario_dir, out, context, platform_gpus);
  const std::string text = scenario.ini(header);
  if (out.empty()) {
    std::cout << text;
    return 0;
  }
  if (!scenario.model_config.is_null() && fs::is_directory(model_file, out_error))
    throw InputError("-o " + out.string() + ": the model would be written to " + model_file.string() +
                     ", which is a folder; accepted: another -o");
  if (!scenario.model_config.is_null())
    write_file_atomically(model_file, scenario.model_config.dump(2) + "\n");
  try {
    write_file_atomically(out, text);
  } catch (const InputError&) {
    if (!scenario.model_config.is_null())
      fs::remove(model_file, out_error);  // no partial outputs
    throw;
  }
  std::cout << "trainsim: wrote " << out.string() << " (" << scenario.lines.size() << " settings"
            << (scenario.model_config.is_null() ? "" : ", the model in " + model_file.string())
            << ")\n";
  if (!scenario.left_out.empty())
    std::cout << "not carried over (also listed at its top):\n";
  for (const std::string& line : scenario.left_out_lines())
    std::cout << "  " << line << '\n';
  return 0;
}

} // namespace trainsim::cli
