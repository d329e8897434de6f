// The per-layer op emitter (LayerOps) on hand-made costs: which ops a layer's forward and
// backward emit without model parallelism, with tensor parallelism (Megatron: Shoeybi et al.
// 2019, two all-reduces per pass), with sequence parallelism (Korthikanti et al. 2022: an
// all-gather and a reduce-scatter in place of each all-reduce) and with context parallelism
// (ring attention: the K/V exchange beside the local block), on which streams, after what, and
// with FLOPs and bytes that add up to the layer's.
#include <doctest/doctest.h>

#include <vector>

#include "program/program_writer.hpp"

using namespace trainsim;

namespace {

// A micro-batch of b = 2 sequences of s = 32 tokens, hidden h = 64, in bf16: the layer's output
// (what a tensor-parallel collective carries) is b x s x h x 2 bytes.
constexpr double layer_output_bytes = 2.0 * 32 * 64 * 2;  // 8192
constexpr double kv_bytes = 1000;                            // K and V of the whole sequence
constexpr int tp_group = 5, cp_group = 7;                    // arbitrary slots, to see them carried

// Round numbers, so that each part's share is exact: attention 100 FLOPs (its core 40) and MLP
// 200 in forward, twice the FLOPs in backward (attention 200, MLP 400). Under context
// parallelism over 4 ranks (model/costs decides the split, tested there), the attention's local
// piece is all but the 3 / 4 of its core that waits for the other ranks' K and V: 70 and 30
// FLOPs forward, 140 and 60 backward (its core is 80 there), bytes in the same ratio.
ModelCosts hand_made_costs() {
  ModelCosts costs;
  costs.layer_kinds.resize(1);
  costs.kind_of_layer = {0};
  LayerCosts& layer = costs.layer_kinds[0];
  layer.attention_forward = {100, 10};
  layer.mlp_forward = {200, 20};
  layer.forward = {300, 30};
  layer.attention_backward = {200, 30};
  layer.mlp_backward = {400, 60};
  layer.backward = {600, 90};
  layer.attention_core = {40, 4};
  layer.attention_forward_local = {70, 7};
  layer.attention_forward_ring = {30, 3};
  layer.attention_backward_local = {140, 21};
  layer.attention_backward_ring = {60, 9};
  // The blocks' parts under tensor parallelism (over 4 ranks where chunked), adding up to the
  // blocks: attention forward 0 + 4 x 10 (the QKV chunks) + 30 + 4 x 5 (the output projection's)
  // + 10 = 100; MLP forward 0 + 4 x 25 + 20 + 4 x 20 + 0 = 200; attention backward 10 + 4 x 10
  // (the projection's dgrad chunks) + 40 + 50 (up to the column GEMM: 140) + 30 + 30 + 0 = 200;
  // MLP backward 0 + 4 x 25 + 100 + 40 (240) + 80 + 80 + 0 = 400. Bytes in the blocks' ratios: a
  // tenth of the FLOPs forward, 0.15 backward.
  layer.attention_parts = {{0, 0},     {10, 1},   {30, 3},   {5, 0.5}, {10, 1},  {10, 1.5}, {10, 1.5},
                           {40, 6},    {50, 7.5}, {30, 4.5}, {30, 4.5}, {0, 0},  {140, 21}};
  layer.mlp_parts = {{0, 0},    {25, 2.5},  {20, 2},  {20, 2},  {0, 0},  {0, 0},    {25, 3.75},
                     {100, 15}, {40, 6},    {80, 12}, {80, 12}, {0, 0},  {240, 36}};
  // Split in two, the input-gradient parts up to the column GEMM leave the row GEMM's wgrad out:
  // attention 140 - 40 = 100, MLP 240 - 100 = 140. Without tp, B is the backward less its
  // weight-gradient GEMMs (400 of 600 here), W those (200).
  layer.attention_parts.to_column_input = {100, 15};
  layer.mlp_parts.to_column_input = {140, 21};
  layer.backward_input = {400, 60};
  layer.backward_weight = {200, 30};
  costs.tp_collective_bytes = layer_output_bytes;
  layer.cp_kv_bytes = kv_bytes;
  costs.embedding_forward = {0, 50};
  costs.embedding_backward = {0, 60};
  costs.head_forward = {1000, 70};
  costs.head_backward = {2000, 80};
  return costs;
}

// The ops one call emits after an input op (id 0), and what the call returned.
struct Emitted {
  Program program;
  OpId input = 0;
  OpId returned = 0;
  const Op& op(OpId id) const { return program.ops.at(id); }
  std::size_t count() const { return program.ops.size() - 1; }  // without the input
  double flops() const {
    double sum = 0;
    for (OpId id = 1; id < program.ops.size(); ++id)
      sum += program.ops[id].kind == OpKind::compute ? program.ops[id].flops : 0.0;
    return sum;
  }
  double compute_bytes() const {
    double sum = 0;
    for (OpId id = 1; id < program.ops.size(); ++id)
      sum += program.ops[id].kind == OpKind::compute ? program.ops[id].bytes : 0.0;
    return sum;
  }
};

enum class Pass { forward, backward };

Emitted emit(Pass pass, const ModelParallelGroups& groups, const ModelCosts& costs = hand_made_costs()) {
  ProgramWriter writer;
  Emitted emitted;
  emitted.input = writer.compute("input", Work{}, Phase::other);
  LayerOps ops(writer, costs, groups);
  emitted.returned = pass == Pass::forward ? ops.forward(0, "L0.fwd", {emitted.input}, Phase::forward)
                                           : ops.backward(0, "L0.bwd", {emitted.input});
  emitted.program = writer.take();
  return emitted;
}

// The compute ops of a pass share the layer's work between them, nothing lost or counted twice.
void check_adds_up_to(const Emitted& emitted, const Work& layer) {
  CHECK(emitted.flops() == doctest::Approx(layer.flops));
  CHECK(emitted.compute_bytes() == doctest::Approx(layer.bytes));
}

void check_compute(const Op& op, double flops, Phase phase, const std::vector<OpId>& deps) {
  CHECK(op.kind == OpKind::compute);
  CHECK(op.stream == Stream::compute);
  CHECK(op.flops == doctest::Approx(flops));
  CHECK(op.phase == phase);
  CHECK(op.deps == deps);
}

void check_collective(const Op& op, Stream stream, Collective kind, int group, double bytes,
                      const std::vector<OpId>& deps) {
  CHECK(op.kind == OpKind::collective);
  CHECK(op.stream == stream);
  CHECK(op.collective == kind);
  CHECK(op.group == group);
  CHECK(op.bytes == bytes);
  CHECK(op.deps == deps);
}

} // namespace

