#include "platform/platform_binding.hpp"

#include <algorithm>
#include <csignal>
#include <set>
#include <string>
#include <tuple>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <simgrid/s4u.hpp>

#include "common/error.hpp"
#include "common/units.hpp"
#include "program/collective_plan.hpp"

namespace sg4 = simgrid::s4u;

namespace trainsim {

// What a program's ops name, each distinct thing once: the ops of every rank running the
// program are bound by resolving these per rank.
struct PlatformBinding::ProgramSlots {
  struct Target {
    std::string name;  // a host, a disk, @cpu or @nvme
    bool disk = false;  // named by a read or a write
  };
  struct Message {
    bool send = false;
    int peer = -1;  // slot
    int tag = 0;
  };
  // What binding checks of a rank's target, at the first op that needs it (so the first error
  // names the first op that fails).
  enum class Check : std::uint8_t { resolve, dram_bandwidth };
  struct TargetCheck {
    OpId op;
    Check check;
  };
  // A route the replay takes, at the first op that takes it.
  enum class Need : std::uint8_t { peer, copy_in, copy_out, read, write };
  struct RouteNeed {
    Need need;
    int index;  // peer slot or target slot
  };

  std::vector<int> slot;  // per op: its target or message slot; -1 for ops that name neither
  std::vector<Target> targets;
  std::vector<Message> messages;
  std::vector<TargetCheck> checks;
  std::vector<RouteNeed> routes;
  int peer_slots = 0;

  explicit ProgramSlots(const Program& program) : slot(program.ops.size(), -1) {
    std::map<std::pair<bool, std::string>, int> target_slots;
    std::map<std::tuple<bool, int, int>, int> message_slots;
    std::set<int> dram_checked;
    std::set<std::tuple<OpKind, int, std::string, bool>> taken;
    for (OpId id = 0; id < program.ops.size(); ++id) {
      const Op& op = program.ops[id];
      const bool names_target = op.kind == OpKind::copy || op.kind == OpKind::read || op.kind == OpKind::write ||
                                (op.kind == OpKind::compute && !op.target.empty());
      if (op.kind == OpKind::send || op.kind == OpKind::recv) {
        const bool send = op.kind == OpKind::send;
        const auto [found, fresh] =
            message_slots.try_emplace({send, op.peer, op.tag}, static_cast<int>(messages.size()));
        if (fresh)
          messages.push_back({send, op.peer, op.tag});
        slot[id] = found->second;
        if (send)
          peer_slots = std::max(peer_slots, op.peer + 1);
      } else if (names_target) {
        const bool disk = op.kind == OpKind::read || op.kind == OpKind::write;
        const auto [found, fresh] = target_slots.try_emplace({disk, op.target}, static_cast<int>(targets.size()));
        if (fresh) {
          targets.push_back({op.target, disk});
          checks.push_back({id, Check::resolve});
        }
        slot[id] = found->second;
        if (op.kind == OpKind::compute && dram_checked.insert(found->second).second)
          checks.push_back({id, Check::dram_bandwidth});
      }
      if ((op.kind == OpKind::send || op.kind == OpKind::copy || op.kind == OpKind::read ||
           op.kind == OpKind::write) &&
          taken.insert({op.kind, op.peer, op.target, op.inbound}).second) {
        switch (op.kind) {
        case OpKind::send: routes.push_back({Need::peer, op.peer}); break;
        case OpKind::copy: routes.push_back({op.inbound ? Need::copy_in : Need::copy_out, slot[id]}); break;
        case OpKind::read: routes.push_back({Need::read, slot[id]}); break;
        default: routes.push_back({Need::write, slot[id]}); break;
        }
      }
    }
  }
};

// Routes by pair of hosts, each looked up in SimGrid once.
class PlatformBinding::RouteTable {
public:
  // Told each pair of hosts before its route is looked up, and whether the platform has one.
  struct Probe {
    virtual ~Probe() = default;
    virtual void trying(const sg4::Host* from, const sg4::Host* to) = 0;
    virtual void found(bool any_link) = 0;
  };

  RouteTable(std::vector<BoundRoute>& routes, Probe* probe) : routes_(routes), probe_(probe) {
    const std::vector<sg4::Link*> links = sg4::Engine::get_instance()->get_all_links();
    for (std::size_t i = 0; i < links.size(); ++i)
      index_[links[i]] = static_cast<int>(i);
  }

