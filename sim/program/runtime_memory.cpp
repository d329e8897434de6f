#include "program/runtime_memory.hpp"

namespace trainsim {

RuntimeMemory runtime_memory(const Scenario& scenario, int communicators, double activation_bytes) {
  RuntimeMemory memory;
  memory.cuda_context = scenario.cuda_context_bytes;
  memory.nccl_buffers =
      scenario.nccl_buffer_bytes >= 0 ? scenario.nccl_buffer_bytes : communicators * nccl_communicator_bytes;
  if (scenario.tp_comm_overlap)
    memory.userbuffers = tp_overlap_userbuffers * activation_bytes;
  return memory;
}

int runtime_communicators(const Workload& workload, int rank, const RankCoords& coords, const Scenario& scenario) {
  const Binding& binding = workload.bindings[static_cast<std::size_t>(rank)];
  int count = 0;
  for (std::size_t slot = 0; slot < binding.groups.size(); ++slot) {
    const int group = binding.groups[slot];
    // A DeepEP leg over the whole ep group (on one node, or one member per node) goes through
    // the ep group's buffers; other groups of the same members are communicators of their own.
    const bool ep_leg = slot == ep_node_slot || slot == ep_rail_slot;
    if (group >= 0 && workload.groups[static_cast<std::size_t>(group)].ranks.size() > 1 &&
        !(ep_leg && group == binding.groups[ep_slot]))
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
  writer.alloc("tp-userbuffers", MemCategory::buffers, memory.userbuffers);
}

} // namespace trainsim
