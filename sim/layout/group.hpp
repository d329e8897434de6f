#pragma once
// A process group: ranks that run collectives together. The layout makes them; programs name
// them (directly, or by slot through a rank's binding); the replay lays rings over them.
#include <string>
#include <vector>

namespace trainsim {

struct Group {
  std::string name;          // unique, e.g. "dp0"
  std::string kind;          // dp, tp, pp, cp, ep, emb: what its traffic is reported as
  std::vector<int> ranks;    // in ring order
};

} // namespace trainsim
