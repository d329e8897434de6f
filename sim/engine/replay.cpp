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
#include <unordered_set>

#include <simgrid/s4u.hpp>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "engine/ring_model.hpp"
#include "program/compute_time.hpp"
#include "platform/platform_binding.hpp"
#include "program/collective_plan.hpp"
#include "engine/program_graph.hpp"

namespace sg4 = simgrid::s4u;

// One actor per rank runs an event loop over its program. An op is ready when its predecessors
// are done, at the latest of their finish times. Ops whose finish follows from their start alone
// are settled by the rank itself, ahead of the simulated clock, without a round trip through
// SimGrid: alloc/free, kernels when all of the program's kernels are on one stream (they never
// overlap and the GPU host runs no other actor, so an execution would last its roofline time,
// stretched only by communication beside it; see below), and collectives timed analytically
// (fast fidelity) on a group only one stream uses.
// Every other ready op waits until the clock reaches its ready time and is started in the
// simulation; the rank waits for any of its activities or the next due op or timer. Events told
// to observers are held per rank and told in time order once the clock passes them; past
// max_events_ahead a rank stops running ahead. The timeline equals that of simulating every op
// (ReplaySettings::settle_ahead off; tests/engine compares the two on random programs).
//
// Ops map to activities:
// - compute: settled, or (kernels on several streams) an execution of kernel_seconds x host speed
//   FLOPs on the GPU host, so concurrent kernels share it; on the node's CPU an execution placed
//   there (Host::exec_async runs on the caller's host in SimGrid 3.32, hence set_host), lasting
//   max(flops / speed, bytes / dram_bandwidth) and shared with the node's other ranks' work;
// - collective: rings, run as NCCL would choose for the call (program/nccl_model.hpp: algorithm,
//   protocol, latency, link efficiency). Each phase (all-reduce: reduce-scatter then all-gather)
//   is one concurrent flow per ring edge of (n - 1) / n of the ring's share, O(channels x n)
//   activities instead of the O(n^2) of step-by-step rings, with the link sharing left to
//   SimGrid; a flow carries its bytes over the choice's efficiency for its edge's kind, and a
//   timer adds the rest of the phase's latency beyond the flow's route. Flows go through mailboxes per (group,
//   ring, member), each with one sender, so consecutive collectives match in order; a rank runs
//   one collective per group at a time, as NCCL runs one operation per communicator stream. The
//   transfer starts when the last member arrives (Arrivals). Fast fidelity, group across nodes:
//   the NVLink edges are timed, not flows; each moves its bytes once both its ends have started
//   the phase (a member that starts before its neighbour waits on its gate mailbox for a word
//   without bytes from it), at the pace of its own busiest link. All-to-all: one flow per pair, or
//   (fast fidelity, even, every member running one program) timed from the load its pairs put
//   on the links (ring_model.hpp);
// - send/recv: a mailbox per (source, destination, tag), posted when their deps are done;
// - copy: Comm::sendto between the GPU host and the target host; read/write:
//   Disk::read_async / write_async, plus a flow between a drive's pcie_port and its host, so its
//   bytes cross the PCIe tree and share it with the GPUs' copies; the op ends when both are done;
// - alloc/free: instantaneous.
// With comm_slowdown f, kernels run 1 + f times as long while a collective or send of their rank
// is under way beside them. A rank whose kernels run one at a time settles a kernel ahead once
// every communication that might overlap it (mark_overlaps) is known: settled ahead (collectives
// timed from their ring, whose spans it keeps and stretches the kernel over), or finished in the
// simulation (then over before the kernel is ready). A kernel started in the simulation shares its
// GPU host with a companion execution bounded at f / (1 + f) of the host's speed while
// communication is under way (SimGrid's fair sharing leaves the kernel 1 / (1 + f) of it), the
// same slowdown.
// What each flow, CPU and drive carried is told to the observer (ResourceCollector adds it up).
// Ranks blocked forever end the replay with unfinished ranks: the caller reports a deadlock.
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

// A group's rings as the replay runs them: the binding's rings and routes, and the mailboxes of
// its flows.
struct GroupPlan {
  const BoundGroup* bound = nullptr;
  int members = 0;
  std::vector<std::vector<sg4::Mailbox*>> inbox;  // [channel][member]
  std::vector<sg4::Mailbox*> all_to_all;          // [from * members + to], made on first use
  std::vector<sg4::Mailbox*> gate;                // [member]: told a neighbour started a phase (timed edges)
  AllToAllPace all_to_all_pace;                   // of an even one timed analytically
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
  // With a comm slowdown: the communication that may run beside a kernel, and, when the kernels
  // run one at a time, for each such op the stream index of the last kernel it waits for, in that
  // order: a kernel is settled ahead only once every op that might overlap it is known.
  std::vector<bool> overlaps_kernels = {};
  std::vector<std::int32_t> kernel_index = {};  // place among the serialised kernels; -1 for other ops
  std::vector<std::pair<std::int32_t, OpId>> overlapping_after = {};  // (last kernel waited for, op), sorted
  bool kernels_wait_for_overlaps = false;
  std::vector<int> collective_slots = {};  // the group slots its collectives name, sorted
};

