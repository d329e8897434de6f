#pragma once
// Step metrics from a replay: a collector that listens to op starts and finishes,
// then step time, throughput, MFU, per-kind communication (total and exposed
// behind compute) and memory per rank. Pure: no SimGrid.
//
// Per rank: the union of compute spans (and of recompute and optimizer spans), the union of
// transfer spans per communication kind (a collective's group kind: dp, tp, cp, emb; pp for
// pipeline sends), the bytes sent, the FLOPs executed, and a MemoryTracker fed by alloc/free. A
// transfer starts when its data can move (a send: when the receive is posted; a collective: when
// its last member arrives); waiting for a slower peer is idle time attributed to that peer.
// Exposed communication is transfer time not covered by compute. The step breakdown counts each
// instant once, in priority order: compute, recompute, optimizer, exposed communication by kind,
// then idle time: waiting at collectives, and the rest, the bubble; the parts add up to the step.
// Offload kinds (h2d, d2h, nvme_read, nvme_write, cpu_optimizer) are reported apart from
// communication. Host memory and NVMe are accounted per node (the most the node's ranks held at
// once). The step time is the last rank's finish; top-level times are that rank's. MFU = model
// FLOPs per step / (step time x the GPUs' dense peaks in the training precision); HFU counts the
// FLOPs executed, recompute included.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/observer.hpp"
#include "memory/memory_tracker.hpp"
#include "cluster/gpu.hpp"
#include "report/resource_collector.hpp"

