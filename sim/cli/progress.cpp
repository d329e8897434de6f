#include "cli/progress.hpp"

#include <cmath>
#include <iostream>

#include <unistd.h>

#include "common/text.hpp"
#include "common/units.hpp"

namespace trainsim::cli {

Progress::Progress(std::string what, std::size_t total, std::string noted, double quiet_s)
    : what_(std::move(what)), noted_(std::move(noted)), total_(total), terminal_(::isatty(STDERR_FILENO) != 0),
      start_(Clock::now()), quiet_s_(quiet_s) {}

void Progress::update(std::size_t done, std::size_t noted) {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  // A terminal is redrawn at most ten times a second: the memory check counts thousands a second.
  if (terminal_ && done != total_ && elapsed - last_redraw_ < 0.1)
    return;
  if (!shown_ && elapsed < quiet_s_)
    return;
  shown_ = true;
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : INFINITY;
  const std::string numbers = std::to_string(done) + "/" + std::to_string(total_) + " (" + std::to_string(noted) + " " +
                              noted_ + "), " + format_double(std::round(rate * 100) / 100) + "/s, ETA " +
                              format_duration(eta);
  if (terminal_) {
    constexpr int width = 30;
    const int filled = total_ ? static_cast<int>(width * done / total_) : width;
    std::cerr << "\r[" << std::string(static_cast<std::size_t>(filled), '#')
              << std::string(static_cast<std::size_t>(width - filled), '.') << "] " << numbers << "   " << std::flush;
    last_redraw_ = elapsed;
    if (done == total_)
      std::cerr << '\n';
    return;
  }
  const auto decile = total_ ? done * 10 / total_ : 10;
  if (done == total_ || decile != last_decile_ || elapsed - last_line_ >= 30) {
    std::cerr << what_ << ": " << numbers << '\n';
    last_decile_ = decile;
    last_line_ = elapsed;
  }
}

} // namespace trainsim::cli
