#pragma once
// What a replay tells the outside world: each op's start and finish on each rank,
// in simulated-time order. Collectors (metrics, memory timelines, traces) implement
// this; the replay loop knows nothing about what they do with it.
#include "program/program.hpp"

namespace trainsim {

class ReplayObserver {
public:
  virtual ~ReplayObserver() = default;
  virtual void op_started(int rank, OpId op, double time) = 0;
  virtual void op_finished(int rank, OpId op, double time) = 0;
  // A send's or a collective's data moved from `start` (when its peers were ready) to `end`;
  // told just before op_finished, so `start` may be earlier than events already told.
  virtual void op_transferred(int rank, OpId op, double start, double end) = 0;
};

} // namespace trainsim