// One collective call as its group's members reach it: the n-th collective a rank starts on a
// group is the n-th of every member (each rank runs a group's collectives one at a time, in
// the same order).
struct Arrivals {
  int arrived = 0;
  int finished = 0;
  double latest = 0;      // when the last member so far arrived
  int last_rank = -1;     // and which rank that was
  // Where edges are timed (BoundGroup::analytic_nvlink_edges): when each member started each
  // phase (-1: not yet), and which members wait to hear that it has; [phase][member].
  std::vector<std::vector<double>> phase_started = {};
  std::vector<std::vector<std::vector<int>>> waiting_for = {};
};

struct SharedState {
  const Workload* workload = nullptr;
  const ComputeTimer* compute = nullptr;
  PlatformBinding* binding = nullptr;
  const std::vector<GpuInfo>* gpus = nullptr;
  bool settle_ahead = true;
  double comm_slowdown = 0;
  double bandwidth_efficiency = 1;  // ReplaySettings::bandwidth_efficiency
  CommTuning tuning;                // ReplaySettings::tuning
  std::vector<GroupPlan> groups;
  std::vector<std::unordered_map<std::uint64_t, Arrivals>> arrivals;  // per group, per call
  std::map<const Program*, ProgramPlan> plans;
  ReplayObserver* observer = nullptr;
  std::vector<double> rank_finish;
  std::vector<std::size_t> ops_done;
  std::exception_ptr escaped;          // the first exception out of a rank: the replay stops with it
};

// A time interval [first, second] of the simulated clock.
using Span = std::pair<double, double>;

// When work of `seconds` started at `start` ends if it runs `slowdown` times as long inside
// `spans` (sorted here; they may overlap) and at full speed elsewhere.
double stretched_end(std::vector<Span>& spans, double start, double seconds, double slowdown) {
  std::sort(spans.begin(), spans.end());
  double time = start;
  double left = seconds;
  for (const auto& [from, to] : spans) {
    if (to <= time)
      continue;
    if (from > time) {
      if (left <= from - time)
        return time + left;
      left -= from - time;
      time = from;
    }
    if (left * slowdown <= to - time)
      return time + left * slowdown;
    left -= (to - time) / slowdown;
    time = to;
  }
  return time + left;
}

// Communication that slows the GPU's kernels while it runs (a recv is its send's other half).
bool slows_compute(const Op& op) { return op.kind == OpKind::collective || op.kind == OpKind::send; }

// Which communication may run beside a kernel. With kernels on several streams, any may. With
// kernels one after another (k_0, k_1, ... in stream order), an op waiting for k_a (and so for
// every kernel before it) and waited for by k_d (and every kernel after it) can only overlap the
// kernels strictly between: none when d = a + 1, as for a tensor-parallel collective between two
// pieces of a layer.
void mark_overlaps(const Program& program, bool kernels_serialised, ProgramPlan& plan) {
  const std::size_t ops = program.ops.size();
  if (!kernels_serialised) {
    for (OpId id = 0; id < ops; ++id)
      plan.overlaps_kernels[id] = slows_compute(program.ops[id]);
    return;
  }
  plan.kernels_wait_for_overlaps = true;
  plan.kernel_index.assign(ops, -1);
  std::int32_t kernels = 0;
  for (OpId id = 0; id < ops; ++id)
    if (program.ops[id].kind == OpKind::compute && program.ops[id].target.empty())
      plan.kernel_index[id] = kernels++;
  // Edges go from earlier to later ops, so one pass each way propagates the bounds.
  std::vector<std::int32_t> after(ops, -1), before(ops, kernels);
  for (OpId id = 0; id < ops; ++id)
    for (OpId next : plan.graph.successors[id])
      after[next] = std::max({after[next], after[id], plan.kernel_index[id]});
  for (OpId id = ops; id-- > 0;)
    for (OpId next : plan.graph.successors[id])
      before[id] = std::min({before[id], before[next], plan.kernel_index[next] >= 0 ? plan.kernel_index[next] : kernels});
  for (OpId id = 0; id < ops; ++id) {
    if (slows_compute(program.ops[id]) && after[id] + 1 < before[id]) {
      plan.overlaps_kernels[id] = true;
      plan.overlapping_after.emplace_back(after[id], id);
    }
  }
  std::sort(plan.overlapping_after.begin(), plan.overlapping_after.end());
}

// Whether a collective on a group is timed analytically: an all-to-all only where the group's
// all-to-alls are (BoundGroup::analytic_all_to_all) and it divides its bytes evenly.
bool timed_analytically(const Op& op, bool analytic, bool analytic_all_to_all) {
  if (op.collective == Collective::all_to_all)
    return analytic_all_to_all && op.peer < 0;
  return analytic;
}
bool timed_analytically(const Op& op, const BoundGroup& bound) {
  return timed_analytically(op, bound.analytic, bound.analytic_all_to_all);
}

// Per group slot of a program, whether its collectives (and its all-to-alls) are timed
// analytically on every rank running the program.
struct AnalyticSlots {
  std::vector<bool> collectives;
  std::vector<bool> all_to_alls;
};

