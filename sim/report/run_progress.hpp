#pragma once
// Where a long replay stands, on stderr: once a run has replayed ops for more than a few seconds
// of wall time, the ops done of the workload's total, the simulated time reached, the rate and the time
// left at that rate. On a terminal one line rewritten every second; otherwise a line every 30
// seconds. Runs shorter than the first delay print nothing.
#include <chrono>
#include <ostream>

#include "engine/observer.hpp"
#include "program/program.hpp"

namespace trainsim {

class RunProgress : public ReplayObserver {
public:
  using Clock = std::chrono::steady_clock;
  // `first_after_s`: wall seconds before the first line.
  RunProgress(const Workload& workload, std::ostream& out, bool terminal, double first_after_s = 5);
  ~RunProgress() override;
  RunProgress(const RunProgress&) = delete;
  RunProgress& operator=(const RunProgress&) = delete;

  void op_started(int, OpId, double) override {}
  void op_finished(int rank, OpId op, double time) override;
  void op_transferred(int, OpId, const Transfer&) override {}

  // The line printed for `done` ops at simulated `time`, `elapsed` wall seconds in.
  std::string line(double done, double time, double elapsed) const;

private:
  std::ostream& out_;
  const bool terminal_;
  const double first_after_s_;
  double total_ = 0;
  double done_ = 0;
  double printed_at_ = -1;  // wall seconds of the last line; -1: none yet
  Clock::time_point start_;  // when the first op finished
};

} // namespace trainsim
