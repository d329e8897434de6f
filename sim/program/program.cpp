#include "program/program.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include "common/error.hpp"
#include "common/text.hpp"
#include "program/collective_plan.hpp"

namespace trainsim {
namespace {

std::string describe(const std::string& where, std::size_t rank, std::size_t op) {
  return where + ": rank " + std::to_string(rank) + " op " + std::to_string(op);
}

} // namespace

const char* to_string(OpKind kind) {
  switch (kind) {
  case OpKind::compute: return "compute";
  case OpKind::collective: return "collective";
  case OpKind::send: return "send";
  case OpKind::recv: return "recv";
  case OpKind::copy: return "copy";
  case OpKind::read: return "read";
  case OpKind::write: return "write";
  case OpKind::alloc: return "alloc";
  case OpKind::free: return "free";
  }
  return "?";
}

const char* to_string(Stream stream) {
  switch (stream) {
  case Stream::compute: return "compute";
  case Stream::tp_comm: return "tp-comm";
  case Stream::dp_comm: return "dp-comm";
  case Stream::pp_comm: return "pp-comm";
  case Stream::copy: return "copy";
  case Stream::io_read: return "io-read";
  case Stream::cp_comm: return "cp-comm";
  case Stream::pp_bwd: return "pp-bwd";
  case Stream::copy_out: return "copy-out";
  case Stream::cpu: return "cpu";
  case Stream::io_write: return "io-write";
  case Stream::ep_comm: return "ep-comm";
  case Stream::ep_rail: return "ep-rail";
  }
  return "?";
}

const char* to_string(Collective collective) {
  switch (collective) {
  case Collective::all_reduce: return "allreduce";
  case Collective::reduce_scatter: return "reducescatter";
  case Collective::all_gather: return "allgather";
  case Collective::all_to_all: return "alltoall";
  case Collective::broadcast: return "broadcast";
  }
  return "?";
}

const char* to_string(MemCategory category) {
  switch (category) {
  case MemCategory::weights: return "weights";
  case MemCategory::gradients: return "gradients";
  case MemCategory::optimizer: return "optimizer";
  case MemCategory::activations: return "activations";
  case MemCategory::buffers: return "buffers";
  case MemCategory::cuda_context: return "cuda_context";
  case MemCategory::nccl_buffers: return "nccl_buffers";
  }
  return "?";
}

const char* to_string(Device device) {
  switch (device) {
  case Device::gpu: return "gpu";
  case Device::host: return "host";
  case Device::nvme: return "nvme";
  }
  return "?";
}

const char* to_string(Phase phase) {
  switch (phase) {
  case Phase::other: return "other";
  case Phase::forward: return "forward";
  case Phase::backward: return "backward";
  case Phase::recompute: return "recompute";
  case Phase::optimizer: return "optimizer";
  case Phase::weight_gradient: return "weight-gradient";
  }
  return "?";
}


double Workload::all_to_all_bytes(const Op& op, int member, int members) const {
  return op.peer >= 0 ? op.bytes * all_to_all_splits[static_cast<std::size_t>(op.peer)][static_cast<std::size_t>(member)]
                      : op.bytes / members;
}

std::vector<bool> Workload::groups_running(const std::function<bool(const Op&)>& runs) const {
  std::vector<bool> running(groups.size(), false);
  std::map<const Program*, std::set<int>> slots_of_program;
  for (std::size_t rank = 0; rank < ranks(); ++rank) {
    auto [slots, fresh] = slots_of_program.try_emplace(&program(rank));
    if (fresh)
      for (const Op& op : program(rank).ops)
        if (op.kind == OpKind::collective && runs(op))
          slots->second.insert(op.group);
    for (int slot : slots->second)
      if (const int group = group_of(rank, slot); group >= 0)
        running[static_cast<std::size_t>(group)] = true;
  }
  return running;
}

double Workload::bytes_sent(std::size_t rank, const Op& op) const {
  const std::vector<int>& ranks = groups[group_of(rank, op.group)].ranks;
  const int members = static_cast<int>(ranks.size());
  if (op.collective != Collective::all_to_all || op.peer < 0)
    return bytes_sent_per_rank(op.collective, op.bytes, members);
  const auto me = std::find(ranks.begin(), ranks.end(), static_cast<int>(rank)) - ranks.begin();
  return op.bytes - all_to_all_bytes(op, static_cast<int>(me), members);
}

namespace {

using CollectiveSequence = std::vector<std::pair<Collective, double>>;

// What a program does that depends only on the program: checked once, however many ranks share it.
struct ProgramFacts {
  std::map<int, CollectiveSequence> collectives;      // by group slot
  std::vector<std::size_t> first_op_of_slot;           // where each slot's first collective is
  std::vector<std::pair<std::size_t, const Op*>> p2p;  // op index, send/recv op
  std::vector<std::pair<std::size_t, int>> splits;  // the all-to-alls dividing unevenly: op index, split
};

ProgramFacts check_program(const Program& program, const std::string& where, std::size_t rank,
                           std::size_t kernel_sets, std::size_t splits) {
  ProgramFacts facts;
  std::map<std::string, bool> live;
  const auto& ops = program.ops;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    for (OpId dep : op.deps)
      if (dep >= i)
        throw InputError(describe(where, rank, i) + ": depends on op " + std::to_string(dep) +
                         ", which does not come before it; accepted: ids of earlier ops");
    if (!(op.flops >= 0) || !(op.bytes >= 0) || op.flops > 1e30 || op.bytes > 1e30)
      throw InputError(describe(where, rank, i) + ": flops and bytes must be non-negative and finite");
    if (op.kernel_set >= 0 && (op.kind != OpKind::compute || static_cast<std::size_t>(op.kernel_set) >= kernel_sets))
      throw InputError(describe(where, rank, i) + ": kernels=" + std::to_string(op.kernel_set) +
                       " names no kernel set; accepted: a compute op's index among the " +
                       std::to_string(kernel_sets) + " kernel_set lines of workload.txt, from 0");
    switch (op.kind) {
    case OpKind::collective:
      if (!facts.collectives.count(op.group))
        facts.first_op_of_slot.push_back(i);
      // An all-to-all's members may send different amounts (uneven routing).
      facts.collectives[op.group].emplace_back(op.collective, op.collective == Collective::all_to_all ? 0.0 : op.bytes);
      if (op.collective == Collective::all_to_all && op.peer >= 0) {
        if (static_cast<std::size_t>(op.peer) >= splits)
          throw InputError(describe(where, rank, i) + ": split=" + std::to_string(op.peer) + " names no split; accepted: "
                           "an index among the " + std::to_string(splits) + " all_to_all_split lines of workload.txt");
        facts.splits.emplace_back(i, op.peer);
      }
      break;
    case OpKind::send:
    case OpKind::recv:
      facts.p2p.emplace_back(i, &op);
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
  return facts;
}

} // namespace

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

