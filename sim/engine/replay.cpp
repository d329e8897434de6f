#include "engine/replay.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <unordered_map>

#include <csignal>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <simgrid/s4u.hpp>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "common/units.hpp"
#include "model/costs.hpp"
#include "program/collective_plan.hpp"
#include "program/program_graph.hpp"

namespace sg4 = simgrid::s4u;

namespace trainsim {
namespace {

// Timers closer than SimGrid's numerical accuracy fire at once.
constexpr double timer_resolution = 1e-9;

// Observer events a rank may hold back while it settles ops ahead of the clock.
constexpr std::size_t max_events_ahead = 1 << 16;

// Beyond this a replay would take hours on one core: refused up front.
constexpr std::size_t max_simulated_ops = 500'000'000;

// Mailbox payloads are never read: only the simulated size matters.
char payload_token;
void* received_payload;

// A group's rings, fixed for the whole replay.
struct GroupPlan {
  std::vector<std::vector<int>> next;   // [channel][member] -> member to send to
  std::unordered_map<int, int> member_of_rank;
  double step_latency = 0;              // the slowest ring edge's route latency
  std::vector<std::vector<sg4::Mailbox*>> inbox;  // [channel][member]
  // Fast fidelity for a group inside one node: collectives are timed from the ring's slowest
  // edge (bytes / bandwidth + latency per step) instead of simulated as flows.
  bool analytic = false;
  double edge_bandwidth = std::numeric_limits<double>::infinity();
  std::vector<std::vector<const std::vector<int>*>> edge_route;  // [channel][member] -> links to the next member
};

// Per distinct program: its dependency graph and which ops the rank can time on its own.
struct ProgramPlan {
  ProgramGraph graph;
  // Ops whose finish follows from their start alone: memory ops, kernels when the program never
  // runs two at once (the GPU host runs no other actor), and analytically timed collectives on
  // a group that only one stream uses (so stream order already serialises them). A rank settles
  // these ahead of the simulated clock without a round trip through SimGrid; only ops that share
  // platform resources or meet other ranks are started in the simulation.
  std::vector<bool> local;
};

// Work handed to a CPU: busy time at full speed and bytes.
struct Usage {
  double busy_s = 0;
  double bytes = 0;
};

// Bytes carried by every link, counted per flow along its route (routes are fixed).
class LinkCounter {
public:
  explicit LinkCounter(std::vector<sg4::Link*> links) : links_(std::move(links)), bytes_(links_.size(), 0.0) {
    for (std::size_t i = 0; i < links_.size(); ++i)
      index_[links_[i]] = static_cast<int>(i);
  }
  // Told each pair of hosts before its route is looked up, and whether the platform has one.
  struct Probe {
    virtual ~Probe() = default;
    virtual void trying(const sg4::Host* from, const sg4::Host* to) = 0;
    virtual void found(bool any_link) = 0;
  };
  void set_probe(Probe* probe) { probe_ = probe; }

