#pragma once
// Per-rank programs: what each simulated GPU does in one training step.
//
// A program is a list of ops. Each op runs on a stream; a stream runs its ops in
// program order, like a CUDA stream; `deps` are extra edges to earlier ops of the
// same rank (cross-stream waits). Memory is part of the program: Alloc/Free ops
// carry a category and a device, so peak memory follows from program order alone.
// The text form of a workload is documented in docs/trace-format.md.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/gpu.hpp"
#include "layout/group.hpp"
#include "model/kernels.hpp"
#include "common/precision.hpp"

namespace trainsim {

enum class OpKind : std::uint8_t { compute, collective, send, recv, copy, read, write, alloc, free };
// pp-comm carries activations to the next pipeline stage, pp-bwd gradients to the previous one:
// two streams, so that a send blocked on a busy neighbour never holds up the other direction.
// copy and copy-out are the two copy engines: host-to-device and device-to-host traffic do not
// queue behind each other; io-read and io-write likewise for a drive (DeepSpeed's swappers keep
// a read and a write handle). cpu is work the rank hands to its node's CPU.
enum class Stream : std::uint8_t {
  compute, tp_comm, dp_comm, pp_comm, copy, io_read, cp_comm, pp_bwd, copy_out, cpu, io_write, ep_comm,
  // DeepEP's inter-node leg, beside the NVLink leg on ep_comm.
  ep_rail
};
enum class Collective : std::uint8_t { all_reduce, reduce_scatter, all_gather, all_to_all, broadcast };
// cuda_context and nccl_buffers are held outside PyTorch's caching allocator (the driver's context
// and NCCL's own buffers): allocated once when a program starts, never freed.
enum class MemCategory : std::uint8_t {
  weights, gradients, optimizer, activations, buffers, cuda_context, nccl_buffers
};
enum class Device : std::uint8_t { gpu, host, nvme };
// What a compute op is part of, for reports (recompute time, Gantt charts). A backward split in
// two runs its input gradients as `backward` and its weight gradients as `weight_gradient`.
enum class Phase : std::uint8_t { other, forward, backward, recompute, optimizer, weight_gradient };

constexpr int op_kind_count = 9;
constexpr int stream_count = 13;
constexpr int collective_count = 5;
constexpr int category_count = 7;
constexpr int device_count = 3;
constexpr int phase_count = 6;

// Each value is named once, by to_string; reading a name searches the values for it.
const char* to_string(OpKind kind);
const char* to_string(Stream stream);
const char* to_string(Collective collective);
const char* to_string(MemCategory category);
const char* to_string(Device device);
const char* to_string(Phase phase);

// How many values each enum has: from_name and names_of go over them.
template <typename Enum> constexpr int value_count = 0;
template <> inline constexpr int value_count<OpKind> = op_kind_count;
template <> inline constexpr int value_count<Stream> = stream_count;
template <> inline constexpr int value_count<Collective> = collective_count;
template <> inline constexpr int value_count<MemCategory> = category_count;
template <> inline constexpr int value_count<Device> = device_count;
template <> inline constexpr int value_count<Phase> = phase_count;

template <typename Enum>
std::optional<Enum> from_name(const std::string& text) {
  for (int i = 0; i < value_count<Enum>; ++i)
    if (text == to_string(static_cast<Enum>(i)))
      return static_cast<Enum>(i);
  return std::nullopt;
}

// Every value's name, comma-separated: what an error lists as accepted.
template <typename Enum>
std::string names_of() {
  std::string names;
  for (int i = 0; i < value_count<Enum>; ++i)
    names += (i ? ", " : "") + std::string(to_string(static_cast<Enum>(i)));
  return names;
}

using OpId = std::uint32_t;

// Targets that name a place relative to the rank, so that one program serves every node: the
// CPU host of the rank's node, and the NVMe drive of its node that serves it (drives are shared
// out over the node's GPUs in turn).
inline const std::string node_cpu = "@cpu";
inline const std::string node_nvme = "@nvme";

// Where an op sits in the training step, for reports (trace events, the pipeline chart): the
// transformer layer, the micro-batch and the model chunk (virtual pipeline stage) it belongs to,
// each `none` outside one.
struct OpPlace {
  static constexpr int none = -1;
  std::int32_t layer = none;
  std::int32_t micro_batch = none;
  std::int16_t chunk = none;
  bool operator==(const OpPlace& other) const {
    return layer == other.layer && micro_batch == other.micro_batch && chunk == other.chunk;
  }
};

// The one-byte fields come first, so that the place fits in what was padding: GPT-3 on 1,024
// GPUs holds 19 million ops.
struct Op {
  OpKind kind = OpKind::compute;
  Stream stream = Stream::compute;
  Collective collective = Collective::all_reduce;
  MemCategory category = MemCategory::buffers;
  Device device = Device::gpu;
  Phase phase = Phase::other;  // compute: forward, backward, recompute or optimizer
  bool inbound = false;      // copy: from `target` to this rank's GPU (host to device)
  OpPlace place;             // set by the builders; alloc and free have none
  int group = -1;            // collective: the group's slot in the rank's Binding (see Workload)
  int peer = -1;             // send/recv: the other rank's slot in the rank's Binding; all-to-all: how its bytes
                             // divide over the group, an index into Workload::all_to_all_splits (-1: evenly)
  int tag = 0;               // send/recv: matches a send with its recv
  int kernel_set = -1;       // compute: its kernels, an index into Workload::kernel_sets (-1: unknown)
  std::vector<OpId> deps;    // earlier ops of this rank that must finish first
  std::string name;          // what it is, for traces and reports ("L3.fwd.mb0")
  double flops = 0;          // compute
  double bytes = 0;          // compute: HBM traffic; comm, copy, I/O: payload; alloc: size
  std::string target;        // copy: the other host; read/write: disk name; compute: a host to run on instead of the GPU
  std::string tensor;        // alloc/free: the name that pairs them
};

struct Program {
  std::vector<Op> ops;
  OpId add(Op op) {
    ops.push_back(std::move(op));
    return static_cast<OpId>(ops.size() - 1);
  }
};

// What a step means, so that reports can turn time into throughput.
struct StepInfo {
  std::string model;
  double parameters = 0;
  double tokens_per_step = 0;
  double model_flops_per_step = 0;   // 0 when unknown (a hand-written trace)
  Precision precision = Precision::bf16;
  ComputeEfficiency efficiency;
};

// What a shared program's slots mean on one rank: its groups (indices into Workload::groups,
// -1 for a slot the rank does not have) and its peers (ranks).
struct Binding {
  std::vector<int> groups;
  std::vector<int> peers;
  bool operator==(const Binding& other) const { return groups == other.groups && peers == other.peers; }
  bool operator<(const Binding& other) const {
    return groups != other.groups ? groups < other.groups : peers < other.peers;
  }
};

struct Workload {
  StepInfo step;
  std::vector<Group> groups;
  // The kernels behind compute ops (Op::kernel_set), timed per GPU by the replay.
  std::vector<KernelSet> kernel_sets;
  // How all-to-alls divide their bytes over their group (Op::peer): per split, each member's
  // share in group order (a mixture's uneven routing).
  std::vector<std::vector<double>> all_to_all_splits;
  // One per rank; ranks that do the same work share a program (every replica under data
  // parallelism, every rank of a pipeline stage), which keeps large workloads small. Ops name
  // groups and peers by slot, and each rank's binding says what the slots are; a workload
  // without bindings (a hand-written trace) names them directly: slot = group index or rank.
  std::vector<std::shared_ptr<const Program>> programs;
  std::vector<Binding> bindings;  // per rank, or empty

