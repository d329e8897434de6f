// trainsim import megatron: Megatron-LM's pretrain_gpt.py arguments as scenario keys and a model.
#include "config/import_support.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <vector>

namespace trainsim {
namespace {

using namespace import_detail;

// A command line as the shell would split it, without the launcher: quotes (with a double
// quote's backslash escapes), backslash line continuations and comments are handled; a script's
// commands are split at newlines, ';', '&&' and '||', and what follows a pipe or a redirection is
// not the training's. The command that runs a *.py script (or the only one) is the training's;
// what comes before the script (torchrun and its options) is kept apart for its process count.
struct CommandLine {
  std::vector<std::string> launcher, arguments;
};

std::vector<std::vector<std::string>> shell_commands(const std::string& text, const std::string& name) {
  std::vector<std::vector<std::string>> commands(1);
  std::string word;
  bool in_word = false, ignoring = false;
  char quote = 0;
  const auto end_word = [&] {
    if (in_word && !ignoring)
      commands.back().push_back(word);
    word.clear();
    in_word = false;
  };
  const auto end_command = [&] {
    end_word();
    if (!commands.back().empty())
      commands.emplace_back();
    ignoring = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i], next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (quote) {
      if (c == quote)
        quote = 0;
      else if (quote == '"' && c == '\\' && (next == '"' || next == '\\' || next == '$' || next == '`'))
        word += text[++i];
      else
        word += c;
      continue;
    }
    if (c == '\\' && next == '\r' && i + 2 < text.size() && text[i + 2] == '\n') {
      i += 2;  // a continuation written with CRLF
    } else if (c == '\\' && next == '\n') {
      ++i;
    } else if (c == '\\' && next) {
      word += text[++i];
      in_word = true;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '#' && !in_word) {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
    } else if (c == '\n' || c == ';') {
      end_command();
    } else if ((c == '&' || c == '|') && next == c) {
      end_command();
      ++i;
    } else if (c == '&') {
      end_command();
    } else if (c == '|' || c == '>' || c == '<') {
      // A pipe's next program or a redirection's file; "2>" names a file descriptor, not a word.
      if (in_word && c != '|' && word.find_first_not_of("0123456789") == std::string::npos)
        in_word = false;
      end_word();
      ignoring = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      end_word();
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote)
    throw InputError(name + ": a quote is not closed");
  end_command();
  commands.pop_back();
  return commands;
}

bool is_script(const std::string& word) { return word.size() > 3 && word.compare(word.size() - 3, 3, ".py") == 0; }

CommandLine split_command_line(const std::string& text, const std::string& name) {
  const std::vector<std::vector<std::string>> commands = shell_commands(text, name);
  const std::vector<std::string>* chosen = commands.size() == 1 ? &commands.front() : nullptr;
  for (const auto& command : commands)
    if (std::any_of(command.begin(), command.end(), is_script))
      chosen = &command;
  if (!chosen)
    throw InputError(name + ": " + std::to_string(commands.size()) +
                     " commands and none runs a *.py script; accepted: one command line, or a script that runs "
                     "pretrain_gpt.py");
  for (const std::string& w : *chosen)
    if (w.find('$') != std::string::npos)
      throw InputError(name + ": '" + w + "' is a shell variable; accepted: the arguments as the script passes them "
                                         "(echo them, or write the values in)");
  CommandLine line;
  const auto script = std::find_if(chosen->rbegin(), chosen->rend(), is_script);
  const auto first = script == chosen->rend() ? chosen->begin() : script.base();
  line.launcher.assign(chosen->begin(), first);
  line.arguments.assign(first, chosen->end());
  return line;
}

// Megatron's arguments by flag (with '_' as '-' in the flag's name), each with its values.
class MegatronArguments {
public:
  MegatronArguments(const std::vector<std::string>& words, std::string name) : name_(std::move(name)) {
    std::string flag;
    for (const std::string& word : words) {
      if (word.rfind("--", 0) == 0 && word.size() > 2 && !std::isdigit(static_cast<unsigned char>(word[2]))) {
        flag = word.substr(2);
        std::string value;
        if (const auto equals = flag.find('='); equals != std::string::npos) {
          value = flag.substr(equals + 1);
          flag = flag.substr(0, equals);
        }
        std::replace(flag.begin(), flag.end(), '_', '-');
        if (!values_.count(flag))
          order_.push_back(flag);
        values_[flag].clear();
        if (!value.empty())
          values_[flag].push_back(value);
      } else if (flag.empty()) {
        throw InputError(name_ + ": '" + word + "' comes before any --flag; accepted: pretrain_gpt.py's arguments");
      } else {
        values_[flag].push_back(word);
      }
    }
  }