  // The links from one host to another, as indices; computed once per pair.
  const std::vector<int>& route(const sg4::Host* from, const sg4::Host* to) {
    auto [found, fresh] = routes_.try_emplace({from, to});
    if (fresh) {
      std::vector<sg4::Link*> links;
      double latency = 0;
      if (probe_)
        probe_->trying(from, to);
      from->route_to(to, links, &latency);
      if (probe_)
        probe_->found(!links.empty() || from == to);
      for (const sg4::Link* link : links)
        if (const auto indexed = index_.find(link); indexed != index_.end())  // not a host's own loopback
          found->second.push_back(indexed->second);
    }
    return found->second;
  }
  void carry(const std::vector<int>& route, double bytes) {
    for (int link : route)
      bytes_[link] += bytes;
  }
  const std::vector<sg4::Link*>& links() const { return links_; }
  double bytes(std::size_t link) const { return bytes_[link]; }

private:
  std::vector<sg4::Link*> links_;
  std::vector<double> bytes_;
  std::unordered_map<const sg4::Link*, int> index_;
  std::map<std::pair<const sg4::Host*, const sg4::Host*>, std::vector<int>> routes_;
  Probe* probe_ = nullptr;
};

// One collective call as its group's members reach it: the n-th collective a rank starts on a
// group is the n-th of every member (each rank runs a group's collectives one at a time, in
// the same order).
struct Arrivals {
  int arrived = 0;
  int finished = 0;
  double latest = 0;      // when the last member so far arrived
  int last_rank = -1;     // and which rank that was
};

// A drive serves reads and writes side by side, together at most at the rate of its faster
// direction (SimGrid's default for a disk): busy for the least time its traffic needs.
struct DriveUsage {
  double read_s = 0;
  double write_s = 0;
  double bytes = 0;
  double combined_bandwidth = 0;
  double busy_s() const { return std::max({read_s, write_s, bytes / combined_bandwidth}); }
};

struct SharedState {
  std::map<std::string, DriveUsage> disks;  // by drive name
  std::map<std::string, Usage> cpus;    // by host name
  std::unique_ptr<LinkCounter> link_use;
  const Workload* workload = nullptr;
  std::vector<sg4::Host*> hosts;        // per rank
  const std::vector<GpuInfo>* gpus = nullptr;
  std::vector<GroupPlan> groups;
  std::vector<std::unordered_map<std::uint64_t, Arrivals>> arrivals;  // per group, per call
  std::map<const Program*, ProgramPlan> plans;
  ReplayObserver* observer = nullptr;
  std::vector<double> rank_finish;
  std::vector<std::size_t> ops_done;
  std::exception_ptr escaped;          // the first exception out of a rank: the replay stops with it
};

// `analytic_slot[k]`: the group slot k is timed analytically on every rank running the program.
ProgramPlan plan_program(const Program& program, const std::vector<bool>& analytic_slot) {
  ProgramPlan plan{ProgramGraph(program), std::vector<bool>(program.ops.size(), false)};
  std::optional<Stream> compute_stream;
  bool kernels_serialised = true;
  std::map<int, std::optional<Stream>> stream_of_group;
  std::set<int> shared_groups;
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::compute && op.target.empty()) {
      if (compute_stream && *compute_stream != op.stream)
        kernels_serialised = false;
      compute_stream = op.stream;
    } else if (op.kind == OpKind::collective) {
      auto& stream = stream_of_group[op.group];
      if (stream && *stream != op.stream)
        shared_groups.insert(op.group);
      stream = op.stream;
    }
  }
  for (OpId id = 0; id < program.ops.size(); ++id) {
    const Op& op = program.ops[id];
    switch (op.kind) {
    case OpKind::alloc:
    case OpKind::free: plan.local[id] = true; break;
    case OpKind::compute: plan.local[id] = kernels_serialised && op.target.empty(); break;
    case OpKind::collective:
      plan.local[id] = analytic_slot[op.group] && op.collective != Collective::all_to_all &&
                       !shared_groups.count(op.group);
      break;
    default: break;
    }
  }
  return plan;
}

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

sg4::Mailbox* all_to_all_mailbox(int group, int from, int to) {
  return sg4::Mailbox::by_name("a2a/" + std::to_string(group) + "/" + std::to_string(from) + "/" + std::to_string(to));
}

class RankRunner {
public:
  RankRunner(SharedState& shared, int rank)
      : shared_(shared), rank_(rank), program_(shared.workload->program(rank)),
        plan_(shared.plans.at(&program_)), host_(shared.hosts[rank]), gpu_((*shared.gpus)[rank]),
        waiting_(plan_.graph.predecessors), ready_at_(program_.ops.size(), 0.0),
        group_busy_(shared.groups.size(), false), group_queue_(shared.groups.size()),
        group_calls_(shared.groups.size(), 0),
        cpu_(gpu_.cpu_host.empty() ? nullptr : sg4::Host::by_name(gpu_.cpu_host)) {}

  void run() {
    for (OpId id = 0; id < program_.ops.size(); ++id)
      if (waiting_[id] == 0)
        settling_.push_back(id);
    settle();
    while (finished_ < program_.ops.size()) {
      const double now = sg4::Engine::get_clock();
      tell_observer_until(now);
      if (start_due(now))
        continue;
      const double wake = next_wake();
      if (activities_.empty() && wake == never)
        break;  // blocked forever: reported as a deadlock after the run
      if (activities_.empty()) {
        sg4::this_actor::sleep_for(wake - now);
        continue;
      }
      const ssize_t index = sg4::Activity::wait_any_for(activities_, wake == never ? -1.0 : wake - now);
      if (index < 0)
        continue;
      const OpId op = activity_ops_[index];
      const OpKind kind = program_.ops[op].kind;
      if (kind == OpKind::send)
        transferred(op, {activities_[index]->get_start_time(), sg4::Engine::get_clock()});
      activities_[index] = activities_.back();
      activities_.pop_back();
      activity_ops_[index] = activity_ops_.back();
      activity_ops_.pop_back();
      activity_done(op);
      settle();
    }
    tell_observer_until(never);
    shared_.rank_finish[rank_] = last_finish_;
  }

private:
  static constexpr double never = std::numeric_limits<double>::infinity();

  int group(const Op& op) const { return shared_.workload->group_of(rank_, op.group); }
  int peer(const Op& op) const { return shared_.workload->peer_of(rank_, op.peer); }

