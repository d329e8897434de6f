#pragma once
// A scenario: what to train, on which platform, with which strategy.
// Read from an INI file (sections and keys listed by scenario_options()) plus
// "--set section.key=value" overrides, validated here so that later stages only
// see sensible values. Every problem is an InputError naming the file, line or key.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/comm_tuning.hpp"
#include "cluster/cluster.hpp"
#include "common/precision.hpp"
#include "config/schedule.hpp"

namespace trainsim {

// Per pipeline rank's chunk of layers, N = `recompute_every`: every: segments of N layers, all
// checkpointed but the last (torch checkpoint_sequential); uniform: segments of N layers, all
// checkpointed (Megatron's --recompute-method uniform); block: the first N layers checkpointed
// one by one, the others keeping their activations (Megatron's block); nth: every Nth layer
// checkpointed, the others keeping theirs (torchtitan's selective_ac_option = N); optimal: a
// per-layer plan that fits a budget. op: torchtitan's op-level selective activation checkpointing.
enum class Recompute { none, selective, op, full, every, uniform, block, nth, optimal };
// When gradients are reduced under accumulation: after the last micro-batch, or after each one.
enum class GradSync { last, every };
// Where offloaded model states live: on the GPU (none), in host DRAM, or on the node's NVMe drives.
enum class OffloadTier { none, cpu, nvme };

// The training framework a scenario imitates: it sets the defaults of how gradients are bucketed
// and reduced and how model states are kept (scenario.cpp cites each).
enum class Framework { ddp, megatron, deepspeed, fsdp2 };

// platform.calibration: the file a scenario took efficiencies from, the GPU model it was fitted
// on (the platform's must be the same) and the keys it set; empty without one.
struct Calibration {
  std::filesystem::path file;
  std::string gpu;
  std::vector<std::string> keys;
};

// compute.comm_slowdown's default, where scenario.cpp cites it; trace replays share it.
constexpr const char* default_comm_slowdown = "0.189";

const char* to_string(Recompute recompute);
const char* to_string(Framework framework);
const char* to_string(GradSync sync);
const char* to_string(OffloadTier tier);

// What PyTorch's caching allocator holds reserved but unallocated beyond the live tensors
// (fragmentation and its cache), which the GPU must have room for: either a share of what the
// allocator reserves, fragmentation = 1 - allocated / reserved, or a fixed size.
struct AllocatorReserve {
  double fragmentation = 0.15;  // the default of memory.reserve, where scenario.cpp cites it
  double bytes = 0;             // a fixed size instead (fragmentation 0)
  // Reserved but unallocated when `allocated` bytes of tensors are live.
  double unallocated(double allocated) const { return bytes + allocated * fragmentation / (1 - fragmentation); }
  // The most tensors may hold on a GPU with `free_bytes` outside the CUDA context and NCCL.
  double allocatable(double free_bytes) const { return (free_bytes - bytes) * (1 - fragmentation); }
};

// How tokens reach the experts under expert parallelism (moe.dispatcher): Megatron-Core's
// all-to-all dispatcher (each token's copies to their experts' ranks), its allgather dispatcher
// (every rank gathers the ep group's tokens and reduce-scatters the outputs), or DeepEP's
// (each token once to each node of its experts, to the GPU of the same index there, then once
// over NVLink to each GPU of its experts; the combine sums on the way back).
enum class TokenDispatcher : std::uint8_t { all_to_all, all_gather, deepep };

// How a mixture's router spreads the token copies over the experts (moe.routing,
// moe.capacity_factor).
struct ExpertRouting {
  double zipf = 0;             // 0: uniform; s > 0: expert e (from 0) draws a share proportional to 1 / (e + 1)^s
  double capacity_factor = 0;  // 0: dropless; else an expert takes at most this x the uniform share, the rest is dropped
  bool fp8_dispatch = false;   // the tokens go to the experts in fp8 (DeepSeek-V3), the rest in the activations' precision
  TokenDispatcher dispatcher = TokenDispatcher::all_to_all;
  // moe.routing = file:PATH: the tokens each expert received, per expert layer in order (or one
  // row for every layer), as a real run's router statistics count them
  std::vector<std::vector<double>> layer_loads;
  std::filesystem::path file;  // that file
  bool uniform() const { return zipf == 0 && layer_loads.empty(); }  // a capacity (>= 1 x an even share) drops nothing then
};

struct Scenario {
  std::string name;                   // the file's stem: names the default output folder
  std::filesystem::path file;