  for (std::size_t k = 0; k < workload.all_to_all_splits.size(); ++k) {
    double total = 0;
    for (const double share : workload.all_to_all_splits[k]) {
      if (!(share >= 0 && share <= 1))
        throw InputError(where + ": all_to_all_split " + std::to_string(k) + " has a share " + format_double(share) +
                         "; accepted: shares from 0 to 1");
      total += share;
    }
    if (std::abs(total - 1) > 1e-9)
      throw InputError(where + ": the shares of all_to_all_split " + std::to_string(k) + " add up to " +
                       format_double(total) + "; accepted: shares adding up to 1");
  }
  if (!workload.bindings.empty() && workload.bindings.size() != ranks)
    throw InputError(where + ": " + std::to_string(workload.bindings.size()) + " bindings for " + std::to_string(ranks) +
                     " ranks");
  std::map<const Program*, ProgramFacts> facts_of;
  // Ranks sharing a program must bind each slot to a group of the same kind and size, since
  // reports and timings read those from the program.
  std::map<const Program*, std::map<int, std::pair<std::string, std::size_t>>> slot_shape;
  // Collectives must be issued in the same order by every member, or the replay would deadlock.
  std::vector<std::map<int, const CollectiveSequence*>> issued(workload.groups.size());
  // (from, to, tag) -> the bytes of its sends and of its receives, in program order: the k-th
  // send meets the k-th receive, as the replay's mailboxes match them.
  std::map<std::tuple<int, int, int>, std::pair<std::vector<double>, std::vector<double>>> p2p_bytes;
  for (std::size_t rank = 0; rank < ranks; ++rank) {
    const Program* program = workload.programs[rank].get();
    auto found = facts_of.find(program);
    if (found == facts_of.end())
      found = facts_of.emplace(program, check_program(*program, where, rank, workload.kernel_sets.size(),
                                                      workload.all_to_all_splits.size()))
                  .first;
    const ProgramFacts& facts = found->second;
    const int me = static_cast<int>(rank);
    for (const auto& [index, split] : facts.splits) {
      const int group = workload.group_of(rank, program->ops[index].group);
      const std::size_t shares = workload.all_to_all_splits[static_cast<std::size_t>(split)].size();
      if (group >= 0 && static_cast<std::size_t>(group) < workload.groups.size() &&
          workload.groups[group].ranks.size() != shares)
        throw InputError(describe(where, rank, index) + ": split " + std::to_string(split) + " gives " +
                         std::to_string(shares) + " shares for group " + workload.groups[group].name + " of " +
                         std::to_string(workload.groups[group].ranks.size()) + " ranks; accepted: one per member");
    }
    for (std::size_t op : facts.first_op_of_slot) {
      const int slot = program->ops[op].group;
      const int group = workload.group_of(rank, slot);
      if (group < 0 || static_cast<std::size_t>(group) >= workload.groups.size())
        throw InputError(describe(where, rank, op) + ": unknown group");
      const auto shape = std::make_pair(workload.groups[group].kind, workload.groups[group].ranks.size());
      const auto [known, fresh] = slot_shape[program].emplace(slot, shape);
      if (!fresh && known->second != shape)
        throw InputError(describe(where, rank, op) + ": group " + workload.groups[group].name +
                         " differs in kind or size from the group other ranks running this program use here");
    }
    for (const auto& [slot, sequence] : facts.collectives) {
      const int group = workload.group_of(rank, slot);
      if (!members[group].count(me))
        throw InputError(where + ": rank " + std::to_string(rank) + " issues a collective on group " +
                         workload.groups[group].name + " but is not a member of it");
      issued[group][me] = &sequence;
    }
    for (const auto& [index, op] : facts.p2p) {
      const int peer = workload.peer_of(rank, op->peer);
      if (peer < 0 || static_cast<std::size_t>(peer) >= ranks || peer == me)
        throw InputError(describe(where, rank, index) + ": peer " + std::to_string(peer) +
                         " is not another rank; accepted: 0 to " + std::to_string(ranks - 1) + ", not itself");
      if (op->kind == OpKind::send)
        p2p_bytes[{me, peer, op->tag}].first.push_back(op->bytes);
      else
        p2p_bytes[{peer, me, op->tag}].second.push_back(op->bytes);
    }
  }
  static const CollectiveSequence none;
  for (std::size_t g = 0; g < workload.groups.size(); ++g) {
    const auto& per_rank = issued[g];
    const int first_rank = workload.groups[g].ranks.front();
    const auto sequence_of = [&](int rank) {
      const auto it = per_rank.find(rank);
      return it == per_rank.end() ? &none : it->second;
    };
    const CollectiveSequence* first = sequence_of(first_rank);
    for (int rank : workload.groups[g].ranks) {
      const CollectiveSequence* mine = sequence_of(rank);
      if (mine == first || *mine == *first)
        continue;
      std::size_t k = 0;
      while (k < mine->size() && k < first->size() && (*mine)[k] == (*first)[k])
        ++k;
      const auto issues = [&](const CollectiveSequence& sequence) -> std::string {
        return k < sequence.size() ? std::string(to_string(sequence[k].first)) + " of " +
                                         format_double(sequence[k].second) + " bytes"
                                   : "nothing more";
      };
      throw InputError(where + ": the members of group " + workload.groups[g].name +
                       " do not issue the same collectives in the same order: collective " + std::to_string(k + 1) +
                       " is " + issues(*first) + " on rank " + std::to_string(first_rank) + " but " + issues(*mine) +
                       " on rank " + std::to_string(rank));
    }
  }
  for (const auto& [key, bytes] : p2p_bytes) {
    const auto& [sent, received] = bytes;
    const std::string pair = "rank " + std::to_string(std::get<0>(key)) + " to rank " +
                             std::to_string(std::get<1>(key)) + " with tag " + std::to_string(std::get<2>(key));
    if (sent.size() != received.size())
      throw InputError(where + ": " + std::to_string(sent.size()) + " send(s) from " + pair + " but " +
                       std::to_string(received.size()) + " recv(s); accepted: one recv for each send");
    for (std::size_t k = 0; k < sent.size(); ++k)
      if (sent[k] != received[k])
        throw InputError(where + ": send " + std::to_string(k + 1) + " from " + pair + " carries " +
                         format_double(sent[k]) + " bytes but its recv expects " + format_double(received[k]) +
                         "; accepted: the same bytes on both sides");
  }
}

void check_node_targets(const Workload& workload, const std::vector<GpuInfo>& gpus) {
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    const GpuInfo& gpu = gpus[rank];
    if (rank > 0 && &workload.program(rank) == &workload.program(rank - 1) && gpu.cpu_host == gpus[rank - 1].cpu_host &&
        gpu.nvme_disk.empty() == gpus[rank - 1].nvme_disk.empty())
      continue;  // a replica on a node like its predecessor's: the same answer
    const std::string where = "rank " + std::to_string(rank) + " (" + gpu.host + ", node " + gpu.node + ")";
    for (const Op& op : workload.program(rank).ops) {
      const auto op_name = [&op] { return op.kind == OpKind::alloc ? "alloc " + op.tensor : op.name; };
      const bool uses_cpu = op.target == node_cpu || (op.kind == OpKind::alloc && op.device == Device::host);
      const bool uses_nvme = op.target == node_nvme || (op.kind == OpKind::alloc && op.device == Device::nvme);
      if (uses_cpu && gpu.cpu_host.empty())
        throw InputError(where + " op " + op_name() + " needs its node's CPU host and the platform has none: a <host> "
                         "with <prop id=\"role\" value=\"cpu\"/> in the node's zone or with <prop id=\"node\" value=\"" +
                         gpu.node + "\"/> (described clusters have one)");
      if (uses_nvme && gpu.nvme_disk.empty())
        throw InputError(where + " op " + op_name() + " needs an NVMe drive on its node's CPU host and the platform has "
                         "none (a <disk> in that host; described clusters: platform.nvme_per_node >= 1)");
      // Whether offloaded states fit is part of the answer: a tier of unknown size cannot say.
      if (op.kind == OpKind::alloc && op.device == Device::host && !(gpu.host_memory_capacity > 0))
        throw InputError("host " + gpu.cpu_host + " lacks property 'dram_capacity', which " + where +
                         " needs to place its offloaded states; accepted: a size such as 2TiB");
      if (op.kind == OpKind::alloc && op.device == Device::nvme && !(gpu.nvme_capacity > 0))
        throw InputError("the disks of host " + gpu.cpu_host + " lack property 'size', which " + where +
                         " needs to place its offloaded states; accepted: a size such as 3.84TB");
    }
  }
}

} // namespace trainsim
