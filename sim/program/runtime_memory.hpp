#pragma once
// What a GPU holds beyond the program's tensors from the moment its process starts: the CUDA
// context and NCCL's communication buffers, both outside PyTorch's caching allocator. The
// writers allocate them first (categories cuda_context and nccl_buffers), so every report, the
// fit decision and the planner see them; the allocator's reserve comes on top of the tensors
// (AllocatorReserve in config/scenario.hpp).
//
// NCCL's buffers, when memory.nccl_buffers is auto: a communicator connects each rank to its
// ring neighbours once per channel, and each connection keeps one buffer per protocol, the
// receiving side holding it (ncclConnInfo::buffs: "Local for recv, remote for send"). The sizes
// are NCCL's defaults (src/init.cc DEFAULT_BUFFSIZE, DEFAULT_LL_BUFFSIZE, DEFAULT_LL128_BUFFSIZE
// with src/include/device.h): Simple 4 MiB; LL 8 lines per thread x 512 threads x 8 steps x 16
// bytes = 512 KiB; LL128 120 elements per thread x 640 threads x 8 steps x 8 bytes = 4,915,200
// bytes. Channels: 16, as NCCL reports for 8 Hopper GPUs on NVLink ("16 coll channels",
// NVIDIA/nccl issue #892). Each communicator of the rank with more than one member counts once
// (data parallel, tensor, context, tied embedding, expert parallel; not DeepEP's legs, which move
// through DeepEP's own buffers, below), and so does each pipeline neighbour it
// exchanges activations with. Tree,
// NVLS and extra point-to-point channels, which NCCL connects only when it uses them, are left
// out: this is the least NCCL holds.
#include <optional>
#include <string>
#include <vector>

#include "config/scenario.hpp"
#include "layout/layout.hpp"
#include "program/program.hpp"
#include "program/program_writer.hpp"

namespace trainsim {

constexpr double nccl_simple_buffer_bytes = 4.0 * 1024 * 1024;
constexpr double nccl_ll_buffer_bytes = 8.0 * 512 * 8 * 16;
constexpr double nccl_ll128_buffer_bytes = 120.0 * 640 * 8 * 8;
constexpr int nccl_channels = 16;
// One communicator's buffers on one of its ranks: 16 x 9,633,792 bytes = 147 MiB.
constexpr double nccl_communicator_bytes =
    nccl_channels * (nccl_simple_buffer_bytes + nccl_ll_buffer_bytes + nccl_ll128_buffer_bytes);

// Transformer Engine's userbuffers under comm.tp_comm_overlap: initialize_ub registers one
// communicator per overlapped GEMM (4 ring exchanges, 2 pipelined reduce-scatters, 4 bulk
// overlaps), each with a buffer of Megatron's input shape, (sequence x micro-batch / cp) x
// hidden elements; allocated through PyTorch (category buffers), for the whole run.
constexpr int tp_overlap_userbuffers = 10;

// DeepEP's buffers under moe.dispatcher = deepep: one deep_ep.Buffer per rank in normal mode,
// sized as Megatron-Core's fused_a2a.get_buffer sizes it, the larger of the dispatch's and the
// combine's hints (deepseek-ai/DeepEP, csrc/legacy/config.hpp get_nvl_buffer_size_hint and
// get_rdma_buffer_size_hint, with the recommended configurations of deep_ep/buffers/legacy.py
// get_dispatch_config and get_combine_config) for 20 SMs (DeepEP's Buffer.num_sms, Megatron's
// default, and the 20 SMs of the DeepSeek-V3 report, section 3.2.2): an NVLink buffer with its
// 160 bytes of barrier signals and peer pointers, an RDMA buffer in NVSHMEM's heap (groups of
// more than 8 ranks) and a 32 MiB workspace, all outside PyTorch's allocator. Per received token
// slot the NVLink buffer holds its hidden bytes, an 8-byte source record, 128 int64 top-k indices,
// 128 weights and 128 scales (hidden + 2,056 bytes), the RDMA buffer two of those and a 16-byte
// header. `hidden_bytes`: hidden x max(element size, 2), as get_hidden_bytes counts it (fp8
// tokens travel in slots of bf16 size). Null for a group size DeepEP has no configuration for.
constexpr int deepep_sms = 20;
std::optional<double> deepep_buffer_bytes(int ranks, double hidden_bytes);
// The group sizes DeepEP's normal kernels have configurations for, for messages.
std::string deepep_group_sizes();

struct RuntimeMemory {
  double cuda_context = 0;
  double nccl_buffers = 0;
  double deepep_buffers = 0;
  double userbuffers = 0;
  double total() const { return cuda_context + nccl_buffers + deepep_buffers + userbuffers; }
};

// A rank's runtime memory: `communicators` is how many NCCL communicators (and pipeline
// neighbours) it connects to, from runtime_communicators; `activation_bytes` the hidden states
// of a micro-batch on one rank (sequence x micro-batch / cp x hidden, what a userbuffer holds);
// `hidden` the model's hidden size (DeepEP's token slots).
RuntimeMemory runtime_memory(const Scenario& scenario, int communicators, double activation_bytes, double hidden);

// The communicators of `rank` (at `coords`) in a workload whose groups and bindings are laid
// out: its groups with more than one member and the pipeline neighbours it sends to or receives
// from (the first and last stages have one, unless the interleaved schedule wraps around).
int runtime_communicators(const Workload& workload, int rank, const RankCoords& coords, const Scenario& scenario);

// Allocates them at the start of a program, never freed (nothing for zero bytes).
void allocate_runtime_memory(ProgramWriter& writer, const RuntimeMemory& memory);

} // namespace trainsim
