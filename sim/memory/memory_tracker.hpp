#pragma once
// Memory accounting from Alloc/Free ops: what each category holds on each device,
// the peak, the breakdown at the peak and, optionally, the timeline. The same
// tracker serves program order (`trainsim memory`, no simulation) and replay order
// (simulated timestamps), so the two give the same numbers for the same sequence.
#include <array>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/scenario.hpp"
#include "program/program.hpp"

namespace trainsim {

using CategoryBytes = std::array<double, category_count>;

struct MemoryPoint {
  double time = 0;
  CategoryBytes gpu{};
  double host = 0;   // this rank's bytes in host memory
  double nvme = 0;   // and on NVMe
};

struct DeviceMemory {
  double peak = 0;
  CategoryBytes at_peak{};
  double peak_time = 0;     // simulated seconds (replay) or op index (program order)
};

struct RankMemory {
  std::array<DeviceMemory, device_count> devices{};
  CategoryBytes persistent_gpu{};   // still allocated when the step ends: model states
  double reserve = 0;               // the caching allocator's reserved but unallocated bytes at the GPU peak
  double over_capacity_at = -1;     // when GPU use and the reserve first exceeded the capacity; -1: never
  const DeviceMemory& gpu() const { return devices[static_cast<int>(Device::gpu)]; }
  // What the GPU must hold at the peak: allocations, runtime memory and the allocator's reserve.
  // "Fits" means this is at most the GPU's capacity.
  double required() const { return gpu().peak + reserve; }
};

class MemoryTracker {
public:
  // `gpu_capacity`: the moment use and the allocator's `reserve` first exceed it is recorded
  // (out of memory).
  explicit MemoryTracker(bool keep_timeline, double gpu_capacity = std::numeric_limits<double>::infinity(),
                         AllocatorReserve reserve = {})
      : keep_timeline_(keep_timeline), gpu_capacity_(gpu_capacity), reserve_(reserve) {}

  // Applies an alloc or free (other ops are ignored). `allocation` identifies the tensor: the
  // id of its alloc op, for the alloc and for its free (see pair_allocations). `when` is the
  // time of the event.
  void apply(const Op& op, OpId allocation, double when);
  RankMemory result() const;
  const std::vector<MemoryPoint>& timeline() const { return timeline_; }

private:
  struct Allocation {
    double bytes;
    MemCategory category;
    Device device;
  };
  bool keep_timeline_;
  double gpu_capacity_;
  AllocatorReserve reserve_;
  double over_capacity_at_ = -1;
  std::unordered_map<OpId, Allocation> live_;
  std::array<CategoryBytes, device_count> in_use_{};
  std::array<DeviceMemory, device_count> peaks_{};
  std::vector<MemoryPoint> timeline_;
};

// For each op of a program, the id of the alloc op of the tensor it allocates or frees (the op's
// own id for an alloc); 0 for other ops. Throws InputError for a free without its alloc.
std::vector<OpId> pair_allocations(const Program& program);

// Peak memory of a program executed in program order (op index as time).
RankMemory memory_in_program_order(const Program& program,
                                   double gpu_capacity = std::numeric_limits<double>::infinity(),
                                   AllocatorReserve reserve = {});

double sum(const CategoryBytes& bytes);
// What PyTorch's caching allocator serves of `bytes`: all but the CUDA context and NCCL's buffers.
double allocator_bytes(const CategoryBytes& bytes);

} // namespace trainsim
