#include "program/ddp_builder.hpp"

#include <memory>
#include <string>

#include "common/error.hpp"
#include "common/units.hpp"

#include "layout/layout.hpp"
#include "model/costs.hpp"

namespace trainsim {
namespace {

// Appends ops to one rank's program with the bookkeeping of names and buckets.
class DdpProgramWriter {
public:
  DdpProgramWriter(const Scenario& scenario, const ModelSpec& model, const ModelCosts& costs, int dp_group)
      : scenario_(scenario), model_(model), costs_(costs), counts_(count_parameters(model)), dp_group_(dp_group) {}

  Program build() {
    allocate_model_states();
    for (long long mb = 0; mb < scenario_.grad_accum; ++mb) {
      forward(mb);
      backward(mb, mb + 1 == scenario_.grad_accum);
    }
    optimizer_step();
    return std::move(program_);
  }

private:
  OpId compute(const std::string& name, const Work& work) {
    Op op;
    op.kind = OpKind::compute;
    op.stream = Stream::compute;
    op.name = name;
    op.flops = work.flops;
    op.bytes = work.bytes;
    return program_.add(std::move(op));
  }

  void alloc(const std::string& tensor, MemCategory category, double bytes) {
    if (bytes <= 0)
      return;
    Op op;
    op.kind = OpKind::alloc;
    op.stream = Stream::compute;
    op.tensor = tensor;
    op.category = category;
    op.device = Device::gpu;
    op.bytes = bytes;
    program_.add(std::move(op));
  }

  void release(const std::string& tensor, double bytes) {
    if (bytes <= 0)
      return;
    Op op;
    op.kind = OpKind::free;
    op.stream = Stream::compute;
    op.tensor = tensor;
    program_.add(std::move(op));
  }

  void allocate_model_states() {
    const double params = static_cast<double>(counts_.total);
    const double master_copy = scenario_.precision == Precision::fp32 ? 0.0 : 4.0;
    alloc("weights", MemCategory::weights, params * bytes_per_element(scenario_.precision));
    alloc("gradients", MemCategory::gradients, params * bytes_per_element(scenario_.grad_precision));
    alloc("optimizer", MemCategory::optimizer, params * (master_copy + 8.0));  // fp32 master, momentum, variance
  }

  static std::string suffix(long long mb) { return ".mb" + std::to_string(mb); }
  static std::string layer_name(long long layer) { return "L" + std::to_string(layer); }

  void forward(long long mb) {
    const std::string s = suffix(mb);
    alloc("embedding.act" + s, MemCategory::activations, costs_.embedding_activations);
    compute("embedding.fwd" + s, costs_.embedding_forward);
    const double kept = kept_activation_bytes(costs_.layer.activations, scenario_.recompute);
    for (long long l = 0; l < model_.layers; ++l) {
      alloc(layer_name(l) + ".act" + s, MemCategory::activations, kept);
      compute(layer_name(l) + ".fwd" + s, costs_.layer.forward);
    }
    alloc("head.act" + s, MemCategory::activations, costs_.head_activations);
    compute("head.fwd" + s, costs_.head_forward);
  }

  void backward(long long mb, bool last) {
    const std::string s = suffix(mb);
    const double gradient_bytes = bytes_per_element(scenario_.grad_precision);
    alloc("act-grad" + s, MemCategory::buffers, costs_.activation_gradient_buffer);
    const OpId head = compute("head.bwd" + s, costs_.head_backward);
    release("head.act" + s, costs_.head_activations);
    if (last) {
      // Untied output weights are complete after the head's backward; tied ones only after the embedding's.
      pending_bucket_bytes_ += static_cast<double>(counts_.final_norm + counts_.output_head) * gradient_bytes;
      flush_bucket_if_full(head);
    }

    const LayerActivations& activations = costs_.layer.activations;
    const double kept = kept_activation_bytes(activations, scenario_.recompute);
    for (long long l = model_.layers - 1; l >= 0; --l) {
      const std::string layer = layer_name(l);
      double rebuilt = 0;
      if (scenario_.recompute == Recompute::full) {
        rebuilt = activations.total - activations.input;
        alloc(layer + ".recompute" + s, MemCategory::activations, rebuilt);
        compute(layer + ".recompute" + s, costs_.layer.forward);
      } else if (scenario_.recompute == Recompute::selective && activations.attention_core > 0) {
        rebuilt = activations.attention_core;
        alloc(layer + ".recompute" + s, MemCategory::activations, rebuilt);
        compute(layer + ".recompute" + s, costs_.layer.attention_core);
      }
      const OpId backward_op = compute(layer + ".bwd" + s, costs_.layer.backward);
      release(layer + ".recompute" + s, rebuilt);
      release(layer + ".act" + s, kept);
      if (last) {
        pending_bucket_bytes_ += static_cast<double>(counts_.per_layer) * gradient_bytes;
        flush_bucket_if_full(backward_op);
      }
    }
    const OpId embedding = compute("embedding.bwd" + s, costs_.embedding_backward);
    release("embedding.act" + s, costs_.embedding_activations);
    release("act-grad" + s, costs_.activation_gradient_buffer);
    if (last) {
      pending_bucket_bytes_ += static_cast<double>(counts_.embedding + counts_.positions) * gradient_bytes;
      flush_bucket(embedding);
    }
  }

