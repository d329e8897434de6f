#pragma once
// What a replay tells the outside world: each op's start and finish on each rank,
// in simulated-time order. Collectors (metrics, memory timelines, traces) implement
// this; the replay loop knows nothing about what they do with it.
#include <string>

#include "program/program.hpp"

namespace trainsim {

// How busy one class of shared resource was: links by what they join (nvlink, pcie-gpu,
// pcie-uplink, nic, network), the NVMe drives (nvme), the nodes' CPUs (cpu); the metrics add
// the GPUs' compute (gpu).
struct ResourceUse {
  std::string kind;
  int count = 0;            // resources of that class in the platform that were used
  std::string busiest;      // the one that was busy longest
  double busy_s = 0;        // its busy time: bytes / bandwidth (links, drives) or work at full speed (CPUs)
  double bytes = 0;         // moved through all of them (links: summed over each link crossed)
};

// When a send's or a collective's data moved, and what it waited for before that.
struct Transfer {
  double start = 0;        // when its data could move: every member of a collective had arrived
  double end = 0;
  // The member of a collective that arrived last, when this rank arrived before it and waited
  // from `wait_start` to `start`: idle time caused by that rank. -1 otherwise (and for sends).
  int waited_for = -1;
  double wait_start = 0;
};

class ReplayObserver {
public:
  virtual ~ReplayObserver() = default;
  virtual void op_started(int rank, OpId op, double time) = 0;
  virtual void op_finished(int rank, OpId op, double time) = 0;
  // A send's or a collective's data moved; told just before op_finished, so its start may be
  // earlier than events already told.
  virtual void op_transferred(int rank, OpId op, const Transfer& transfer) = 0;
};

} // namespace trainsim
