#include "memory/memory_tracker.hpp"

#include <numeric>

#include "common/error.hpp"

namespace trainsim {

double sum(const CategoryBytes& bytes) { return std::accumulate(bytes.begin(), bytes.end(), 0.0); }

double allocator_bytes(const CategoryBytes& bytes) {
  return sum(bytes) - bytes[static_cast<int>(MemCategory::cuda_context)] -
         bytes[static_cast<int>(MemCategory::nccl_buffers)];
}

void MemoryTracker::apply(const Op& op, OpId key, double when) {
  if (op.kind != OpKind::alloc && op.kind != OpKind::free)
    return;
  Allocation allocation{op.bytes, op.category, op.device};
  if (op.kind == OpKind::alloc) {
    if (!live_.emplace(key, allocation).second)
      throw InputError("tensor " + op.tensor + " is allocated twice without a free");
  } else {
    const auto it = live_.find(key);
    if (it == live_.end())
      throw InputError("free of tensor " + op.tensor + ", which is not allocated");
    allocation = it->second;
    allocation.bytes = -allocation.bytes;
    live_.erase(it);
  }
  const int device = static_cast<int>(allocation.device);
  CategoryBytes& usage = in_use_[device];
  usage[static_cast<int>(allocation.category)] += allocation.bytes;
  const double total = sum(usage);
  DeviceMemory& peak = peaks_[device];
  if (total > peak.peak) {
    peak.peak = total;
    peak.at_peak = usage;
    peak.peak_time = when;
  }
  if (allocation.device == Device::gpu && over_capacity_at_ < 0 &&
      total + reserve_.unallocated(allocator_bytes(usage)) > gpu_capacity_)
    over_capacity_at_ = when;
  if (keep_timeline_)
    timeline_.push_back({when, in_use_[static_cast<int>(Device::gpu)], sum(in_use_[static_cast<int>(Device::host)]),
                         sum(in_use_[static_cast<int>(Device::nvme)])});
}

RankMemory MemoryTracker::result() const {
  RankMemory memory;
  memory.devices = peaks_;
  memory.over_capacity_at = over_capacity_at_;
  memory.reserve = reserve_.unallocated(allocator_bytes(memory.gpu().at_peak));
  for (const auto& [name, allocation] : live_)
    if (allocation.device == Device::gpu)
      memory.persistent_gpu[static_cast<int>(allocation.category)] += allocation.bytes;
  return memory;
}

std::vector<OpId> pair_allocations(const Program& program) {
  std::vector<OpId> pairs(program.ops.size(), 0);
  std::unordered_map<std::string, OpId> live;
  for (OpId id = 0; id < program.ops.size(); ++id) {
    const Op& op = program.ops[id];
    if (op.kind == OpKind::alloc) {
      pairs[id] = id;
      live[op.tensor] = id;
    } else if (op.kind == OpKind::free) {
      const auto it = live.find(op.tensor);
      if (it == live.end())
        throw InputError("free of tensor " + op.tensor + ", which is not allocated");
      pairs[id] = it->second;
      live.erase(it);
    }
  }
  return pairs;
}

RankMemory memory_in_program_order(const Program& program, double gpu_capacity, AllocatorReserve reserve) {
  MemoryTracker tracker(false, gpu_capacity, reserve);
  const std::vector<OpId> pairs = pair_allocations(program);
  for (OpId id = 0; id < program.ops.size(); ++id)
    tracker.apply(program.ops[id], pairs[id], static_cast<double>(id));
  return tracker.result();
}

} // namespace trainsim
