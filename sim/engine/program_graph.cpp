#include "engine/program_graph.hpp"

#include <array>
#include <optional>

namespace trainsim {

ProgramGraph::ProgramGraph(const Program& program)
    : predecessors(program.ops.size(), 0), successors(program.ops.size()) {
  std::array<std::optional<OpId>, stream_count> last_on_stream{};
  for (OpId id = 0; id < program.ops.size(); ++id) {
    const Op& op = program.ops[id];
    // Point-to-point ops are posted when their deps are done, not in stream order (NCCL's
    // batched isend/irecv): a send blocked on a busy peer must not hold up later receives.
    if (op.kind != OpKind::send && op.kind != OpKind::recv) {
      auto& previous = last_on_stream[static_cast<int>(op.stream)];
      if (previous) {
        successors[*previous].push_back(id);
        ++predecessors[id];
      }
      previous = id;
    }
    for (OpId dep : op.deps) {
      successors[dep].push_back(id);
      ++predecessors[id];
    }
  }
}

} // namespace trainsim
