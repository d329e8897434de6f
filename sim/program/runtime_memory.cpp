#include "program/runtime_memory.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "common/precision.hpp"

namespace trainsim {

namespace {

// A DeepEP Config's chunk sizes in tokens that size its buffers.
struct DeepEpChunks {
  int nvl_recv;
  int rdma_send;
  int rdma_recv;
};

// get_dispatch_config and get_combine_config, by group size.
const std::map<int, std::pair<DeepEpChunks, DeepEpChunks>>& deepep_configs() {
  static const std::map<int, std::pair<DeepEpChunks, DeepEpChunks>> configs = {
      {2, {{256, 6, 128}, {256, 6, 128}}},    {4, {{256, 6, 128}, {256, 6, 128}}},
      {8, {{256, 6, 128}, {256, 6, 128}}},    {16, {{288, 20, 128}, {288, 12, 128}}},
      {24, {{288, 8, 128}, {288, 8, 128}}},   {32, {{288, 8, 128}, {288, 8, 128}}},
      {48, {{288, 8, 128}, {288, 8, 128}}},   {64, {{288, 8, 128}, {288, 8, 128}}},
      {96, {{480, 12, 128}, {480, 8, 128}}},  {128, {{560, 12, 128}, {560, 8, 128}}},
      {144, {{720, 12, 128}, {720, 8, 128}}}, {160, {{720, 12, 128}, {720, 8, 128}}}};
  return configs;
}

constexpr double deepep_max_nvl_peers = 8;
constexpr double deepep_slot_extra_bytes = 8 + 128 * 8 + 128 * 4 + 128 * 4;  // source record, top-k indices, weights, scales
constexpr double deepep_peer_table_bytes = 160;  // barrier signals (8 ints), buffer and signal pointers (8 each)
constexpr double deepep_workspace_bytes = 32.0 * 1024 * 1024;

double align_128(double bytes) { return std::ceil(bytes / 128) * 128; }

double nvl_hint(const DeepEpChunks& chunks, double ranks, double hidden_bytes) {
  const double channels = deepep_sms / 2, nvl_ranks = std::min(ranks, deepep_max_nvl_peers);
  const double rdma_ranks = std::max(std::floor(ranks / deepep_max_nvl_peers), 1.0);
  return align_128(channels * nvl_ranks * (2 * rdma_ranks + 3) * 4 +
                   channels * nvl_ranks * chunks.nvl_recv * (hidden_bytes + deepep_slot_extra_bytes));
}

double rdma_hint(const DeepEpChunks& chunks, double ranks, double hidden_bytes) {
  if (ranks <= deepep_max_nvl_peers)
    return 0;
  const double channels = deepep_sms / 2, rdma_ranks = ranks / deepep_max_nvl_peers;
  // Config rounds the receive chunk up to a multiple of the send chunk.
  const double recv = std::ceil(static_cast<double>(chunks.rdma_recv) / chunks.rdma_send) * chunks.rdma_send;
  return align_128(channels * rdma_ranks * (deepep_max_nvl_peers * 2 + 2) * 2 * 4 +
                   channels * rdma_ranks * recv * 2 * (hidden_bytes + deepep_slot_extra_bytes + 16));
}

} // namespace

std::optional<double> deepep_buffer_bytes(int ranks, double hidden_bytes) {
  const auto config = deepep_configs().find(ranks);
  if (config == deepep_configs().end())
    return std::nullopt;
  const auto& [dispatch, combine] = config->second;
  const double r = ranks;
  return std::max(nvl_hint(dispatch, r, hidden_bytes), nvl_hint(combine, r, hidden_bytes)) + deepep_peer_table_bytes +
         std::max(rdma_hint(dispatch, r, hidden_bytes), rdma_hint(combine, r, hidden_bytes)) + deepep_workspace_bytes;
}

std::string deepep_group_sizes() {
  std::string sizes;
  for (const auto& [ranks, configs] : deepep_configs())
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(ranks);
  return sizes;
}

RuntimeMemory runtime_memory(const Scenario& scenario, int communicators, double activation_bytes, double hidden) {
  RuntimeMemory memory;
  memory.cuda_context = scenario.cuda_context_bytes;
  memory.nccl_buffers =
      scenario.nccl_buffer_bytes >= 0 ? scenario.nccl_buffer_bytes : communicators * nccl_communicator_bytes;
  if (scenario.ep > 1 && scenario.routing.dispatcher == TokenDispatcher::deepep)
    memory.deepep_buffers =
        deepep_buffer_bytes(scenario.ep, hidden * std::max(2.0, bytes_per_element(scenario.precision))).value_or(0.0);
  if (scenario.tp_comm_overlap)
    memory.userbuffers = tp_overlap_userbuffers * activation_bytes;
  return memory;
}

int runtime_communicators(const Workload& workload, int rank, const RankCoords& coords, const Scenario& scenario) {
  const Binding& binding = workload.bindings[static_cast<std::size_t>(rank)];
  int count = 0;
  for (std::size_t slot = 0; slot < binding.groups.size(); ++slot) {
    const int group = binding.groups[slot];
    // DeepEP's legs move through its own buffers (deepep_buffer_bytes), not NCCL's.
    const bool ep_leg = slot == ep_node_slot || slot == ep_rail_slot;
    if (group >= 0 && workload.groups[static_cast<std::size_t>(group)].ranks.size() > 1 && !ep_leg)
      ++count;
  }
  if (scenario.pp == 1)
    return count;
  // Interleaved, the last stage's chunk feeds the first stage's next chunk; ZB-V's V turns on
  // the last stage, so its ends talk to one neighbour each, as 1F1B's.
  if (scenario.vpp > 1 && !v_placement(scenario.schedule))
    return count + (scenario.pp == 2 ? 1 : 2);
  return count + (coords.pp > 0) + (coords.pp < scenario.pp - 1);
}

void allocate_runtime_memory(ProgramWriter& writer, const RuntimeMemory& memory) {
  writer.alloc("cuda-context", MemCategory::cuda_context, memory.cuda_context);
  writer.alloc("nccl-buffers", MemCategory::nccl_buffers, memory.nccl_buffers);
  writer.alloc("deepep-buffers", MemCategory::nccl_buffers, memory.deepep_buffers);
  writer.alloc("tp-userbuffers", MemCategory::buffers, memory.userbuffers);
}

} // namespace trainsim