  std::filesystem::path model_file;   // a Hugging Face config.json
  long long vocab_multiple = 128;     // vocabulary padded to a multiple of this (Megatron's default)
  long long mtp_layers = -1;          // model.mtp_layers: multi-token-prediction modules; -1: the config's

  std::filesystem::path platform_file;  // a platform XML, or empty when the cluster is described
  Calibration calibration;  // platform.calibration
  std::optional<ClusterSpec> cluster;   // platform.gpu and friends: the platform is generated

  int dp = 1;
  int tp = 1;                         // tensor parallelism (Megatron)
  int pp = 1;                         // pipeline stages
  int vpp = 1;                        // virtual stages (model chunks) per pipeline rank
  int cp = 1;                         // context parallelism: the sequence split over cp ranks
  int ep = 1;                         // expert parallelism: a mixture's experts split over ep data-parallel ranks
  // Expert tensor parallelism: each expert's GEMMs split over etp ranks (Megatron-Core's
  // --expert-tensor-parallel-size; tp unless set). The expert layers fold etp x ep x expert-dp
  // over the same tp x cp x dp ranks of a stage as the attention.
  int etp = 1;
  // The ranks of a stage holding the same experts, which reduce their gradients.
  int expert_data_parallel() const { return tp * cp * dp / (etp * ep); }
  ExpertRouting routing;              // [moe]
  bool sp = false;                    // sequence parallelism (needs tp > 1)
  Schedule schedule = Schedule::one_f_one_b;
  // DualPipe's forward-backward pairs run interleaved (parallel.overlap_pairs).
  bool overlap_pairs = false;
  std::string order = "tp-cp-dp-pp";  // rank order, innermost first
  std::vector<long long> layers_per_stage;  // explicit split over pp x vpp stages; empty: uniform
  // Megatron-Core's --decoder-first/last-pipeline-num-layers: the first and last pipeline ranks'
  // layers, the rest shared evenly; 0: as many as the others.
  long long first_stage_layers = 0, last_stage_layers = 0;

  Framework framework = Framework::ddp;
  int zero = 0;                       // ZeRO stage; FSDP is stage 3
  int prefetch_depth = 1;             // ZeRO-3: layers gathered ahead of use
  Recompute recompute = Recompute::none;
  int recompute_every = 1;            // N of every:N, uniform:N, block:N and nth:N
  double activation_budget = 0;       // bytes for activations (recompute = optimal); 0: what fits the GPU
  Precision precision = Precision::bf16;
  Precision grad_precision = Precision::fp32;
  bool fp32_grad_copy = false;        // the optimizer keeps an fp32 copy of 16-bit gradients (Megatron, DeepSpeed fp16)
  bool flash_attention = true;
  OffloadTier offload_optimizer = OffloadTier::none;  // ZeRO-Offload (cpu) / ZeRO-Infinity (nvme)
  OffloadTier offload_params = OffloadTier::none;     // ZeRO-3 parameter shards streamed in per use
  bool offload_activations = false;   // activation checkpoints kept in host DRAM between forward and backward
  double pinned_buffer_bytes = 1024.0 * 1024 * 1024;  // per GPU, staging NVMe traffic
  bool delayed_update = false;        // the CPU step overlaps the next step (ZeRO-Offload's DPU)
  // Memory that real runs hold beyond the tensors (defaults and sources in scenario.cpp).
  double cuda_context_bytes = 512.0 * 1024 * 1024;  // per GPU
  double nccl_buffer_bytes = -1;      // per GPU; -1: counted from the rank's communicators
  AllocatorReserve reserve;

  long long seq_len = 2048;
  long long micro_batch = 1;
  long long global_batch = 1;
  long long grad_accum = 1;           // derived: global_batch / (micro_batch * dp)
  long long microbatch_group = 0;     // interleaved: micro-batches per group through the chunks (derived: pp if auto)
  double tokens = 1e9;

  ComputeEfficiency efficiency;

