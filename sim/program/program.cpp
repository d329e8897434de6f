#include "program/program.hpp"

#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include "common/error.hpp"

namespace trainsim {
namespace {

template <typename Enum, std::size_t N>
std::optional<Enum> lookup(const std::string& text, const char* const (&names)[N]) {
  for (std::size_t i = 0; i < N; ++i)
    if (text == names[i])
      return static_cast<Enum>(i);
  return std::nullopt;
}

const char* const op_kind_names[] = {"compute", "collective", "send", "recv", "copy", "read", "write", "alloc", "free"};
const char* const stream_names[] = {"compute", "tp-comm", "dp-comm", "pp-comm", "copy", "io"};
const char* const collective_names[] = {"allreduce", "reducescatter", "allgather", "alltoall", "broadcast"};
const char* const category_names[] = {"weights", "gradients", "optimizer", "activations", "buffers"};
const char* const device_names[] = {"gpu", "host", "nvme"};

std::string describe(const std::string& where, std::size_t rank, std::size_t op) {
  return where + ": rank " + std::to_string(rank) + " op " + std::to_string(op);
}

} // namespace

const char* to_string(OpKind kind) { return op_kind_names[static_cast<int>(kind)]; }
const char* to_string(Stream stream) { return stream_names[static_cast<int>(stream)]; }
const char* to_string(Collective collective) { return collective_names[static_cast<int>(collective)]; }
const char* to_string(MemCategory category) { return category_names[static_cast<int>(category)]; }
const char* to_string(Device device) { return device_names[static_cast<int>(device)]; }
std::optional<OpKind> op_kind_from(const std::string& text) { return lookup<OpKind>(text, op_kind_names); }
std::optional<Stream> stream_from(const std::string& text) { return lookup<Stream>(text, stream_names); }
std::optional<Collective> collective_from(const std::string& text) { return lookup<Collective>(text, collective_names); }
std::optional<MemCategory> category_from(const std::string& text) { return lookup<MemCategory>(text, category_names); }
std::optional<Device> device_from(const std::string& text) { return lookup<Device>(text, device_names); }

void validate_workload(const Workload& workload, const std::string& where) {
  const std::size_t ranks = workload.ranks();
  if (ranks == 0)
    throw InputError(where + ": the workload has no ranks");
  std::vector<std::set<int>> members(workload.groups.size());
  for (std::size_t g = 0; g < workload.groups.size(); ++g) {
    const Group& group = workload.groups[g];
    if (group.ranks.empty())
      throw InputError(where + ": group " + group.name + " has no ranks");
    for (int rank : group.ranks) {
      if (rank < 0 || static_cast<std::size_t>(rank) >= ranks)
        throw InputError(where + ": group " + group.name + " names rank " + std::to_string(rank) + " but there are " +
                         std::to_string(ranks) + " ranks");
      if (!members[g].insert(rank).second)
        throw InputError(where + ": group " + group.name + " lists rank " + std::to_string(rank) + " twice");
    }
  }

  // Collectives must be issued in the same order by every member, or the replay would deadlock.
  std::vector<std::map<int, std::vector<std::pair<Collective, double>>>> issued(workload.groups.size());
  std::map<std::tuple<int, int, int>, long> unmatched;  // (from, to, tag) -> sends minus receives
  for (std::size_t rank = 0; rank < ranks; ++rank) {
    std::map<std::string, bool> live;
    const auto& ops = workload.program(rank).ops;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      for (OpId dep : op.deps)
        if (dep >= i)
          throw InputError(describe(where, rank, i) + ": depends on op " + std::to_string(dep) +
                           ", which does not come before it; accepted: ids of earlier ops");
      if (!(op.flops >= 0) || !(op.bytes >= 0) || op.flops > 1e30 || op.bytes > 1e30)
        throw InputError(describe(where, rank, i) + ": flops and bytes must be non-negative and finite");
      switch (op.kind) {
      case OpKind::collective:
        if (op.group < 0 || static_cast<std::size_t>(op.group) >= workload.groups.size())
          throw InputError(describe(where, rank, i) + ": unknown group");
        if (!members[op.group].count(static_cast<int>(rank)))
          throw InputError(describe(where, rank, i) + ": rank is not a member of group " +
                           workload.groups[op.group].name);
        issued[op.group][static_cast<int>(rank)].emplace_back(op.collective, op.bytes);
        break;
      case OpKind::send:
      case OpKind::recv:
        if (op.peer < 0 || static_cast<std::size_t>(op.peer) >= ranks || op.peer == static_cast<int>(rank))
          throw InputError(describe(where, rank, i) + ": peer " + std::to_string(op.peer) +
                           " is not another rank; accepted: 0 to " + std::to_string(ranks - 1) + ", not itself");
        if (op.kind == OpKind::send)
          ++unmatched[{static_cast<int>(rank), op.peer, op.tag}];
        else
          --unmatched[{op.peer, static_cast<int>(rank), op.tag}];
        break;
      case OpKind::copy:
      case OpKind::read:
      case OpKind::write:
        if (op.target.empty())
          throw InputError(describe(where, rank, i) + ": " + to_string(op.kind) +
                           " needs a target (copy: a host name; read/write: a disk name)");
        break;
      case OpKind::alloc:
        if (op.tensor.empty())
          throw InputError(describe(where, rank, i) + ": alloc needs a tensor name");
        if (live[op.tensor])
          throw InputError(describe(where, rank, i) + ": tensor " + op.tensor + " is allocated twice without a free");
        live[op.tensor] = true;
        break;
      case OpKind::free:
        if (!live[op.tensor])
          throw InputError(describe(where, rank, i) + ": free of tensor '" + op.tensor + "', which is not allocated");
        live[op.tensor] = false;
        break;
      case OpKind::compute:
        break;
      }
    }
  }
  for (std::size_t g = 0; g < workload.groups.size(); ++g) {
    const auto& per_rank = issued[g];
    const auto& first = per_rank.empty() ? std::vector<std::pair<Collective, double>>{} : per_rank.begin()->second;
    for (int rank : workload.groups[g].ranks) {
      const auto it = per_rank.find(rank);
      const auto& mine = it == per_rank.end() ? std::vector<std::pair<Collective, double>>{} : it->second;
      if (mine != first)
        throw InputError(where + ": the members of group " + workload.groups[g].name +
                         " do not issue the same collectives in the same order (rank " + std::to_string(rank) +
                         " differs from rank " + std::to_string(per_rank.begin()->first) + ")");
    }
  }
  for (const auto& [key, balance] : unmatched)
    if (balance != 0)
      throw InputError(where + ": " + std::to_string(std::abs(balance)) + " send(s) from rank " +
                       std::to_string(std::get<0>(key)) + " to rank " + std::to_string(std::get<1>(key)) + " with tag " +
                       std::to_string(std::get<2>(key)) + " have no matching recv" + (balance < 0 ? " (or the reverse)" : ""));
}

} // namespace trainsim