  // Something due at a simulated time: a timer of a collective or an op ready to start.
  struct Due {
    double time;
    std::uint64_t sequence;
    OpId op;
    bool operator>(const Due& other) const {
      return time != other.time ? time > other.time : sequence > other.sequence;
    }
  };
  // What the observer hears, held back until the simulated clock reaches it: settled ops run
  // ahead of the clock, and observers expect each rank's events in time order.
  enum class Told : std::uint8_t { started, finished, transferred };
  struct Event {
    double time;
    std::uint64_t sequence;
    OpId op;
    Told what;
    Transfer transfer;
    bool operator>(const Event& other) const {
      return time != other.time ? time > other.time : sequence > other.sequence;
    }
  };
  struct CollectiveState {
    int phase = 0;
    int outstanding = 0;
    std::uint64_t call = 0;  // which call on its group this is (see Arrivals)
    double arrived = 0;      // when this rank reached it
  };
  template <typename T>
  using MinHeap = std::priority_queue<T, std::vector<T>, std::greater<>>;

  // Settles every op whose predecessors are done: local ops finish at once at their simulated
  // times, the others wait in `pending_` for the clock to reach their ready time.
  void settle() {
    while (!settling_.empty()) {
      const OpId id = settling_.front();
      settling_.pop_front();
      const double ready = ready_at_[id];
      // Far enough ahead of the clock, local ops wait like the others (started in the simulation
      // at their ready time, with the same result), which bounds the events held back.
      if (!plan_.local[id] || events_.size() >= max_events_ahead) {
        pending_.push({ready, sequence_++, id});
        continue;
      }
      tell(Told::started, id, ready);
      const double end = ready + local_duration(program_.ops[id]);
      if (program_.ops[id].kind == OpKind::collective)
        transferred(id, {ready, end});
      complete(id, end);
    }
  }

  double gpu_kernel_seconds(const Op& op) const {
    return std::max(0.0, kernel_seconds(Work{op.flops, op.bytes}, gpu_, shared_.workload->step.precision,
                                        shared_.workload->step.efficiency));
  }

  double local_duration(const Op& op) const {
    if (op.kind == OpKind::compute)
      return gpu_kernel_seconds(op);
    if (op.kind == OpKind::collective)
      return analytic_collective(op, 0);
    return 0.0;
  }

  // A ring collective timed from its slowest edge: each remaining phase is one pass of
  // bytes / bandwidth plus n-1 steps of latency. What those phases carry over this rank's ring
  // edge is counted as they are timed.
  double analytic_collective(const Op& op, int from_phase) const {
    const GroupPlan& plan = shared_.groups[group(op)];
    const int members = static_cast<int>(shared_.workload->groups[group(op)].ranks.size());
    const RingPhases phases = ring_phases(op.collective, op.bytes, members);
    if (members > 1)
      shared_.link_use->carry(*plan.edge_route[0][plan.member_of_rank.at(rank_)],
                              (phases.phases - from_phase) * phases.bytes_per_phase);
    return (phases.phases - from_phase) *
           (phases.bytes_per_phase / plan.edge_bandwidth + (members - 1) * plan.step_latency);
  }

  // Starts the ops and fires the timers that are due; true when it did anything.
  bool start_due(double now) {
    bool acted = false;
    while (!timers_.empty() && timers_.top().time <= now + timer_resolution) {
      const OpId id = timers_.top().op;
      timers_.pop();
      start_collective_phase(id, collectives_[id].phase + 1);
      acted = true;
    }
    while (!pending_.empty() && pending_.top().time <= now + timer_resolution) {
      const OpId id = pending_.top().op;
      pending_.pop();
      start_when_group_free(id);
      acted = true;
    }
    if (acted)
      settle();
    return acted;
  }

  double next_wake() const {
    double wake = never;
    if (!timers_.empty())
      wake = timers_.top().time;
    if (!pending_.empty())
      wake = std::min(wake, pending_.top().time);
    return wake;
  }

  void start_when_group_free(OpId id) {
    const Op& op = program_.ops[id];
    if (op.kind == OpKind::collective) {
      if (group_busy_[group(op)]) {
        // Collectives on one group run one at a time per rank, like NCCL operations on one communicator.
        group_queue_[group(op)].push_back(id);
        return;
      }
      group_busy_[group(op)] = true;
    }
    start(id);
  }

