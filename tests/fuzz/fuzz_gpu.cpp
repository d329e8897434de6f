// GPU host properties as "key=value" lines: the platform loading that happens after
// SimGrid has parsed the XML (SimGrid itself parses the XML).
#include <map>
#include <sstream>

#include "fuzz_support.hpp"
#include "cluster/gpu.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  return fuzz::guarded([&] {
    std::map<std::string, std::string> properties;
    std::istringstream lines(fuzz::text_of(data, size));
    for (std::string line; std::getline(lines, line);) {
      const auto equals = line.find('=');
      if (equals != std::string::npos)
        properties[line.substr(0, equals)] = line.substr(equals + 1);
    }
    gpu_from_properties("fuzz.xml", "gpu0", "node0", 312e12, [&](const char* key) -> const char* {
      const auto it = properties.find(key);
      return it == properties.end() ? nullptr : it->second.c_str();
    });
  });
}
