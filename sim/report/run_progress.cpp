#include "report/run_progress.hpp"

#include <cmath>

#include "common/units.hpp"

namespace trainsim {

RunProgress::RunProgress(const Workload& workload, std::ostream& out, bool terminal, double first_after_s)
    : out_(out), terminal_(terminal), first_after_s_(first_after_s) {
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank)
    total_ += static_cast<double>(workload.program(rank).ops.size());
}

RunProgress::~RunProgress() {
  if (terminal_ && printed_at_ >= 0)
    out_ << '\n' << std::flush;
}

std::string RunProgress::line(double done, double time, double elapsed) const {
  const double rate = elapsed > 0 ? done / elapsed : 0.0;
  const double left = rate > 0 ? (total_ - done) / rate : INFINITY;
  const double percent = total_ > 0 ? std::floor(done / total_ * 100) : 100;
  return "trainsim: simulating, " + format_count(done) + " of " + format_count(total_) + " ops (" +
         format_count(percent) + " %), " + format_seconds(time) + " simulated, " + format_count(rate) +
         " ops/s, about " + format_duration(left) + " left";
}

void RunProgress::op_finished(int /*rank*/, OpId /*op*/, double time) {
  // The clock is read every few thousand ops: cheap beside the replay of one op.
  constexpr double ops_between_checks = 4096;
  // The rate counts from the first op: binding the platform and planning the programs, before
  // it, would make the first lines' time left absurd at scale (hours for a two-minute run).
  if (done_ == 0)
    start_ = Clock::now();
  done_ += 1;
  if (std::fmod(done_, ops_between_checks) != 0)
    return;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const double interval = terminal_ ? 1.0 : 30.0;
  if (elapsed < first_after_s_ || (printed_at_ >= 0 && elapsed - printed_at_ < interval))
    return;
  printed_at_ = elapsed;
  if (terminal_)
    out_ << '\r' << line(done_, time, elapsed) << "   " << std::flush;
  else
    out_ << line(done_, time, elapsed) << '\n' << std::flush;
}

} // namespace trainsim