// `comm_slowdown`: kernels overlapping communication are slowed; where kernels run on several
// streams, neither is settled ahead.
ProgramPlan plan_program(const Program& program, const AnalyticSlots& analytic, double comm_slowdown) {
  ProgramPlan plan{ProgramGraph(program), std::vector<bool>(program.ops.size(), false)};
  std::optional<Stream> compute_stream;
  bool kernels_serialised = true;
  std::map<int, std::optional<Stream>> stream_of_group;
  std::set<int> shared_groups;
  bool communicates = false;
  for (const Op& op : program.ops) {
    communicates = communicates || slows_compute(op);
    if (op.kind == OpKind::compute && op.target.empty()) {
      if (compute_stream && *compute_stream != op.stream)
        kernels_serialised = false;
      compute_stream = op.stream;
    } else if (op.kind == OpKind::collective) {
      if (!std::binary_search(plan.collective_slots.begin(), plan.collective_slots.end(), op.group))
        plan.collective_slots.insert(
            std::upper_bound(plan.collective_slots.begin(), plan.collective_slots.end(), op.group), op.group);
      auto& stream = stream_of_group[op.group];
      if (stream && *stream != op.stream)
        shared_groups.insert(op.group);
      stream = op.stream;
    }
  }
  const bool slowed = communicates && comm_slowdown > 0;
  plan.overlaps_kernels.assign(program.ops.size(), false);
  if (slowed)
    mark_overlaps(program, kernels_serialised, plan);
  for (OpId id = 0; id < program.ops.size(); ++id) {
    const Op& op = program.ops[id];
    switch (op.kind) {
    case OpKind::alloc:
    case OpKind::free: plan.local[id] = true; break;
    case OpKind::compute: plan.local[id] = kernels_serialised && op.target.empty(); break;
    case OpKind::collective:
      plan.local[id] = timed_analytically(op, analytic.collectives[op.group], analytic.all_to_alls[op.group]) &&
                       !shared_groups.count(op.group) &&
                       (!plan.overlaps_kernels[id] || plan.kernels_wait_for_overlaps);
      break;
    default: break;
    }
  }
  return plan;
}

// The mailbox of an all-to-all's flow between two members, named once per pair.
sg4::Mailbox* all_to_all_mailbox(GroupPlan& plan, int group, int from, int to) {
  if (plan.all_to_all.empty())
    plan.all_to_all.assign(static_cast<std::size_t>(plan.members) * plan.members, nullptr);
  sg4::Mailbox*& mailbox = plan.all_to_all[static_cast<std::size_t>(from) * plan.members + to];
  if (mailbox == nullptr)
    mailbox = sg4::Mailbox::by_name("a2a/" + std::to_string(group) + "/" + std::to_string(from) + "/" +
                                    std::to_string(to));
  return mailbox;
}

class RankRunner {
public:
  RankRunner(SharedState& shared, int rank)
      : shared_(shared), rank_(rank), program_(shared.workload->program(rank)),
        plan_(shared.plans.at(&program_)), binding_(*shared.binding), observer_(*shared.observer),
        host_(binding_.host(rank)),
        waiting_(plan_.graph.predecessors), ready_at_(program_.ops.size(), 0.0),
        groups_(groups_of_rank()), group_busy_(groups_.size(), false), group_queue_(groups_.size()),
        group_calls_(groups_.size(), 0) {}