  void start(OpId id) {
    const Op& op = program_.ops[id];
    tell(Told::started, id, sg4::Engine::get_clock());
    switch (op.kind) {
    case OpKind::compute: {
      if (!op.target.empty())
        return start_on_host(id, op);
      const double seconds = gpu_kernel_seconds(op);
      if (seconds <= 0)
        return finish(id);
      track(host_->exec_async(seconds * host_->get_speed()), id);
      return;
    }
    case OpKind::collective:
      arrive(id);
      return start_collective_phase(id, 0);
    case OpKind::send:
      shared_.link_use->carry(shared_.link_use->route(host_, shared_.hosts[peer(op)]), op.bytes);
      track(p2p_mailbox(rank_, peer(op), op.tag)->put_async(&payload_token, static_cast<uint64_t>(op.bytes)), id);
      return;
    case OpKind::recv:
      track(p2p_mailbox(peer(op), rank_, op.tag)->get_async<void>(&received_payload), id);
      return;
    case OpKind::copy: {
      sg4::Host* other = host_named(op.target);
      sg4::Host* from = op.inbound ? other : host_;
      sg4::Host* to = op.inbound ? host_ : other;
      shared_.link_use->carry(shared_.link_use->route(from, to), op.bytes);
      track(sg4::Comm::sendto_async(from, to, static_cast<uint64_t>(op.bytes)), id);
      return;
    }
    case OpKind::read:
    case OpKind::write: {
      sg4::Disk* disk = find_disk(op.target);
      const bool read = op.kind == OpKind::read;
      const double bandwidth = read ? disk->get_read_bandwidth() : disk->get_write_bandwidth();
      DriveUsage& usage = shared_.disks[disk->get_name()];
      usage.bytes += op.bytes;
      (read ? usage.read_s : usage.write_s) += op.bytes / bandwidth;
      usage.combined_bandwidth = std::max(disk->get_read_bandwidth(), disk->get_write_bandwidth());
      track(read ? disk->read_async(static_cast<sg_size_t>(op.bytes)) : disk->write_async(static_cast<sg_size_t>(op.bytes)),
            id);
      // A drive behind a PCIe switch: its data also crosses its own PCIe link (at the drive's
      // rates) and the switch's uplink to the CPU, sharing the uplink with the GPUs' copies.
      if (const char* port = disk->get_property("pcie_port")) {
        sg4::Host* drive = sg4::Host::by_name(port);
        sg4::Host* memory = disk->get_host();
        sg4::Host* from = read ? drive : memory;
        sg4::Host* to = read ? memory : drive;
        shared_.link_use->carry(shared_.link_use->route(from, to), op.bytes);
        track(sg4::Comm::sendto_async(from, to, static_cast<uint64_t>(op.bytes)), id);
        parts_left_[id] = 2;
      }
      return;
    }
    case OpKind::alloc:
    case OpKind::free:
      return finish(id);
    }
  }

  // Work on another host (the node's CPU): its speed and memory bandwidth bound it, and
  // everything running there shares it.
  void start_on_host(OpId id, const Op& op) {
    sg4::Host* host = host_named(op.target);
    const char* bandwidth = host->get_property("dram_bandwidth");
    const double memory_seconds = bandwidth && op.bytes > 0 ? op.bytes / parse_bandwidth(bandwidth) : 0.0;
    const double seconds = std::max(op.flops / host->get_speed(), memory_seconds);
    if (seconds <= 0)
      return finish(id);
    Usage& usage = shared_.cpus[host->get_name()];
    usage.busy_s += seconds;
    usage.bytes += op.bytes;
    // Host::exec_async runs on the calling actor's host in SimGrid 3.32: place the execution explicitly.
    track(sg4::this_actor::exec_init(seconds * host->get_speed())->set_host(host)->start(), id);
  }

  // A host or disk named by an op, where @cpu and @nvme are the rank's own (checked before the
  // replay starts).
  sg4::Host* host_named(const std::string& name) const { return name == node_cpu ? cpu_ : sg4::Host::by_name(name); }
  sg4::Disk* find_disk(const std::string& name) const {
    return find_disk_of(name == node_nvme ? gpu_.nvme_disk : name, host_, cpu_);
  }

  void start_collective_phase(OpId id, int phase) {
    const Op& op = program_.ops[id];
    const GroupPlan& plan = shared_.groups[group(op)];
    const int members = static_cast<int>(shared_.workload->groups[group(op)].ranks.size());
    const RingPhases phases = ring_phases(op.collective, op.bytes, members);
    if (phase >= phases.phases)
      return finish(id);
    CollectiveState& state = collectives_[id];
    state.phase = phase;
    state.outstanding = 0;
    if (plan.analytic && op.collective != Collective::all_to_all) {
      // All phases at once (this group is shared by several streams, so not settled locally).
      const double now = sg4::Engine::get_clock();
      state.phase = phases.phases - 1;
      timers_.push({now + analytic_collective(op, phase), sequence_++, id});
      return;
    }
    const int me = plan.member_of_rank.at(rank_);
    if (op.collective == Collective::all_to_all) {
      const auto share = static_cast<uint64_t>(op.bytes / members);
      const std::vector<int>& ranks = shared_.workload->groups[group(op)].ranks;
      for (int other = 0; other < members; ++other) {
        if (other == me)
          continue;
        shared_.link_use->carry(shared_.link_use->route(host_, shared_.hosts[ranks[other]]), static_cast<double>(share));
        track(all_to_all_mailbox(group(op), me, other)->put_async(&payload_token, share), id);
        track(all_to_all_mailbox(group(op), other, me)->get_async<void>(&received_payload), id);
        state.outstanding += 2;
      }
      return;
    }
    const int channels = static_cast<int>(plan.next.size());
    const auto flow = static_cast<uint64_t>(phases.bytes_per_phase / channels);
    const bool broadcast = op.collective == Collective::broadcast;
    for (int c = 0; c < channels; ++c) {
      const int next = plan.next[c][me];
      // A broadcast flows from member 0 around the ring: the member before it neither
      // sends on, nor does member 0 receive.
      if (!broadcast || next != 0) {
        track(plan.inbox[c][next]->put_async(&payload_token, flow), id);
        shared_.link_use->carry(*plan.edge_route[c][me], static_cast<double>(flow));
        ++state.outstanding;
      }
      if (!broadcast || me != 0) {
        track(plan.inbox[c][me]->get_async<void>(&received_payload), id);
        ++state.outstanding;
      }
    }
  }

