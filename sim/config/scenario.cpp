#include "config/scenario.hpp"
#include "config/scenario_options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>

#include <boost/program_options/value_semantic.hpp>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace trainsim {
namespace {

struct OptionSpec {
  const char* key;
  const char* default_value;
  const char* help;
};

// platform.gpu's help: the catalog's keys (kept alive for the option table).
const char* gpu_help() {
  static const std::string help = "a described cluster's GPU: " + gpu_keys(" | ");
  return help.c_str();
}

const std::vector<OptionSpec>& option_specs() {
  static const std::vector<OptionSpec> specs = {
      {"model.name", "", "model file in models/ (without .json), e.g. llama2-7b, or a Hugging Face hub name a file "
                         "there gives as its _name_or_path, e.g. meta-llama/Llama-3.1-8B"},
      {"model.path", "", "path to any Hugging Face config.json (instead of name)"},
      {"model.vocab_multiple", "128", "pad the vocabulary to a multiple of this (Megatron: 128)"},
      {"model.mtp_layers", "auto", "multi-token-prediction modules trained after the last layer (DeepSeek-V3; Megatron's "
                                   "--mtp-num-layers): auto (a deepseek_v3 config's num_nextn_predict_layers, default 1; "
                                   "other models none) | a count, 0 for none"},
      {"platform.file", "", "SimGrid platform XML, a path or a file in platforms/ (or describe the cluster with gpu, nodes, ...)"},
      {"platform.calibration", "", "a calibration file from trainsim calibrate (relative to the scenario's folder; from --set, "
                                   "to the working one): its fitted compute.matmul_efficiency (with compute.model = roofline) "
                                   "and comm.bandwidth_efficiency apply, for the GPU it was fitted on"},
      {"platform.gpu", "", gpu_help()},
      {"platform.nodes", "1", "described cluster: number of nodes"},
      {"platform.gpus_per_node", "8", "described cluster: GPUs per node"},
      {"platform.fabric", "auto", "described cluster: GPUs joined by nvswitch | nvlink-pairs | mesh | pcie (auto: the GPU's usual)"},
      {"platform.nics_per_node", "auto", "described cluster: NICs per node (auto: one per GPU, one per pair with nvlink-pairs, one with pcie)"},
      {"platform.nic_speed", "auto", "described cluster: NIC speed, e.g. 400Gbps (auto: the GPU generation's usual)"},
      {"platform.topology", "single-switch", "described cluster: network between nodes: single-switch | fat-tree | rail-optimized"},
      {"platform.nodes_per_leaf", "auto", "fat tree: nodes under one leaf switch (auto: 32 NIC ports' worth)"},
      {"platform.oversubscription", "1", "fat tree, rail-optimized: switch downlink to uplink bandwidth ratio, >= 1"},
      {"platform.leaves_per_pod", "auto", "fat tree: leaf switches under one pod's spine; more leaves make pods under a "
                                          "core (three tiers) (auto: one pod up to 64 leaves, else pods of 32: 64-port "
                                          "switches)"},
      {"platform.pod_oversubscription", "1", "fat tree with pods: a pod spine's downlink to core uplink bandwidth ratio, >= 1"},
      {"platform.pcie_gen", "auto", "described cluster: PCIe generation 3 to 6 (auto: the GPU's usual)"},
      {"platform.nvme_per_node", "0", "described cluster: NVMe drives per node"},
      {"platform.gpus_per_pcie_switch", "2", "described cluster: GPUs sharing one PCIe switch and its uplink to the CPU (1: each GPU on its own root port)"},
      {"platform.host_memory", "2TiB", "described cluster: host DRAM per node (offloaded states live there)"},
      {"platform.host_memory_bandwidth", "200GBps", "described cluster: host DRAM bandwidth per node (bounds CPU Adam)"},
      {"platform.cpu_speed", "2Tf", "described cluster: FLOP/s of a node's CPUs for offloaded optimizer math"},
      {"parallel.dp", "1", "data-parallel degree (number of model replicas); auto: the described cluster's GPUs / (tp x pp x cp)"},
      {"parallel.tp", "1", "tensor-parallel degree (Megatron column/row-parallel layers)"},
      {"parallel.pp", "1", "pipeline stages"},
      {"parallel.vpp", "1", "virtual pipeline stages (model chunks) per pipeline rank; > 1 needs the interleaved schedule "
                            "(zb-v, dualpipev and dualpipe: 2)"},
      {"parallel.cp", "1", "context-parallel degree: the sequence is split, K/V go around a ring"},
      {"parallel.sp", "false", "sequence parallelism on top of tensor parallelism: true | false"},
      {"parallel.ep", "1", "expert-parallel degree (mixtures of experts): the experts split over ep ranks of a stage, "
                           "tokens sent to them and back by all-to-all; etp x ep divides tp x dp x cp (with etp = tp: "
                           "ep divides dp x cp)"},
      {"parallel.etp", "auto",
       "expert tensor parallelism (mixtures of experts, with parallel.ep > 1): each expert's GEMMs split over etp ranks, "
       "the tokens they receive gathered over them; the expert layers fold etp x ep x expert-dp over the tp x cp x dp "
       "ranks of a stage, tp innermost, as Megatron-Core does (auto: parallel.tp)"},
      {"parallel.schedule", "auto",
       "pipeline schedule: gpipe | 1f1b | interleaved | zb-h1 | zb-h2 | zb-v | dualpipev | dualpipe (auto: interleaved "
       "if vpp > 1, else 1f1b); the zero-bubble zb-* split each backward into input and weight gradients, zb-v over two "
       "chunks per rank in a V; dualpipe (DeepSeek-V3's) feeds half the micro-batches from each end of the pipeline, "
       "each rank holding its stage going down and its mirror's going up (two copies of the model), a forward of one "
       "direction beside a backward of the other; dualpipev is DualPipe cut in half, on ZB-V's V"},
      {"parallel.microbatch_group_size", "auto",
       "interleaved: micro-batches that go through a rank's chunks as one group (Megatron-Core's "
       "--microbatch-group-size-per-virtual-pipeline-stage), from pp to the micro-batches per pipeline, the last "
       "group the rest, which must be none or at least pp; a larger group lets m be any count >= pp (auto: pp)"},
      {"parallel.overlap_pairs", "auto",
       "dualpipe and dualpipev: each forward and the whole backward of another micro-batch paired with it run "
       "interleaved on the compute stream, cut at their expert all-to-alls, so that one's all-to-alls run while the "
       "other computes (Megatron-Core's combined 1F1B order): true | false (one after the other) (auto: true with "
       "them)"},
      {"parallel.order", "tp-cp-dp-pp", "rank order, innermost first (Megatron: tp-cp-dp-pp)"},
      {"parallel.layers_per_stage", "uniform",
       "layers of each of the pp x vpp stages, e.g. 10,12,12,14 (dualpipe: of the pp stages each direction passes) "
       "(uniform: equal)"},
      {"parallel.first_stage_layers", "auto",
       "layers of the first pipeline rank (Megatron-Core's --decoder-first-pipeline-num-layers), the others sharing "
       "the rest evenly (dualpipe: of the model's first stage, which ranks 0 and pp - 1 hold); auto: as many as the "
       "others"},
      {"parallel.last_stage_layers", "auto", "layers of the last pipeline rank (dualpipe: of the model's last stage), as "
                                             "first_stage_layers"},
      {"moe.routing", "uniform", "how a mixture's router spreads tokens over its experts: uniform | zipf:S (expert e, "
                                 "counted from 0, gets a share proportional to 1/(e+1)^S; experts are placed in order, "
                                 "so the popular ones share the first expert-parallel rank) | file:PATH (a CSV of the "
                                 "tokens each expert received, a row per expert layer or one row for all, as a real "
                                 "run's router statistics; experts placed in order)"},
      {"moe.capacity_factor", "none", "a mixture's expert capacity, as a multiple of the uniform share of token copies: "
                                      "a number >= 1 (copies beyond it are dropped) | none (dropless)"},
      {"moe.dispatch_precision", "activations",
       "what the forward all-to-all sends the tokens to the experts in, under expert parallelism: activations (their "
       "precision) | fp8 (quantized in 1 x 128 tiles with an fp32 scale each, as DeepSeek-V3; the combine and the "
       "backward stay in the activations' precision)"},
      {"moe.dispatcher", "alltoall",
       "how tokens reach the experts under expert parallelism (Megatron-Core's --moe-token-dispatcher-type): alltoall "
       "(each rank sends each token's copies to the ranks of their experts, and back) | allgather (each rank gathers "
       "the ep group's tokens, computes its experts' share and reduce-scatters the outputs; with parallel.tp = 1) | deepep "
       "(DeepEP, Megatron-Core's flex dispatcher: each token crosses the network once per node of its experts, to the "
       "GPU of the same index there, which forwards it over NVLink once per GPU of its experts, both legs at once; the "
       "combine sums on the way back; with whole experts, parallel.etp = 1, and uniform routing)"},
      {"memory.zero", "0", "ZeRO stage: 0 (DDP) | 1 (optimizer sharded) | 2 (+ gradients) | 3 or fsdp (+ parameters) "
                           "(default 3 with training.framework = fsdp2)"},
      {"memory.prefetch_depth", "1", "ZeRO-3: layers whose parameters are gathered ahead of use"},
      {"memory.recompute", "none", "activation recompute: none | selective (Korthikanti et al.: the attention core) | op "
                                   "(torchtitan's op-level selective checkpointing) | full | every:N (segments of N layers checkpointed, "
                                   "the last kept, as torch checkpoint_sequential) | uniform:N (segments of N layers, all "
                                   "checkpointed: Megatron's uniform method) | block:N (the first N layers of each stage "
                                   "checkpointed: Megatron's block method) | nth:N (every Nth layer checkpointed, the "
                                   "others kept: torchtitan's selective_ac_option = N) | optimal"},
      {"memory.activation_budget", "auto", "recompute = optimal: bytes for activations (auto: what fits the GPU)"},
      {"memory.precision", "bf16", "training precision: fp32 | fp16 | bf16 | fp8 (GEMMs in fp8, bf16 master)"},
      {"memory.grad_precision", "auto", "gradient precision: auto (fp32 for bf16 and fp8, else as precision) | same | fp32 | fp16 | bf16"},
      {"memory.fp32_grad_copy", "false", "the optimizer keeps an fp32 copy of 16-bit gradients, sharded with it (Megatron fp16): true | false"},
      {"memory.flash_attention", "true", "fused attention that keeps no s x s scores: true | false"},
      {"memory.offload_optimizer", "none", "optimizer states and step: none (GPU) | cpu (ZeRO-Offload: CPU Adam in host DRAM) | nvme (ZeRO-Infinity: states on NVMe)"},
      {"memory.offload_params", "none", "ZeRO-3 parameters: none (GPU shards) | cpu | nvme (streamed to the GPU layer by layer; needs offload_optimizer)"},
      {"memory.offload_activations", "none", "activation checkpoints: none | cpu (copied out after forward, back before backward; needs checkpointing recompute)"},
      {"memory.pinned_buffer_bytes", "1GiB", "per GPU: pinned host buffer that NVMe traffic is staged through, in chunks of half of it"},
      {"memory.delayed_update", "false", "offload_optimizer: the CPU step and parameter upload overlap the next step's forward and backward (ZeRO-Offload DPU): true | false"},
      {"memory.cuda_context", "512MiB", "per GPU: the CUDA context and loaded kernels, outside PyTorch's allocator (0B: leave it out)"},
      {"memory.nccl_buffers", "auto", "per GPU: NCCL's communication buffers (auto: 16 channels x one ring connection's Simple, LL "
                                      "and LL128 buffers per communicator of the rank), or a size such as 600MiB"},
      {"memory.reserve", "0.15", "what PyTorch's caching allocator reserves beyond the live tensors, which must fit too: its "
                                 "fragmentation 1 - allocated/reserved, 0 to 0.5, or a size kept free such as 4GiB"},
      {"training.seq_len", "2048", "sequence length in tokens"},
      {"training.micro_batch", "1", "sequences per micro-batch per data-parallel rank"},
      {"training.global_batch", "auto", "sequences per optimizer step (auto: micro_batch x dp, no accumulation)"},
      {"training.tokens", "1e9", "tokens to train, for time-to-train (1e9, 300B, 2T)"},
      {"training.framework", "auto", "the framework imitated, for its defaults of comm.bucket_size, comm.overlap_grad_reduce "
                                     "and model states: megatron (Megatron-Core) | deepspeed | fsdp2 (PyTorch FSDP2, "
                                     "torchtitan) | ddp (PyTorch DDP) (auto: deepspeed with offload, fsdp2 with ZeRO-3, "
                                     "deepspeed with ZeRO-2, megatron with tp, pp or cp, deepspeed with ZeRO-1, else ddp)"},
      {"compute.model", "roofline", "roofline: each piece at the fixed efficiencies below | kernels: every GEMM, "
                                    "attention and memory-bound kernel timed with its GPU generation's calibration (A100, "
                                    "H100, H200; still too fast end to end, see the README) | auto: kernels where the GPU is calibrated"},
      {"compute.attention_kernel", "auto", "kernels: the fused attention kernel (memory.flash_attention = true): fa2 "
                                           "(FlashAttention-2) | fa3 (FlashAttention-3, Hopper) | cudnn (cuDNN's fused "
                                           "attention, Hopper) | te (Transformer Engine's choice: cudnn on Hopper, fa2 on "
                                           "Ampere) (auto: te with training.framework = megatron, else fa2)"},
      {"compute.matmul_efficiency", "0.55", "roofline: fraction of peak tensor FLOP/s reached by transformer layers, 0.01 to 1"},
      {"compute.memory_efficiency", "0.8", "roofline: fraction of peak HBM bandwidth reached by memory-bound kernels, 0.01 to 1"},
      {"compute.allow_tf32", "true", "fp32 matmuls run on TF32 tensor cores: true | false"},
      {"compute.comm_slowdown", default_comm_slowdown, "how much longer compute kernels take while a communication kernel runs beside "
                                         "them on the GPU (they share SMs and HBM), 0 to 1 (0.189: the average measured on "
                                         "GPT and LLaMA layers on A100, H100, MI250, MI210, arXiv 2507.03114)"},
      {"comm.bucket_size", "auto", "gradient reduction bucket size, e.g. 25MiB (auto, by training.framework: ddp 25 MiB; "
                                   "deepspeed 5e8 gradient elements; megatron max(4e7, 1e6 x dp x cp) elements when "
                                   "overlapping, else all gradients at once; fsdp2 each layer's gradients)"},
      {"comm.bandwidth_efficiency", "1", "a further fraction of the bandwidth collectives and pipeline transfers reach, "
                                         "0.01 to 1, on top of comm.collectives' (1: as NCCL's calibration, or the links' "
                                         "full bandwidth with ideal collectives; trainsim calibrate fits it to a measured run)"},
      {"comm.collectives", "nccl", "nccl: each collective runs with the algorithm and protocol NCCL would choose for its "
                                   "size and group, at the latency and bandwidth published nccl-tests curves show | ideal: "
                                   "every link at full bandwidth, route latency per ring step"},
      {"comm.algorithm", "auto", "auto: NCCL's choice per call | ring | tree: all-reduces across nodes (other calls run "
                                 "as rings) | nvls: all-reduces inside one NVSwitch node with NVLink SHARP (Hopper and "
                                 "later; other calls run as rings)"},
      {"comm.protocol", "auto", "auto: NCCL's choice per call | ll | ll128 (where NCCL runs it: GPUs of a node on NVLink, "
                                "one generation; else Simple) | simple (NVLS runs Simple; sends and all-to-all always do)"},
      {"comm.channels", "auto", "rings per collective (auto: GPUs per node, as NCCL spreads rings over NICs)"},
      {"comm.fidelity", "flows", "flows: every collective simulated as flows | fast: collectives' NVLink edges timed from their ring (a node's collectives wholly), even all-to-alls from their links' load (faster at scale)"},
      {"comm.overlap_grad_reduce", "auto", "gradient buckets are reduced while backward goes on: true | false (the "
                                           "compute waits for each bucket; Megatron reduces after backward) (auto, by "
                                           "training.framework: ddp, fsdp2 true; deepspeed true with ZeRO-3 only; megatron false)"},
      {"comm.overlap_param_gather", "auto", "Megatron-Core's distributed optimizer all-gathers the updated parameters bucket "
                                            "by bucket during the next forward, each layer waiting for its bucket, instead of "
                                            "at the end of the step: true | false (auto: false, Megatron-Core's default; needs "
                                            "training.framework = megatron, memory.zero = 1 and comm.overlap_grad_reduce = true)"},
      {"comm.tp_comm_overlap", "auto", "Megatron-Core's --tp-comm-overlap (Transformer Engine's userbuffers): each tensor-"
                                       "parallel all-gather and reduce-scatter runs in chunks beside the GEMM it feeds or "
                                       "follows: true | false (auto: false, Megatron-Core's default; needs parallel.sp = true, "
                                       "training.framework = megatron, parallel.cp = 1)"},
      {"comm.grad_sync", "auto", "gradient reduction under accumulation: last | every micro-batch (auto: every for ZeRO-2/3, as DeepSpeed)"},
      {"comm.pp_scatter_gather", "false", "pipelines with tp but no sp: each tp rank sends 1/tp of a stage's output and the next "
                                          "stage all-gathers it over tp (Megatron-LM 2021's scatter/gather; Megatron-Core sends it whole): true | false"},
  };
  return specs;
}

struct RawValue {
  std::string value;
  std::string where;  // "file:line" or "--set key=value"
  bool given = true;  // false: the default
};

// Levenshtein distance: how many single-character edits turn one key into the other.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "unknown key 'x'; closest accepted: a, b, c (...)": the keys fewest edits away, not all of them.
std::string unknown_key(const std::string& key) {
  std::vector<std::pair<std::size_t, std::size_t>> ranked;  // (distance, position in the table)
  const auto& specs = option_specs();
  for (std::size_t i = 0; i < specs.size(); ++i)
    ranked.emplace_back(edit_distance(key, specs[i].key), i);
  std::sort(ranked.begin(), ranked.end());
  std::string closest;
  for (std::size_t i = 0; i < std::min<std::size_t>(3, ranked.size()); ++i)
    closest += (closest.empty() ? "" : ", ") + std::string(specs[ranked[i].second].key);
  return "unknown key '" + key + "'; closest accepted: " + closest + " (every key: trainsim run --help)";
}


bool is_known_key(const std::string& key) {
  for (const auto& spec : option_specs())
    if (key == spec.key)
      return true;
  return false;
}

} // namespace