  void run() {
    for (OpId id = 0; id < program_.ops.size(); ++id)
      if (waiting_[id] == 0)
        settling_.push_back(id);
    settle();
    while (finished_ < program_.ops.size()) {
      const double now = sg4::Engine::get_clock();
      tell_observer_until(now);
      if (kernels_simulated_ > 0)
        steer_companion();
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
  // The groups this rank's collectives use, sorted: per-group state is kept for these only (a
  // rank of 16,384 is in a few of their thousands of groups).
  std::vector<int> groups_of_rank() const {
    std::vector<int> groups;
    for (int slot : plan_.collective_slots)
      groups.push_back(shared_.workload->group_of(rank_, slot));
    std::sort(groups.begin(), groups.end());
    groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
    return groups;
  }
  // The place of an op's group among groups_.
  std::size_t local_group(const Op& op) const {
    return static_cast<std::size_t>(std::lower_bound(groups_.begin(), groups_.end(), group(op)) - groups_.begin());
  }
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
  // ahead of the clock, and observers expect each rank's events in time order. A transfer's
  // details wait beside the heap (in held_transfers_), which keeps the heap's moves small.
  enum class Told : std::uint8_t { started, finished, transferred };
  struct Event {
    double time;
    std::uint64_t sequence;
    OpId op;
    std::uint32_t transfer;  // transferred: its place in held_transfers_
    Told what;
    bool operator>(const Event& other) const {
      return time != other.time ? time > other.time : sequence > other.sequence;
    }
  };
  struct CollectiveState {
    CommChoice choice;       // NCCL's algorithm and protocol for this call
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
      if (!plan_.local[id] || !shared_.settle_ahead || events_.size() >= max_events_ahead ||
          (plan_.kernels_wait_for_overlaps && plan_.kernel_index[id] >= 0 && !clear_of_overlaps(id))) {
        pending_.push({ready, sequence_++, id});
        continue;
      }
      tell(Told::started, id, ready);
      const double end = local_end(id, ready);
      if (program_.ops[id].kind == OpKind::collective)
        transferred(id, {ready, end});
      if (plan_.overlaps_kernels[id])
        overlap_known(id, ready, end);
      complete(id, end);
    }
  }

  // True when every communication that might run beside kernel `id` is known (settled ahead or
  // finished), so the kernel's time follows from its start; kernels are asked in stream order.
  bool clear_of_overlaps(OpId id) {
    const auto& overlapping = plan_.overlapping_after;
    while (next_overlap_ < overlapping.size() && overlapping[next_overlap_].first < plan_.kernel_index[id]) {
      const OpId op = overlapping[next_overlap_++].second;
      if (overlap_known_.erase(op) == 0)
        watched_overlaps_.insert(op);
    }
    return watched_overlaps_.empty();
  }

  // Communication that might overlap kernels ran over [start, end].
  void overlap_known(OpId id, double start, double end) {
    if (!plan_.kernels_wait_for_overlaps)
      return;
    if (end > start)
      slow_spans_.emplace_back(start, end);
    if (watched_overlaps_.erase(id) == 0)
      overlap_known_.insert(id);
  }

  // When an op settled ahead at `ready` ends: a kernel slowed where it meets communication.
  double local_end(OpId id, double ready) {
    const double seconds = local_duration(id);
    if (!plan_.kernels_wait_for_overlaps || plan_.kernel_index[id] < 0 || slow_spans_.empty())
      return ready + seconds;
    // Kernels settle in stream order, each ready no earlier than the one before: spans over by
    // now slow no later kernel.
    forget_spans_until(ready);
    return stretched_end(slow_spans_, ready, seconds, 1 + shared_.comm_slowdown);
  }

  // Drops the spans over by `time`: no kernel starts before it any more (kernels settle in stream
  // order, and an op is settled or started no earlier than the clock).
  void forget_spans_until(double time) {
    slow_spans_.erase(std::remove_if(slow_spans_.begin(), slow_spans_.end(),
                                     [time](const Span& span) { return span.second <= time; }),
                      slow_spans_.end());
  }

  double gpu_kernel_seconds(const Op& op) const {
    return shared_.compute->seconds(op, static_cast<std::size_t>(rank_));
  }

  double local_duration(OpId id) const {
    const Op& op = program_.ops[id];
    if (op.kind == OpKind::compute)
      return gpu_kernel_seconds(op);
    if (op.kind == OpKind::collective) {
      const CommChoice choice = choose(op);
      observer_.collective_chosen(rank_, id, choice);
      return analytic_collective(op, choice, 0);
    }
    return 0.0;
  }

  // How NCCL would run this collective on its group.
  CommChoice choose(const Op& op) const {
    const BoundGroup& bound = *shared_.groups[group(op)].bound;
    return choose_collective(*bound.nccl, bound.shape, op.collective, op.bytes, shared_.tuning);
  }

  // A collective timed by the ring model; what its phases carry over this rank's ring edge (an
  // all-to-all: its pairs' routes) is told as they are timed.
  double analytic_collective(const Op& op, const CommChoice& choice, int from_phase) const {
    const GroupPlan& plan = shared_.groups[group(op)];
    if (op.collective == Collective::all_to_all) {
      const AllToAllLoad& load = plan.bound->all_to_all;
      for (const auto& [links, share] : load.carried[plan.bound->member_of_rank.at(rank_)])
        observer_.link_carried(links, share * op.bytes);
      return even_all_to_all_seconds(load, plan.all_to_all_pace, shared_.bandwidth_efficiency, op.bytes);
    }
    const AnalyticCollective timed =
        time_analytically(plan.bound->shape, choice, shared_.bandwidth_efficiency, op.collective, op.bytes, from_phase);
    if (plan.members > 1)
      carry(plan.bound->edge_route[0][plan.bound->member_of_rank.at(rank_)], timed.edge_bytes);
    return timed.seconds;
  }

  // What a collective's or send's `bytes` weigh on the wire at `efficiency` of the links (the
  // observer hears the bytes themselves).
  uint64_t wire_bytes(double bytes, double efficiency) const {
    return static_cast<uint64_t>(bytes / (efficiency * shared_.bandwidth_efficiency));
  }
  // A send's or all-to-all flow's, NCCL's point-to-point.
  uint64_t point_to_point_bytes(double bytes, int route) const {
    const NcclProfile& profile = nccl_profile((*shared_.gpus)[rank_].architecture);
    return wire_bytes(bytes, point_to_point_efficiency(profile, binding_.route(route).kind, shared_.tuning));
  }

  void carry(int route, double bytes) const { observer_.link_carried(binding_.route(route).links, bytes); }

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
    return std::min(wake, next_span_edge(sg4::Engine::get_clock()));
  }

  void start_when_group_free(OpId id) {
    const Op& op = program_.ops[id];
    if (op.kind == OpKind::collective) {
      if (group_busy_[local_group(op)]) {
        // Collectives on one group run one at a time per rank, like NCCL operations on one communicator.
        group_queue_[local_group(op)].push_back(id);
        return;
      }
      group_busy_[local_group(op)] = true;
    }
    start(id);
  }

