#pragma once
// A workload bound to a loaded platform, once per rank before the replay: what the ops name
// (@cpu, @nvme, hosts, disks, peers' mailboxes) resolved into SimGrid handles, the properties the
// replay needs read and parsed (a CPU host's speed and dram_bandwidth, a drive's PCIe port),
// each group's rings laid out, and every route the replay will take looked up. Binding checks
// that the platform has all of it (InputError naming the rank, the op and what is missing), so
// the replay does no string work and no lookups by name: an op's target, mailbox or route is an
// index away.
#include <limits>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cluster/gpu.hpp"
#include "platform/resources.hpp"
#include "program/collective_plan.hpp"
#include "program/nccl_model.hpp"
#include "program/program.hpp"

// Handles only: SimGrid's headers stay out of ours (docs/architecture.md).
namespace simgrid::s4u {
class Disk;
class Host;
class Mailbox;
} // namespace simgrid::s4u

namespace trainsim {

// The links from one host to another, fixed for the whole replay.
struct BoundRoute {
  std::vector<int> links;  // indices into PlatformResources::links (a host's own loopback left out)
  double latency = 0;
  double bandwidth = std::numeric_limits<double>::infinity();  // its narrowest link
  EdgeKind kind = EdgeKind::network;  // nvlink when it crosses NVLink and no NIC or network link
  bool nvswitch = false;              // nvlink through NVSwitch ports only (resources.hpp)
};

// What a copy, a CPU op, a read or a write names, resolved for one rank.
struct BoundTarget {
  simgrid::s4u::Host* host = nullptr;  // copy: the other end; compute: the host it runs on
  double speed = 0;                    // compute: that host's FLOP/s
  double dram_bandwidth = 0;           // compute: its memory's bytes/s; 0: not a bound
  int cpu = -1;                        // compute: index into PlatformResources::cpus
  int route_in = -1;                   // copy: routes into the rank's GPU and out of it
  int route_out = -1;
  simgrid::s4u::Disk* disk = nullptr;  // read, write
  int drive = -1;                      // index into PlatformResources::drives
  // A drive behind a PCIe switch: its port host and the host whose memory it serves, with the
  // routes between them a read and a write cross; nullptr when the drive has no port.
  simgrid::s4u::Host* port = nullptr;
  simgrid::s4u::Host* memory = nullptr;
  int route_read = -1;
  int route_write = -1;
};

// A group's rings on the platform, fixed for the whole replay.
struct BoundGroup {
  std::vector<std::vector<int>> next;        // [channel][member] -> member to send to
  std::vector<std::vector<int>> previous;    // [channel][member] -> member it receives from
  std::vector<std::vector<int>> edge_route;  // [channel][member] -> route to that member; -1 in a group of one
  std::unordered_map<int, int> member_of_rank;
  RingShape shape;                   // what NCCL's choice of algorithm and protocol depends on
  const NcclProfile* nccl = nullptr;  // the calibration of its GPUs' generation
  // Fast fidelity inside one node: timed analytically instead of simulated as flows.
  bool analytic = false;
  // Fast fidelity across nodes: the NVLink edges of its rings are timed rather than simulated
  // as flows; the rest (between nodes, PCIe) stay flows. Per NVLink edge ([channel][member it
  // leaves]): seconds per byte of a member's phase on its most loaded link, the load of every
  // edge of the group crossing it, as max-min sharing would pace its flow; 0 for other edges.
  bool analytic_nvlink_edges = false;
  std::vector<std::vector<double>> nvlink_seconds_per_byte;
  // Where a program runs all-to-alls on the group: each pair's route ([from * members + to], -1
  // on the diagonal) and what an even all-to-all puts on the links; empty otherwise.
  std::vector<int> pair_route;
  AllToAllLoad all_to_all;
  // Fast fidelity: its even all-to-alls are timed from that load instead of simulated as flows,
  // wherever the members are. Only where every member runs the same program, so that they reach
  // each call together (each member's call is timed from its own arrival).
  bool analytic_all_to_all = false;
};

struct BindSettings {
  int channels = 0;  // rings per collective; 0: GPUs of the group on its fullest node
  bool fast_collectives = false;  // ReplaySettings::fast_collectives
};

class PlatformBinding {
public:
  // Resolves and checks everything; throws InputError (without the platform's name: the caller
  // knows it). Every route is first looked up in a child process, because SimGrid 3.32 crashes
  // or aborts on a missing one.
  PlatformBinding(const Workload& workload, const std::vector<GpuInfo>& gpus, const BindSettings& settings);
  ~PlatformBinding();
  PlatformBinding(const PlatformBinding&) = delete;
  PlatformBinding& operator=(const PlatformBinding&) = delete;

  simgrid::s4u::Host* host(int rank) const { return hosts_[rank]; }
  const BoundGroup& group(int index) const { return groups_[index]; }
  const BoundRoute& route(int index) const { return routes_[index]; }
  // What op `op` of `rank`'s program names (copies, reads, writes, compute on a host).
  const BoundTarget& target(int rank, OpId op) const { return targets_[rank][ranks_[rank].op_slot[op]]; }
  // A send's or recv's mailbox.
  simgrid::s4u::Mailbox* mailbox(int rank, OpId op) const { return mailboxes_[rank][ranks_[rank].op_slot[op]]; }
  // The route of `rank`'s sends to its peer in slot `peer`.
  int peer_route(int rank, int peer) const { return ranks_[rank].peer_routes[peer]; }
  const PlatformResources& resources() const { return resources_; }

  struct ProgramSlots;  // what a program's ops name, found once per distinct program
  class RouteTable;

private:
  struct RankSlots {
    const ProgramSlots* slots = nullptr;
    const int* op_slot = nullptr;  // slots->slot: per op, its target or message slot
    std::vector<int> peer_routes;  // per peer slot; -1 where the rank sends nothing
  };
  void bind_targets(const Workload& workload, const std::vector<GpuInfo>& gpus);
  void take_routes(const Workload& workload, const std::vector<GpuInfo>& gpus, const BindSettings& settings,
                   RouteTable& table);
  void check_routes(const Workload& workload, const std::vector<GpuInfo>& gpus, const BindSettings& settings);
  // The platform's host of that name, or null. SimGrid 3.32's Host::by_name walks every zone of
  // the platform: binding 16,384 ranks on Llama 3's Clos (about 5,000 zones) spent 6 s there.
  simgrid::s4u::Host* host_named(const std::string& name) const;

  std::unordered_map<std::string, simgrid::s4u::Host*> hosts_by_name_;
  std::vector<simgrid::s4u::Host*> hosts_;  // per rank
  std::map<const Program*, std::unique_ptr<ProgramSlots>> programs_;
  std::vector<RankSlots> ranks_;
  std::vector<std::vector<BoundTarget>> targets_;                // per rank, per target slot
  std::vector<std::vector<simgrid::s4u::Mailbox*>> mailboxes_;   // per rank, per message slot
  std::vector<BoundGroup> groups_;
  std::vector<BoundRoute> routes_;
  PlatformResources resources_;
};

} // namespace trainsim