void require_scenario_key(const std::string& key, const std::string& where) {
  if (!is_known_key(key))
    throw InputError(where + ": " + unknown_key(key));
}

std::string default_of(const std::string& key) {
  for (const auto& spec : option_specs())
    if (key == spec.key)
      return spec.default_value;
  return "";
}

std::pair<std::string, std::string> parse_setting(const std::string& assignment) {
  const auto equals = assignment.find('=');
  const std::string key = trim(assignment.substr(0, equals));
  if (equals == std::string::npos || key.find('.') == std::string::npos)
    throw InputError("--set " + assignment + ": expected section.key=value, e.g. --set parallel.dp=8");
  require_scenario_key(key, "--set " + assignment);
  return {key, trim(assignment.substr(equals + 1))};
}

namespace {

class ValueReader {
public:
  explicit ValueReader(std::map<std::string, RawValue> values) : values_(std::move(values)) {}

  const std::string& text(const std::string& key) const { return values_.at(key).value; }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    const RawValue& raw = values_.at(key);
    throw InputError(raw.where + ": " + key + " = '" + raw.value + "': " + problem);
  }

  long long integer(const std::string& key, long long min, long long max) const {
    long long value = 0;
    if (!parse_integer(text(key), value))
      fail(key, "not a whole number; accepted: an integer from " + std::to_string(min) + " to " + std::to_string(max));
    if (value < min || value > max)
      fail(key, "out of range; accepted: an integer from " + std::to_string(min) + " to " + std::to_string(max));
    return value;
  }

  // A plain number within [min, max] (min excluded when `above_min`); `accepted` describes it.
  double number(const std::string& key, double min, bool above_min, double max, const std::string& accepted) const {
    double value = 0;
    try {
      value = parse_count(text(key));
    } catch (const UnitError&) {
      fail(key, "not a number; accepted: " + accepted);
    }
    if (!((above_min ? value > min : value >= min) && value <= max))
      fail(key, "out of range; accepted: " + accepted);
    return value;
  }

  // An efficiency: below 1% of a GPU's peak no kernel runs, and times would be nonsense.
  double efficiency(const std::string& key) const {
    return number(key, 0.01, false, 1, "a number from 0.01 to 1, such as 0.55 (not a percentage)");
  }

  double quantity(const std::string& key, double (*parse)(std::string_view)) const {
    try {
      return parse(text(key));
    } catch (const UnitError& error) {
      fail(key, error.what());
    }
  }

  bool boolean(const std::string& key) const {
    const std::string& value = text(key);
    if (value == "true" || value == "yes" || value == "on" || value == "1")
      return true;
    if (value == "false" || value == "no" || value == "off" || value == "0")
      return false;
    fail(key, "not a boolean; accepted: true, false (also yes/no, on/off, 1/0)");
  }

  template <typename Enum>
  Enum choice(const std::string& key, const std::vector<std::pair<std::string, Enum>>& choices,
              const std::string& later = "") const {
    std::string accepted;
    for (const auto& [name, value] : choices) {
      if (text(key) == name)
        return value;
      accepted += (accepted.empty() ? "" : ", ") + name;
    }
    fail(key, (later.empty() ? "unknown value" : later) + "; accepted: " + accepted);
  }

  const RawValue& raw(const std::string& key) const { return values_.at(key); }
  bool given(const std::string& key) const { return values_.at(key).given; }
  // Given with a value other than its default: a setting that must have an effect. (Writing the
  // default out has none to miss.)
  bool changed(const std::string& key) const { return given(key) && text(key) != default_of(key); }
  // Refuses a changed setting whose precondition does not hold: it would have no effect.
  void needs(const std::string& key, bool applies, const std::string& requirement) const {
    if (changed(key) && !applies)
      fail(key, "has no effect here; it needs " + requirement);
  }

private:
  std::map<std::string, RawValue> values_;
};

// "[model], [platform], ...": the sections of the option table, in its order.
std::string section_headers() {
  std::string list, last;
  for (const auto& spec : option_specs()) {
    const std::string key = spec.key, section = key.substr(0, key.find('.'));
    if (section != last)
      list += (list.empty() ? "[" : ", [") + section + "]";
    last = section;
  }
  return list;
}

struct IniLine {
  std::string key;  // section.key
  std::string value;
  int line = 0;
};

