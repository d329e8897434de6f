#pragma once
// AddressSanitizer's one-time note that it cannot follow SimGrid's own stack switching: the
// sanitizer runtime speaking, not trainsim. Dropped from what a command printed so that the
// sanitized build checks the same output as the normal one.
#include <sstream>
#include <string>

namespace trainsim::test {

inline std::string without_sanitizer_notes(const std::string& text) {
#if TRAINSIM_SANITIZED
  std::istringstream lines(text);
  std::string kept;
  for (std::string line; std::getline(lines, line);)
    if (line.find("ASan is ignoring requested __asan_handle_no_return") == std::string::npos &&
        line != "False positive error reports may follow" &&
        line != "For details see https://github.com/google/sanitizers/issues/189")
      kept += line + "\n";
  return kept;
#else
  return text;
#endif
}

} // namespace trainsim::test
