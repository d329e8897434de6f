#pragma once
// Replays per-rank programs on a loaded platform: one SimGrid actor per rank on
// its GPU host. Compute ops become executions whose length is the roofline time,
// collectives become rings of concurrent flows over the platform's routes,
// send/recv become point-to-point flows, copies flows to another host, reads and
// writes disk I/O. The platform binding has resolved and checked what the ops name
// before the first op starts. Observers hear when each op starts and finishes and
// what it asked of the shared resources; the engine writes nothing itself.
#include <string>
#include <vector>

#include "engine/observer.hpp"
#include "cluster/gpu.hpp"
#include "platform/simulation_context.hpp"
#include "program/nccl_model.hpp"
#include "program/program.hpp"

namespace trainsim {

struct ReplaySettings {
  int channels = 0;  // rings per collective; 0: GPUs of the group on its fullest node
  // Time collectives of groups inside one node from the ring formula over their routes, and even
  // all-to-alls of groups whose members run one program from the load on the links their pairs
  // cross, instead of simulating their flows (comm.fidelity = fast; other cross-node traffic is
  // always simulated).
  bool fast_collectives = false;
  // Ranks settle ops that need no shared resource ahead of the clock (see replay.cpp); off, every
  // op is started in the simulation at its ready time. The same timeline either way: off is for
  // the tests that check so.
  bool settle_ahead = true;
  // How much longer a GPU's kernels take while one of its collectives or sends is under way (they
  // share the SMs and HBM): f stretches compute by 1 + f. 0: communication costs compute nothing.
  double comm_slowdown = 0;
  // The fraction of link bandwidth collectives and pipeline transfers reach (protocol overheads,
  // what NCCL's kernels can push): their flows carry bytes / efficiency, and rings timed
  // analytically see the same fraction of their edge bandwidth. Offload copies and I/O are not
  // NCCL's and keep the links' full bandwidth.
  double bandwidth_efficiency = 1;
  // NCCL's algorithm and protocol, chosen per call unless forced, or ideal collectives
  // (program/nccl_model.hpp).
  CommTuning tuning;
};

struct ReplayOutcome {
  double end_time = 0;
  std::vector<double> rank_finish;  // when each rank's last op finished
};


// `gpus` are the platform's GPUs in rank order (rank r runs on gpus[r]).
// Throws InputError when the workload does not fit the platform or deadlocks.
ReplayOutcome replay(SimulationContext& context, const Workload& workload, const std::vector<GpuInfo>& gpus,
                     const ReplaySettings& settings, ReplayObserver& observer);

} // namespace trainsim