// The INI lines of a scenario: [section] headers and key = value lines; '#' starts a comment; a
// leading UTF-8 byte-order mark, which editors on Windows write, is skipped.
std::vector<IniLine> read_ini(std::string_view text, const fs::path& file) {
  static constexpr std::string_view byte_order_mark = "\xEF\xBB\xBF";
  if (text.substr(0, byte_order_mark.size()) == byte_order_mark)
    text.remove_prefix(byte_order_mark.size());
  std::vector<IniLine> lines;
  std::string section;
  int number = 0;
  for (const std::string& raw : split(text, '\n')) {
    ++number;
    const std::string line = trim(raw.substr(0, raw.find('#')));
    if (line.empty())
      continue;
    const std::string where = file.string() + ":" + std::to_string(number) + ": ";
    if (line.front() == '[') {
      if (line.back() != ']')
        throw InputError(where + "section header '" + line + "' lacks its closing ']'; accepted: [section]");
      section = trim(line.substr(1, line.size() - 2));
      if (section.empty())
        throw InputError(where + "'[]' names no section; accepted: " + section_headers());
      continue;
    }
    const auto equals = line.find('=');
    const std::string key = trim(line.substr(0, equals));
    if (equals == std::string::npos || key.empty())
      throw InputError(where + "'" + line + "' is not a key = value line; accepted: [section] headers and "
                               "key = value lines (# starts a comment)");
    lines.push_back({section.empty() ? key : section + "." + key, trim(line.substr(equals + 1)), number});
  }
  return lines;
}

std::map<std::string, RawValue> read_values(const std::string& text, const fs::path& file,
                                            const std::vector<std::string>& overrides) {
  std::map<std::string, RawValue> values;
  for (const IniLine& line : read_ini(text, file)) {
    const std::string where = file.string() + ":" + std::to_string(line.line);
    require_scenario_key(line.key, where);
    if (values.count(line.key))
      throw InputError(where + ": '" + line.key + "' is set twice (first at " + values.at(line.key).where + ")");
    values[line.key] = {line.value, where};
  }
  for (const auto& assignment : overrides) {
    const auto [key, value] = parse_setting(assignment);
    values[key] = {value, "--set " + assignment};
    // Naming a model on the command line replaces the file's model, whichever way the file named it;
    // likewise a platform file replaces a described cluster and a GPU a platform file.
    if (key == "model.name")
      values.erase("model.path");
    if (key == "model.path")
      values.erase("model.name");
    if (key == "platform.gpu")
      values.erase("platform.file");
    if (key == "platform.file")
      for (auto it = values.begin(); it != values.end();)
        it = it->first.rfind("platform.", 0) == 0 && it->first != "platform.file" && it->first != "platform.calibration"
                 ? values.erase(it)
                 : std::next(it);
  }
  for (const auto& spec : option_specs())
    if (!values.count(spec.key))
      values[spec.key] = {spec.default_value, file.string() + " (default of " + spec.key + ")", false};
  return values;
}

// Up to 16,384 nodes (131,072 GPUs of 8): the frontier clusters of 100K GPUs.
constexpr long long max_described_nodes = 16384;

// What the platform.* keys other than file describe.
ClusterSpec cluster_from(const ValueReader& values) {
  ClusterSpec cluster;
  cluster.gpu = find_gpu(values.text("platform.gpu"), values.raw("platform.gpu").where + ": platform.gpu");
  const GpuSpec& gpu = cluster.gpu;
  cluster.nodes = static_cast<int>(values.integer("platform.nodes", 1, max_described_nodes));
  cluster.gpus_per_node = static_cast<int>(values.integer("platform.gpus_per_node", 1, 16));
  const std::vector<std::pair<std::string, Fabric>> fabrics = {{"nvswitch", Fabric::nvswitch},
                                                               {"nvlink-pairs", Fabric::nvlink_pairs},
                                                               {"mesh", Fabric::mesh},
                                                               {"pcie", Fabric::pcie}};
  if (values.text("platform.fabric") == "auto") {
    for (const auto& [name, fabric] : fabrics)
      if (name == gpu.fabric)
        cluster.fabric = fabric;
  } else {
    cluster.fabric = values.choice<Fabric>("platform.fabric", fabrics);
  }
  if (cluster.fabric != Fabric::pcie && gpu.gpu_link <= 0)
    values.fail("platform.fabric", gpu.model + " has no GPU-to-GPU links; accepted: pcie");
  if (values.text("platform.nics_per_node") == "auto")
    cluster.nics_per_node = cluster.fabric == Fabric::pcie           ? 1
                            : cluster.fabric == Fabric::nvlink_pairs ? std::max(1, cluster.gpus_per_node / 2)
                                                                     : cluster.gpus_per_node;
  else
    cluster.nics_per_node = static_cast<int>(values.integer("platform.nics_per_node", 1, 32));
  cluster.nic_speed = values.text("platform.nic_speed") == "auto"
                          ? gpu.nic_speed
                          : values.quantity("platform.nic_speed", parse_bandwidth);
  if (!(cluster.nic_speed > 0))
    values.fail("platform.nic_speed", "must be positive; accepted: a speed such as 400Gbps or 50GBps");
  cluster.topology = values.choice<Topology>("platform.topology", {{"single-switch", Topology::single_switch},
                                                                  {"fat-tree", Topology::fat_tree},
                                                                  {"rail-optimized", Topology::rail_optimized}});
  if (cluster.topology == Topology::rail_optimized && cluster.nics_per_node != cluster.gpus_per_node)
    values.fail("platform.topology", "rail-optimized needs one NIC per GPU (platform.nics_per_node = " +
                                         std::to_string(cluster.gpus_per_node) + ")");
  if (cluster.topology == Topology::rail_optimized && cluster.nodes * cluster.gpus_per_node > max_pairwise_routed)
    values.fail("platform.topology", "rail-optimized routes every pair of GPUs (one zone each); accepted: up to " +
                                         std::to_string(max_pairwise_routed) + " GPUs");
  cluster.nodes_per_leaf = values.text("platform.nodes_per_leaf") == "auto"
                               ? std::max(1, 32 / cluster.nics_per_node)
                               : static_cast<int>(values.integer("platform.nodes_per_leaf", 1, 512));
  cluster.oversubscription = values.number("platform.oversubscription", 1, false, 64, "1 (non-blocking) to 64");
  values.needs("platform.oversubscription", cluster.topology != Topology::single_switch,
               "platform.topology = fat-tree or rail-optimized (a single switch is non-blocking)");
  values.needs("platform.nodes_per_leaf", cluster.topology == Topology::fat_tree, "platform.topology = fat-tree");
  // 64-port switches: a spine joins up to 64 leaves; in three tiers it gives 32 ports to the leaves, 32 to the core.
  cluster.leaves_per_pod = values.text("platform.leaves_per_pod") == "auto"
                               ? (cluster.topology == Topology::fat_tree && fat_tree_leaves(cluster) > 64 ? 32 : 0)
                               : static_cast<int>(values.integer("platform.leaves_per_pod", 1, 512));
  values.needs("platform.leaves_per_pod", cluster.topology == Topology::fat_tree, "platform.topology = fat-tree");
  // The core routes every pair of pods, as a single switch every pair of nodes.
  if (cluster.topology == Topology::fat_tree && fat_tree_pods(cluster) > max_pairwise_routed)
    values.fail("platform.leaves_per_pod",
                "makes " + std::to_string(fat_tree_pods(cluster)) +
                    " pods, and the core routes every pair of them; accepted: at most " + std::to_string(max_pairwise_routed) +
                    " pods (" + std::to_string((fat_tree_leaves(cluster) + max_pairwise_routed - 1) / max_pairwise_routed) +
                    " or more leaves per pod)");
  cluster.pod_oversubscription = values.number("platform.pod_oversubscription", 1, false, 64, "1 (non-blocking) to 64");
  values.needs("platform.pod_oversubscription", cluster.topology == Topology::fat_tree && fat_tree_pods(cluster) > 1,
               "platform.topology = fat-tree with more leaves than platform.leaves_per_pod (pods under a core)");
  if (cluster.topology == Topology::single_switch && cluster.nodes > max_pairwise_routed)
    values.fail("platform.nodes", "a single switch routes every pair of nodes; accepted: up to " +
                                      std::to_string(max_pairwise_routed) +
                                      " nodes (more under platform.topology = fat-tree)");
  cluster.pcie_gen = values.text("platform.pcie_gen") == "auto"
                         ? gpu.pcie_gen
                         : static_cast<int>(values.integer("platform.pcie_gen", 3, 6));
  cluster.nvme_per_node = static_cast<int>(values.integer("platform.nvme_per_node", 0, 32));
  cluster.gpus_per_pcie_switch = static_cast<int>(values.integer("platform.gpus_per_pcie_switch", 1, 16));
  cluster.host_memory = values.quantity("platform.host_memory", parse_bytes);
  if (!(cluster.host_memory > 0))
    values.fail("platform.host_memory", "must be positive; accepted: a size such as 1.5TiB");
  cluster.host_memory_bandwidth = values.quantity("platform.host_memory_bandwidth", parse_bandwidth);
  if (!(cluster.host_memory_bandwidth > 0))
    values.fail("platform.host_memory_bandwidth", "must be positive; accepted: a bandwidth such as 200GBps");
  cluster.cpu_speed = values.quantity("platform.cpu_speed", parse_flops);
  if (!(cluster.cpu_speed > 0))
    values.fail("platform.cpu_speed", "must be positive; accepted: a speed such as 2Tf");
  return cluster;
}

std::string list_folder(const fs::path& folder, const std::string& extension) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(folder, error))
    if (entry.path().extension() == extension)
      names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  std::string list;
  for (const auto& name : names)
    list += (list.empty() ? "" : ", ") + name;
  return list.empty() ? "(none found in " + folder.string() + ")" : list;
}

} // namespace

const char* to_string(OffloadTier tier) {
  switch (tier) {
  case OffloadTier::none: return "none";
  case OffloadTier::cpu: return "cpu";
  case OffloadTier::nvme: return "nvme";
  }
  return "?";
}

const char* to_string(GradSync sync) { return sync == GradSync::last ? "last" : "every"; }

const char* to_string(Framework framework) {
  switch (framework) {
  case Framework::ddp: return "ddp";
  case Framework::megatron: return "megatron";
  case Framework::deepspeed: return "deepspeed";
  case Framework::fsdp2: return "fsdp2";
  }
  return "?";
}

const std::vector<std::pair<std::string, Schedule>>& schedule_names() {
  static const std::vector<std::pair<std::string, Schedule>> names = {
      {"gpipe", Schedule::gpipe}, {"1f1b", Schedule::one_f_one_b}, {"interleaved", Schedule::interleaved},
      {"zb-h1", Schedule::zb_h1}, {"zb-h2", Schedule::zb_h2},      {"zb-v", Schedule::zb_v},
      {"dualpipev", Schedule::dualpipev}, {"dualpipe", Schedule::dualpipe}};
  return names;
}

const char* to_string(Schedule schedule) { return name_of(schedule_names(), schedule); }

const char* to_string(Recompute recompute) {
  switch (recompute) {
  case Recompute::none: return "none";
  case Recompute::selective: return "selective";
  case Recompute::op: return "op";
  case Recompute::full: return "full";
  case Recompute::every: return "every";
  case Recompute::uniform: return "uniform";
  case Recompute::block: return "block";
  case Recompute::nth: return "nth";
  case Recompute::optimal: return "optimal";
  }
  return "?";
}


const po::options_description& scenario_options() {
  static const po::options_description description = [] {
    po::options_description options("Scenario keys ([section] key = value in the INI file, or --set section.key=value)");
    for (const auto& spec : option_specs())
      options.add_options()(spec.key,
                            po::value<std::string>()->default_value(spec.default_value,
                                                                    *spec.default_value ? spec.default_value : "none"),
                            spec.help);
    return options;
  }();
  return description;
}