TEST_CASE("without model parallelism a layer's forward and backward are one compute op each") {
  const Emitted forward = emit(Pass::forward, ModelParallelGroups{});
  REQUIRE(forward.count() == 1);
  check_compute(forward.op(1), 300, Phase::forward, {forward.input});
  CHECK(forward.op(1).bytes == 30);
  CHECK(forward.returned == 1);

  const Emitted backward = emit(Pass::backward, ModelParallelGroups{});
  REQUIRE(backward.count() == 1);
  check_compute(backward.op(1), 600, Phase::backward, {backward.input});
  CHECK(backward.op(1).bytes == 90);
  CHECK(backward.returned == 1);
}

TEST_CASE("tensor parallelism all-reduces the attention and MLP outputs, b x s x h x 2 bytes each, on the tp stream") {
  // Megatron (Shoeybi et al. 2019, Figure 3): the g operator all-reduces the output of the
  // row-parallel projection closing each of the two blocks, in forward; in backward the f
  // operator all-reduces each block's input gradient, MLP first.
  const ModelParallelGroups tp{tp_group, -1, 1, false};
  const Emitted forward = emit(Pass::forward, tp);
  REQUIRE(forward.count() == 4);
  check_compute(forward.op(1), 100, Phase::forward, {forward.input});
  check_collective(forward.op(2), Stream::tp_comm, Collective::all_reduce, tp_group, layer_output_bytes, {1});
  check_compute(forward.op(3), 200, Phase::forward, {2});
  check_collective(forward.op(4), Stream::tp_comm, Collective::all_reduce, tp_group, layer_output_bytes, {3});
  CHECK(forward.returned == 4);
  check_adds_up_to(forward, {300, 30});

  // Backward, MLP first, as Megatron's column-parallel linear runs it: everything up to FC1
  // (op 1: the part after FC2, FC2's dgrad and wgrad, the activation's backward), FC1's dgrad
  // (2), whose output is all-reduced (3) while FC1's wgrad (4) computes; the norm part (5) needs
  // both.
  const Emitted backward = emit(Pass::backward, tp);
  REQUIRE(backward.count() == 10);
  check_compute(backward.op(1), 240, Phase::backward, {backward.input});
  check_compute(backward.op(2), 80, Phase::backward, {1});
  check_collective(backward.op(3), Stream::tp_comm, Collective::all_reduce, tp_group, layer_output_bytes, {2});
  check_compute(backward.op(4), 80, Phase::backward, {2});
  check_compute(backward.op(5), 0, Phase::backward, {4, 3});
  check_compute(backward.op(6), 140, Phase::backward, {5});  // then the attention's, the same way
  check_collective(backward.op(8), Stream::tp_comm, Collective::all_reduce, tp_group, layer_output_bytes, {7});
  CHECK(backward.returned == 10);
  check_adds_up_to(backward, {600, 90});
}

