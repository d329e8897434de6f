#pragma once
// Data-parallel training (PyTorch DDP / Megatron without model parallelism):
// every rank holds the whole model, runs its micro-batches, and all-reduces the
// gradients in buckets on the dp-comm stream while the last micro-batch's
// backward is still running; the optimizer step waits for every bucket.
#include "config/scenario.hpp"
#include "model/model.hpp"
#include "program/program.hpp"

namespace trainsim {

Workload build_ddp_workload(const Scenario& scenario, const ModelSpec& model);

} // namespace trainsim
