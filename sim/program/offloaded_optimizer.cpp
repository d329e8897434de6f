#include "program/offloaded_optimizer.hpp"

#include <algorithm>
#include <cmath>

namespace trainsim {

OffloadedOptimizer::OffloadedOptimizer(ProgramWriter& writer, const Scenario& scenario, const ModelStatePlan& states,
                                       double shard)
    : w_(writer), s_(scenario), states_(states), shard_(shard) {}

// CPU Adam reads fp32 gradients, master weights and moments and writes the last three and the
// 16-bit weights for the GPU.
Work OffloadedOptimizer::adam_work(double params) const {
  return optimizer_step_work(params, s_.precision, Precision::fp32);
}

void OffloadedOptimizer::allocate_states() {
  const StatePlacement& gradients = states_.offloaded_gradients;
  w_.alloc("gradients.offloaded", MemCategory::gradients, shard_ * gradients.bytes_per_parameter, gradients.device);
  w_.alloc("optimizer.states", MemCategory::optimizer, shard_ * states_.optimizer.bytes_per_parameter,
           states_.optimizer.device);
  w_.alloc("pinned-buffers", MemCategory::buffers, states_.pinned_buffer_bytes, Device::host);
}

OffloadedOptimizer::Arrival OffloadedOptimizer::gradients(double bytes, const std::string& bucket, OpId reduced) {
  const OpId copied = w_.copy(node_cpu, false, bytes, "d2h.grads" + bucket, {reduced});
  // The CPU turns them into fp32 (write 4 bytes) or adds them to the fp32 ones (read and write 8).
  const double params = bytes / states_.gradient_element_bytes;
  const double fp32_traffic = accumulated_before_ ? 8.0 : 4.0;
  OpId done = w_.compute_on(node_cpu, "cpu-accumulate.grads" + bucket,
                            Work{params, params * (states_.gradient_element_bytes + fp32_traffic)}, Phase::other,
                            {copied});
  if (on_nvme())  // staged in the pinned buffer, written as fp32
    done = w_.disk_io(OpKind::write, node_nvme, params * states_.offloaded_gradients.bytes_per_parameter,
                      "nvme-write.grads" + bucket, {done});
  return {copied, done};
}

std::vector<OpId> OffloadedOptimizer::step(const std::vector<OpId>& after) {
  if (!on_nvme())
    return {w_.compute_on(node_cpu, "cpu-adam", adam_work(shard_), Phase::optimizer, after)};
  const double per_param = states_.optimizer.bytes_per_parameter;
  const double gradient = states_.offloaded_gradients.bytes_per_parameter;
  const double chunk_params = std::max(1.0, std::floor(states_.pinned_buffer_bytes / 2 / (per_param + gradient)));
  std::vector<double> chunks;
  for (double done = 0; done < shard_; done += chunk_params)
    chunks.push_back(std::min(chunk_params, shard_ - done));
  // DeepSpeed's pipelined optimizer swapper (runtime/swap_tensor/pipelined_optimizer_swapper.py)
  // has a read and a write aio handle: chunk k + 1 is read while k is updated, and k is written
  // back while k + 1 is updated. Reads and writes go on the two I/O streams, each in order, and
  // the drive serves them side by side as the platform allows. The first read waits for the
  // gradients (DeepSpeed flushes the gradient swapper before swapping states in); read k + 2
  // waits for write k, which frees its half of the pinned buffer.
  std::vector<OpId> reads, writes, updated;
  const auto read = [&](std::size_t k) {
    std::vector<OpId> deps = k == 0 ? after : std::vector<OpId>{};
    if (k >= 2)
      deps.push_back(writes[k - 2]);
    reads.push_back(w_.disk_io(OpKind::read, node_nvme, chunks[k] * (per_param + gradient),
                               "nvme-read.optimizer.chunk" + std::to_string(k), deps));
  };
  for (std::size_t k = 0; k < std::min<std::size_t>(2, chunks.size()); ++k)
    read(k);
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    std::vector<OpId> deps = after;
    deps.push_back(reads[k]);
    const std::string chunk = ".chunk" + std::to_string(k);
    updated.push_back(w_.compute_on(node_cpu, "cpu-adam" + chunk, adam_work(chunks[k]), Phase::optimizer, deps));
    writes.push_back(
        w_.disk_io(OpKind::write, node_nvme, chunks[k] * per_param, "nvme-write.optimizer" + chunk, {updated.back()}));
    if (k + 2 < chunks.size())
      read(k + 2);
  }
  return updated;
}

void allocate_states_on_gpu(ProgramWriter& writer, const ModelStatePlan& states, double weight_parameters,
                            double parameters, const std::string& prefix) {
  writer.alloc(prefix + "weights", MemCategory::weights, weight_parameters * states.weights.bytes_per_parameter,
               states.weights.device);
  writer.alloc(prefix + "gradients", MemCategory::gradients,
               states.held(states.gradients, parameters) * states.gradients.bytes_per_parameter);
  if (!states.offloads_optimizer())
    writer.alloc(prefix + "optimizer", MemCategory::optimizer,
                 states.held(states.optimizer, parameters) * states.optimizer.bytes_per_parameter);
}

double allocate_model_states(ProgramWriter& writer, const Scenario& scenario, const ModelStatePlan& states,
                             double weight_parameters, double parameters,
                             std::optional<OffloadedOptimizer>& offloaded) {
  allocate_states_on_gpu(writer, states, weight_parameters, parameters, "");
  const double optimizer_parameters = states.held(states.optimizer, parameters);
  if (!states.offloads_optimizer())
    return optimizer_parameters;
  offloaded.emplace(writer, scenario, states, optimizer_parameters);
  offloaded->allocate_states();
  return optimizer_parameters;
}

} // namespace trainsim