TEST_CASE("sequence parallelism all-gathers each block's input and reduce-scatters its output instead") {
  // Korthikanti et al. 2022, section 4.2.2: g becomes an all-gather before each block and g-bar a
  // reduce-scatter after it; each carries the whole b x s x h tensor, of which a rank holds 1/t.
  const ModelParallelGroups sp{tp_group, -1, 1, true};
  const Emitted forward = emit(Pass::forward, sp);
  REQUIRE(forward.count() == 6);
  check_collective(forward.op(1), Stream::tp_comm, Collective::all_gather, tp_group, layer_output_bytes, {forward.input});
  check_compute(forward.op(2), 100, Phase::forward, {1});
  check_collective(forward.op(3), Stream::tp_comm, Collective::reduce_scatter, tp_group, layer_output_bytes, {2});
  check_collective(forward.op(4), Stream::tp_comm, Collective::all_gather, tp_group, layer_output_bytes, {3});
  check_compute(forward.op(5), 200, Phase::forward, {4});
  check_collective(forward.op(6), Stream::tp_comm, Collective::reduce_scatter, tp_group, layer_output_bytes, {5});
  CHECK(forward.returned == 6);
  check_adds_up_to(forward, {300, 30});

  // Backward, MLP first: FC2's output gradient all-gathered (1); everything up to FC1 (2); FC1's
  // input, which forward kept sequence-split, all-gathered again (3) beside FC1's dgrad (4); that
  // gradient reduce-scattered (5) beside FC1's wgrad (6, which needs the gathered input); the
  // norm part (7) needs both.
  const Emitted backward = emit(Pass::backward, sp);
  REQUIRE(backward.count() == 14);
  check_collective(backward.op(1), Stream::tp_comm, Collective::all_gather, tp_group, layer_output_bytes,
                   {backward.input});
  check_compute(backward.op(2), 240, Phase::backward, {1});
  check_collective(backward.op(3), Stream::tp_comm, Collective::all_gather, tp_group, layer_output_bytes, {2});
  check_compute(backward.op(4), 80, Phase::backward, {2});
  check_collective(backward.op(5), Stream::tp_comm, Collective::reduce_scatter, tp_group, layer_output_bytes, {4});
  check_compute(backward.op(6), 80, Phase::backward, {4, 3});
  check_compute(backward.op(7), 0, Phase::backward, {6, 5});
  CHECK(backward.returned == 14);
  check_adds_up_to(backward, {600, 90});
}

