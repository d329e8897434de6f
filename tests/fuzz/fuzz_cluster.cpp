// Described clusters: "key = value" lines (platform.* keys without the prefix) as trainsim
// platform's options give them, then the generated platform XML for small clusters.
#include <map>
#include <sstream>

#include "cluster/cluster.hpp"
#include "common/text.hpp"
#include "config/scenario.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  return fuzz::guarded([&] {
    std::map<std::string, std::pair<std::string, std::string>> given;
    std::istringstream lines(fuzz::text_of(data, size));
    std::string line;
    while (std::getline(lines, line)) {
      const auto equals = line.find('=');
      if (equals != std::string::npos)
        given["platform." + trim(line.substr(0, equals))] = {trim(line.substr(equals + 1)), "fuzz"};
    }
    const ClusterSpec cluster = parse_cluster(given);
    if (cluster.nodes * cluster.gpus_per_node <= 64)  // larger ones only take longer to write
      platform_xml(cluster);
  });
}
