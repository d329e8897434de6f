// Scenario INI text, optionally followed by a line "--" and --set overrides, one per line.
#include <sstream>
#include <vector>

#include "config/scenario.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  return fuzz::guarded([&] {
    const std::string input = fuzz::text_of(data, size);
    const auto separator = input.find("\n--\n");
    std::vector<std::string> overrides;
    if (separator != std::string::npos) {
      std::istringstream lines(input.substr(separator + 4));
      for (std::string line; std::getline(lines, line);)
        overrides.push_back(line);
    }
    parse_scenario(input.substr(0, separator), std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/fuzz.ini", overrides);
  });
}