TEST_CASE("a backward split in two keeps its collectives in the input-gradient pass and leaves the weight gradients none") {
  // Transformer Engine's delay_wgrad_compute under SP, MLP first: FC2's output gradient gathered
  // (1), up to FC1 without FC2's wgrad (2), FC1's input gathered (3, kept for W) beside FC1's
  // dgrad (4), that reduce-scattered (5), the norm part once both collectives are done (6); then
  // the attention the same way.
  const ModelParallelGroups sp{tp_group, -1, 1, true};
  const ModelCosts costs = hand_made_costs();  // LayerOps keeps a reference
  ProgramWriter writer;
  const OpId input = writer.compute("input", Work{}, Phase::other);
  LayerOps ops(writer, costs, sp);
  const OpId input_done = ops.backward_input(0, "L0.bwd-input", {input});
  const OpId weight_done = ops.backward_weight(0, "L0.bwd-weight", input_done);
  const Program program = writer.take();
  REQUIRE(program.ops.size() == 1 + 12 + 4);
  const auto op = [&](OpId id) -> const Op& { return program.ops.at(id); };
  check_collective(op(1), Stream::tp_comm, Collective::all_gather, tp_group, layer_output_bytes, {input});
  check_compute(op(2), 140, Phase::backward, {1});
  check_collective(op(3), Stream::tp_comm, Collective::all_gather, tp_group, layer_output_bytes, {2});
  check_compute(op(4), 80, Phase::backward, {2});
  check_collective(op(5), Stream::tp_comm, Collective::reduce_scatter, tp_group, layer_output_bytes, {4});
  check_compute(op(6), 0, Phase::backward, {5, 3});
  check_compute(op(8), 100, Phase::backward, {7});
  CHECK(input_done == 12);
  // W: FC2's and FC1's wgrads, then the output projection's and QKV's, on the compute stream only.
  check_compute(op(13), 100, Phase::weight_gradient, {12});
  check_compute(op(14), 80, Phase::weight_gradient, {13});
  check_compute(op(15), 40, Phase::weight_gradient, {14});
  check_compute(op(16), 30, Phase::weight_gradient, {15});
  CHECK(weight_done == 16);
  // Together they do the whole backward's work: 600 FLOPs.
  double flops = 0;
  for (const Op& each : program.ops)
    flops += each.flops;
  CHECK(flops == doctest::Approx(600));

  // Without model parallelism, one op each.
  ProgramWriter single_writer;
  const OpId start = single_writer.compute("input", Work{}, Phase::other);
  LayerOps single(single_writer, costs, ModelParallelGroups{});
  const OpId b = single.backward_input(0, "L0.bwd-input", {start});
  single.backward_weight(0, "L0.bwd-weight", b);
  const Program single_program = single_writer.take();
  REQUIRE(single_program.ops.size() == 3);
  check_compute(single_program.ops[1], 400, Phase::backward, {start});
  check_compute(single_program.ops[2], 200, Phase::weight_gradient, {b});
}

TEST_CASE("context parallelism gathers K and V on the cp stream while the local block is computed") {
  // Ring attention over cp = 4 ranks: the attention's local piece (70 FLOPs, 7 bytes) runs
  // beside the exchange, the ring piece (30, 3) after it.
  const ModelParallelGroups cp{-1, cp_group, 4, false};
  const Emitted forward = emit(Pass::forward, cp);
  REQUIRE(forward.count() == 4);
  check_compute(forward.op(1), 70, Phase::forward, {forward.input});
  CHECK(forward.op(1).bytes == doctest::Approx(7));
  // The exchange starts with the layer's input, beside the local block, not after it.
  check_collective(forward.op(2), Stream::cp_comm, Collective::all_gather, cp_group, kv_bytes, {forward.input});
  check_compute(forward.op(3), 30, Phase::forward, {1, 2});
  CHECK(forward.op(3).bytes == doctest::Approx(3));
  check_compute(forward.op(4), 200, Phase::forward, {3});  // the MLP: no tp, nothing to reduce
  CHECK(forward.returned == 4);
  check_adds_up_to(forward, {300, 30});

  // Backward: the MLP's 400 FLOPs, then the attention's local 140 and, after K and V, its ring
  // 60; then dK/dV go back to their owners (a reduce-scatter of the same bytes as K/V).
  const Emitted backward = emit(Pass::backward, cp);
  REQUIRE(backward.count() == 5);
  check_compute(backward.op(1), 400, Phase::backward, {backward.input});
  check_compute(backward.op(2), 140, Phase::backward, {1});
  check_collective(backward.op(3), Stream::cp_comm, Collective::all_gather, cp_group, kv_bytes, {1});
  check_compute(backward.op(4), 60, Phase::backward, {2, 3});
  check_collective(backward.op(5), Stream::cp_comm, Collective::reduce_scatter, cp_group, kv_bytes, {4});
  CHECK(backward.returned == 5);
  check_adds_up_to(backward, {600, 90});
}