  int route(const sg4::Host* from, const sg4::Host* to) {
    const auto [found, fresh] = ids_.try_emplace({from, to}, static_cast<int>(routes_.size()));
    if (!fresh)
      return found->second;
    std::vector<sg4::Link*> links;
    BoundRoute route;
    if (probe_)
      probe_->trying(from, to);
    from->route_to(to, links, &route.latency);
    if (probe_)
      probe_->found(!links.empty() || from == to);
    bool nvlink = false, network = false, switch_ports = true;
    for (const sg4::Link* link : links) {
      route.bandwidth = std::min(route.bandwidth, link->get_bandwidth());
      if (const auto indexed = index_.find(link); indexed != index_.end())  // not a host's own loopback
        route.links.push_back(indexed->second);
      const LinkClass kind = link_class(link->get_name());
      nvlink = nvlink || kind == LinkClass::nvlink;
      network = network || kind == LinkClass::nic || kind == LinkClass::network;
      switch_ports = switch_ports && (kind != LinkClass::nvlink || nvswitch_port(link->get_name()));
    }
    route.kind = nvlink && !network ? EdgeKind::nvlink : EdgeKind::network;
    route.nvswitch = route.kind == EdgeKind::nvlink && switch_ports;
    routes_.push_back(std::move(route));
    return found->second;
  }

private:
  std::vector<BoundRoute>& routes_;
  Probe* probe_;
  std::unordered_map<const sg4::Link*, int> index_;
  std::map<std::pair<const sg4::Host*, const sg4::Host*>, int> ids_;
};

namespace {

// A disk of the GPU's host or of its node's CPU host, by name; nullptr if neither has it.
sg4::Disk* find_disk_of(const std::string& name, const sg4::Host* gpu, const sg4::Host* cpu) {
  for (const sg4::Host* host : {gpu, cpu})
    if (host != nullptr)
      for (sg4::Disk* disk : host->get_disks())
        if (disk->get_name() == name)
          return disk;
  return nullptr;
}

sg4::Mailbox* p2p_mailbox(int from, int to, int tag) {
  return sg4::Mailbox::by_name("p2p/" + std::to_string(from) + "/" + std::to_string(to) + "/" + std::to_string(tag));
}

// A group's rings over its members (members of a node adjacent, see build_rings) and the route
// of each ring edge.
BoundGroup bind_group(const Group& group, const std::vector<sg4::Host*>& hosts, const std::vector<GpuInfo>& gpus,
                      const BindSettings& settings, PlatformBinding::RouteTable& table,
                      const std::vector<BoundRoute>& routes, const std::vector<PlatformResources::Link>& links) {
  BoundGroup bound;
  std::map<std::string, int> node_ids;
  std::vector<int> node_of_member;
  for (std::size_t i = 0; i < group.ranks.size(); ++i) {
    bound.member_of_rank[group.ranks[i]] = static_cast<int>(i);
    const std::string& node = gpus[group.ranks[i]].node;
    node_of_member.push_back(node_ids.emplace(node, static_cast<int>(node_ids.size())).first->second);
  }
  const int ring_count = settings.channels > 0 ? settings.channels : default_channels(node_of_member);
  bound.analytic = settings.fast_collectives && node_ids.size() == 1;
  bound.analytic_nvlink_edges = settings.fast_collectives && node_ids.size() > 1;
  const auto rings = build_rings(node_of_member, ring_count);
  const std::size_t members = group.ranks.size();
  bound.shape.members = static_cast<int>(members);
  bound.shape.nodes = static_cast<int>(node_ids.size());
  bool nvswitch = true;
  for (int rank : group.ranks)
    bound.shape.one_generation =
        bound.shape.one_generation && gpus[rank].architecture == gpus[group.ranks.front()].architecture;
  // Each ring edge carries 1/channels of a member's phase: what each link carries per byte of it,
  // by the kind of the edges crossing it (on a FATPIPE link, the most any one edge carries).
  std::unordered_map<int, double> load[edge_kinds];
  bound.next.assign(rings.size(), std::vector<int>(members));
  bound.previous.assign(rings.size(), std::vector<int>(members));
  bound.edge_route.assign(rings.size(), std::vector<int>(members, -1));
  for (std::size_t c = 0; c < rings.size(); ++c) {
    for (std::size_t k = 0; k < members; ++k) {
      const int from = rings[c][k], to = rings[c][(k + 1) % members];
      bound.next[c][from] = to;
      bound.previous[c][to] = from;
      if (members < 2)
        continue;
      const int route = table.route(hosts[group.ranks[from]], hosts[group.ranks[to]]);
      bound.edge_route[c][from] = route;
      const BoundRoute& edge = routes[route];
      const double share = 1.0 / static_cast<double>(rings.size());
      for (int link : edge.links) {
        double& carried = load[static_cast<int>(edge.kind)][link];
        carried = with_flow(carried, share, links[link].fatpipe);
      }
      bound.shape.route_latency = std::max(bound.shape.route_latency, edge.latency);
      nvswitch = nvswitch && edge.nvswitch;
      // Two GPUs of a node joined by PCIe (or anything but NVLink).
      bound.shape.pcie_inside =
          bound.shape.pcie_inside || (node_of_member[from] == node_of_member[to] && edge.kind != EdgeKind::nvlink);
    }
  }
  for (int kind = 0; kind < edge_kinds; ++kind)
    for (const auto& [link, share] : load[kind])
      bound.shape.seconds_per_byte[kind] = std::max(bound.shape.seconds_per_byte[kind], share / links[link].bandwidth);
  if (bound.analytic_nvlink_edges) {
    bound.nvlink_seconds_per_byte.assign(rings.size(), std::vector<double>(members, 0.0));
    const auto& nvlink_load = load[static_cast<int>(EdgeKind::nvlink)];
    for (std::size_t c = 0; c < rings.size(); ++c)
      for (std::size_t from = 0; from < members; ++from) {
        const BoundRoute& edge = routes[bound.edge_route[c][from]];
        if (edge.kind == EdgeKind::nvlink)
          for (int link : edge.links)
            bound.nvlink_seconds_per_byte[c][from] =
                std::max(bound.nvlink_seconds_per_byte[c][from], nvlink_load.at(link) / links[link].bandwidth);
      }
  }
  bound.shape.nvswitch = nvswitch && members > 1;
  bound.nccl = &nccl_profile(gpus[group.ranks.front()].architecture);
  return bound;
}

// An all-to-all's pair routes and what an even one puts on each link.
void bind_all_to_all(const Group& group, const std::vector<sg4::Host*>& hosts, PlatformBinding::RouteTable& table,
                     const std::vector<BoundRoute>& routes, const std::vector<PlatformResources::Link>& links,
                     BoundGroup& bound) {
  const std::size_t members = group.ranks.size();
  const double share = 1.0 / static_cast<double>(members);
  bound.pair_route.assign(members * members, -1);
  std::map<int, AllToAllLoad::Link> load;
  AllToAllLoad& all_to_all = bound.all_to_all;
  all_to_all.carried.assign(members, {});
  for (std::size_t from = 0; from < members; ++from) {
    std::map<int, int> pairs_across;  // link -> this member's pairs crossing it
    for (std::size_t to = 0; to < members; ++to) {
      if (to == from)
        continue;
      const int id = table.route(hosts[group.ranks[from]], hosts[group.ranks[to]]);
      bound.pair_route[from * members + to] = id;
      const BoundRoute& route = routes[id];
      all_to_all.route_latency = std::max(all_to_all.route_latency, route.latency);
      for (int link : route.links) {
        ++pairs_across[link];
        AllToAllLoad::Link& on_link = load[link];
        on_link.index = link;
        on_link.bandwidth = links[link].bandwidth;
        on_link.fatpipe = links[link].fatpipe;
        on_link.latency = std::min(on_link.latency, route.latency);
        double& carried = on_link.share[static_cast<int>(route.kind)];
        carried = with_flow(carried, share, links[link].fatpipe);
      }
    }
    std::map<int, std::vector<int>> links_by_pairs;
    for (const auto& [link, pairs] : pairs_across)
      links_by_pairs[pairs].push_back(link);
    for (auto& [pairs, crossed] : links_by_pairs)
      all_to_all.carried[from].emplace_back(std::move(crossed), pairs * share);
  }
  for (const auto& [link, on_link] : load)
    all_to_all.links.push_back(on_link);
}

} // namespace

PlatformBinding::PlatformBinding(const Workload& workload, const std::vector<GpuInfo>& gpus,
                                 const BindSettings& settings) {
  for (sg4::Host* host : sg4::Engine::get_instance()->get_all_hosts())
    hosts_by_name_.emplace(host->get_name(), host);
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    hosts_.push_back(host_named(gpus[rank].host));
    if (hosts_.back() == nullptr)
      throw InputError("rank " + std::to_string(rank) + ": GPU host '" + gpus[rank].host + "' is not in the platform");
  }
  for (const sg4::Link* link : sg4::Engine::get_instance()->get_all_links())
    resources_.links.push_back({link->get_name(), link_class(link->get_name()), link->get_bandwidth(),
                                link->get_sharing_policy() == sg4::Link::SharingPolicy::FATPIPE});
  bind_targets(workload, gpus);
  check_routes(workload, gpus, settings);
  RouteTable table(routes_, nullptr);
  take_routes(workload, gpus, settings, table);
}