  void activity_done(OpId id) {
    const Op& op = program_.ops[id];
    if (op.kind != OpKind::collective) {
      const auto parts = parts_left_.find(id);
      if (parts != parts_left_.end() && --parts->second > 0)
        return;  // the other part of an I/O is still under way
      if (parts != parts_left_.end())
        parts_left_.erase(parts);
      return finish(id);
    }
    CollectiveState& state = collectives_[id];
    if (--state.outstanding > 0)
      return;
    // One flow per ring edge carries a phase; the ring's other n-2 steps each add a latency.
    const int members = static_cast<int>(shared_.workload->groups[group(op)].ranks.size());
    const double extra_latency = op.collective == Collective::all_to_all
                                     ? 0.0
                                     : std::max(0, members - 2) * shared_.groups[group(op)].step_latency;
    if (extra_latency > 0) {
      timers_.push({sg4::Engine::get_clock() + extra_latency, sequence_++, id});
      return;
    }
    start_collective_phase(id, state.phase + 1);
  }

  void track(sg4::ActivityPtr activity, OpId id) {
    activities_.push_back(std::move(activity));
    activity_ops_.push_back(id);
  }

  // An op started in the simulation finished now.
  void finish(OpId id) {
    const Op& op = program_.ops[id];
    const double now = sg4::Engine::get_clock();
    if (op.kind == OpKind::collective) {
      transferred(id, depart(id, now));
      collectives_.erase(id);
    }
    complete(id, now);
    if (op.kind == OpKind::collective) {
      auto& queue = group_queue_[group(op)];
      if (queue.empty()) {
        group_busy_[group(op)] = false;
      } else {
        const OpId next = queue.front();
        queue.pop_front();
        start(next);
      }
    }
  }

  void complete(OpId id, double time) {
    ++finished_;
    shared_.ops_done[rank_] = finished_;
    last_finish_ = std::max(last_finish_, time);
    tell(Told::finished, id, time);
    for (OpId successor : plan_.graph.successors[id]) {
      ready_at_[successor] = std::max(ready_at_[successor], time);
      if (--waiting_[successor] == 0)
        settling_.push_back(successor);
    }
  }

  // This rank reached a collective now.
  void arrive(OpId id) {
    const int g = group(program_.ops[id]);
    CollectiveState& state = collectives_[id];
    state.call = group_calls_[g]++;
    state.arrived = sg4::Engine::get_clock();
    Arrivals& call = shared_.arrivals[g][state.call];
    ++call.arrived;
    if (call.last_rank < 0 || state.arrived >= call.latest) {
      call.latest = state.arrived;
      call.last_rank = rank_;
    }
  }

  // A collective finished now: its data could move once every member had arrived (a broadcast's
  // root may finish before the last member arrives: then as far as is known); the time before
  // that was waiting for the last member.
  Transfer depart(OpId id, double now) {
    const int g = group(program_.ops[id]);
    const CollectiveState& state = collectives_.at(id);
    auto found = shared_.arrivals[g].find(state.call);
    Arrivals& call = found->second;
    Transfer transfer{std::min(call.latest, now), now};
    if (call.last_rank != rank_ && transfer.start > state.arrived) {
      transfer.waited_for = call.last_rank;
      transfer.wait_start = state.arrived;
    }
    if (++call.finished == static_cast<int>(shared_.workload->groups[g].ranks.size()))
      shared_.arrivals[g].erase(found);
    return transfer;
  }

  void transferred(OpId id, const Transfer& transfer) {
    events_.push({transfer.end, sequence_++, id, Told::transferred, transfer});
  }
  void tell(Told what, OpId id, double time) { events_.push({time, sequence_++, id, what, {}}); }

  void tell_observer_until(double time) {
    ReplayObserver& observer = *shared_.observer;
    while (!events_.empty() && events_.top().time <= time) {
      const Event event = events_.top();
      events_.pop();
      switch (event.what) {
      case Told::started: observer.op_started(rank_, event.op, event.time); break;
      case Told::finished: observer.op_finished(rank_, event.op, event.time); break;
      case Told::transferred: observer.op_transferred(rank_, event.op, event.transfer); break;
      }
    }
  }