void print_scenario_keys(std::ostream& out) {
  out << "Scenario keys: [section] key = value in the INI file, or --set section.key=value (default shown):\n";
  std::string section;
  for (const auto& spec : option_specs()) {
    const std::string key = spec.key;
    const std::string this_section = key.substr(0, key.find('.'));
    if (this_section != section) {
      out << "  [" << this_section << "]\n";
      section = this_section;
    }
    std::string assignment = key.substr(key.find('.') + 1) + " = " + (*spec.default_value ? spec.default_value : "(none)");
    if (assignment.size() < 34)
      assignment.resize(34, ' ');
    out << "    " << assignment << "  " << spec.help << '\n';
  }
}

fs::path data_dir() {
  if (const char* configured = std::getenv("TRAINSIM_DATA"); configured && *configured)
    return configured;
  return TRAINSIM_DATA_DIR;
}

fs::path resolve_data_file(const std::string& value, const std::string& folder, const std::string& extension,
                           const fs::path& scenario_dir, const std::string& where) {
  const fs::path as_given(value);
  std::vector<fs::path> candidates = {as_given, scenario_dir / as_given, scenario_dir / ".." / folder / as_given,
                                      data_dir() / folder / as_given};
  if (as_given.extension() != extension) {
    candidates.push_back(scenario_dir / ".." / folder / (value + extension));
    candidates.push_back(data_dir() / folder / (value + extension));
  }
  for (const auto& candidate : candidates) {
    std::error_code error;
    if (!value.empty() && fs::is_regular_file(candidate, error))
      return candidate.lexically_normal();
  }
  throw InputError(where + ": no file '" + value + "' found (as a path or in " + folder +
                   "/); available: " + list_folder(data_dir() / folder, extension));
}

namespace {

// A catalog name such as "llama2-7b" (never a path: those go in model.path) to its file.
fs::path resolve_catalog_name(const std::string& value, const std::string& folder, const std::string& extension,
                              const fs::path& scenario_dir, const std::string& where) {
  if (value.find_first_of("/\\") != std::string::npos || value == "." || value == "..")
    throw InputError(where + " = '" + value + "': a name from " + folder + "/ (one of: " +
                     list_folder(data_dir() / folder, extension) + "), not a path; give a file's path with model.path");
  const std::string file_name = fs::path(value).extension() == extension ? value : value + extension;
  for (const fs::path& candidate : {scenario_dir / ".." / folder / file_name, data_dir() / folder / file_name}) {
    std::error_code error;
    if (fs::is_regular_file(candidate, error))
      return candidate.lexically_normal();
  }
  throw InputError(where + ": no '" + value + "' in " + folder + "/; available: " +
                   list_folder(data_dir() / folder, extension));
}

// Whether `value` reads as a Hugging Face hub name ("org/model"): one '/', no path of ours.
bool is_hub_name(const std::string& value) {
  return std::count(value.begin(), value.end(), '/') == 1 && value.front() != '/' && value.front() != '.' &&
         value.back() != '/' && value.find('\\') == std::string::npos && fs::path(value).extension() != ".json";
}

} // namespace

fs::path resolve_hub_model(const std::string& hub, const std::string& where) {
  std::vector<fs::path> files;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(data_dir() / "models", error))
    if (entry.path().extension() == ".json")
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  const auto lower = [](std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    return text;
  };
  std::vector<std::string> known;
  for (const fs::path& file : files) {
    std::ifstream stream(file);
    const nlohmann::json config = nlohmann::json::parse(stream, nullptr, false);
    if (!config.is_object() || !config.contains("_name_or_path") || !config["_name_or_path"].is_string())
      continue;
    const std::string name = config["_name_or_path"].get<std::string>();
    if (lower(name) == lower(hub))
      return file.lexically_normal();
    known.push_back(name);
  }
  throw InputError(where + ": no config in models/ is '" + hub + "' (its _name_or_path); accepted: " +
                   (known.empty() ? std::string("(none)") : join(known, ", ")) +
                   ", a name in models/, or a config.json's path");
}

bool names_hub_model(const std::string& value, const fs::path& scenario_dir) {
  std::error_code error;
  return is_hub_name(value) && !fs::is_regular_file(value, error) && !fs::is_regular_file(scenario_dir / value, error);
}

fs::path resolve_model_file(const std::string& value, const fs::path& scenario_dir, const std::string& where) {
  if (names_hub_model(value, scenario_dir))
    return resolve_hub_model(value, where);
  return resolve_data_file(value, "models", ".json", scenario_dir, where);
}

std::string read_scenario_file(const fs::path& file) {
  std::error_code error;
  if (fs::is_directory(file, error))
    throw InputError(file.string() + ": is a directory; expected a scenario INI file such as scenarios/default.ini");
  if (!fs::is_regular_file(file, error))
    throw InputError(file.string() + ": no such scenario file (expected an INI file such as scenarios/default.ini)");
  std::ifstream stream(file);
  if (!stream)
    throw InputError(file.string() + ": cannot read the scenario file");
  std::stringstream buffer;
  buffer << stream.rdbuf();
  return buffer.str();
}

Scenario load_scenario(const fs::path& file, const std::vector<std::string>& overrides) {
  return parse_scenario(read_scenario_file(file), file, overrides);
}

std::vector<std::pair<std::string, std::string>> settings_in(const std::string& text, const fs::path& file) {
  std::vector<std::pair<std::string, std::string>> settings;
  for (const IniLine& line : read_ini(text, file)) {
    require_scenario_key(line.key, file.string() + ":" + std::to_string(line.line));
    settings.emplace_back(line.key, line.value);
  }
  return settings;
}