PlatformBinding::~PlatformBinding() = default;

sg4::Host* PlatformBinding::host_named(const std::string& name) const {
  const auto found = hosts_by_name_.find(name);
  return found == hosts_by_name_.end() ? nullptr : found->second;
}

// Hosts and disks named by copies, host work, reads and writes exist for every rank that runs
// them: InputError naming the rank, the op and what the platform lacks.
void PlatformBinding::bind_targets(const Workload& workload, const std::vector<GpuInfo>& gpus) {
  check_node_targets(workload, gpus);
  std::map<std::string, int> drive_ids, cpu_ids;
  ranks_.resize(workload.ranks());
  targets_.resize(workload.ranks());
  mailboxes_.resize(workload.ranks());
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    const Program& program = workload.program(rank);
    auto& slots = programs_[&program];
    if (!slots)
      slots = std::make_unique<ProgramSlots>(program);
    ranks_[rank].slots = slots.get();
    ranks_[rank].op_slot = slots->slot.data();
    ranks_[rank].peer_routes.assign(static_cast<std::size_t>(slots->peer_slots), -1);
    for (const ProgramSlots::Message& message : slots->messages) {
      const int me = static_cast<int>(rank), peer = workload.peer_of(rank, message.peer);
      mailboxes_[rank].push_back(message.send ? p2p_mailbox(me, peer, message.tag) : p2p_mailbox(peer, me, message.tag));
    }
    std::vector<BoundTarget>& targets = targets_[rank];
    targets.resize(slots->targets.size());
    const GpuInfo& gpu = gpus[rank];
    const auto where = [&] { return "rank " + std::to_string(rank) + " (" + gpu.host + ", node " + gpu.node + ")"; };
    const sg4::Host* cpu = gpu.cpu_host.empty() ? nullptr : host_named(gpu.cpu_host);
    if (!gpu.cpu_host.empty() && cpu == nullptr)
      throw InputError(where() + ": CPU host '" + gpu.cpu_host + "' is not in the platform");
    for (const ProgramSlots::TargetCheck& check : slots->checks) {
      const Op& op = program.ops[check.op];
      BoundTarget& target = targets[slots->slot[check.op]];
      if (check.check == ProgramSlots::Check::dram_bandwidth) {
        sg4::Host* host = target.host;
        target.speed = host->get_speed();
        target.cpu = cpu_ids.try_emplace(host->get_name(), static_cast<int>(cpu_ids.size())).first->second;
        if (static_cast<std::size_t>(target.cpu) == resources_.cpus.size())
          resources_.cpus.push_back(host->get_name());
        const char* bandwidth = host->get_property("dram_bandwidth");
        try {
          if (bandwidth && !((target.dram_bandwidth = parse_bandwidth(bandwidth)) > 0))
            throw UnitError("not positive");
        } catch (const UnitError& error) {
          throw InputError("host " + host->get_name() + ": dram_bandwidth '" + bandwidth + "': " + error.what());
        }
        continue;
      }
      if (op.kind == OpKind::copy || op.kind == OpKind::compute) {
        target.host = host_named(op.target == node_cpu ? gpu.cpu_host : op.target);
        if (target.host == nullptr)
          throw InputError(where() + " op " + op.name + ": " + to_string(op.kind) + " host '" + op.target +
                           "' is not in the platform");
        continue;
      }
      target.disk = find_disk_of(op.target == node_nvme ? gpu.nvme_disk : op.target, hosts_[rank], cpu);
      if (target.disk == nullptr)
        throw InputError(where() + " op " + op.name + ": neither " + hosts_[rank]->get_name() +
                         " nor its node's CPU host has a disk '" + op.target + "'");
      target.drive = drive_ids.try_emplace(target.disk->get_name(), static_cast<int>(drive_ids.size())).first->second;
      if (static_cast<std::size_t>(target.drive) == resources_.drives.size())
        resources_.drives.push_back({target.disk->get_name(), std::max(target.disk->get_read_bandwidth(),
                                                                       target.disk->get_write_bandwidth())});
      if (const char* port = target.disk->get_property("pcie_port")) {
        target.port = host_named(port);
        if (target.port == nullptr)
          throw InputError("disk " + target.disk->get_name() + ": pcie_port '" + port +
                           "' is not a host of the platform (the drive's end of its PCIe route to the CPU)");
        target.memory = target.disk->get_host();
      }
    }
  }
}

