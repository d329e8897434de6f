#pragma once
// Memory per rank from program order, without simulating: what `trainsim memory` prints, what
// its --compare tabulates and what the planner checks each candidate with.
#include <vector>

#include "memory/memory_tracker.hpp"
#include "cluster/gpu.hpp"
#include "program/program.hpp"

namespace trainsim {

// The peak of each rank against its GPU's capacity, with the caching allocator's `reserve`.
// Replicas share a program, so each (program, capacity) pair is accounted once.
std::vector<RankMemory> estimate_memory(const Workload& workload, const std::vector<double>& gpu_capacities,
                                        const AllocatorReserve& reserve);
// The same on the GPUs the ranks run on (rank r on gpus[r]).
std::vector<RankMemory> estimate_memory(const Workload& workload, const std::vector<GpuInfo>& gpus,
                                        const AllocatorReserve& reserve);

} // namespace trainsim