namespace {

// [model]: the model file, by catalog name or path.
void read_model_keys(const ValueReader& values, const fs::path& file, const fs::path& scenario_dir,
                     Scenario& scenario) {
  const bool has_name = !values.text("model.name").empty(), has_path = !values.text("model.path").empty();
  if (has_name == has_path)
    throw InputError(file.string() + ": [model] needs exactly one of name (one of: " +
                     list_folder(data_dir() / "models", ".json") + ") or path (a Hugging Face config.json)");
  if (has_name && is_hub_name(values.text("model.name")))
    scenario.model_file = resolve_hub_model(values.text("model.name"), values.raw("model.name").where + ": model.name");
  else if (has_name)
    scenario.model_file = resolve_catalog_name(values.text("model.name"), "models", ".json", scenario_dir,
                                               values.raw("model.name").where + ": model.name");
  else
    scenario.model_file = resolve_data_file(values.text("model.path"), "models", ".json", scenario_dir,
                                            values.raw("model.path").where + ": model.path");
  scenario.vocab_multiple = values.integer("model.vocab_multiple", 1, 1 << 20);
  if (values.text("model.mtp_layers") != "auto")
    scenario.mtp_layers = values.integer("model.mtp_layers", 0, 16);
}

// [platform]: a platform file, or a described cluster.
void read_platform_keys(const ValueReader& values, const fs::path& file, const fs::path& scenario_dir,
                        Scenario& scenario) {
  const bool has_file = !values.text("platform.file").empty(), described = !values.text("platform.gpu").empty();
  if (has_file && described)
    throw InputError(values.raw("platform.gpu").where + ": give either platform.file (" +
                     values.text("platform.file") + ") or a described cluster (platform.gpu = " +
                     values.text("platform.gpu") + "), not both");
  if (!has_file && !described)
    throw InputError(file.string() + ": [platform] needs file (one of: " + list_folder(data_dir() / "platforms", ".xml") +
                     ") or a described cluster (gpu = h100-sxm, nodes = 2, ...)");
  if (has_file) {
    for (const auto& spec : option_specs()) {
      const std::string key = spec.key;
      if (key.rfind("platform.", 0) == 0 && key != "platform.file" && key != "platform.calibration" && values.given(key))
        throw InputError(values.raw(key).where + ": " + key + " describes a generated cluster and needs platform.gpu "
                         "instead of platform.file");
    }
    scenario.platform_file = resolve_data_file(values.text("platform.file"), "platforms", ".xml", scenario_dir,
                                               values.raw("platform.file").where + ": platform.file");
  } else {
    scenario.cluster = cluster_from(values);
  }
}

// [parallel]: the layout, its schedule, rank order and stage split.
void read_layout_keys(const ValueReader& values, Scenario& scenario) {
  scenario.tp = static_cast<int>(values.integer("parallel.tp", 1, 1024));
  scenario.pp = static_cast<int>(values.integer("parallel.pp", 1, 4096));
  scenario.vpp = static_cast<int>(values.integer("parallel.vpp", 1, 1024));
  scenario.cp = static_cast<int>(values.integer("parallel.cp", 1, 4096));
  if (values.text("parallel.dp") == "auto") {
    // The GPUs the other degrees leave, so that a sweep over platform.nodes scales the job with
    // the cluster; a platform file's GPUs are known only once SimGrid loads it.
    if (!scenario.cluster)
      values.fail("parallel.dp", "auto fills a described cluster (platform.gpu, platform.nodes, ...); with "
                                 "platform.file accepted: a number");
    const long long gpus = static_cast<long long>(scenario.cluster->nodes) * scenario.cluster->gpus_per_node;
    const long long others = static_cast<long long>(scenario.tp) * scenario.pp * scenario.cp;
    if (gpus % others != 0)
      values.fail("parallel.dp", "auto: tp x pp x cp = " + std::to_string(others) + " does not divide the cluster's " +
                                     std::to_string(gpus) + " GPUs");
    scenario.dp = static_cast<int>(gpus / others);
  } else {
    scenario.dp = static_cast<int>(values.integer("parallel.dp", 1, max_ranks));
  }
  scenario.sp = values.boolean("parallel.sp");
  if (static_cast<double>(scenario.dp) * scenario.tp * scenario.pp * scenario.cp > static_cast<double>(max_ranks))
    values.fail("parallel.dp", "dp x tp x pp x cp exceeds " + std::to_string(max_ranks) + " ranks");
  if (scenario.sp && scenario.tp == 1)
    values.fail("parallel.sp", "sequence parallelism splits over the tensor-parallel group; it needs parallel.tp > 1");
  scenario.ep = static_cast<int>(values.integer("parallel.ep", 1, max_ranks));
  scenario.etp = values.text("parallel.etp") == "auto" ? scenario.tp
                                                       : static_cast<int>(values.integer("parallel.etp", 1, 1024));
  if (scenario.etp != scenario.tp && scenario.ep == 1)
    values.fail("parallel.etp", "splits the experts of an expert-parallel group; accepted with parallel.ep = 1: auto "
                                "or parallel.tp (" + std::to_string(scenario.tp) + ")");
  const long long stage_ranks = static_cast<long long>(scenario.dp) * scenario.cp * scenario.tp;
  if (stage_ranks % (static_cast<long long>(scenario.etp) * scenario.ep) != 0) {
    if (scenario.etp == scenario.tp)
      values.fail("parallel.ep", "does not divide parallel.dp x parallel.cp = " +
                                     std::to_string(static_cast<long long>(scenario.dp) * scenario.cp) +
                                     " (the experts are split over the data- and context-parallel ranks); accepted: a "
                                     "divisor of it" +
                                     (scenario.tp > 1 && stage_ranks % scenario.ep == 0
                                          ? ", or parallel.etp = 1 (whole experts over tp x dp x cp = " +
                                                std::to_string(stage_ranks) + " ranks)"
                                          : std::string()));
    values.fail(values.given("parallel.etp") ? "parallel.etp" : "parallel.ep",
                "etp x ep = " + std::to_string(static_cast<long long>(scenario.etp) * scenario.ep) +
                    " does not divide the tp x dp x cp = " + std::to_string(stage_ranks) +
                    " ranks of a stage, over which the expert layers fold; accepted: etp x ep a divisor of it");
  }
  if (values.text("parallel.schedule") == "auto")
    scenario.schedule = scenario.vpp > 1 ? Schedule::interleaved : Schedule::one_f_one_b;
  else
    scenario.schedule = values.choice("parallel.schedule", schedule_names());
  if (v_placement(scenario.schedule)) {
    if (values.given("parallel.vpp") && scenario.vpp != 2)
      values.fail("parallel.vpp", std::string(to_string(scenario.schedule)) +
                                      " places two model chunks on each pipeline rank; accepted with it: 2, or unset");
    scenario.vpp = 2;
  } else if (scenario.vpp > 1 && scenario.schedule != Schedule::interleaved) {
    values.fail("parallel.vpp", "virtual stages need parallel.schedule = interleaved (or zb-v, dualpipev or dualpipe, "
                                "with 2)");
  }
  values.needs("parallel.schedule", scenario.pp > 1, "parallel.pp > 1 (a schedule orders pipeline stages)");
  scenario.overlap_pairs = values.text("parallel.overlap_pairs") == "auto" ? pairs_passes(scenario.schedule)
                                                                         : values.boolean("parallel.overlap_pairs");
  if (scenario.overlap_pairs && !pairs_passes(scenario.schedule))
    values.fail("parallel.overlap_pairs", "runs the forward-backward pairs of DualPipe and DualPipeV; it needs "
                                          "parallel.schedule = dualpipe or dualpipev");
  if (two_directions(scenario.schedule) && scenario.pp % 2 != 0)
    values.fail("parallel.pp", "dualpipe pairs each pipeline rank r with its mirror pp - 1 - r; accepted with it: an "
                               "even number");
  if (splits_backward(scenario.schedule) && scenario.cp > 1)
    values.fail("parallel.schedule", std::string(to_string(scenario.schedule)) +
                                         " splits backwards in two, which is not simulated with context "
                                         "parallelism; accepted with parallel.cp = 1");
  values.needs("parallel.vpp", scenario.pp > 1, "parallel.pp > 1 (virtual stages split a pipeline rank's layers)");
  {
    auto dims = split(values.text("parallel.order"), '-');
    auto sorted = dims;
    std::sort(sorted.begin(), sorted.end());
    if (sorted != std::vector<std::string>{"cp", "dp", "pp", "tp"})
      values.fail("parallel.order", "not an order of tp, cp, dp and pp; accepted: four of them separated by '-', "
                                    "innermost first, e.g. tp-cp-dp-pp");
    scenario.order = values.text("parallel.order");
  }
  if (values.text("parallel.layers_per_stage") != "uniform") {
    for (const auto& part : split(values.text("parallel.layers_per_stage"), ',')) {
      long long layers = 0;
      if (!parse_integer(part, layers) || layers < 1)
        values.fail("parallel.layers_per_stage", "'" + part + "' is not a positive number of layers; accepted: "
                                                 "pp x vpp comma-separated counts, e.g. 10,12,12,14");
      scenario.layers_per_stage.push_back(layers);
    }
    // DualPipe's directions each pass the pp stages of the model.
    if (two_directions(scenario.schedule) && scenario.layers_per_stage.size() != static_cast<std::size_t>(scenario.pp))
      values.fail("parallel.layers_per_stage", "gives " + std::to_string(scenario.layers_per_stage.size()) +
                                                   " stages but dualpipe passes pp = " + std::to_string(scenario.pp) +
                                                   " in each direction; accepted: pp counts");
    if (!two_directions(scenario.schedule) &&
        scenario.layers_per_stage.size() != static_cast<std::size_t>(scenario.pp) * scenario.vpp)
      values.fail("parallel.layers_per_stage", "gives " + std::to_string(scenario.layers_per_stage.size()) +
                                                   " stages but pp x vpp = " + std::to_string(scenario.pp * scenario.vpp));
  }
  for (const auto& [key, layers] : {std::pair<const char*, long long*>{"parallel.first_stage_layers", &scenario.first_stage_layers},
                                    {"parallel.last_stage_layers", &scenario.last_stage_layers}}) {
    if (values.text(key) == "auto")
      continue;
    *layers = values.integer(key, 1, 1'000'000);
    values.needs(key, scenario.pp > 1, "parallel.pp > 1 (it sets a pipeline stage's layers)");
    if (layers == &scenario.last_stage_layers && v_placement(scenario.schedule) && !two_directions(scenario.schedule))
      values.fail(key, std::string("under ") + to_string(scenario.schedule) +
                           " the last pipeline rank holds the middle of the model (the first holds the output "
                           "layer); accepted with it: parallel.first_stage_layers");
    if (!scenario.layers_per_stage.empty())
      values.fail(key, "and parallel.layers_per_stage both split the layers; accepted: one of them");
  }
}

// The recompute modes with a number of layers: the mode, its name before ':' and an example.
struct CountedRecompute {
  Recompute mode;
  const char* name;
  const char* example;
};
constexpr CountedRecompute counted_recompute[] = {{Recompute::every, "every", "every:4"},
                                                  {Recompute::uniform, "uniform", "uniform:2"},
                                                  {Recompute::block, "block", "block:4"},
                                                  {Recompute::nth, "nth", "nth:2"}};

// memory.recompute = MODE:N: false when it is no such mode.
bool read_counted_recompute(const ValueReader& values, Scenario& scenario) {
  const std::string recompute = values.text("memory.recompute");
  for (const CountedRecompute& mode : counted_recompute) {
    if (recompute.rfind(std::string(mode.name) + ":", 0) != 0)
      continue;
    long long layers = 0;
    if (!parse_integer(recompute.substr(recompute.find(':') + 1), layers) || layers < 1 || layers > 100'000)
      values.fail("memory.recompute", std::string(mode.name) + ":N needs a whole number of layers N >= 1, e.g. " +
                                          mode.example);
    scenario.recompute = mode.mode;
    scenario.recompute_every = static_cast<int>(layers);
    return true;
  }
  return false;
}

// [memory]: the ZeRO stage and activation recompute.
void read_zero_and_recompute_keys(const ValueReader& values, Scenario& scenario) {
  scenario.zero = values.choice<int>("memory.zero", {{"0", 0}, {"1", 1}, {"2", 2}, {"3", 3}, {"fsdp", 3}});
  if (!values.given("memory.zero") && values.text("training.framework") == "fsdp2")
    scenario.zero = 3;
  scenario.prefetch_depth = static_cast<int>(values.integer("memory.prefetch_depth", 0, 64));
  if (!read_counted_recompute(values, scenario)) {
    scenario.recompute = values.choice<Recompute>("memory.recompute", {{"none", Recompute::none},
                                                                      {"selective", Recompute::selective},
                                                                      {"op", Recompute::op},
                                                                      {"full", Recompute::full},
                                                                      {"every:N", Recompute::every},
                                                                      {"uniform:N", Recompute::uniform},
                                                                      {"block:N", Recompute::block},
                                                                      {"nth:N", Recompute::nth},
                                                                      {"optimal", Recompute::optimal}});
    for (const CountedRecompute& mode : counted_recompute)
      if (scenario.recompute == mode.mode)
        values.fail("memory.recompute", std::string("give the number of layers, e.g. ") + mode.example);
  }
  if (values.text("memory.activation_budget") != "auto") {
    scenario.activation_budget = values.quantity("memory.activation_budget", parse_bytes);
    if (!(scenario.activation_budget > 0))
      values.fail("memory.activation_budget", "must be positive; accepted: auto or a size such as 40GiB");
  }
}

// [memory]: the training and gradient precisions.
void read_precision_keys(const ValueReader& values, Scenario& scenario) {
  const std::vector<std::pair<std::string, Precision>> precisions = {
      {"fp32", Precision::fp32}, {"fp16", Precision::fp16}, {"bf16", Precision::bf16}, {"fp8", Precision::fp8}};
  scenario.precision = values.choice<Precision>("memory.precision", precisions);
  const std::string grad_precision = values.text("memory.grad_precision");
  if (grad_precision == "auto")
    scenario.grad_precision = scenario.precision == Precision::fp16 ? Precision::fp16 : Precision::fp32;
  else if (grad_precision == "same")
    scenario.grad_precision = scenario.precision == Precision::fp8 ? Precision::bf16 : scenario.precision;
  else
    scenario.grad_precision = values.choice<Precision>(
        "memory.grad_precision",
        {{"auto", Precision::fp32}, {"same", Precision::fp32}, {"fp32", Precision::fp32}, {"fp16", Precision::fp16},
         {"bf16", Precision::bf16}});
  scenario.flash_attention = values.boolean("memory.flash_attention");
  scenario.fp32_grad_copy = values.boolean("memory.fp32_grad_copy");
  if (scenario.fp32_grad_copy)
    values.needs("memory.fp32_grad_copy", scenario.grad_precision != Precision::fp32,
                 "16-bit gradients (memory.grad_precision = fp16 or bf16); fp32 gradients need no fp32 copy");
}

// [memory]: where offloaded states and checkpoints live.
void read_offload_keys(const ValueReader& values, Scenario& scenario) {
  const std::vector<std::pair<std::string, OffloadTier>> tiers = {
      {"none", OffloadTier::none}, {"cpu", OffloadTier::cpu}, {"nvme", OffloadTier::nvme}};
  scenario.offload_optimizer = values.choice<OffloadTier>("memory.offload_optimizer", tiers);
  scenario.offload_params = values.choice<OffloadTier>("memory.offload_params", tiers);
  scenario.offload_activations =
      values.choice<bool>("memory.offload_activations", {{"none", false}, {"cpu", true}});
  scenario.pinned_buffer_bytes = values.quantity("memory.pinned_buffer_bytes", parse_bytes);
  if (!(scenario.pinned_buffer_bytes >= 2))
    values.fail("memory.pinned_buffer_bytes", "must be at least 2 bytes; accepted: a size such as 1GiB");
  scenario.delayed_update = values.boolean("memory.delayed_update");
}

// [memory]: what a GPU holds beyond the tensors of the program.
void read_runtime_memory_keys(const ValueReader& values, Scenario& scenario) {
  // CUDA context: with lazy module loading (PyTorch's default since 1.13) the context after one
  // small kernel took 287,047,680 bytes and 666,632,192 bytes with every kernel loaded eagerly
  // (cudaMemGetInfo, pytorch/pytorch PR #86509); "around 400MB" with lazy loading
  // (pytorch/pytorch issue #109888). A training step loads cuBLAS, attention and NCCL kernels
  // besides: its context lies between the two measurements, and the default, 512 MiB, in between.
  scenario.cuda_context_bytes = values.quantity("memory.cuda_context", parse_bytes);
  if (!(scenario.cuda_context_bytes >= 0))
    values.fail("memory.cuda_context", "must not be negative; accepted: a size such as 512MiB, or 0B");
  if (values.text("memory.nccl_buffers") != "auto") {
    scenario.nccl_buffer_bytes = values.quantity("memory.nccl_buffers", parse_bytes);
    if (!(scenario.nccl_buffer_bytes >= 0))
      values.fail("memory.nccl_buffers", "must not be negative; accepted: auto or a size such as 600MiB");
  }
  values.needs("memory.nccl_buffers", static_cast<double>(scenario.dp) * scenario.tp * scenario.pp * scenario.cp > 1,
               "more than one GPU (a single GPU creates no NCCL communicator)");
  // Fragmentation: GMLake (Guo et al., ASPLOS 2024, abstract) removed on average 15% (up to 33%)
  // fragmentation, reserved memory holding no tensor, that PyTorch's caching allocator left on
  // eight LLMs trained on A100-80GB: the default keeps that share of the reserved memory free.
  const std::string reserve = values.text("memory.reserve");
  try {
    scenario.reserve = {0, parse_bytes(reserve)};
  } catch (const UnitError&) {
    scenario.reserve = {values.number("memory.reserve", 0, false, 0.5,
                                      "a fraction from 0 to 0.5 (fragmentation, e.g. 0.15) or a size such as 4GiB"),
                        0};
  }
  if (!(scenario.reserve.bytes >= 0))
    values.fail("memory.reserve", "must not be negative; accepted: a fraction from 0 to 0.5 or a size such as 4GiB");
}

// [memory] settings whose precondition does not hold: refused, as they would have no effect.
void refuse_memory_keys_without_effect(const ValueReader& values, const Scenario& scenario) {
  values.needs("memory.activation_budget", scenario.recompute == Recompute::optimal, "memory.recompute = optimal");
  values.needs("memory.prefetch_depth", scenario.zero == 3,
               "memory.zero = 3 (only ZeRO-3 gathers parameters before their use)");
  values.needs("memory.pinned_buffer_bytes",
               scenario.offload_optimizer == OffloadTier::nvme || scenario.offload_params == OffloadTier::nvme,
               "memory.offload_optimizer or memory.offload_params = nvme (it stages NVMe traffic)");
  if (scenario.offload_params != OffloadTier::none && scenario.zero != 3)
    values.fail("memory.offload_params", "streams ZeRO-3 parameter shards; it needs memory.zero = 3");
  if (scenario.offload_params != OffloadTier::none && scenario.offload_optimizer == OffloadTier::none)
    values.fail("memory.offload_params", "needs memory.offload_optimizer = cpu or nvme: the updated parameters are "
                                         "produced where the optimizer runs");
  if (scenario.delayed_update && scenario.offload_optimizer == OffloadTier::none)
    values.fail("memory.delayed_update", "overlaps the CPU optimizer step; it needs memory.offload_optimizer = cpu or nvme");
  if (scenario.offload_activations &&
      (scenario.recompute == Recompute::none || scenario.recompute == Recompute::selective ||
       scenario.recompute == Recompute::op))
    values.fail("memory.offload_activations", "offloads activation checkpoints; it needs memory.recompute = full, "
                                              "every:N, nth:N or optimal");
}

// [training]: the batch and its accumulation, checked against the layout and memory techniques.
void read_training_keys(const ValueReader& values, Scenario& scenario) {
  scenario.seq_len = values.integer("training.seq_len", 1, 100'000'000);
  scenario.micro_batch = values.integer("training.micro_batch", 1, 1'000'000);
  const long long replica_batch = scenario.micro_batch * scenario.dp;  // cp, tp and pp ranks share a replica's batch
  if (values.text("training.global_batch") == "auto")
    scenario.global_batch = replica_batch;
  else
    scenario.global_batch = values.integer("training.global_batch", 1, 1'000'000'000);
  if (scenario.global_batch % replica_batch != 0)
    values.fail("training.global_batch",
                "not a multiple of micro_batch x dp = " + std::to_string(scenario.micro_batch) + " x " +
                    std::to_string(scenario.dp) + " = " + std::to_string(replica_batch) +
                    "; gradient accumulation steps must be a whole number");
  scenario.grad_accum = scenario.global_batch / replica_batch;
  // Megatron-Core's interleaved schedule takes the micro-batches in groups of N, pp <= N <= m, and
  // refuses a last group smaller than pp (schedules.py): with its default N = pp, m must be a
  // multiple of pp.
  const bool grouped = values.text("parallel.microbatch_group_size") != "auto";
  if (grouped && scenario.schedule != Schedule::interleaved)
    values.fail("parallel.microbatch_group_size", "groups the micro-batches of the interleaved schedule; it needs "
                                                  "parallel.schedule = interleaved");
  if (scenario.schedule == Schedule::interleaved && scenario.pp > 1) {
    const long long m = scenario.grad_accum;
    scenario.microbatch_group = grouped ? values.integer("parallel.microbatch_group_size", 1, 1LL << 40) : scenario.pp;
    const long long n = scenario.microbatch_group, rest = m % n;
    const std::string accepted = "; accepted: m a multiple of pp, or parallel.microbatch_group_size = N with pp <= N "
                                 "<= m and m mod N either 0 or at least pp";
    if (!grouped && rest != 0)
      values.fail("training.global_batch", "gives " + std::to_string(m) + " micro-batches per pipeline, not a multiple "
                                               "of pp = " + std::to_string(scenario.pp) +
                                               " as the interleaved schedule needs in groups of pp" + accepted);
    if (grouped && n < scenario.pp)
      values.fail("parallel.microbatch_group_size", "is fewer than pp = " + std::to_string(scenario.pp) + accepted);
    if (grouped && n > m)
      values.fail("parallel.microbatch_group_size",
                  "is more than the " + std::to_string(m) + " micro-batches per pipeline" + accepted);
    if (grouped && rest > 0 && rest < scenario.pp)
      values.fail("parallel.microbatch_group_size",
                  "leaves a last group of " + std::to_string(rest) + " of the " + std::to_string(m) +
                      " micro-batches per pipeline, fewer than pp = " + std::to_string(scenario.pp) + accepted);
  }
  // DualPipeV's steady state starts after 2 pp forwards on the first rank (PyTorch's
  // ScheduleDualPipeV refuses fewer micro-batches than virtual stages).
  if (scenario.schedule == Schedule::dualpipev && scenario.grad_accum < 2LL * scenario.pp)
    values.fail("training.global_batch", "gives " + std::to_string(scenario.grad_accum) +
                                             " micro-batches per pipeline; dualpipev needs at least 2 x pp = " +
                                             std::to_string(2 * scenario.pp));
  // DualPipe feeds half of them from each end, at least pp each (deepseek-ai/DualPipe's assertion).
  if (two_directions(scenario.schedule) && (scenario.grad_accum < 2LL * scenario.pp || scenario.grad_accum % 2 != 0))
    values.fail("training.global_batch", "gives " + std::to_string(scenario.grad_accum) +
                                             " micro-batches per pipeline; dualpipe feeds half from each end and "
                                             "needs an even number of at least 2 x pp = " +
                                             std::to_string(2 * scenario.pp));
  if (scenario.seq_len % scenario.cp != 0)
    values.fail("training.seq_len", "not divisible by parallel.cp = " + std::to_string(scenario.cp));
  if (scenario.sp && scenario.seq_len / scenario.cp % scenario.tp != 0)
    values.fail("training.seq_len", "the sequence of each cp rank is not divisible by tp = " +
                                        std::to_string(scenario.tp) + ", as sequence parallelism needs");
  if (scenario.zero > max_pipeline_zero_stage && scenario.pp > 1)
    values.fail("memory.zero", "ZeRO-2/3 shard gradients that pipeline parallelism accumulates across micro-batches; "
                               "with pp > 1 accepted: 0 or 1 (Megatron's distributed optimizer)");
  if (scenario.offload_activations && scenario.pp > 1)
    values.fail("memory.offload_activations", "offloading activation checkpoints is simulated without pipelines; "
                                              "with parallel.pp > 1 accepted: none");
  if (scenario.grad_accum > 100'000)
    values.fail("training.global_batch", "gives more than 100000 accumulation steps per step");
  scenario.tokens = values.quantity("training.tokens", parse_tokens);
}

// training.framework: named, or chosen from what the layout and memory keys ask for; each framework
// accepts the ZeRO stages and offloads it has.
void read_framework_key(const ValueReader& values, Scenario& scenario) {
  const bool offloads = scenario.offload_optimizer != OffloadTier::none || scenario.offload_params != OffloadTier::none ||
                        scenario.offload_activations;
  if (values.text("training.framework") == "auto") {
    if (offloads || scenario.zero == 2)
      scenario.framework = Framework::deepspeed;
    else if (scenario.zero == 3)
      scenario.framework = Framework::fsdp2;
    else if (scenario.tp > 1 || scenario.pp > 1 || scenario.cp > 1 || scenario.ep > 1)
      scenario.framework = Framework::megatron;
    else
      scenario.framework = scenario.zero == 1 ? Framework::deepspeed : Framework::ddp;
    return;
  }
  scenario.framework = values.choice<Framework>("training.framework", {{"megatron", Framework::megatron},
                                                                       {"deepspeed", Framework::deepspeed},
                                                                       {"fsdp2", Framework::fsdp2},
                                                                       {"ddp", Framework::ddp}});
  const std::string stage = std::to_string(scenario.zero);
  if (scenario.framework == Framework::ddp && scenario.zero != 0)
    values.fail("training.framework", "PyTorch DDP keeps whole model states; with memory.zero = " + stage +
                                          " accepted: deepspeed, fsdp2 (ZeRO-3) or megatron (ZeRO-1)");
  if (scenario.framework == Framework::megatron && scenario.zero > 1)
    values.fail("training.framework", "Megatron-Core shards optimizer states only (its distributed optimizer, "
                                          "ZeRO-1); with memory.zero = " + stage + " accepted: " +
                                          (scenario.zero == 3 ? "deepspeed or fsdp2" : "deepspeed"));
  if (scenario.framework == Framework::fsdp2 && scenario.zero != 3)
    values.fail("training.framework", "FSDP2 shards parameters, gradients and optimizer states (ZeRO-3); with "
                                          "memory.zero = " + stage + " accepted: megatron, deepspeed or ddp");
  if (scenario.framework == Framework::fsdp2 && scenario.fp32_grad_copy)
    values.fail("training.framework", "FSDP2 keeps its gradients in fp32 already; with memory.fp32_grad_copy = true "
                                          "accepted: megatron or deepspeed");
  if (scenario.framework != Framework::deepspeed && offloads)
    values.fail("training.framework", "offload is simulated as DeepSpeed's ZeRO-Offload and ZeRO-Infinity; with "
                                          "memory.offload_* accepted: deepspeed or auto");
}

// The zero-bubble schedules are Megatron's (the authors' fork, Transformer Engine's
// delay_wgrad_compute) and PyTorch's (torch.distributed.pipelining); DeepSpeed's pipeline engine
// runs 1F1B only.
void refuse_schedule_without_framework(const ValueReader& values, const Scenario& scenario) {
  if (splits_backward(scenario.schedule) && scenario.framework == Framework::deepspeed)
    values.fail("parallel.schedule", std::string(to_string(scenario.schedule)) +
                                         " is not in DeepSpeed's pipeline engine (training.framework = deepspeed" +
                                         (values.text("training.framework") == "auto" ? ", as offload implies" : "") +
                                         "); accepted with it: 1f1b or gpipe");
}

// [compute]: how kernels are timed.
// [moe]: the routing a mixture's step is simulated with.
// A routing file: rows of non-negative token counts, one per expert layer, separated by commas
// (blank lines and lines from '#' on skipped); their number and width are checked against the
// model when the workload is built.
std::vector<std::vector<double>> read_routing_file(const fs::path& path) {
  std::ifstream stream(path);
  if (!stream)
    throw InputError(path.string() + ": cannot read the routing file");
  std::vector<std::vector<double>> rows;
  std::string line;
  for (int number = 1; std::getline(stream, line); ++number) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty())
      continue;
    std::vector<double> row;
    for (const std::string& field : split(line, ',')) {
      double count = -1;
      try {
        count = parse_count(trim(field));
      } catch (const UnitError&) {
      }
      if (!(count >= 0) || !std::isfinite(count))
        throw InputError(path.string() + ":" + std::to_string(number) + ": '" + trim(field) +
                         "' is not a token count; accepted: non-negative numbers separated by commas, a row per "
                         "expert layer");
      row.push_back(count);
    }
    if (std::accumulate(row.begin(), row.end(), 0.0) <= 0)
      throw InputError(path.string() + ":" + std::to_string(number) +
                       ": no tokens in the row; accepted: counts of which at least one is positive");
    rows.push_back(std::move(row));
  }
  if (rows.empty())
    throw InputError(path.string() + ": no rows; accepted: a row of token counts per expert layer, or one for all");
  return rows;
}

void read_moe_keys(const ValueReader& values, const fs::path& scenario_dir, Scenario& scenario) {
  const std::string routing = values.text("moe.routing");
  if (routing.rfind("file:", 0) == 0) {
    // A path in the scenario is relative to its folder (as platform.calibration's), one from
    // --set to the working directory; either may name a file in scenarios/.
    const std::string name = routing.substr(5);
    const bool from_command_line = values.raw("moe.routing").where.rfind("--set", 0) == 0;
    scenario.routing.file =
        resolve_data_file(from_command_line || fs::path(name).is_absolute() ? name : (scenario_dir / name).string(),
                          "scenarios", ".csv", scenario_dir, values.raw("moe.routing").where + ": moe.routing");
    scenario.routing.layer_loads = read_routing_file(scenario.routing.file);
  } else if (routing.rfind("zipf:", 0) == 0) {
    double exponent = 0;
    try {
      exponent = parse_count(routing.substr(5));
    } catch (const UnitError&) {
      exponent = -1;
    }
    if (!(exponent > 0 && exponent <= 10))
      values.fail("moe.routing", "the exponent is not a number in (0, 10]; accepted: uniform, zipf:S (e.g. zipf:1.2) "
                                 "or file:PATH");
    scenario.routing.zipf = exponent;
  } else if (routing != "uniform") {
    values.fail("moe.routing", "accepted: uniform, zipf:S (e.g. zipf:1.2) or file:PATH");
  }
  if (values.text("moe.capacity_factor") != "none")
    scenario.routing.capacity_factor =
        values.number("moe.capacity_factor", 1, false, 1000, "none (dropless) or a number from 1 to 1000, e.g. 1.25");
  const std::string dispatch = values.text("moe.dispatch_precision");
  if (dispatch != "activations" && dispatch != "fp8")
    values.fail("moe.dispatch_precision", "accepted: activations or fp8");
  scenario.routing.fp8_dispatch = dispatch == "fp8";
  scenario.routing.dispatcher = values.choice<TokenDispatcher>(
      "moe.dispatcher", {{"alltoall", TokenDispatcher::all_to_all},
                         {"allgather", TokenDispatcher::all_gather},
                         {"deepep", TokenDispatcher::deepep}});
  if (scenario.routing.dispatcher == TokenDispatcher::all_gather) {
    if (scenario.routing.fp8_dispatch)
      values.fail("moe.dispatcher", "allgather gathers the tokens in the activations' precision; fp8 quantizes the "
                                    "all-to-all's copies; accepted with moe.dispatch_precision = fp8: alltoall or deepep");
    if (scenario.tp > 1 || scenario.etp > 1)
      values.fail("moe.dispatcher", "allgather is simulated over the ep group without tensor parallelism (Megatron "
                                    "gathers over tp x ep); accepted with parallel.tp or parallel.etp > 1: alltoall");
  }
  if (scenario.routing.dispatcher == TokenDispatcher::deepep) {
    if (scenario.etp > 1)
      values.fail("moe.dispatcher", "deepep is simulated with whole experts (each token once per GPU of its experts); "
                                    "accepted with it: parallel.etp = 1");
    // Which GPUs a token reaches is known in expectation for even routing only.
    if (!scenario.routing.uniform())
      values.fail("moe.dispatcher", "deepep's exchange is simulated under uniform routing (the GPUs and nodes a token "
                                    "reaches are expected counts of an even draw); accepted with moe.routing = " +
                                        values.text("moe.routing") + ": alltoall");
  }
}

void read_compute_keys(const ValueReader& values, Scenario& scenario) {
  scenario.efficiency.model = values.choice<ComputeModel>(
      "compute.model",
      {{"auto", ComputeModel::automatic}, {"kernels", ComputeModel::kernels}, {"roofline", ComputeModel::roofline}});
  scenario.efficiency.matmul = values.efficiency("compute.matmul_efficiency");
  scenario.efficiency.memory = values.efficiency("compute.memory_efficiency");
  // Under auto they time the GPUs without a kernel calibration, which only the platform tells.
  for (const char* key : {"compute.matmul_efficiency", "compute.memory_efficiency"})
    values.needs(key, scenario.efficiency.model != ComputeModel::kernels,
                 "compute.model = roofline or auto (kernels take their GPU generation's calibration)");
  scenario.efficiency.allow_tf32 = values.boolean("compute.allow_tf32");
  // Megatron-Core runs attention through Transformer Engine; PyTorch's scaled_dot_product_attention
  // (FSDP2, DDP, DeepSpeed's models) through its FlashAttention-2 backend.
  const AttentionKernel framework_attention =
      scenario.framework == Framework::megatron ? AttentionKernel::transformer_engine : AttentionKernel::fa2;
  scenario.efficiency.attention = values.choice<AttentionKernel>(
      "compute.attention_kernel", {{"auto", framework_attention},
                                   {"fa2", AttentionKernel::fa2},
                                   {"fa3", AttentionKernel::fa3},
                                   {"cudnn", AttentionKernel::cudnn},
                                   {"te", AttentionKernel::transformer_engine}});
  values.needs("compute.attention_kernel", scenario.efficiency.model != ComputeModel::roofline,
               "compute.model = kernels or auto (the roofline times attention with the other matmuls)");
  values.needs("compute.attention_kernel", scenario.flash_attention,
               "memory.flash_attention = true (eager attention is GEMMs and a softmax)");
  scenario.comm_slowdown = values.number("compute.comm_slowdown", 0, false, 1, "a number from 0 to 1, such as 0.189");
  if (!scenario.efficiency.allow_tf32)
    values.needs("compute.allow_tf32", scenario.precision == Precision::fp32,
                 "memory.precision = fp32 (16-bit and fp8 matmuls do not use TF32)");
}

// comm.collectives, comm.algorithm and comm.protocol: what NCCL's tuner may choose.
void read_comm_tuning(const ValueReader& values, CommTuning& tuning) {
  tuning.ideal = values.choice("comm.collectives", comm_collectives_names());
  tuning.algorithm = values.choice("comm.algorithm", comm_algorithm_names());
  tuning.protocol = values.choice("comm.protocol", comm_protocol_names());
  const auto [key, problem] = comm_tuning_conflict(tuning);
  if (!key.empty())
    values.fail(key, problem);
}

// comm.overlap_param_gather: Megatron-Core's --overlap-param-gather, off unless asked for; its
// arguments refuse it without the distributed optimizer or without --overlap-grad-reduce.
void read_param_gather_key(const ValueReader& values, Scenario& scenario) {
  scenario.overlap_param_gather = values.text("comm.overlap_param_gather") != "auto" &&
                                  values.boolean("comm.overlap_param_gather");
  if (!scenario.overlap_param_gather)
    return;
  if (scenario.framework != Framework::megatron)
    values.fail("comm.overlap_param_gather", std::string("is Megatron-Core's; with training.framework = ") +
                                                 to_string(scenario.framework) + " accepted: false or auto");
  if (scenario.zero != 1 || scenario.dp * scenario.cp < 2)
    values.fail("comm.overlap_param_gather", "needs parameters to gather: the distributed optimizer (memory.zero = 1) "
                                             "over more than one data-parallel rank");
  if (!scenario.overlap_grad_reduce)
    values.fail("comm.overlap_param_gather", "Megatron-Core needs comm.overlap_grad_reduce = true with it");
}

// comm.tp_comm_overlap: Megatron-Core's --tp-comm-overlap, off unless asked for; its arguments
// refuse it without sequence parallelism.
void read_tp_overlap_key(const ValueReader& values, Scenario& scenario) {
  scenario.tp_comm_overlap = values.text("comm.tp_comm_overlap") != "auto" && values.boolean("comm.tp_comm_overlap");
  if (!scenario.tp_comm_overlap)
    return;
  if (!scenario.sp)
    values.fail("comm.tp_comm_overlap", "Megatron-Core overlaps tensor-parallel communication only under sequence "
                                        "parallelism; accepted with parallel.sp = true");
  if (scenario.framework != Framework::megatron)
    values.fail("comm.tp_comm_overlap", std::string("is Megatron-Core's (Transformer Engine); with training.framework = ") +
                                            to_string(scenario.framework) + " accepted: false or auto");
  if (scenario.cp > 1)
    values.fail("comm.tp_comm_overlap", "is not simulated together with context parallelism; accepted with parallel.cp = 1");
  if (splits_backward(scenario.schedule))
    values.fail("comm.tp_comm_overlap", std::string("is not simulated with a backward split in two (parallel.schedule = ") +
                                            to_string(scenario.schedule) + "); accepted: 1f1b, interleaved or gpipe");
}

// [comm]: buckets, rings, fidelity and when gradients are reduced.
void read_comm_keys(const ValueReader& values, Scenario& scenario) {
  // DeepSpeed's overlap_comm defaults to true for ZeRO-3 only (DeepSpeedZeroConfig's overlap_comm
  // validator); Megatron-Core's --overlap-grad-reduce is off unless asked for; PyTorch DDP and FSDP2
  // launch each bucket's (each layer's) reduction from the backward hooks.
  if (values.text("comm.overlap_grad_reduce") == "auto")
    scenario.overlap_grad_reduce = scenario.framework == Framework::deepspeed ? scenario.zero == 3
                                                                               : scenario.framework != Framework::megatron;
  else
    scenario.overlap_grad_reduce = values.boolean("comm.overlap_grad_reduce");
  read_param_gather_key(values, scenario);
  read_tp_overlap_key(values, scenario);
  const double element = bytes_per_element(scenario.grad_precision);
  if (values.text("comm.bucket_size") == "auto") {
    // PyTorch DDP's bucket_cap_mb (25); DeepSpeed's reduce_bucket_size (5e8 elements); Megatron-Core's
    // DistributedDataParallel: max(40,000,000, 1,000,000 x dp) parameters when overlapping, else no
    // bucketing; FSDP2 reduce-scatters each sharded module's (layer's) gradients.
    constexpr double ddp_bucket_bytes = 25.0 * 1024 * 1024;
    constexpr double deepspeed_bucket_elements = 5e8;
    switch (scenario.framework) {
    case Framework::ddp: scenario.bucket_bytes = ddp_bucket_bytes; break;
    case Framework::deepspeed: scenario.bucket_bytes = deepspeed_bucket_elements * element; break;
    case Framework::megatron:
      scenario.bucket_bytes = scenario.overlap_grad_reduce
                                  ? std::max(4e7, 1e6 * scenario.dp * scenario.cp) * element
                                  : std::numeric_limits<double>::max();
      break;
    case Framework::fsdp2: scenario.bucket_per_layer = true; break;
    }
  } else {
    if (scenario.framework == Framework::fsdp2)
      values.fail("comm.bucket_size", "FSDP2 reduce-scatters each layer's gradients at once; accepted: auto, or "
                                      "another training.framework");
    if (scenario.framework == Framework::megatron && !scenario.overlap_grad_reduce)
      values.fail("comm.bucket_size", "Megatron-Core reduces all gradients at once without overlap_grad_reduce; "
                                      "accepted: auto, or comm.overlap_grad_reduce = true");
    scenario.bucket_bytes = values.quantity("comm.bucket_size", parse_bytes);
  }
  if (scenario.bucket_bytes < 1)
    values.fail("comm.bucket_size", "must be at least 1 byte; accepted: a size such as 25MiB");
  scenario.bandwidth_efficiency = values.efficiency("comm.bandwidth_efficiency");
  scenario.channels = values.text("comm.channels") == "auto" ? 0 : static_cast<int>(values.integer("comm.channels", 1, 64));
  scenario.fast_collectives =
      values.choice<bool>("comm.fidelity", {{"flows", false}, {"fast", true}});
  read_comm_tuning(values, scenario.comm_tuning);
  if (values.text("comm.grad_sync") == "auto")
    scenario.grad_sync = scenario.zero >= 2 ? GradSync::every : GradSync::last;
  else
    scenario.grad_sync = values.choice<GradSync>("comm.grad_sync", {{"auto", GradSync::last},
                                                                    {"last", GradSync::last},
                                                                    {"every", GradSync::every}});
  values.needs("comm.grad_sync", scenario.grad_accum > 1,
               "gradient accumulation (training.global_batch > micro_batch x dp): with one micro-batch "
               "the last is every one");
  scenario.pp_scatter_gather = values.boolean("comm.pp_scatter_gather");
  values.needs("comm.pp_scatter_gather", scenario.pp > 1 && scenario.tp > 1 && !scenario.sp,
               "parallel.pp > 1 and parallel.tp > 1 without parallel.sp (with sp the transfers are split already)");
}

// The frameworks' expert parallelism: Megatron-Core's and DeepSpeed-MoE's (ZeRO 0-2, ZeRO-Offload),
// and torchtitan's under FSDP2, which shards the experts over the expert-data-parallel mesh.
// DeepSpeed's MoE layers do not run under ZeRO-3 (its stage 3 partitions every parameter over the
// whole data-parallel group), so ZeRO-Infinity's parameter offload is out too; PyTorch DDP has
// no expert groups.
void refuse_with_expert_parallelism(const ValueReader& values, const Scenario& scenario) {
  if (scenario.ep == 1)
    return;
  if (scenario.framework == Framework::ddp)
    values.fail("training.framework", "PyTorch DDP has no expert-parallel groups; with parallel.ep > 1 accepted: "
                                      "megatron, deepspeed or fsdp2");
  const bool offloads = scenario.offload_optimizer != OffloadTier::none || scenario.offload_params != OffloadTier::none ||
                        scenario.offload_activations;
  if (scenario.framework == Framework::deepspeed && scenario.zero == 3)
    values.fail("memory.zero", offloads ? "DeepSpeed's MoE layers run under ZeRO stages 0-2 (and with them ZeRO-Offload, "
                                          "not ZeRO-Infinity's parameter offload); with parallel.ep > 1 and offload "
                                          "accepted: 0, 1 or 2"
                                        : "DeepSpeed's MoE layers run under ZeRO stages 0-2; with parallel.ep > 1 and "
                                          "ZeRO-3 accepted: training.framework = fsdp2 (torchtitan's experts sharded "
                                          "over the expert-data-parallel group)");
  if (scenario.offload_optimizer != OffloadTier::none && scenario.pp > 1)
    values.fail("memory.offload_optimizer", "with parallel.ep > 1 the offloaded optimizer is simulated without pipelines; "
                                            "with parallel.pp > 1 accepted: none");
  if (scenario.framework == Framework::megatron)
    return;
  const std::string framework = to_string(scenario.framework);
  // DeepSpeed-MoE (enable_expert_tensor_parallelism) and torchtitan split the experts over tp or not at all.
  if (scenario.etp != 1 && scenario.etp != scenario.tp)
    values.fail("parallel.etp", framework + " splits the experts over the tensor-parallel group or not at all; accepted "
                                "under it: 1 or parallel.tp = " + std::to_string(scenario.tp) +
                                    " (other splits: training.framework = megatron)");
  const bool has_dispatcher = scenario.routing.dispatcher == TokenDispatcher::all_to_all ||
                              (scenario.routing.dispatcher == TokenDispatcher::deepep && scenario.framework == Framework::fsdp2);
  if (!has_dispatcher)
    values.fail("moe.dispatcher", std::string(scenario.framework == Framework::fsdp2
                                                  ? "torchtitan dispatches by all-to-all or DeepEP; accepted under fsdp2: alltoall or deepep"
                                                  : "DeepSpeed-MoE dispatches by all-to-all; accepted under deepspeed: alltoall") +
                                      " (allgather: training.framework = megatron)");
}

// Every key with its effective value; derived values where "auto" chose one.
void record_settings(const ValueReader& values, Scenario& scenario) {
  for (const auto& spec : option_specs())
    scenario.settings[spec.key] = values.text(spec.key);
  scenario.settings["training.global_batch"] = std::to_string(scenario.global_batch);
  scenario.settings["memory.grad_precision"] = to_string(scenario.grad_precision);
  scenario.settings["memory.zero"] = std::to_string(scenario.zero);
  scenario.settings["comm.grad_sync"] = to_string(scenario.grad_sync);
  scenario.settings["parallel.schedule"] = to_string(scenario.schedule);
  scenario.settings["parallel.vpp"] = std::to_string(scenario.vpp);
  scenario.settings["parallel.etp"] = std::to_string(scenario.etp);
  scenario.settings["parallel.overlap_pairs"] = scenario.overlap_pairs ? "true" : "false";
  scenario.settings["training.framework"] = to_string(scenario.framework);
  scenario.settings["compute.attention_kernel"] = to_string(scenario.efficiency.attention);
  scenario.settings["comm.overlap_grad_reduce"] = scenario.overlap_grad_reduce ? "true" : "false";
  scenario.settings["comm.overlap_param_gather"] = scenario.overlap_param_gather ? "true" : "false";
  scenario.settings["comm.tp_comm_overlap"] = scenario.tp_comm_overlap ? "true" : "false";
  scenario.settings["comm.bucket_size"] = scenario.bucket_per_layer ? "each layer"
                                          : scenario.bucket_bytes == std::numeric_limits<double>::max()
                                              ? "all gradients"
                                              : format_bytes(scenario.bucket_bytes);
}

// platform.calibration: the calibration file's keys join the scenario's as if written there; one
// the scenario sets to another value is refused (which would win is not obvious). A path in the
// scenario file is relative to its folder, one from --set to the working directory.
Calibration apply_calibration(std::map<std::string, RawValue>& values, const fs::path& scenario_dir) {
  const RawValue& key = values.at("platform.calibration");
  Calibration calibration;
  if (key.value.empty())
    return calibration;
  const std::string where = key.where + ": platform.calibration = '" + key.value + "'";
  const bool from_command_line = key.where.rfind("--set", 0) == 0;
  calibration.file = from_command_line || fs::path(key.value).is_absolute() ? fs::path(key.value) : scenario_dir / key.value;
  std::error_code error;
  std::ifstream stream(calibration.file);
  if (!fs::is_regular_file(calibration.file, error) || !stream)
    throw InputError(where + ": no such file; accepted: a file written by trainsim calibrate");
  std::stringstream buffer;
  buffer << stream.rdbuf();
  std::map<std::string, std::string> seen;
  for (const IniLine& line : read_ini(buffer.str(), calibration.file)) {
    const std::string at = calibration.file.string() + ":" + std::to_string(line.line);
    if (line.key != "calibration.gpu" && line.key != "compute.model" && line.key != "compute.matmul_efficiency" &&
        line.key != "comm.bandwidth_efficiency")
      throw InputError(at + ": '" + line.key + "' is not a calibration key; accepted: calibration.gpu, compute.model, "
                            "compute.matmul_efficiency, comm.bandwidth_efficiency");
    if (!seen.emplace(line.key, at).second)
      throw InputError(at + ": '" + line.key + "' is set twice (first at " + seen.at(line.key) + ")");
    if (line.key == "calibration.gpu") {
      calibration.gpu = line.value;
      continue;
    }
    // The efficiencies a calibration holds are the roofline's.
    if (line.key == "compute.model" && line.value != "roofline")
      throw InputError(at + ": compute.model = '" + line.value + "'; accepted: roofline (calibrate fits the roofline)");
    const RawValue& scenario_value = values.at(line.key);
    if (scenario_value.given && scenario_value.value != line.value)
      throw InputError(at + ": " + line.key + " = " + line.value + ", but " + scenario_value.where + " sets " +
                       scenario_value.value + "; accepted: one of them (the calibration's, or the scenario's without "
                       "platform.calibration)");
    values[line.key] = {line.value, at};
    calibration.keys.push_back(line.key);
  }
  if (calibration.gpu.empty())
    throw InputError(calibration.file.string() + ": no [calibration] gpu; accepted: a file written by trainsim calibrate");
  return calibration;
}

} // namespace

void require_calibration_for(const Scenario& scenario, const std::string& gpu_model) {
  if (!scenario.calibration.gpu.empty() && scenario.calibration.gpu != gpu_model)
    throw InputError(scenario.calibration.file.string() + ": fitted on " + scenario.calibration.gpu + ", but the platform's GPUs are " +
                     gpu_model + "; accepted: a calibration fitted on " + gpu_model + " (trainsim calibrate on such a machine)");
}

Scenario parse_scenario(const std::string& text, const fs::path& file, const std::vector<std::string>& overrides) {
  const fs::path scenario_dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  std::map<std::string, RawValue> raw = read_values(text, file, overrides);
  Scenario scenario;
  scenario.calibration = apply_calibration(raw, scenario_dir);
  const ValueReader values(std::move(raw));
  scenario.file = file;
  scenario.name = file.stem().string();
  // In this order: a key's checks read the keys before it, and the first problem is reported.
  read_model_keys(values, file, scenario_dir, scenario);
  read_platform_keys(values, file, scenario_dir, scenario);
  read_layout_keys(values, scenario);
  read_zero_and_recompute_keys(values, scenario);
  read_precision_keys(values, scenario);
  read_offload_keys(values, scenario);
  read_runtime_memory_keys(values, scenario);
  refuse_memory_keys_without_effect(values, scenario);
  read_training_keys(values, scenario);
  read_framework_key(values, scenario);
  refuse_schedule_without_framework(values, scenario);
  read_compute_keys(values, scenario);
  read_comm_keys(values, scenario);
  read_moe_keys(values, scenario_dir, scenario);
  refuse_with_expert_parallelism(values, scenario);
  record_settings(values, scenario);
  return scenario;
}

ClusterSpec parse_cluster(const std::map<std::string, std::pair<std::string, std::string>>& given) {
  std::map<std::string, RawValue> values;
  for (const auto& [key, value] : given)
    values[key] = {value.first, value.second, true};
  for (const auto& spec : option_specs())
    if (std::string(spec.key).rfind("platform.", 0) == 0 && !values.count(spec.key))
      values[spec.key] = {spec.default_value, std::string("default of ") + spec.key, false};
  if (values.at("platform.gpu").value.empty())
    throw InputError("--gpu is required; accepted: " + gpu_keys(", "));
  return cluster_from(ValueReader(std::move(values)));
}

} // namespace trainsim