// Every route the replay takes, in one place: the ring edges of each group, then per rank its
// sends' peers, its copies' hosts (each way it copies) and its drives' PCIe routes (each way it
// moves data). The route check takes them all in a child process first.
void PlatformBinding::take_routes(const Workload& workload, const std::vector<GpuInfo>& gpus,
                                  const BindSettings& settings, RouteTable& table) {
  groups_.clear();
  for (const Group& group : workload.groups)
    groups_.push_back(bind_group(group, hosts_, gpus, settings, table, routes_, resources_.links));
  const std::vector<bool> all_to_all =
      workload.groups_running([](const Op& op) { return op.collective == Collective::all_to_all; });
  for (std::size_t g = 0; g < workload.groups.size(); ++g) {
    if (!all_to_all[g] || workload.groups[g].ranks.size() < 2)
      continue;
    const Group& group = workload.groups[g];
    bind_all_to_all(group, hosts_, table, routes_, resources_.links, groups_[g]);
    // Members that run one program on one kind of GPU reach each call together.
    const auto first = static_cast<std::size_t>(group.ranks.front());
    groups_[g].analytic_all_to_all =
        settings.fast_collectives && std::all_of(group.ranks.begin(), group.ranks.end(), [&](int rank) {
          const auto member = static_cast<std::size_t>(rank);
          return &workload.program(member) == &workload.program(first) && gpus[member].model == gpus[first].model;
        });
  }
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    sg4::Host* gpu = hosts_[rank];
    for (const ProgramSlots::RouteNeed& need : ranks_[rank].slots->routes) {
      if (need.need == ProgramSlots::Need::peer) {
        ranks_[rank].peer_routes[need.index] = table.route(gpu, hosts_[workload.peer_of(rank, need.index)]);
        continue;
      }
      BoundTarget& target = targets_[rank][need.index];
      switch (need.need) {
      case ProgramSlots::Need::copy_in: target.route_in = table.route(target.host, gpu); break;
      case ProgramSlots::Need::copy_out: target.route_out = table.route(gpu, target.host); break;
      case ProgramSlots::Need::read:
        if (target.port)
          target.route_read = table.route(target.port, target.memory);
        break;
      case ProgramSlots::Need::write:
        if (target.port)
          target.route_write = table.route(target.memory, target.port);
        break;
      case ProgramSlots::Need::peer: break;
      }
    }
  }
}

