#include "run/memory_estimate.hpp"

#include <map>
#include <utility>

namespace trainsim {

std::vector<RankMemory> estimate_memory(const Workload& workload, const std::vector<double>& gpu_capacities,
                                        const AllocatorReserve& reserve) {
  std::map<std::pair<const Program*, double>, RankMemory> accounted;
  std::vector<RankMemory> ranks;
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    const auto key = std::make_pair(workload.programs[rank].get(), gpu_capacities[rank]);
    auto found = accounted.find(key);
    if (found == accounted.end())
      found = accounted.emplace(key, memory_in_program_order(*key.first, key.second, reserve)).first;
    ranks.push_back(found->second);
  }
  return ranks;
}

std::vector<RankMemory> estimate_memory(const Workload& workload, const std::vector<GpuInfo>& gpus,
                                        const AllocatorReserve& reserve) {
  std::vector<double> capacities;
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank)
    capacities.push_back(gpus[rank].hbm_capacity);
  return estimate_memory(workload, capacities, reserve);
}

} // namespace trainsim
