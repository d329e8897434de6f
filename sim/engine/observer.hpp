#pragma once
// What a replay tells the outside world: each op's start and finish on each rank,
// in simulated-time order, and what it hands to the platform's shared resources.
// Collectors (metrics, memory timelines, traces, resource use) implement this; the
// replay loop knows nothing about what they do with it.
#include <vector>

#include "platform/resources.hpp"
#include "program/nccl_model.hpp"
#include "program/program.hpp"

namespace trainsim {

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

  // Resource accounting, heard the way SimGrid's plugins hear activities, but from the replay: an
  // analytically timed collective never becomes a SimGrid activity, and what counts is the op's
  // payload, not a flow's size rounded to whole bytes. Told once before the replay starts, then
  // as work is handed to a resource (for ops a rank settles ahead of the clock, before their
  // op_started).
  virtual void resources_bound(const PlatformResources& /*resources*/) {}
  // How a collective call runs (algorithm, protocol), told when the rank starts moving its data.
  virtual void collective_chosen(int /*rank*/, OpId /*op*/, const CommChoice& /*choice*/) {}
  // `links` (indices into PlatformResources::links) each carry `bytes` more.
  virtual void link_carried(const std::vector<int>& /*links*/, double /*bytes*/) {}
  // A CPU given `seconds` of work at full speed that touches `bytes` of its memory.
  virtual void cpu_worked(int /*cpu*/, double /*seconds*/, double /*bytes*/) {}
  // A drive asked to read or write `bytes`, `seconds` at that direction's bandwidth.
  virtual void drive_worked(int /*drive*/, bool /*read*/, double /*seconds*/, double /*bytes*/) {}
};

} // namespace trainsim