  void flush_bucket_if_full(OpId producer) {
    if (pending_bucket_bytes_ >= scenario_.bucket_bytes)
      flush_bucket(producer);
  }

  void flush_bucket(OpId producer) {
    if (pending_bucket_bytes_ <= 0 || scenario_.dp == 1)
      return;
    Op op;
    op.kind = OpKind::collective;
    op.stream = Stream::dp_comm;
    op.collective = Collective::all_reduce;
    op.group = dp_group_;
    op.bytes = pending_bucket_bytes_;
    op.name = "grad-allreduce.bucket" + std::to_string(bucket_ops_.size());
    op.deps = {producer};
    bucket_ops_.push_back(program_.add(std::move(op)));
    pending_bucket_bytes_ = 0;
  }

  void optimizer_step() {
    Op op;
    op.kind = OpKind::compute;
    op.stream = Stream::compute;
    op.name = "optimizer.step";
    const Work work = optimizer_step_work(static_cast<double>(counts_.total), scenario_.precision, scenario_.grad_precision);
    op.flops = work.flops;
    op.bytes = work.bytes;
    op.deps = bucket_ops_;
    program_.add(std::move(op));
  }

  const Scenario& scenario_;
  const ModelSpec& model_;
  const ModelCosts& costs_;
  const ParameterCounts counts_;
  const int dp_group_;
  Program program_;
  double pending_bucket_bytes_ = 0;
  std::vector<OpId> bucket_ops_;
};

} // namespace

Workload build_ddp_workload(const Scenario& scenario, const ModelSpec& model) {
  if (model.learned_positions && scenario.seq_len > model.max_positions)
    throw InputError(scenario.file.string() + ": training.seq_len = " + std::to_string(scenario.seq_len) +
                     " is longer than the " + std::to_string(model.max_positions) + " learned positions of model " +
                     model.name + "; accepted: at most " + std::to_string(model.max_positions));
  const double ops_per_rank = static_cast<double>(scenario.grad_accum) * static_cast<double>(model.layers) * 10.0;
  if (ops_per_rank > 50e6)
    throw InputError(scenario.file.string() + ": " + std::to_string(scenario.grad_accum) + " micro-batches x " +
                     std::to_string(model.layers) + " layers makes a program of about " + format_count(ops_per_rank) +
                     " ops per rank; accepted: at most 50M (fewer accumulation steps or layers)");
  const ModelCosts costs = compute_costs(model, scenario.micro_batch, scenario.seq_len, scenario.precision,
                                         scenario.grad_precision, scenario.flash_attention);
  const Layout layout = layout_of(scenario);
  Workload workload;
  workload.groups = layout.dp_groups();
  workload.step.model = model.name;
  workload.step.parameters = static_cast<double>(count_parameters(model).total);
  workload.step.tokens_per_step = static_cast<double>(scenario.global_batch * scenario.seq_len);
  workload.step.model_flops_per_step =
      costs.model_flops_per_micro_batch * static_cast<double>(scenario.grad_accum) * scenario.dp;
  workload.step.precision = scenario.precision;
  workload.step.efficiency = scenario.efficiency;

  // Every rank of a replica-only layout runs the same program on its own data.
  const auto program = std::make_shared<const Program>(DdpProgramWriter(scenario, model, costs, 0).build());
  workload.programs.assign(static_cast<std::size_t>(layout.world()), program);
  return workload;
}

} // namespace trainsim