  SharedState& shared_;
  const int rank_;
  const Program& program_;
  const ProgramPlan& plan_;
  sg4::Host* host_;
  const GpuInfo& gpu_;
  std::vector<std::uint32_t> waiting_;
  std::vector<double> ready_at_;         // the latest finish among each op's predecessors so far
  std::deque<OpId> settling_;
  MinHeap<Due> pending_;                 // ready ops waiting for the clock to reach their time
  MinHeap<Due> timers_;
  MinHeap<Event> events_;
  std::uint64_t sequence_ = 0;
  std::vector<sg4::ActivityPtr> activities_;
  std::vector<OpId> activity_ops_;
  std::unordered_map<OpId, CollectiveState> collectives_;
  std::vector<bool> group_busy_;
  std::vector<std::deque<OpId>> group_queue_;
  std::vector<std::uint64_t> group_calls_;  // collectives started per group
  sg4::Host* cpu_;                       // the node's CPU host, or nullptr
  std::unordered_map<OpId, int> parts_left_;  // I/O ops with a drive transfer and a PCIe transfer
  std::size_t finished_ = 0;
  double last_finish_ = 0;
};

GroupPlan plan_group(const Group& group, int group_index, const std::vector<sg4::Host*>& hosts,
                     const std::vector<GpuInfo>& gpus, int channels, bool fast, LinkCounter& link_use) {
  GroupPlan plan;
  std::map<std::string, int> node_ids;
  std::vector<int> node_of_member;
  for (std::size_t i = 0; i < group.ranks.size(); ++i) {
    plan.member_of_rank[group.ranks[i]] = static_cast<int>(i);
    const std::string& node = gpus[group.ranks[i]].node;
    node_of_member.push_back(node_ids.emplace(node, static_cast<int>(node_ids.size())).first->second);
  }
  const int ring_count = channels > 0 ? channels : default_channels(node_of_member);
  plan.analytic = fast && node_ids.size() == 1;
  const auto rings = build_rings(node_of_member, ring_count);
  const std::size_t members = group.ranks.size();
  plan.next.assign(rings.size(), std::vector<int>(members));
  plan.inbox.assign(rings.size(), std::vector<sg4::Mailbox*>(members));
  plan.edge_route.assign(rings.size(), std::vector<const std::vector<int>*>(members, nullptr));
  std::map<std::pair<int, int>, double> latency_of_edge;
  for (std::size_t c = 0; c < rings.size(); ++c) {
    for (std::size_t k = 0; k < members; ++k) {
      const int from = rings[c][k], to = rings[c][(k + 1) % members];
      plan.next[c][from] = to;
      plan.inbox[c][k] = sg4::Mailbox::by_name("ring/" + std::to_string(group_index) + "/" + std::to_string(c) + "/" +
                                               std::to_string(k));  // indexed by member, one sender each
      if (members > 1)
        plan.edge_route[c][from] = &link_use.route(hosts[group.ranks[from]], hosts[group.ranks[to]]);
      if (members > 1 && !latency_of_edge.count({from, to})) {
        std::vector<sg4::Link*> links;
        double latency = 0;
        hosts[group.ranks[from]]->route_to(hosts[group.ranks[to]], links, &latency);
        latency_of_edge[{from, to}] = latency;
        plan.step_latency = std::max(plan.step_latency, latency);
        for (const sg4::Link* link : links)
          plan.edge_bandwidth = std::min(plan.edge_bandwidth, link->get_bandwidth());
      }
    }
  }
  return plan;
}

// Hosts and disks named by copies, host work, reads and writes exist for every rank that runs
// them: InputError naming the rank, the op and what the platform lacks.
void check_targets(const Workload& workload, const std::vector<sg4::Host*>& hosts, const std::vector<GpuInfo>& gpus) {
  check_node_targets(workload, gpus);
  std::map<const Program*, std::vector<const Op*>> targeted;
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    const Program& program = workload.program(rank);
    auto [ops, fresh] = targeted.try_emplace(&program);
    if (fresh)
      for (const Op& op : program.ops)
        if (op.kind == OpKind::copy || op.kind == OpKind::read || op.kind == OpKind::write ||
            (op.kind == OpKind::compute && !op.target.empty()))
          ops->second.push_back(&op);
    const GpuInfo& gpu = gpus[rank];
    const std::string where = "rank " + std::to_string(rank) + " (" + gpu.host + ", node " + gpu.node + ")";
    for (const Op* target_op : ops->second) {
      const Op& op = *target_op;
      const bool on_host = op.kind == OpKind::copy || op.kind == OpKind::compute;
      const std::string host_name = op.target == node_cpu ? gpu.cpu_host : op.target;
      if (on_host && sg4::Host::by_name_or_null(host_name) == nullptr)
        throw InputError(where + " op " + op.name + ": " + to_string(op.kind) + " host '" + op.target +
                         "' is not in the platform");
      if (op.kind == OpKind::compute) {
        const char* bandwidth = sg4::Host::by_name(host_name)->get_property("dram_bandwidth");
        try {
          if (bandwidth && !(parse_bandwidth(bandwidth) > 0))
            throw UnitError("not positive");
        } catch (const UnitError& error) {
          throw InputError("host " + host_name + ": dram_bandwidth '" + bandwidth + "': " + error.what());
        }
      }
      if (op.kind != OpKind::read && op.kind != OpKind::write)
        continue;
      const sg4::Host* cpu = gpu.cpu_host.empty() ? nullptr : sg4::Host::by_name(gpu.cpu_host);
      const sg4::Disk* disk = find_disk_of(op.target == node_nvme ? gpu.nvme_disk : op.target, hosts[rank], cpu);
      if (disk == nullptr)
        throw InputError(where + " op " + op.name + ": neither " + hosts[rank]->get_name() +
                         " nor its node's CPU host has a disk '" + op.target + "'");
      const char* port = disk->get_property("pcie_port");
      if (port && sg4::Host::by_name_or_null(port) == nullptr)
        throw InputError("disk " + disk->get_name() + ": pcie_port '" + port +
                         "' is not a host of the platform (the drive's end of its PCIe route to the CPU)");
    }
  }
}