  double bucket_bytes = 25.0 * 1024 * 1024;
  bool bucket_per_layer = false;      // FSDP2: each layer's gradients are one reduction (bucket_bytes unused)
  // Gradient buckets are reduced while backward goes on; false: the compute stream waits for each
  // reduction (DeepSpeed without overlap_comm), or the reduction waits for backward's end (Megatron).
  bool overlap_grad_reduce = true;
  // The distributed optimizer's updated parameters are all-gathered during the next forward, each
  // piece of the model waiting for its bucket (Megatron-Core's overlap_param_gather), instead of
  // at the end of the step.
  bool overlap_param_gather = false;
  // Tensor-parallel collectives in chunks beside the GEMMs they feed or follow (Transformer
  // Engine's userbuffers, Megatron-Core's tp_comm_overlap); program/program_writer.hpp's LayerOps.
  bool tp_comm_overlap = false;
  // How much longer compute kernels take while a communication kernel runs on the same GPU.
  double comm_slowdown = 0.189;     // compute.comm_slowdown
  double bandwidth_efficiency = 1;    // comm.bandwidth_efficiency
  int channels = 0;                   // 0: one ring per GPU of a node (as NCCL does)
  GradSync grad_sync = GradSync::last;
  bool fast_collectives = false;      // comm.fidelity = fast: intra-node collectives timed, not simulated
  CommTuning comm_tuning;             // comm.collectives, comm.algorithm, comm.protocol
  // Pipeline transfers under tp without SP: each tp rank sends 1/tp of the boundary tensor and the
  // receiving stage all-gathers it over tp (Narayanan et al. 2021, section 4.1).
  bool pp_scatter_gather = false;

  // Every key with its effective value, for the summary and the "effective configuration" print.
  std::map<std::string, std::string> settings;
};

// ZeRO-2/3 shard gradients that pipeline parallelism accumulates across micro-batches: with
// pp > 1 stage 1 (Megatron's distributed optimizer) is the most a scenario may ask for.
constexpr int max_pipeline_zero_stage = 1;

Scenario load_scenario(const std::filesystem::path& file, const std::vector<std::string>& overrides);
// A scenario file's text; InputError for a folder or a file that is missing or unreadable.
std::string read_scenario_file(const std::filesystem::path& file);
// The section.key = value settings of a scenario's text, in order; InputError for an unknown key.
std::vector<std::pair<std::string, std::string>> settings_in(const std::string& text, const std::filesystem::path& file);
// The same from the file's text; `file` names it in errors and anchors relative paths.
Scenario parse_scenario(const std::string& text, const std::filesystem::path& file,
                        const std::vector<std::string>& overrides);
// InputError unless the scenario's platform.calibration (if any) was fitted on `gpu_model`: a
// calibration holds one GPU's efficiencies, which on another GPU would mean nothing.
void require_calibration_for(const Scenario& scenario, const std::string& gpu_model);

// A cluster from platform.* keys given outside a scenario (trainsim platform's options):
// `given` maps keys such as "platform.gpu" to (value, where it was given).
ClusterSpec parse_cluster(const std::map<std::string, std::pair<std::string, std::string>>& given);

// The config.json in models/ whose _name_or_path is the Hugging Face hub name `hub` (case aside);
// InputError naming `where` and the hub names there otherwise.
std::filesystem::path resolve_hub_model(const std::string& hub, const std::string& where);
// Whether a model given as `value` (relative to `scenario_dir`) means a Hugging Face hub name:
// it reads as "org/model" and names no file.
bool names_hub_model(const std::string& value, const std::filesystem::path& scenario_dir);
// A model given on the command line: a config.json's path, a name in models/ or a hub name.
std::filesystem::path resolve_model_file(const std::string& value, const std::filesystem::path& scenario_dir,
                                         const std::string& where);

// Where models/, platforms/ and scenarios/ live: $TRAINSIM_DATA, else the source tree.
std::filesystem::path data_dir();
// Resolves a name such as "llama2-7b" or a path to an existing file; InputError otherwise.
std::filesystem::path resolve_data_file(const std::string& value, const std::string& folder, const std::string& extension,
                                        const std::filesystem::path& scenario_dir, const std::string& where);

} // namespace trainsim