  std::size_t ranks() const { return programs.size(); }
  const Program& program(std::size_t rank) const { return *programs[rank]; }
  // The group index or rank behind a slot of `rank`'s program; -1 when the slot is unbound.
  int group_of(std::size_t rank, int slot) const { return resolve(rank, slot, &Binding::groups); }
  int peer_of(std::size_t rank, int slot) const { return resolve(rank, slot, &Binding::peers); }
  // What `rank` puts on the wire for collective `op`: a ring's phases, or what an all-to-all
  // sends to the other members.
  double bytes_sent(std::size_t rank, const Op& op) const;
  // What all-to-all `op` sends to group member `member` (in group order) of `members`.
  double all_to_all_bytes(const Op& op, int member, int members) const;
  // Per group, whether some rank runs a collective on it that `runs` accepts (each distinct
  // program read once).
  std::vector<bool> groups_running(const std::function<bool(const Op&)>& runs) const;

private:
  int resolve(std::size_t rank, int slot, std::vector<int> Binding::*slots) const {
    if (bindings.empty())
      return slot;
    const std::vector<int>& bound = bindings[rank].*slots;
    return slot >= 0 && static_cast<std::size_t>(slot) < bound.size() ? bound[slot] : -1;
  }
};

// Checks that a workload is well formed (deps point backwards, groups and peers exist,
// each free matches an alloc); throws InputError naming `where` and the op.
void validate_workload(const Workload& workload, const std::string& where);

// Every rank whose ops use its node's CPU host or NVMe drive (@cpu, @nvme; host or NVMe
// allocations) has them on this platform (rank r on gpus[r]): InputError naming the rank, the op
// and what the platform lacks. Every command checks this before it uses a workload on a platform.
void check_node_targets(const Workload& workload, const std::vector<GpuInfo>& gpus);

} // namespace trainsim