TEST_CASE("with tensor and context parallelism together the K/V exchange sits between the tp collectives") {
  // Forward: attention (local 70, ring 30 after the exchange), its all-reduce, the MLP, its all-reduce.
  const ModelParallelGroups both{tp_group, cp_group, 4, false};
  const Emitted forward = emit(Pass::forward, both);
  REQUIRE(forward.count() == 6);
  check_compute(forward.op(1), 70, Phase::forward, {forward.input});
  check_collective(forward.op(2), Stream::cp_comm, Collective::all_gather, cp_group, kv_bytes, {forward.input});
  check_compute(forward.op(3), 30, Phase::forward, {1, 2});
  check_collective(forward.op(4), Stream::tp_comm, Collective::all_reduce, tp_group, layer_output_bytes, {3});
  check_compute(forward.op(5), 200, Phase::forward, {4});
  check_collective(forward.op(6), Stream::tp_comm, Collective::all_reduce, tp_group, layer_output_bytes, {5});
  CHECK(forward.returned == 6);
  check_adds_up_to(forward, {300, 30});
}

TEST_CASE("the vocabulary-parallel embedding sums its output over tp and the head gathers its input under SP") {
  // Megatron's VocabParallelEmbedding: each rank looks up its part of the vocabulary and the
  // partial embeddings are all-reduced (reduce-scattered along the sequence under SP). The head's
  // input is sequence-split under SP: gathered first; its input gradient is reduced likewise.
  const ModelCosts costs = hand_made_costs();
  for (const bool sequence_parallel : {false, true}) {
    CAPTURE(sequence_parallel);
    const Collective reduction = sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce;
    ProgramWriter writer;
    LayerOps ops(writer, costs, ModelParallelGroups{tp_group, -1, 1, sequence_parallel});
    const OpId embedded = ops.embedding_forward("embedding.fwd", {});
    const OpId headed = ops.head_forward("head.fwd", {embedded});
    const OpId head_grad = ops.head_backward("head.bwd", {headed});
    ops.embedding_backward("embedding.bwd", {head_grad});
    const Program program = writer.take();
    // Walks the program in order, checking each op it expects and returning its id.
    OpId next = 0;
    const auto compute = [&](double flops, Phase phase, const std::vector<OpId>& deps) {
      check_compute(program.ops.at(next), flops, phase, deps);
      return next++;
    };
    const auto reduced = [&](OpId producer) {
      check_collective(program.ops.at(next), Stream::tp_comm, reduction, tp_group, layer_output_bytes, {producer});
      return next++;
    };
    const auto gathered = [&](OpId input) {
      if (!sequence_parallel)
        return input;
      check_collective(program.ops.at(next), Stream::tp_comm, Collective::all_gather, tp_group, layer_output_bytes,
                       {input});
      return next++;
    };
    const OpId lookup = compute(0, Phase::forward, {});
    CHECK(embedded == reduced(lookup));
    CHECK(headed == compute(1000, Phase::forward, {gathered(embedded)}));
    CHECK(head_grad == reduced(compute(2000, Phase::backward, {headed})));
    const OpId embedding_grad = compute(0, Phase::backward, {gathered(head_grad)});
    CHECK(program.ops.at(lookup).bytes == 50);
    CHECK(program.ops.at(embedding_grad).bytes == 60);
    CHECK(program.ops.size() == next);
  }
}