namespace trainsim {

struct Interval {
  double start = 0;
  double end = 0;
};

// The union of possibly overlapping activity spans: fed either as begin/end events in time
// order, or as whole spans in any order.
class BusyTime {
public:
  void begin(double time);
  void end(double time);
  void add(double start, double end);
  // Sorted, disjoint.
  const std::vector<Interval>& intervals() const;
  double total() const;

private:
  int active_ = 0;
  mutable bool sorted_ = true;
  mutable std::vector<Interval> intervals_;
};

// Length of `covered` not overlapped by `cover` (both sorted, disjoint).
double uncovered_time(const std::vector<Interval>& covered, const std::vector<Interval>& cover);
// The union of two sorted, disjoint interval lists.
std::vector<Interval> merge_intervals(const std::vector<Interval>& a, const std::vector<Interval>& b);

struct CommMetrics {
  double total_s = 0;     // time with at least one such transfer in flight
  double exposed_s = 0;   // of which no compute was running
  double bytes = 0;       // bytes this rank sent
};

// Where a rank's step went, each instant counted once, in priority order: computing (forward
// and backward, recompute, optimizer), else communicating while no compute runs (by kind), else
// idle: waiting in a collective for a member that arrived later (by that member), else waiting
// for pipeline peers or for nothing (the bubble). The parts add up to the step time.
struct StepBreakdown {
  double compute_s = 0;
  double recompute_s = 0;
  double optimizer_s = 0;
  std::map<std::string, double> exposed_comm_s;
  std::map<int, double> waiting_s;  // by the rank waited for
  double bubble_s = 0;
  double idle_s() const;            // waiting and bubble
  // The rank this rank waited for longest, and how long; -1 when it waited for none.
  std::pair<int, double> longest_wait() const;
};

struct RankMetrics {
  int rank = 0;
  std::string host;
  double finish_s = 0;
  double compute_s = 0;                      // forward, backward, recompute and optimizer
  double recompute_s = 0;                    // of compute_s, re-running forward for backward
  double optimizer_s = 0;                    // of compute_s, the optimizer step
  double hardware_flops = 0;                 // FLOPs this rank executed, recompute included
  StepBreakdown breakdown;
  std::map<std::string, CommMetrics> comm;   // by kind: dp, tp, pp, cp, copy, io
  RankMemory memory;
  std::vector<MemoryPoint> timeline;
};

// Host DRAM or NVMe: shared by the GPUs of a node, so held per node. In a replay, the most the
// node's ranks held at once; in program order (no common clock), their peaks added up
// (offloaded states persist through the step, so the two differ only by transient buffers).
struct NodeTier {
  double peak_bytes = 0;        // the fullest node's
  std::string node;             // which node that is
  double capacity_bytes = 0;    // that node's; 0: the platform does not say
  bool used = false;            // some rank placed something on this tier
  bool fits = true;             // on every node
};

// Per node, bytes on each device (the most held at once, or in use now).
using NodePeaks = std::map<std::string, std::array<double, device_count>>;

struct MemorySummary {
  // The rank with the least headroom (its peak and reserve furthest above, or closest below, its
  // own GPU's capacity): its peak and its GPU's capacity. With one kind of GPU, the highest peak.
  double capacity_bytes = 0;
  double peak_bytes = 0;
  double reserve_bytes = 0;     // the caching allocator's reserve at that rank's peak
  int peak_rank = 0;
  bool gpu_fits = true;
  NodeTier host;
  NodeTier nvme;
  bool fits = true;             // on the GPUs, in host memory and on NVMe
};

// The node tiers of a summary with their names: host memory, then NVMe.
inline std::vector<std::pair<const NodeTier*, std::string>> node_tiers(const MemorySummary& summary) {
  return {{&summary.host, "host memory"}, {&summary.nvme, "NVMe"}};
}

// A node's host memory and NVMe in use (its ranks' allocations added up), from a time on.
struct NodeMemoryPoint {
  double time = 0;
  double host = 0;
  double nvme = 0;
};

struct StepMetrics {
  double step_time_s = 0;
  double tokens_per_s = 0;      // 0 when the workload does not say how many tokens a step is
  double mfu = 0;               // 0 when model FLOPs are unknown
  double hfu = 0;               // hardware FLOPs (recompute included) over the peak
  double time_to_train_s = 0;
  int critical_rank = 0;        // the rank that finished last
  std::vector<RankMetrics> ranks;
  MemorySummary memory;
  std::vector<ResourceUse> resources;  // busy time per class of links, drives, CPUs and GPUs, by kind
  // Per node holding a rank whose memory timeline is kept and placing something in host memory or
  // on NVMe: those tiers over the step.
  std::map<std::string, std::vector<NodeMemoryPoint>> node_timelines;
};

// Training takes whole steps: ceil(tokens / tokens per step) of them.
double time_to_train(double tokens, double tokens_per_step, double step_time_s);

// The ranks whose memory timeline a run keeps: all up to 64 ranks; beyond, one per pipeline
// stage (the first rank of each), which keeps memory.csv readable at 1,000+ GPUs.
std::vector<bool> default_timeline_ranks(const std::vector<int>& stage_of_rank);
// The lowest rank of each pipeline stage.
std::vector<bool> first_rank_of_each_stage(const std::vector<int>& stage_of_rank);

// Communication kind of an op for reporting, or "" for ops that are not transfers: the kind of
// its group (dp, tp, cp, pp, emb), p2p, or an offload kind: h2d, d2h, nvme_read, nvme_write,
// cpu_optimizer (CPU work of the optimizer step; other CPU work is cpu).
std::string comm_kind(const Op& op, const Workload& workload, std::size_t rank);
// The kinds above that move data between a GPU and host memory or NVMe, or run on the CPU.
bool is_offload_kind(const std::string& kind);

class StepCollector : public ReplayObserver {
public:
  // `gpus`: the GPU of each rank, for capacities and peaks; `timeline_ranks`: the ranks whose
  // memory timeline is kept (all of them when empty); `reserve`: the caching allocator's.
  StepCollector(const Workload& workload, const std::vector<GpuInfo>& gpus, const std::vector<bool>& timeline_ranks,
                const AllocatorReserve& reserve);
  void op_started(int rank, OpId op, double time) override;
  void op_finished(int rank, OpId op, double time) override;
  void op_transferred(int rank, OpId op, const Transfer& transfer) override;
  void resources_bound(const PlatformResources& resources) override { resources_.resources_bound(resources); }
  void link_carried(const std::vector<int>& links, double bytes) override { resources_.link_carried(links, bytes); }
  void cpu_worked(int cpu, double seconds, double bytes) override { resources_.cpu_worked(cpu, seconds, bytes); }
  void drive_worked(int drive, bool read, double seconds, double bytes) override {
    resources_.drive_worked(drive, read, seconds, bytes);
  }
  StepMetrics finish(double training_tokens) const;

private:
  // What the hot path needs of a program, computed once per distinct program.
  struct ProgramFacts {
    std::vector<signed char> kind;       // per op: index into kinds_, -1 for ops that move no data
    std::vector<OpId> allocation;        // per op: see pair_allocations
  };
  // The GPU's time by phase: kernels running at once (a trace's compute ops on several streams)
  // each take an equal share of it, so that recompute and the optimizer are not counted twice.
  struct PhaseTime {
    double last = 0;
    int running = 0, recompute = 0, optimizer = 0;  // kernels under way, and of those phases
    double recompute_s = 0, optimizer_s = 0;
    void advance(double time) {
      if (running > 0) {
        recompute_s += (time - last) * recompute / running;
        optimizer_s += (time - last) * optimizer / running;
      }
      last = time;
    }
  };
  struct RankState {
    BusyTime compute;
    PhaseTime phases;
    double flops = 0;
    std::vector<BusyTime> comm;          // by kind index
    std::vector<double> comm_bytes;      // by kind index
    std::vector<bool> comm_seen;         // by kind index: a transfer of that kind happened
    std::map<int, BusyTime> waits;       // collectives waiting for a later member, by that member
    MemoryTracker memory;
    double finish = 0;
    const ProgramFacts* facts = nullptr;
    RankState(bool keep_timeline, double capacity, const AllocatorReserve& reserve)
        : memory(keep_timeline, capacity, reserve) {}
  };
  StepBreakdown breakdown_of(const RankState& state, const RankMetrics& rank, double step_time) const;
  // Host and NVMe allocations added up over a node's ranks as the replay tells them.
  void apply_to_node(int rank, OpId id, double time);
  static bool transfers_are_told(const Op& op);
  int kind_index(const std::string& kind);
  const Workload& workload_;
  const std::vector<GpuInfo>& gpus_;
  std::vector<std::string> kinds_;
  std::map<const Program*, ProgramFacts> facts_;
  std::vector<RankState> ranks_;
  NodePeaks node_in_use_;
  NodePeaks node_peaks_;
  std::map<std::string, std::vector<NodeMemoryPoint>> node_timelines_;  // nodes of timeline ranks
  ResourceCollector resources_;
};

// `node_peaks`: from a replay; without them a node's tiers add its ranks' peaks.
MemorySummary summarize_memory(const std::vector<RankMemory>& ranks, const std::vector<GpuInfo>& gpus,
                               const NodePeaks* node_peaks = nullptr);

} // namespace trainsim