// Looks up every route the replay will take (the ring edges of each group as plan_group builds
// them, a send's two ends, a copy's GPU and host, a drive's port and its host's memory).
void take_every_route(const Workload& workload, const std::vector<sg4::Host*>& hosts, const std::vector<GpuInfo>& gpus,
                      const ReplaySettings& settings, LinkCounter& counter) {
  for (std::size_t g = 0; g < workload.groups.size(); ++g)
    plan_group(workload.groups[g], static_cast<int>(g), hosts, gpus, settings.channels,
               settings.fast_intra_node_collectives, counter);
  std::map<const Program*, std::vector<const Op*>> moving;  // per program: its sends, copies and I/O
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    const Program& program = workload.program(rank);
    auto [ops, fresh] = moving.try_emplace(&program);
    if (fresh) {
      std::set<std::pair<OpKind, std::pair<int, std::string>>> seen;
      for (const Op& op : program.ops)
        if ((op.kind == OpKind::send || op.kind == OpKind::copy || op.kind == OpKind::read ||
             op.kind == OpKind::write) &&
            seen.insert({op.kind, {op.peer, op.target + (op.inbound ? "<" : ">")}}).second)
          ops->second.push_back(&op);
    }
    const GpuInfo& gpu = gpus[rank];
    sg4::Host* cpu = gpu.cpu_host.empty() ? nullptr : sg4::Host::by_name(gpu.cpu_host);
    for (const Op* op : ops->second) {
      if (op->kind == OpKind::send) {
        counter.route(hosts[rank], hosts[workload.peer_of(rank, op->peer)]);
      } else if (op->kind == OpKind::copy) {
        sg4::Host* other = op->target == node_cpu ? cpu : sg4::Host::by_name(op->target);
        counter.route(op->inbound ? other : hosts[rank], op->inbound ? hosts[rank] : other);
      } else if (const sg4::Disk* disk = find_disk_of(op->target == node_nvme ? gpu.nvme_disk : op->target, hosts[rank], cpu)) {
        if (const char* port = disk->get_property("pcie_port")) {
          sg4::Host* drive = sg4::Host::by_name(port);
          sg4::Host* memory = disk->get_host();
          counter.route(op->kind == OpKind::read ? drive : memory, op->kind == OpKind::read ? memory : drive);
        }
      }
    }
  }
}

