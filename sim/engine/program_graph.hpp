#pragma once
// The dependency structure of a program: an op waits for the previous op of its
// stream and for its explicit deps; send and recv wait for their deps only. Built
// once per distinct program.
#include <vector>

#include "program/program.hpp"

namespace trainsim {

struct ProgramGraph {
  std::vector<std::uint32_t> predecessors;      // number of incoming edges per op
  std::vector<std::vector<OpId>> successors;    // an edge may appear twice; counts match

  explicit ProgramGraph(const Program& program);
};

} // namespace trainsim