  [[noreturn]] void fail(const std::string& flag, const std::string& problem) const {
    throw InputError(name_ + ": --" + flag + ": " + problem);
  }
  bool has(const std::string& flag) const {
    used_.insert(flag);
    return values_.count(flag) > 0;
  }
  // A flag's values (nargs='*' or '+').
  std::vector<std::string> list(const std::string& flag) const {
    return has(flag) ? values_.at(flag) : std::vector<std::string>();
  }
  std::string text(const std::string& flag) const {
    if (!has(flag))
      return "";
    const auto& values = values_.at(flag);
    if (values.size() != 1)
      fail(flag, "expected one value, got " + std::to_string(values.size()));
    return values.front();
  }
  // A whole number from 1 to `high`.
  long long whole(const std::string& flag, long long fallback, long long high = max_count) const {
    if (!has(flag))
      return fallback;
    long long value = 0;
    if (!parse_integer(text(flag), value) || value < 1 || value > high)
      fail(flag, "'" + text(flag) + "' is not a whole number from 1 to " + std::to_string(high));
    return value;
  }
  double number(const std::string& flag) const {
    const std::string value = text(flag);
    char* end = nullptr;
    const double parsed = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !std::isfinite(parsed))
      fail(flag, "'" + value + "' is not a number");
    return parsed;
  }
  // A boolean flag (store_true): given with no value.
  bool flag(const std::string& name) const {
    if (!has(name))
      return false;
    if (!values_.at(name).empty())
      fail(name, "takes no value, got '" + values_.at(name).front() + "'");
    return true;
  }
  // The flags not asked about, in order.
  std::vector<std::string> unused() const {
    std::vector<std::string> flags;
    for (const std::string& flag : order_)
      if (!used_.count(flag))
        flags.push_back(flag);
    return flags;
  }

private:
  std::string name_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> order_;
  mutable std::set<std::string> used_;
};

// The launcher's process count: torchrun (or torch.distributed.run / launch) --nproc_per_node x
// --nnodes, deepspeed --num_gpus x --num_nodes, srun --ntasks-per-node x -N (or -n), mpirun -np;
// 0 when it gives none.
int launcher_processes(const std::vector<std::string>& launcher, const std::string& name) {
  long long per_node = 0, nodes = 1, total = 0;
  for (std::size_t i = 0; i < launcher.size(); ++i) {
    std::string word = launcher[i], value;
    if (const auto equals = word.find('='); equals != std::string::npos && word.rfind("--", 0) == 0) {
      value = word.substr(equals + 1);
      word = word.substr(0, equals);
    } else if (i + 1 < launcher.size()) {
      value = launcher[i + 1];
    }
    std::replace(word.begin(), word.end(), '_', '-');
    long long* count = word == "--nproc-per-node" || word == "--num-gpus" || word == "--ntasks-per-node" ? &per_node
                       : word == "--nnodes" || word == "--num-nodes" || word == "-N" || word == "--nodes" ? &nodes
                       : word == "-np" || word == "-n" || word == "--ntasks"                          ? &total
                                                                                                  : nullptr;
    if (!count)
      continue;
    long long parsed = 0;
    if (!parse_integer(value, parsed) || parsed < 1 || parsed > static_cast<long long>(max_ranks))
      throw InputError(name + ": the launcher's " + word + " '" + value + "': accepted: a whole number from 1 to " +
                       std::to_string(max_ranks) + " (an elastic range is not)");
    *count = parsed;
  }
  if (total)
    return static_cast<int>(total);
  return per_node ? static_cast<int>(std::min<long long>(product({per_node, nodes}), max_count)) : 0;
}

void import_parallelism(const MegatronArguments& in, int world, ImportedScenario& out) {
  const long long tp = in.whole("tensor-model-parallel-size", 1, max_ranks),
                  pp = in.whole("pipeline-model-parallel-size", 1, max_ranks),
                  cp = in.whole("context-parallel-size", 1, max_ranks), ep = in.whole("expert-model-parallel-size", 1, max_ranks);
  if (product({tp, pp, cp}) > world || world % (tp * pp * cp) != 0)
    in.fail("tensor-model-parallel-size", std::to_string(tp) + " x pipeline " + std::to_string(pp) + " x context " +
                                              std::to_string(cp) + " does not divide the " + std::to_string(world) +
                                              " GPUs");
  out.set("parallel.dp", std::to_string(world / (tp * pp * cp)), "GPUs / (tp x pp x cp)");
  if (tp > 1)
    out.set("parallel.tp", std::to_string(tp), "--tensor-model-parallel-size");
  if (pp > 1)
    out.set("parallel.pp", std::to_string(pp), "--pipeline-model-parallel-size");
  if (cp > 1)
    out.set("parallel.cp", std::to_string(cp), "--context-parallel-size");
  if (ep > 1)
    out.set("parallel.ep", std::to_string(ep), "--expert-model-parallel-size");
  if (in.has("expert-tensor-parallel-size"))
    out.set("parallel.etp", std::to_string(in.whole("expert-tensor-parallel-size", 1)), "--expert-tensor-parallel-size");
  // arguments.py turns sequence parallelism off without tensor parallelism.
  if (in.flag("sequence-parallel") && tp > 1)
    out.set("parallel.sp", "true", "--sequence-parallel");
  else if (in.flag("sequence-parallel"))
    out.left_out.push_back("--sequence-parallel: Megatron turns it off without tensor parallelism");
  long long vpp = in.whole("num-virtual-stages-per-pipeline-rank", 1, 1024);
  std::string vpp_source = "--num-virtual-stages-per-pipeline-rank";
  if (in.has("num-layers-per-virtual-pipeline-stage")) {
    vpp_source = "--num-layers / (pipeline size x --num-layers-per-virtual-pipeline-stage)";
    const long long per_stage = in.whole("num-layers-per-virtual-pipeline-stage", 1);
    const long long layers = in.whole("num-layers", 0);
    if (!layers || layers % (pp * per_stage) != 0)
      in.fail("num-layers-per-virtual-pipeline-stage", "needs --num-layers, a multiple of pipeline size x " +
                                                           std::to_string(per_stage));
    vpp = layers / (pp * per_stage);
  }
  if (vpp > 1) {
    out.set("parallel.schedule", "interleaved", "virtual pipeline stages (Megatron's interleaved 1F1B)");
    out.set("parallel.vpp", std::to_string(vpp), vpp_source);
    if (in.has("microbatch-group-size-per-virtual-pipeline-stage"))
      out.set("parallel.microbatch_group_size",
              std::to_string(in.whole("microbatch-group-size-per-virtual-pipeline-stage", 1)),
              "--microbatch-group-size-per-virtual-pipeline-stage");
  } else if (pp > 1) {
    out.set("parallel.schedule", "1f1b", "Megatron's schedule without virtual stages");
  }
  if (in.has("decoder-first-pipeline-num-layers"))
    out.set("parallel.first_stage_layers", std::to_string(in.whole("decoder-first-pipeline-num-layers", 1)),
            "--decoder-first-pipeline-num-layers");
  if (in.has("decoder-last-pipeline-num-layers"))
    out.set("parallel.last_stage_layers", std::to_string(in.whole("decoder-last-pipeline-num-layers", 1)),
            "--decoder-last-pipeline-num-layers");
}

// Precision and the gradients' (arguments.py: bf16 implies gradients accumulated and all-reduced
// in fp32; fp16 keeps them in fp16 and its optimizer copies them to fp32 beside the main
// parameters).
std::string import_megatron_precision(const MegatronArguments& in, ImportedScenario& out) {
  const bool bf16 = in.flag("bf16"), fp16 = in.flag("fp16");
  if (bf16 && fp16)
    in.fail("fp16", "given with --bf16; accepted: one of them");
  const bool fp8 = in.has("fp8-format");
  if (fp8 && in.text("fp8-format") != "e4m3" && in.text("fp8-format") != "hybrid")
    in.fail("fp8-format", "'" + in.text("fp8-format") + "'; accepted: e4m3, hybrid");
  const std::string precision = fp8 ? "fp8" : bf16 ? "bf16" : fp16 ? "fp16" : "fp32";
  out.set("memory.precision", precision, fp8 ? "--fp8-format" : bf16 ? "--bf16" : fp16 ? "--fp16" : "neither --bf16 nor --fp16");
  const bool accumulate = in.flag("accumulate-allreduce-grads-in-fp32");
  const bool fp32_grads = !fp16 || accumulate;
  const bool bf16_reduce = in.flag("grad-reduce-in-bf16");
  if (bf16_reduce && (!bf16 || accumulate))
    in.fail("grad-reduce-in-bf16", "reduces bf16 gradients; accepted with --bf16 and without "
                                   "--accumulate-allreduce-grads-in-fp32");
  const std::string grads = bf16_reduce ? "bf16" : fp32_grads ? "fp32" : "fp16";
  out.set("memory.grad_precision", grads,
          bf16_reduce ? "--grad-reduce-in-bf16"
          : accumulate ? "--accumulate-allreduce-grads-in-fp32"
          : fp32_grads ? (bf16 ? "--bf16: Megatron accumulates and reduces gradients in fp32" : "fp32 training")
                       : "--fp16");
  if (grads == "fp16")
    out.set("memory.fp32_grad_copy", "true", "--fp16: the optimizer copies the gradients to fp32");
  return grads;
}

void import_recompute(const MegatronArguments& in, ImportedScenario& out) {
  std::string granularity = in.text("recompute-granularity");
  if (in.flag("recompute-activations"))
    granularity = "selective";
  if (granularity.empty())
    return;
  if (granularity == "selective") {
    if (in.has("recompute-modules"))
      for (const std::string& module : in.list("recompute-modules"))
        if (module != "core_attn")
          in.fail("recompute-modules", "'" + module + "' is not simulated; accepted: core_attn");
    out.set("memory.recompute", "selective", "--recompute-granularity selective (the attention core)");
    return;
  }
  if (granularity != "full")
    in.fail("recompute-granularity", "'" + granularity + "'; accepted: full, selective");
  // --recompute-num-layers: the layers of a checkpointed chunk (uniform) or the checkpointed
  // layers of each pipeline rank (block); Megatron's default is 1.
  const std::string method = in.text("recompute-method");
  if (method != "uniform" && method != "block")
    in.fail("recompute-method", "'" + method + "'; accepted with --recompute-granularity full: uniform, block");
  const long long layers = in.whole("recompute-num-layers", 1);
  const std::string source = "--recompute-granularity full --recompute-method " + method + " --recompute-num-layers " +
                             std::to_string(layers);
  if (method == "uniform" && layers == 1)
    out.set("memory.recompute", "full", source);
  else
    out.set("memory.recompute", method + ":" + std::to_string(layers), source);
  if (in.flag("distribute-saved-activations"))
    out.left_out.push_back("--distribute-saved-activations: checkpoints are kept whole on each tensor-parallel rank");
}

void import_megatron_training(const MegatronArguments& in, const std::string& grad_precision, ImportedScenario& out) {
  out.set("training.framework", "megatron", "Megatron-LM");
  if (!in.has("seq-length"))
    in.fail("seq-length", "missing; accepted: the sequence length pretrain_gpt.py is given");
  const long long seq = in.whole("seq-length", 1), micro = in.whole("micro-batch-size", 1);
  const long long dp = std::stoll(out.value_of("parallel.dp"));
  const long long global = in.whole("global-batch-size", micro * dp);
  out.set("training.seq_len", std::to_string(seq), "--seq-length");
  out.set("training.micro_batch", std::to_string(micro), "--micro-batch-size");
  out.set("training.global_batch", std::to_string(global),
          in.has("global-batch-size") ? "--global-batch-size" : "--micro-batch-size x data-parallel size");
  if (in.has("train-iters"))
    out.set("training.tokens", format_double(static_cast<double>(in.whole("train-iters", 1)) * global * seq),
            "--train-iters x global batch x sequence length");
  else if (in.has("train-samples"))
    out.set("training.tokens", format_double(static_cast<double>(in.whole("train-samples", 1)) * seq),
            "--train-samples x sequence length");
  if (in.flag("use-distributed-optimizer"))
    out.set("memory.zero", "1", "--use-distributed-optimizer");
  if (in.flag("overlap-grad-reduce"))
    out.set("comm.overlap_grad_reduce", "true", "--overlap-grad-reduce");
  if (in.flag("overlap-param-gather"))
    out.set("comm.overlap_param_gather", "true", "--overlap-param-gather");
  if (in.flag("tp-comm-overlap"))
    out.set("comm.tp_comm_overlap", "true", "--tp-comm-overlap");
  if (in.has("ddp-bucket-size")) {
    const long long elements = in.whole("ddp-bucket-size", 1);
    out.set("comm.bucket_size", bytes_text(static_cast<double>(elements) * element_bytes(grad_precision)),
            "--ddp-bucket-size " + std::to_string(elements) + " x " + std::to_string(element_bytes(grad_precision)) +
                " bytes");
  }
  if (in.has("optimizer") && in.text("optimizer") != "adam")
    in.fail("optimizer", "'" + in.text("optimizer") + "': its states and step are not simulated; accepted: adam");
  const std::string backend = in.text("attention-backend");
  if (backend == "unfused" || backend == "local")
    out.set("memory.flash_attention", "false", "--attention-backend " + backend);
  else if (backend == "flash" || backend == "fused")
    out.left_out.push_back("--attention-backend " + backend + ": the scenario times with the roofline; with "
                           "compute.model = kernels set compute.attention_kernel = " +
                           (backend == "flash" ? "fa2" : "cudnn") + " (unset: Transformer Engine's choice)");
  // arguments.py pads the vocabulary to a multiple of --make-vocab-size-divisible-by (128) x tp.
  const long long tp = in.whole("tensor-model-parallel-size", 1, max_ranks);
  const long long multiple = product({in.whole("make-vocab-size-divisible-by", 128, 1 << 20), tp});
  if (multiple > (1 << 20))
    in.fail("make-vocab-size-divisible-by", "x tensor-parallel size is more than 1048576");
  out.set("model.vocab_multiple", std::to_string(multiple),
          std::string(in.has("make-vocab-size-divisible-by") ? "--make-vocab-size-divisible-by" : "128 (Megatron's default)") +
              " x tensor-parallel size");
  for (const char* flag : {"use-torch-fsdp2", "use-custom-fsdp", "use-megatron-fsdp", "optimizer-cpu-offload", "cpu-offloading"})
    if (in.has(flag))
      in.fail(flag, "is not simulated with Megatron-LM (offload is simulated as DeepSpeed's, FSDP2 as PyTorch's: "
                    "trainsim import deepspeed or torchtitan); accepted: without it");
  if (in.has("transformer-impl") && in.text("transformer-impl") != "transformer_engine")
    out.left_out.push_back("--transformer-impl " + in.text("transformer-impl") +
                           ": kernels are timed as Transformer Engine's");
}

void import_moe(const MegatronArguments& in, ImportedScenario& out) {
  if (!in.has("moe-token-dispatcher-type") && in.whole("num-experts", 1) > 1)
    out.set("moe.dispatcher", "allgather", "Megatron's default --moe-token-dispatcher-type");
  if (in.has("moe-token-dispatcher-type")) {
    const std::string type = in.text("moe-token-dispatcher-type");
    if (type == "flex") {
      if (!in.flag("moe-enable-deepep") && in.text("moe-flex-dispatcher-backend") != "deepep")
        in.fail("moe-token-dispatcher-type", "flex without DeepEP is not simulated; accepted: alltoall, allgather, or "
                                             "flex with --moe-enable-deepep");
      out.set("moe.dispatcher", "deepep", "--moe-token-dispatcher-type flex with DeepEP");
    } else if (type == "alltoall" || type == "allgather") {
      out.set("moe.dispatcher", type, "--moe-token-dispatcher-type");
    } else {
      in.fail("moe-token-dispatcher-type", "'" + type + "'; accepted: alltoall, allgather, flex");
    }
  }
  if (in.has("moe-expert-capacity-factor"))
    out.set("moe.capacity_factor", in.text("moe-expert-capacity-factor"), "--moe-expert-capacity-factor");
  if (in.has("mtp-num-layers"))
    out.set("model.mtp_layers", std::to_string(in.whole("mtp-num-layers", 0, 16)), "--mtp-num-layers");
}

// The model's dimensions as a Hugging Face config.json: a Llama (SwiGLU, RMSNorm, rotary) or, with
// experts, a Mixtral; a GPT-2 otherwise. Defaults as Megatron's arguments.py.
json megatron_model(const MegatronArguments& in, ImportedScenario& out) {
  for (const char* flag : {"num-layers", "hidden-size", "num-attention-heads"})
    if (!in.has(flag))
      in.fail(flag, "missing: the model's dimensions come from the command line without --model; accepted: "
                    "--num-layers, --hidden-size and --num-attention-heads, or --model");
  // Bounds as the model loader's, so that an error names the flag rather than the written file.
  const long long layers = in.whole("num-layers", 1, 100'000), hidden = in.whole("hidden-size", 1, 1'000'000),
                  heads = in.whole("num-attention-heads", 1, hidden);
  const bool swiglu = in.flag("swiglu");
  const long long ffn = in.whole("ffn-hidden-size", swiglu ? (4 * hidden * 2 / 3) / 64 * 64 : 4 * hidden, 100'000'000);
  const long long kv_heads = in.flag("group-query-attention") ? in.whole("num-query-groups", 1, heads) : heads;
  if (heads % kv_heads != 0)
    in.fail("num-query-groups", std::to_string(kv_heads) + " does not divide the " + std::to_string(heads) +
                                    " attention heads");
  if (hidden % heads != 0 && !in.has("kv-channels"))
    in.fail("hidden-size", std::to_string(hidden) + " is not divisible by the " + std::to_string(heads) +
                               " attention heads; accepted: a multiple of them, or --kv-channels");
  long long vocab = in.whole("vocab-size", 0, 100'000'000);
  const std::string tokenizer = in.text("tokenizer-type");
  if (!vocab && (tokenizer == "GPT2BPETokenizer" || tokenizer.empty()))
    vocab = 50257;  // GPT-2's byte-level BPE, Megatron's default tokenizer
  if (!vocab)
    in.fail("tokenizer-type", tokenizer + "'s vocabulary size is in its files; accepted: --vocab-size N beside it, or --model");
  const long long positions = in.whole("max-position-embeddings", std::stoll(out.value_of("training.seq_len")));
  const bool tied = !in.flag("untie-embeddings-and-output-weights");
  const bool bias = !in.flag("disable-bias-linear");
  const std::string norm = in.has("normalization") ? in.text("normalization") : "LayerNorm";
  const std::string position = in.has("position-embedding-type") ? in.text("position-embedding-type") : "learned_absolute";
  const long long experts = in.whole("num-experts", 1, 100'000);
  json model;
  if (swiglu) {
    model["model_type"] = experts > 1 ? "mixtral" : "llama";
    model["hidden_size"] = hidden;
    model["num_hidden_layers"] = layers;
    model["num_attention_heads"] = heads;
    model["num_key_value_heads"] = kv_heads;
    model["intermediate_size"] = ffn;
    model["max_position_embeddings"] = positions;
    model["vocab_size"] = vocab;
    model["tie_word_embeddings"] = tied;
    model["attention_bias"] = bias;
    model["mlp_bias"] = bias;
    if (norm != "RMSNorm")
      out.left_out.push_back("--normalization " + norm + ": a SwiGLU model is simulated with RMSNorm");
    if (position != "rope")
      out.left_out.push_back("--position-embedding-type " + position + ": a SwiGLU model is simulated with rotary "
                                                                        "embeddings");
  } else {
    model["model_type"] = "gpt2";
    model["n_embd"] = hidden;
    model["n_layer"] = layers;
    model["n_head"] = heads;
    if (kv_heads != heads)
      model["num_key_value_heads"] = kv_heads;
    model["n_inner"] = ffn;
    model["n_positions"] = positions;
    model["vocab_size"] = vocab;
    model["tie_word_embeddings"] = tied;
    model["attn_pdrop"] = in.has("attention-dropout") ? in.number("attention-dropout") : 0.1;
    model["resid_pdrop"] = in.has("hidden-dropout") ? in.number("hidden-dropout") : 0.1;
    if (experts > 1)
      in.fail("num-experts", "experts without --swiglu are not among the models simulated; accepted: --model");
    if (norm != "LayerNorm")
      out.left_out.push_back("--normalization " + norm + ": a GELU model is simulated with LayerNorm");
    if (position != "learned_absolute")
      out.left_out.push_back("--position-embedding-type " + position + ": a GELU model is simulated with learned "
                                                                        "positions");
    if (!bias)
      out.left_out.push_back("--disable-bias-linear: a GELU model is simulated with biases");
  }
  if (in.has("kv-channels") && in.whole("kv-channels", 1, 100'000) * heads != hidden)
    model["head_dim"] = in.whole("kv-channels", 1, 100'000);
  if (experts > 1) {
    model["num_local_experts"] = experts;
    model["num_experts_per_tok"] = in.whole("moe-router-topk", 2);
    if (in.has("moe-ffn-hidden-size"))
      model["intermediate_size"] = in.whole("moe-ffn-hidden-size", 1);
    for (const char* flag : {"moe-layer-freq", "moe-shared-expert-intermediate-size", "moe-router-num-groups"})
      if (in.has(flag))
        in.fail(flag, "such a mixture is written from the command line only as Mixtral's; accepted: --model with "
                      "its config.json");
  }
  return model;
}

// Flags with no effect on a step's time or memory, by prefix.
bool without_effect(const std::string& flag) {
  static const std::vector<std::string> prefixes = {
      "lr",          "min-lr",        "weight-decay", "clip-grad",     "adam-",       "sgd-",      "init-method",
      "seed",        "data-",         "split",        "vocab-file",    "merge-file",  "tokenizer", "save",
      "load",        "eval-",         "log",          "tensorboard",   "wandb",       "timing-",   "distributed-",
      "exit-",       "no-load-",      "finetune",     "use-mcore-models", "ckpt-", "dist-ckpt",
      "num-workers", "dataloader-",   "mock-data",    "profile",       "attention-softmax-in-fp32", "loss-scale",
      "initial-loss-scale", "min-loss-scale", "hysteresis", "no-masked-softmax-fusion", "no-bias-",
      "no-gradient-accumulation-fusion", "use-flash-attn", "moe-router-load-balancing-type", "moe-aux-loss-coeff",
      "moe-z-loss-coeff", "moe-router-dtype", "moe-grouped-gemm", "moe-permute-fusion", "moe-router-score-function",
      "moe-router-enable-expert-bias", "moe-router-bias-update-rate", "moe-router-pre-softmax", "norm-epsilon",
      "rotary-", "no-rope-fusion", "use-rotary-position-embeddings",
      "apply-query-key-layer-scaling", "ddp-average-in-collective", "check-for-nan-in-loss-and-grad",
      "manual-gc", "num-dataset-builder-threads", "use-checkpoint-args", "fp8-amax", "fp8-recipe", "fp8-margin",
      "fp8-interval", "override-opt-param-scheduler"};
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](const std::string& prefix) { return flag.rfind(prefix, 0) == 0; });
}

} // namespace

ImportedScenario import_megatron(const std::string& command_line, const std::string& name, ImportWorld world,
                                 bool model_given) {
  const CommandLine line = split_command_line(command_line, name);
  if (line.arguments.empty())
    throw InputError(name + ": no arguments; accepted: pretrain_gpt.py's arguments, e.g. \"--tensor-model-parallel-size 2 "
                            "--num-layers 32 ...\"");
  const int processes = launcher_processes(line.launcher, name);
  const int gpus = job_world(world, processes, "the launcher (--nproc_per_node x --nnodes)");
  const MegatronArguments in(line.arguments, name);
  ImportedScenario out;
  // The launcher without the script it runs.
  const std::vector<std::string> launcher(line.launcher.begin(),
                                          line.launcher.end() - (line.launcher.empty() ? 0 : 1));
  if (!launcher.empty())
    out.left_out.push_back(join(launcher, " ") + ": the launcher: only its process count is read");
  import_parallelism(in, gpus, out);
  const std::string grad_precision = import_megatron_precision(in, out);
  import_recompute(in, out);
  import_megatron_training(in, grad_precision, out);
  import_moe(in, out);
  static const std::vector<std::string> model_flags = {
      "num-layers", "hidden-size", "ffn-hidden-size", "num-attention-heads", "group-query-attention",
      "num-query-groups", "kv-channels", "swiglu", "vocab-size", "tokenizer-type", "max-position-embeddings",
      "untie-embeddings-and-output-weights", "disable-bias-linear", "normalization", "position-embedding-type",
      "num-experts", "moe-router-topk", "moe-ffn-hidden-size", "attention-dropout", "hidden-dropout"};
  if (!model_given) {
    out.model_config = megatron_model(in, out);
  } else {
    // A config such as DeepSeek-V3's names a module Megatron builds only when asked.
    if (!in.has("mtp-num-layers"))
      out.set("model.mtp_layers", "0", "Megatron's default (no --mtp-num-layers: no multi-token prediction)");
    for (const std::string& flag : model_flags)
      if (in.has(flag))
        out.left_out.push_back("--" + flag + ": the model is --model's");
  }
  for (const std::string& flag : in.unused())
    out.left_out.push_back("--" + flag + ": " +
                           (without_effect(flag) ? "no effect on a step's time or memory"
                                                 : "unknown to the importer; check it has no effect on a step"));
  return out;
}

} // namespace trainsim