TEST_CASE("tp_comm_overlap runs each tensor-parallel collective in chunks beside the GEMM it feeds or follows") {
  // tp = 4 under sequence parallelism, with the hand-made parts above.
  const ModelCosts costs = hand_made_costs();
  const ModelParallelGroups overlap{tp_group, -1, 1, true, 4, true};
  const double chunk_bytes = layer_output_bytes / 4;  // the ring passes one rank's share per step

  // Forward, attention: the norm part (op 1), the rank's own QKV chunk (2), then three ring
  // steps, each passing on the chunk held (the own one first, then the one just received) and
  // computing the chunk received; between; four output-projection chunks, each reduce-scattered
  // (a quarter of the tensor) while the next computes; the part after the last reduce-scatter.
  const Emitted forward = emit(Pass::forward, overlap, costs);
  REQUIRE(forward.count() == 2 * 21);
  check_compute(forward.op(1), 0, Phase::forward, {forward.input});
  check_compute(forward.op(2), 10, Phase::forward, {1});
  OpId held = 1, computed = 2;
  for (int step = 0; step < 3; ++step) {
    const OpId send = 3 + 3 * step;
    CHECK(forward.op(send).kind == OpKind::send);
    CHECK(forward.op(send).peer == tp_next_slot);
    CHECK(forward.op(send).deps == std::vector<OpId>{held});
    CHECK(forward.op(send + 1).kind == OpKind::recv);
    CHECK(forward.op(send + 1).peer == tp_previous_slot);
    CHECK(forward.op(send + 1).tag == forward.op(send).tag);
    CHECK(forward.op(send).bytes == chunk_bytes);
    check_compute(forward.op(send + 2), 10, Phase::forward, {send + 1, computed});
    held = send + 1;
    computed = send + 2;
  }
  check_compute(forward.op(12), 30, Phase::forward, {11});
  for (int split = 0; split < 4; ++split) {
    const OpId chunk = 13 + 2 * split;
    check_compute(forward.op(chunk), 5, Phase::forward, {split == 0 ? OpId{12} : chunk - 2});
    check_collective(forward.op(chunk + 1), Stream::tp_comm, Collective::reduce_scatter, tp_group,
                     layer_output_bytes / 4, {chunk});
  }
  check_compute(forward.op(21), 10, Phase::forward, {20});
  check_compute(forward.op(22), 0, Phase::forward, {21});  // the MLP's norm part follows
  CHECK(forward.returned == 42);
  check_adds_up_to(forward, {300, 30});
  // Six ring messages in all, each tagged once.
  std::vector<int> tags;
  for (const Op& op : forward.program.ops)
    if (op.kind == OpKind::send)
      tags.push_back(op.tag);
  CHECK(tags == std::vector<int>{0, 1, 2, 3, 4, 5});

  // Backward, MLP first: the part after FC2 (op 1), FC2's dgrad over the gathered output
  // gradient in four ring-exchanged chunks (2 to 11), FC2's wgrad (12), the activation's backward
  // (13); then FC1's input all-gathered again (14) beside FC1's dgrad (15), whose output is
  // reduce-scattered (16) beside FC1's wgrad (17, which needs the gathered input); the norm part
  // (18) needs both.
  const Emitted backward = emit(Pass::backward, overlap, costs);
  REQUIRE(backward.count() == 2 * 18);
  check_compute(backward.op(1), 0, Phase::backward, {backward.input});
  check_compute(backward.op(2), 25, Phase::backward, {1});
  check_compute(backward.op(11), 25, Phase::backward, {10, 8});
  check_compute(backward.op(12), 100, Phase::backward, {11});
  check_compute(backward.op(13), 40, Phase::backward, {12});
  check_collective(backward.op(14), Stream::tp_comm, Collective::all_gather, tp_group, layer_output_bytes, {13});
  check_compute(backward.op(15), 80, Phase::backward, {13});
  check_collective(backward.op(16), Stream::tp_comm, Collective::reduce_scatter, tp_group, layer_output_bytes, {15});
  check_compute(backward.op(17), 80, Phase::backward, {15, 14});
  check_compute(backward.op(18), 0, Phase::backward, {17, 16});
  check_compute(backward.op(19), 10, Phase::backward, {18});  // the attention's part after its projection
  CHECK(backward.returned == 36);
  check_adds_up_to(backward, {600, 90});
}
