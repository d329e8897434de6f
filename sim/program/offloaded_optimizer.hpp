#pragma once
// The optimizer moved off the GPU: ZeRO-Offload's CPU Adam over states in host memory, or
// ZeRO-Infinity's states on NVMe streamed through a pinned buffer. The ops every program
// builder adds for it, written through the builder's ProgramWriter:
// - each reduced bucket: a copy of the rank's share to `@cpu` (copy-out stream), a compute on
//   `@cpu` (stream cpu) turning it into fp32 or adding it to the fp32 gradients, and with NVMe a
//   write of it as fp32 to `@nvme`;
// - the step: CPU Adam over the shard; on NVMe in chunks of half the pinned buffer, reads and
//   writes on their own streams (io-read, io-write: DeepSpeed's swappers hold a read and a write
//   aio handle) so that read k + 1 overlaps update k and write k - 1, and read k + 2 waits for
//   write k (double buffering). An op is one request at the drive's full rate, which DeepSpeed's
//   aio queue (8 blocks of 1 MiB in flight by default) achieves.
// memory.delayed_update puts the step at the start of the program, overlapping the next step
// (ZeRO-Offload's DPU). `@cpu` and `@nvme` are bound to the rank's node CPU and drive by the
// PlatformBinding.
#include <optional>
#include <string>
#include <vector>

#include "program/model_states.hpp"
#include "program/program_writer.hpp"

namespace trainsim {

class OffloadedOptimizer {
public:
  // `shard`: the parameters whose optimizer states this rank keeps, where `states` puts them.
  OffloadedOptimizer(ProgramWriter& writer, const Scenario& scenario, const ModelStatePlan& states, double shard);

  // fp32 master weights, momentum, variance and fp32 gradients (16 bytes per shard parameter)
  // in host memory or on NVMe, and the pinned buffer NVMe traffic goes through.
  void allocate_states();

  struct Arrival {
    OpId copied;  // the gradients left the GPU: their buffer may be freed
    OpId done;    // they are in the optimizer's fp32 gradients
  };
  // `bytes` of this rank's reduced 16-bit gradients, ready after `reduced`: copied to host memory,
  // turned into fp32 (or added to the fp32 gradients of the step's earlier micro-batches) on the
  // CPU, and written to NVMe when the states live there.
  Arrival gradients(double bytes, const std::string& bucket, OpId reduced);
  // The gradients of a whole micro-batch have arrived: later ones are added to them.
  void micro_batch_done() { accumulated_before_ = true; }

  // Adam over the shard on the node's CPU after `after`; on NVMe in chunks of half the pinned
  // buffer (read k + 1 overlapping update k and write k - 1). Returns the ops that produced
  // the updated 16-bit parameters.
  std::vector<OpId> step(const std::vector<OpId>& after);

private:
  Work adam_work(double params) const;
  bool on_nvme() const { return states_.optimizer.device == Device::nvme; }

  ProgramWriter& w_;
  const Scenario& s_;
  const ModelStatePlan& states_;
  const double shard_;
  bool accumulated_before_ = false;
};

// Weights, gradients and (unless offloaded) optimizer states where `states` keeps them on the GPU,
// as tensors named `prefix` + weights, gradients, optimizer.
void allocate_states_on_gpu(ProgramWriter& writer, const ModelStatePlan& states, double weight_parameters,
                            double parameters, const std::string& prefix);

// A rank's model states, allocated where `states` keeps them: `weight_parameters` weights (FSDP
// counts its per-group shards), the gradients and optimizer states of `parameters`; when the plan
// moves the optimizer off the GPU, `offloaded` becomes that optimizer. Returns the parameters whose
// optimizer states the rank keeps.
double allocate_model_states(ProgramWriter& writer, const Scenario& scenario, const ModelStatePlan& states,
                             double weight_parameters, double parameters,
                             std::optional<OffloadedOptimizer>& offloaded);

} // namespace trainsim