  void start(OpId id) {
    const Op& op = program_.ops[id];
    tell(Told::started, id, sg4::Engine::get_clock());
    if (plan_.overlaps_kernels[id])
      communication_began();
    switch (op.kind) {
    case OpKind::compute: {
      if (!op.target.empty())
        return start_on_host(id, op);
      const double seconds = gpu_kernel_seconds(op);
      ++kernels_simulated_;
      if (seconds <= 0)
        return finish(id);
      steer_companion();
      track(host_->exec_async(seconds * host_->get_speed()), id);
      return;
    }
    case OpKind::collective:
      arrive(id);
      return start_collective_phase(id, 0);
    case OpKind::send: {
      const int route = binding_.peer_route(rank_, op.peer);
      carry(route, op.bytes);
      track(binding_.mailbox(rank_, id)->put_async(&payload_token, point_to_point_bytes(op.bytes, route)), id);
      return;
    }
    case OpKind::recv:
      track(binding_.mailbox(rank_, id)->get_async<void>(&received_payload), id);
      return;
    case OpKind::copy: {
      const BoundTarget& target = binding_.target(rank_, id);
      sg4::Host* from = op.inbound ? target.host : host_;
      sg4::Host* to = op.inbound ? host_ : target.host;
      carry(op.inbound ? target.route_in : target.route_out, op.bytes);
      track(sg4::Comm::sendto_async(from, to, static_cast<uint64_t>(op.bytes)), id);
      return;
    }
    case OpKind::read:
    case OpKind::write: {
      const BoundTarget& target = binding_.target(rank_, id);
      sg4::Disk* disk = target.disk;
      const bool read = op.kind == OpKind::read;
      const double bandwidth = read ? disk->get_read_bandwidth() : disk->get_write_bandwidth();
      observer_.drive_worked(target.drive, read, op.bytes / bandwidth, op.bytes);
      track(read ? disk->read_async(static_cast<sg_size_t>(op.bytes)) : disk->write_async(static_cast<sg_size_t>(op.bytes)),
            id);
      // A drive behind a PCIe switch: its data also crosses its own PCIe link (at the drive's
      // rates) and the switch's uplink to the CPU, sharing the uplink with the GPUs' copies.
      if (target.port != nullptr) {
        sg4::Host* from = read ? target.port : target.memory;
        sg4::Host* to = read ? target.memory : target.port;
        carry(read ? target.route_read : target.route_write, op.bytes);
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
    const BoundTarget& host = binding_.target(rank_, id);
    const double memory_seconds = host.dram_bandwidth > 0 && op.bytes > 0 ? op.bytes / host.dram_bandwidth : 0.0;
    const double seconds = std::max(op.flops / host.speed, memory_seconds);
    if (seconds <= 0)
      return finish(id);
    observer_.cpu_worked(host.cpu, seconds, op.bytes);
    // Host::exec_async runs on the calling actor's host in SimGrid 3.32: place the execution explicitly.
    track(sg4::this_actor::exec_init(seconds * host.speed)->set_host(host.host)->start(), id);
  }

  void start_collective_phase(OpId id, int phase) {
    const Op& op = program_.ops[id];
    GroupPlan& plan = shared_.groups[group(op)];
    const BoundGroup& bound = *plan.bound;
    const int members = plan.members;
    const RingPhases phases = ring_phases(op.collective, op.bytes, members);
    if (phase >= phases.phases)
      return finish(id);
    CollectiveState& state = collectives_[id];
    if (phase == 0) {
      state.choice = choose(op);
      observer_.collective_chosen(rank_, id, state.choice);
    }
    state.phase = phase;
    state.outstanding = 0;
    if (timed_analytically(op, bound)) {
      // All phases at once (not settled ahead: the group is shared by several streams, the
      // collective may overlap kernels on several streams, or the rank is not settling ahead).
      const double now = sg4::Engine::get_clock();
      state.phase = phases.phases - 1;
      timers_.push({now + analytic_collective(op, state.choice, phase), sequence_++, id});
      return;
    }
    const int me = bound.member_of_rank.at(rank_);
    if (op.collective == Collective::all_to_all) {
      for (int other = 0; other < members; ++other) {
        if (other == me)
          continue;
        const auto share = static_cast<uint64_t>(shared_.workload->all_to_all_bytes(op, other, members));
        const int route = bound.pair_route[static_cast<std::size_t>(me * members + other)];
        carry(route, static_cast<double>(share));
        track(all_to_all_mailbox(plan, group(op), me, other)->put_async(&payload_token, point_to_point_bytes(share, route)), id);
        track(all_to_all_mailbox(plan, group(op), other, me)->get_async<void>(&received_payload), id);
        state.outstanding += 2;
      }
      return;
    }
    const int channels = static_cast<int>(bound.next.size());
    const double flow_share = phases.bytes_per_phase / channels;
    const bool broadcast = op.collective == Collective::broadcast;
    Arrivals* call = bound.analytic_nvlink_edges ? &shared_.arrivals[group(op)][state.call] : nullptr;
    if (call)
      started_phase(*call, plan, me, phase);
    for (int c = 0; c < channels; ++c) {
      const int next = bound.next[c][me];
      // A broadcast flows from member 0 around the ring: the member before it neither
      // sends on, nor does member 0 receive.
      if (!broadcast || next != 0) {
        const int route = bound.edge_route[c][me];
        const int kind = static_cast<int>(binding_.route(route).kind);
        const double flow = flow_share * state.choice.byte_scale[kind];
        if (!timed_edge(bound, route)) {
          track(plan.inbox[c][next]->put_async(&payload_token, wire_bytes(flow, state.choice.efficiency[kind])), id);
          ++state.outstanding;
        }
        carry(route, flow);  // timed or not, what it carries is told
      }
      if ((!broadcast || me != 0) && !timed_edge(bound, bound.edge_route[c][bound.previous[c][me]])) {
        track(plan.inbox[c][me]->get_async<void>(&received_payload), id);
        ++state.outstanding;
      }
    }
    // A timed edge moves data once both its ends have started the phase, as its flow would once
    // matched: wait to hear that each neighbour across one has.
    if (call)
      for_each_timed_neighbour(bound, me, broadcast, [&](int neighbour, std::size_t, int) {
        std::vector<int>& waiting = call->waiting_for[phase][neighbour];
        if (call->phase_started[phase][neighbour] >= 0 || std::find(waiting.begin(), waiting.end(), me) != waiting.end())
          return;
        waiting.push_back(me);
        track(plan.gate[me]->get_async<void>(&received_payload), id);
        ++state.outstanding;
      });
    if (state.outstanding == 0)
      end_collective_phase(id);
  }

  // Under fast fidelity, a ring edge over NVLink of a group across nodes is timed, not a flow.
  bool timed_edge(const BoundGroup& bound, int route) const {
    return bound.analytic_nvlink_edges && binding_.route(route).kind == EdgeKind::nvlink;
  }

  // `visit(neighbour, channel, from)` for each of this member's timed edges: the member at its
  // other end, its ring and the member it leaves.
  template <typename Visit>
  void for_each_timed_neighbour(const BoundGroup& bound, int me, bool broadcast, Visit visit) const {
    for (std::size_t c = 0; c < bound.next.size(); ++c) {
      const int next = bound.next[c][me], previous = bound.previous[c][me];
      if ((!broadcast || next != 0) && timed_edge(bound, bound.edge_route[c][me]))
        visit(next, c, me);
      if ((!broadcast || me != 0) && timed_edge(bound, bound.edge_route[c][previous]))
        visit(previous, c, previous);
    }
  }

  // This member starts a phase now: members waiting for that hear it (a message without bytes,
  // over the route their edge takes, so it arrives before the edge could have moved anything).
  void started_phase(Arrivals& call, const GroupPlan& plan, int me, int phase) const {
    const auto slot = static_cast<std::size_t>(phase);
    if (call.phase_started.size() <= slot) {
      call.phase_started.resize(slot + 1);
      call.waiting_for.resize(slot + 1);
    }
    if (call.phase_started[slot].empty()) {
      call.phase_started[slot].assign(static_cast<std::size_t>(plan.members), -1.0);
      call.waiting_for[slot].resize(static_cast<std::size_t>(plan.members));
    }
    call.phase_started[slot][me] = sg4::Engine::get_clock();
    for (int waiting : call.waiting_for[slot][me])
      plan.gate[waiting]->put_init(&payload_token, 0)->detach();
    call.waiting_for[slot][me].clear();
  }

  // When this member's timed edges of its current phase are done (0: it has none): each once both
  // its ends started, then its route's latency and its bytes at its own pace.
  double timed_edges_end(OpId id) const {
    const Op& op = program_.ops[id];
    const GroupPlan& plan = shared_.groups[group(op)];
    const BoundGroup& bound = *plan.bound;
    if (!bound.analytic_nvlink_edges)
      return 0.0;
    const CollectiveState& state = collectives_.at(id);
    const int me = bound.member_of_rank.at(rank_);
    const std::vector<double>& started =
        shared_.arrivals[group(op)].at(state.call).phase_started[static_cast<std::size_t>(state.phase)];
    constexpr int nvlink = static_cast<int>(EdgeKind::nvlink);
    const double bytes = ring_phases(op.collective, op.bytes, plan.members).bytes_per_phase *
                         state.choice.byte_scale[nvlink] / state.choice.efficiency[nvlink] / shared_.bandwidth_efficiency;
    double end = 0.0;
    for_each_timed_neighbour(bound, me, op.collective == Collective::broadcast, [&](int neighbour, std::size_t c, int from) {
      end = std::max(end, std::max(started[me], started[neighbour]) + binding_.route(bound.edge_route[c][from]).latency +
                              bytes * bound.nvlink_seconds_per_byte[c][from]);
    });
    return end;
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
    if (--collectives_[id].outstanding > 0)
      return;
    end_collective_phase(id);
  }

  // This rank's flows of a collective's phase are done: the phase ends once its timed edges are
  // too. One flow per ring edge carries a phase and pays its route's latency; the rest of the
  // phase's latency (the ring's other steps, the protocol's costs) is a timer.
  void end_collective_phase(OpId id) {
    const CollectiveState& state = collectives_[id];
    const double now = sg4::Engine::get_clock();
    const double extra_latency =
        std::max(0.0, state.choice.phase_latency - shared_.groups[group(program_.ops[id])].bound->shape.route_latency);
    const double end = std::max(now, timed_edges_end(id)) + extra_latency;
    if (end > now) {
      timers_.push({end, sequence_++, id});
      return;
    }
    start_collective_phase(id, state.phase + 1);
  }

  void communication_began() {
    ++communicating_;
    steer_companion();
  }
  void communication_ended() {
    --communicating_;
    steer_companion();
  }

  // The companion execution that slows this GPU's kernels runs while communication started in the
  // simulation is under way, and while a known span is, if a kernel runs in the simulation.
  void steer_companion() {
    if (shared_.comm_slowdown <= 0)
      return;
    const double now = sg4::Engine::get_clock();
    forget_spans_until(now);
    const bool slowed = communicating_ > 0 ||
                        (kernels_simulated_ > 0 && std::any_of(slow_spans_.begin(), slow_spans_.end(), [now](const Span& span) {
                           return span.first <= now + timer_resolution && span.second > now + timer_resolution;
                         }));
    if (slowed && !companion_) {
      const double share = shared_.comm_slowdown / (1 + shared_.comm_slowdown);
      // Far more work than any step: it is cancelled, never finished.
      constexpr double endless = 1e300;
      companion_ = host_->exec_init(endless)->set_bound(share * host_->get_speed())->start();
    } else if (!slowed && companion_) {
      companion_->cancel();
      companion_ = nullptr;
    }
  }

  // While kernels run in the simulation, the next time a known span begins or ends.
  double next_span_edge(double now) const {
    double edge = never;
    if (kernels_simulated_ == 0)
      return edge;
    for (const auto& [from, to] : slow_spans_) {
      if (from > now + timer_resolution)
        edge = std::min(edge, from);
      else if (to > now + timer_resolution)
        edge = std::min(edge, to);
    }
    return edge;
  }

  void track(sg4::ActivityPtr activity, OpId id) {
    activities_.push_back(std::move(activity));
    activity_ops_.push_back(id);
  }

  // An op started in the simulation finished now.
  void finish(OpId id) {
    const Op& op = program_.ops[id];
    const double now = sg4::Engine::get_clock();
    if (plan_.overlaps_kernels[id]) {
      // Over now: every kernel still to settle is ready no earlier, so no span to keep.
      overlap_known(id, now, now);
      communication_ended();
    }
    if (op.kind == OpKind::compute && op.target.empty()) {
      --kernels_simulated_;
      steer_companion();
    }
    if (op.kind == OpKind::collective) {
      transferred(id, depart(id, now));
      collectives_.erase(id);
    }
    complete(id, now);
    if (op.kind == OpKind::collective) {
      auto& queue = group_queue_[local_group(op)];
      if (queue.empty()) {
        group_busy_[local_group(op)] = false;
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
    state.call = group_calls_[local_group(program_.ops[id])]++;
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
    if (++call.finished == shared_.groups[static_cast<std::size_t>(g)].members)
      shared_.arrivals[g].erase(found);
    return transfer;
  }

  void transferred(OpId id, const Transfer& transfer) {
    std::uint32_t slot = 0;
    if (free_transfers_.empty()) {
      slot = static_cast<std::uint32_t>(held_transfers_.size());
      held_transfers_.push_back(transfer);
    } else {
      slot = free_transfers_.back();
      free_transfers_.pop_back();
      held_transfers_[slot] = transfer;
    }
    events_.push({transfer.end, sequence_++, id, slot, Told::transferred});
  }
  void tell(Told what, OpId id, double time) { events_.push({time, sequence_++, id, 0, what}); }

  void tell_observer_until(double time) {
    while (!events_.empty() && events_.top().time <= time) {
      const Event event = events_.top();
      events_.pop();
      switch (event.what) {
      case Told::started: observer_.op_started(rank_, event.op, event.time); break;
      case Told::finished: observer_.op_finished(rank_, event.op, event.time); break;
      case Told::transferred:
        observer_.op_transferred(rank_, event.op, held_transfers_[event.transfer]);
        free_transfers_.push_back(event.transfer);
        break;
      }
    }
  }

  SharedState& shared_;
  const int rank_;
  const Program& program_;
  const ProgramPlan& plan_;
  PlatformBinding& binding_;
  ReplayObserver& observer_;
  sg4::Host* host_;
  std::vector<std::uint32_t> waiting_;
  std::vector<double> ready_at_;         // the latest finish among each op's predecessors so far
  std::deque<OpId> settling_;
  MinHeap<Due> pending_;                 // ready ops waiting for the clock to reach their time
  MinHeap<Due> timers_;
  MinHeap<Event> events_;
  std::vector<Transfer> held_transfers_;
  std::vector<std::uint32_t> free_transfers_;  // places in held_transfers_ to reuse
  std::uint64_t sequence_ = 0;
  std::vector<sg4::ActivityPtr> activities_;
  std::vector<OpId> activity_ops_;
  std::unordered_map<OpId, CollectiveState> collectives_;
  std::vector<int> groups_;                 // the groups of this rank's collectives, sorted
  std::vector<bool> group_busy_;            // per place in groups_
  std::vector<std::deque<OpId>> group_queue_;
  std::vector<std::uint64_t> group_calls_;  // collectives started per group
  std::unordered_map<OpId, int> parts_left_;  // I/O ops with a drive transfer and a PCIe transfer
  int communicating_ = 0;                     // collectives and sends under way beside kernels
  std::size_t next_overlap_ = 0;              // into plan_.overlapping_after: those watched so far
  std::unordered_set<OpId> watched_overlaps_; // watched and not known
  std::unordered_set<OpId> overlap_known_;    // known before being watched
  std::vector<Span> slow_spans_;              // known communication beside kernels (pruned lazily)
  int kernels_simulated_ = 0;                 // GPU kernels under way in the simulation
  sg4::ExecPtr companion_;                    // slows the kernels meanwhile (comm_slowdown)
  std::size_t finished_ = 0;
  double last_finish_ = 0;
};

// `group_index` names its mailboxes.
GroupPlan plan_group(const Group& group, const BoundGroup& bound, int group_index, const CommTuning& tuning) {
  GroupPlan plan;
  plan.bound = &bound;
  plan.members = static_cast<int>(group.ranks.size());
  if (bound.analytic_all_to_all)
    plan.all_to_all_pace = even_all_to_all_pace(
        bound.all_to_all, choose_collective(*bound.nccl, bound.shape, Collective::all_to_all, 0, tuning));
  if (bound.analytic_nvlink_edges)
    for (int member = 0; member < plan.members; ++member)
      plan.gate.push_back(
          sg4::Mailbox::by_name("gate/" + std::to_string(group_index) + "/" + std::to_string(member)));
  plan.inbox.assign(bound.next.size(), std::vector<sg4::Mailbox*>(plan.members));
  for (std::size_t c = 0; c < bound.next.size(); ++c)
    for (int member = 0; member < plan.members; ++member)  // one sender each: the member before it
      plan.inbox[c][member] = sg4::Mailbox::by_name("ring/" + std::to_string(group_index) + "/" + std::to_string(c) +
                                                    "/" + std::to_string(member));
  return plan;
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
  std::unique_ptr<ComputeTimer> compute;
  std::unique_ptr<PlatformBinding> binding;
  try {
    // A forced NVLS leaves to rings the calls it cannot run, but one it can run at all.
    if (settings.tuning.algorithm == CommAlgorithm::nvls &&
        std::none_of(gpus.begin(), gpus.begin() + static_cast<long>(workload.ranks()),
                     [](const GpuInfo& gpu) { return nccl_profile(gpu.architecture).nvls_latency > 0; }))
      throw InputError("comm.algorithm = nvls: the platform's " + gpus.front().model +
                       " GPUs have no NVLink SHARP (Hopper and later have it); accepted: auto, ring, tree");
    compute = std::make_unique<ComputeTimer>(workload, gpus);
    binding = std::make_unique<PlatformBinding>(workload, gpus,
                                                BindSettings{settings.channels, settings.fast_collectives});
  } catch (const InputError& error) {
    throw InputError(context.platform_file().string() + ": " + error.what());
  }
  observer.resources_bound(binding->resources());
  SharedState shared;
  shared.workload = &workload;
  shared.compute = compute.get();
  shared.binding = binding.get();
  shared.gpus = &gpus;
  shared.settle_ahead = settings.settle_ahead;
  shared.comm_slowdown = settings.comm_slowdown;
  shared.bandwidth_efficiency = settings.bandwidth_efficiency;
  shared.tuning = settings.tuning;
  shared.observer = &observer;
  shared.rank_finish.assign(workload.ranks(), 0.0);
  shared.ops_done.assign(workload.ranks(), 0);
  for (std::size_t g = 0; g < workload.groups.size(); ++g)
    shared.groups.push_back(
        plan_group(workload.groups[g], binding->group(static_cast<int>(g)), static_cast<int>(g), settings.tuning));
  shared.arrivals.resize(shared.groups.size());
  std::map<const Program*, AnalyticSlots> analytic_slots;
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    const Program& program = workload.program(rank);
    auto [slots, fresh] = analytic_slots.try_emplace(&program);
    AnalyticSlots& analytic = slots->second;
    if (fresh) {
      int count = 0;
      for (const Op& op : program.ops)
        if (op.kind == OpKind::collective)
          count = std::max(count, op.group + 1);
      analytic.collectives.assign(static_cast<std::size_t>(count), true);
      analytic.all_to_alls.assign(static_cast<std::size_t>(count), true);
    }
    for (std::size_t slot = 0; slot < analytic.collectives.size(); ++slot) {
      const int group = workload.group_of(rank, static_cast<int>(slot));
      if (group >= 0 && !shared.groups[group].bound->analytic)
        analytic.collectives[slot] = false;
      if (group >= 0 && !shared.groups[group].bound->analytic_all_to_all)
        analytic.all_to_alls[slot] = false;
    }
  }
  for (const auto& [program, analytic] : analytic_slots)
    shared.plans.emplace(program, plan_program(*program, analytic, settings.comm_slowdown));

  std::vector<std::unique_ptr<RankRunner>> runners;
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank) {
    runners.push_back(std::make_unique<RankRunner>(shared, static_cast<int>(rank)));
    RankRunner* runner = runners.back().get();
    sg4::Actor::create("rank-" + std::to_string(rank), binding->host(static_cast<int>(rank)), [runner, &shared] {
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
  return outcome;
}

} // namespace trainsim