// Every route the replay will take exists, or InputError naming the two hosts. SimGrid 3.32 does
// not say so itself: a Full zone without routes crashes the lookup, and a missing route aborts
// once data is sent. So the routes are first taken in a child process that names each pair
// before it looks it up: the last pair it named is the missing one.
void check_routes(const Workload& workload, const std::vector<sg4::Host*>& hosts, const std::vector<GpuInfo>& gpus,
                  const ReplaySettings& settings) {
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
    struct Reporter : LinkCounter::Probe {
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
    LinkCounter counter(sg4::Engine::get_instance()->get_all_links());
    counter.set_probe(&reporter);
    take_every_route(workload, hosts, gpus, settings, counter);
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

// Busy time per class of links, drives and CPUs: the bytes each link carried over its
// bandwidth, and the work the ranks handed to drives and CPUs.
std::vector<ResourceUse> resource_use(const SharedState& shared) {
  std::map<std::string, ResourceUse> by_kind;
  const auto add = [&](const std::string& kind, const std::string& name, double busy_s, double bytes) {
    if (kind.empty() || (!(bytes > 0) && !(busy_s > 0)))
      return;
    ResourceUse& use = by_kind[kind];
    use.kind = kind;
    ++use.count;
    use.bytes += bytes;
    if (busy_s > use.busy_s) {
      use.busy_s = busy_s;
      use.busiest = name;
    }
  };
  const LinkCounter& counter = *shared.link_use;
  for (std::size_t i = 0; i < counter.links().size(); ++i) {
    const sg4::Link* link = counter.links()[i];
    add(link_class(link->get_name()), link->get_name(), counter.bytes(i) / link->get_bandwidth(), counter.bytes(i));
  }
  for (const auto& [name, usage] : shared.disks)
    add("nvme", name, usage.busy_s(), usage.bytes);
  for (const auto& [name, usage] : shared.cpus)
    add("cpu", name, usage.busy_s, usage.bytes);
  std::vector<ResourceUse> uses;
  for (auto& [kind, use] : by_kind)
    uses.push_back(std::move(use));
  return uses;
}

} // namespace

ReplayOutcome replay(SimulationContext& context, const Workload& workload, const std::vector<GpuInfo>& gpus,
                     const ReplaySettings& settings, ReplayObserver& observer) {
  if (gpus.size() < workload.ranks())
    throw InputError(context.platform_file().string() + ": the workload needs " + std::to_string(workload.ranks()) +
                     " GPUs but the platform has " + std::to_string(gpus.size()));
  std::size_t total_ops = 0;
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank)
    total_ops += workload.program(rank).ops.size();
  if (total_ops > max_simulated_ops)
    throw InputError("the workload has " + std::to_string(total_ops) + " ops over " + std::to_string(workload.ranks()) +
                     " ranks; accepted: at most " + std::to_string(max_simulated_ops) +
                     " (hours of simulation); use fewer accumulation steps or ranks");
  SharedState shared;
  shared.workload = &workload;
  shared.gpus = &gpus;
  shared.observer = &observer;
  shared.rank_finish.assign(workload.ranks(), 0.0);
  shared.ops_done.assign(workload.ranks(), 0);
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank)
    shared.hosts.push_back(sg4::Host::by_name(gpus[rank].host));
  try {
    check_targets(workload, shared.hosts, gpus);
    check_routes(workload, shared.hosts, gpus, settings);
  } catch (const InputError& error) {
    throw InputError(context.platform_file().string() + ": " + error.what());
  }
  shared.link_use = std::make_unique<LinkCounter>(sg4::Engine::get_instance()->get_all_links());
  for (std::size_t g = 0; g < workload.groups.size(); ++g)
    shared.groups.push_back(plan_group(workload.groups[g], static_cast<int>(g), shared.hosts, gpus, settings.channels,
                                       settings.fast_intra_node_collectives, *shared.link_use));
  shared.arrivals.resize(workload.groups.size());
  std::map<const Program*, std::vector<bool>> analytic_slots;
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    const Program& program = workload.program(rank);
    auto [slots, fresh] = analytic_slots.try_emplace(&program);
    if (fresh) {
      int count = 0;
      for (const Op& op : program.ops)
        if (op.kind == OpKind::collective)
          count = std::max(count, op.group + 1);
      slots->second.assign(static_cast<std::size_t>(count), true);
    }
    for (std::size_t slot = 0; slot < slots->second.size(); ++slot) {
      const int group = workload.group_of(rank, static_cast<int>(slot));
      if (group >= 0 && !shared.groups[group].analytic)
        slots->second[slot] = false;
    }
  }
  for (const auto& [program, analytic] : analytic_slots)
    shared.plans.emplace(program, plan_program(*program, analytic));

  std::vector<std::unique_ptr<RankRunner>> runners;
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    runners.push_back(std::make_unique<RankRunner>(shared, static_cast<int>(rank)));
    RankRunner* runner = runners.back().get();
    sg4::Actor::create("rank-" + std::to_string(rank), shared.hosts[rank], [runner, &shared] {
      // An exception cannot leave an actor (SimGrid would abort the process): the first one (memory
      // running out, mostly) stops every rank and is rethrown to replay()'s caller.
      try {
        runner->run();
      } catch (const std::exception&) {
        if (!shared.escaped)
          shared.escaped = std::current_exception();
        try {
          sg4::Actor::kill_all();
        } catch (const std::exception&) {
          // Too little memory even to stop the others: they stop on their own errors or block,
          // and replay() rethrows the first exception either way.
        }
      }
    });
  }
  spdlog::info("replaying {} ranks, {} ops, {} groups", workload.ranks(), total_ops, workload.groups.size());
  const auto wall_start = std::chrono::steady_clock::now();
  sg4::Engine::get_instance()->run();
  if (shared.escaped)
    std::rethrow_exception(shared.escaped);
  const double wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();

  ReplayOutcome outcome;
  outcome.rank_finish = shared.rank_finish;
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    if (shared.ops_done[rank] != workload.program(rank).ops.size())
      throw InputError("the replay deadlocked: rank " + std::to_string(rank) + " finished " +
                       std::to_string(shared.ops_done[rank]) + " of " +
                       std::to_string(workload.program(rank).ops.size()) +
                       " ops (a recv without its send, or ranks waiting on each other in a cycle)");
    outcome.end_time = std::max(outcome.end_time, shared.rank_finish[rank]);
  }
  spdlog::info("simulated {:.6f} s in {:.3f} s of wall time", outcome.end_time, wall_seconds);
  outcome.resources = resource_use(shared);
  return outcome;
}

} // namespace trainsim
