#pragma once
// Progress of a long loop on stderr, as sweeps and plans show it: a bar redrawn in place on a
// terminal, plain lines every 10 % (and at least every 30 s) otherwise, with the rate and the
// time left.
#include <chrono>
#include <cstddef>
#include <string>

namespace trainsim::cli {

class Progress {
public:
  // `what` starts the plain lines ("sweep"); `noted` names the count shown beside the total
  // ("invalid or failed"). Nothing shows before `quiet_s` seconds: a loop that ends sooner is
  // not worth a progress line.
  Progress(std::string what, std::size_t total, std::string noted, double quiet_s = 0);
  void update(std::size_t done, std::size_t noted);

private:
  using Clock = std::chrono::steady_clock;
  std::string what_, noted_;
  std::size_t total_;
  bool terminal_;
  Clock::time_point start_;
  std::size_t last_decile_ = 0;
  double last_line_ = 0;
  double last_redraw_ = -1;
  double quiet_s_;
  bool shown_ = false;
};

} // namespace trainsim::cli