// Every route the replay will take exists, or InputError naming the two hosts. SimGrid 3.32 does
// not say so itself: a Full zone without routes crashes the lookup, and a missing route aborts
// once data is sent. So the routes are first taken in a child process that names each pair
// before it looks it up: the last pair it named is the missing one.
void PlatformBinding::check_routes(const Workload& workload, const std::vector<GpuInfo>& gpus,
                                   const BindSettings& settings) {
  int channel[2];
  if (pipe(channel) != 0)
    return;  // without a pipe the check cannot run; the replay itself still stops on a missing route
  const pid_t child = fork();
  if (child == 0) {
    close(channel[0]);
    // Quietly: SimGrid's crash handler and messages are not the user's business here.
    signal(SIGSEGV, SIG_DFL);
    if (const int null = open("/dev/null", O_WRONLY); null >= 0)
      dup2(null, STDERR_FILENO);
    struct Reporter : RouteTable::Probe {
      int out;
      explicit Reporter(int fd) : out(fd) {}
      void trying(const sg4::Host* from, const sg4::Host* to) override {
        const std::string pair = from->get_name() + " " + to->get_name() + "\n";
        if (write(out, pair.data(), pair.size()) < 0)
          _exit(3);
      }
      void found(bool any_link) override {
        if (!any_link)
          _exit(1);
      }
    } reporter(channel[1]);
    RouteTable table(routes_, &reporter);
    take_routes(workload, gpus, settings, table);
    _exit(0);
  }
  close(channel[1]);
  std::string named, chunk(4096, '\0');
  for (ssize_t read_bytes; (read_bytes = read(channel[0], chunk.data(), chunk.size())) > 0;)
    named.append(chunk.data(), static_cast<std::size_t>(read_bytes));
  close(channel[0]);
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
    return;
  if (named.empty() || (WIFEXITED(status) && WEXITSTATUS(status) == 3))
    return;
  named.pop_back();
  const std::string pair = named.substr(named.rfind('\n') + 1);  // npos + 1: the whole text
  const std::size_t space = pair.find(' ');
  throw InputError("no route from " + pair.substr(0, space) + " to " + pair.substr(space + 1) +
                   ", which the workload sends data between; accepted: a platform with a <route> (or zones "
                   "joined by routes) between every two hosts that exchange data");
}

} // namespace trainsim
