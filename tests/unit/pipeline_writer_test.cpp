// The pipeline writer (build_pipeline_program) on a small GPT, its inputs built as
// build_workload builds them: the order of each stage's forward and backward steps under GPipe,
// 1F1B and interleaved 1F1B, the sends and receives between neighbouring stages, the bytes of a
// stage boundary, the activations held at the peak, and the gradient reduction after each
// chunk's last backward.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "layout/layout.hpp"
#include "memory/memory_tracker.hpp"
#include "model/costs.hpp"
#include "program/model_states.hpp"
#include "program/pipeline_schedule.hpp"
#include "program/pipeline_writer.hpp"
#include "program/program_writer.hpp"
#include "program/recompute_plan.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {

// A GPT of L = 8 layers, h = 64, 4 heads, a padded vocabulary of V = 128 and 64 learned
// positions, untied (no embedding group between the first and last stages), with dropout.
ModelSpec small_gpt() {
  return parse_model(R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 8, "n_head": 4, "n_positions": 64,
                        "vocab_size": 128, "attn_pdrop": 0.1, "resid_pdrop": 0.1, "embd_pdrop": 0.1,
                        "tie_word_embeddings": false})",
                     "small.json", "small", 128);
}

// Micro-batches of b = 2 sequences of s = 32 tokens, bf16 with fp32 gradients, FlashAttention.
constexpr double b = 2, s = 32, h = 64, vocab = 128;
constexpr double sbh = s * b * h;

Scenario pipeline_scenario(Schedule schedule, int pp, int vpp, long long micro_batches) {
  Scenario scenario;
  scenario.schedule = schedule;
  scenario.pp = pp;
  scenario.vpp = vpp;
  scenario.grad_accum = micro_batches;
  scenario.micro_batch = static_cast<long long>(b);
  scenario.seq_len = static_cast<long long>(s);
  return scenario;
}

// The program of the rank at pipeline stage `stage` whose other coordinates are 0; `copies`: the
// rank is bound to a group summing copies' gradients (tied embedding, DualPipe's mirror).
Program stage_program(const Scenario& scenario, int stage, bool copies = false) {
  const ModelSpec model = small_gpt();
  const ModelCosts costs =
      compute_costs(model, scenario.micro_batch, scenario.seq_len, scenario.precision, scenario.grad_precision,
                    scenario.flash_attention, Sharding{scenario.tp, scenario.sp, scenario.cp});
  const ModelStatePlan states = plan_model_states(scenario, scenario.dp * scenario.cp);
  const Layout layout = layout_of(scenario);
  const LayoutGroups groups = groups_of(layout);
  const std::vector<long long> layers = layers_per_virtual_stage(scenario, model);
  const std::vector<long long> firsts = first_layer_of_virtual_stages(scenario, layers);
  std::vector<RecomputePlan> plans;
  for (int chunk = 0; chunk < scenario.vpp; ++chunk) {
    const auto vs = static_cast<std::size_t>(virtual_stage(scenario.schedule, scenario.pp, chunk, stage));
    plans.push_back(plan_recompute(scenario, costs.layers_from(firsts[vs], layers[vs]), 0));
  }
  const PipelinePlacement placement{&layout, &groups,
                                    std::vector<int>(static_cast<std::size_t>(layout.world()), copies ? 0 : -1),
                                    std::vector<RuntimeMemory>(static_cast<std::size_t>(layout.world()))};
  RankCoords coords;
  coords.pp = stage;
  return build_pipeline_program(scenario, model, costs, states, plans, placement, layout.rank_of(coords));
}

// The micro-batch and chunk a pipeline op works for, from its name (".mb3", ".mb3.c1").
std::string step_of(const Op& op) {
  static const std::regex step(R"(\.mb(\d+)(\.c\d+)?)");
  std::smatch match;
  return std::regex_search(op.name, match, step) ? match[1].str() + match[2].str() : "";
}

// The steps a program runs, in order: "F3" for micro-batch 3's forward, "B0.c1" for the backward
// of micro-batch 0 on chunk 1.
std::string steps_of(const Program& program) {
  std::vector<std::string> steps;
  for (const Op& op : program.ops) {
    if (op.kind != OpKind::compute || (op.phase != Phase::forward && op.phase != Phase::backward))
      continue;
    const std::string step = (op.phase == Phase::forward ? "F" : "B") + step_of(op);
    if (steps.empty() || steps.back() != step)
      steps.push_back(step);
  }
  std::string joined;
  for (const std::string& step : steps)
    joined += (joined.empty() ? "" : " ") + step;
  return joined;
}

struct Transfer {
  int tag;
  double bytes;
  bool operator<(const Transfer& other) const { return tag < other.tag; }
  bool operator==(const Transfer& other) const { return tag == other.tag && bytes == other.bytes; }
};

// The sends (or receives) of a program to (or from) one peer slot on one stream, by tag.
std::vector<Transfer> transfers(const Program& program, OpKind kind, int peer, Stream stream) {
  std::vector<Transfer> found;
  for (const Op& op : program.ops)
    if (op.kind == kind && op.peer == peer && op.stream == stream)
      found.push_back({op.tag, op.bytes});
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<Transfer> transfers(const Program& program, OpKind kind, int peer) {
  std::vector<Transfer> found;
  for (const Op& op : program.ops)
    if (op.kind == kind && op.peer == peer)
      found.push_back({op.tag, op.bytes});
  return found;
}

// One layer's activations with FlashAttention: Korthikanti et al. 2022, section 4.1, without the
// 5as^2b of the scores: attention 11 sbh (2-byte QKV input, Q, K, V and projection input, and
// the 1-byte dropout mask), MLP 19 sbh (inputs 2 + 8 + 8, mask 1), the two LayerNorms 4 sbh.
constexpr double layer_activations = 34 * sbh;
// The first stage also keeps the embedding's dropout mask, 1 byte per element: sbh.
constexpr double embedding_activations = sbh;
// The last stage keeps the final norm's and the output projection's 2-byte inputs (4 sbh) and
// the fp32 logits of the loss (4 b s V).
constexpr double head_activations = 4 * sbh + 4 * b * s * vocab;

// p = 2, v = 2, m = 4, dp = 2, ZeRO-1 with Megatron's overlap_grad_reduce and overlap_param_gather.
Scenario overlapped_gathers(Schedule schedule) {
  Scenario scenario = pipeline_scenario(schedule, 2, 2, 4);
  scenario.dp = 2;
  scenario.zero = 1;
  scenario.overlap_grad_reduce = true;
  scenario.overlap_param_gather = true;
  return scenario;
}

// Whether the op named `name` waits for `op`.
bool waits_for(const Program& program, const std::string& name, OpId op) {
  const std::vector<OpId> deps = test::op_named(program, name).deps;
  return std::find(deps.begin(), deps.end(), op) != deps.end();
}

// The op of the optimizer step (0 if none).
OpId optimizer_step(const Program& program) {
  for (OpId id = 0; id < program.ops.size(); ++id)
    if (program.ops[id].kind == OpKind::compute && program.ops[id].phase == Phase::optimizer)
      return id;
  return 0;
}

double activations_at_peak(const Program& program) {
  return memory_in_program_order(program).gpu().at_peak[static_cast<int>(MemCategory::activations)];
}

} // namespace

TEST_CASE("GPipe runs every stage's forwards, then its backwards, in micro-batch order") {
  // Huang et al. 2019: the whole mini-batch's forwards flow through the pipeline before any backward.
  const Scenario scenario = pipeline_scenario(Schedule::gpipe, 4, 1, 4);
  for (int stage = 0; stage < 4; ++stage) {
    CAPTURE(stage);
    CHECK(steps_of(stage_program(scenario, stage)) == "F0 F1 F2 F3 B0 B1 B2 B3");
  }
}

TEST_CASE("1F1B warms stage s up with p - s - 1 forwards, then alternates, then drains") {
  // Narayanan et al. 2021 (PipeDream-Flush), p = 4, m = 8: stage s runs p - s - 1 warm-up
  // forwards, then m - (p - s - 1) pairs of one forward and one backward, then the
  // remaining p - s - 1 backwards.
  const Scenario scenario = pipeline_scenario(Schedule::one_f_one_b, 4, 1, 8);
  CHECK(steps_of(stage_program(scenario, 0)) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  CHECK(steps_of(stage_program(scenario, 1)) == "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  CHECK(steps_of(stage_program(scenario, 2)) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7");
  CHECK(steps_of(stage_program(scenario, 3)) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
}

TEST_CASE("interleaved 1F1B sends micro-batches through the chunks in groups of p") {
  // Megatron-LM's interleaved schedule (Narayanan et al. 2021, section 2.2), p = 2, v = 2, m = 4:
  // forward k runs micro-batch (k / pv) p + k mod p on chunk (k mod pv) / p, backward k the same
  // micro-batch on chunk v - 1 - that; stage s warms up with (p - s - 1) x 2 + (v - 1) x p
  // forwards: 4 on stage 0, 2 on stage 1, of the m v = 8.
  const Scenario scenario = pipeline_scenario(Schedule::interleaved, 2, 2, 4);
  CHECK(steps_of(stage_program(scenario, 0)) ==
        "F0.c0 F1.c0 F0.c1 F1.c1 F2.c0 B0.c1 F3.c0 B1.c1 F2.c1 B0.c0 F3.c1 B1.c0 B2.c1 B3.c1 B2.c0 B3.c0");
  CHECK(steps_of(stage_program(scenario, 1)) ==
        "F0.c0 F1.c0 F0.c1 B0.c1 F1.c1 B1.c1 F2.c0 B0.c0 F3.c0 B1.c0 F2.c1 B2.c1 F3.c1 B3.c1 B2.c0 B3.c0");
}

TEST_CASE("each activation sent to the next stage and each gradient sent back is received there with its tag") {
  // 1F1B, p = 4, m = 4: every stage but the last sends the next one m activations on the
  // pipeline stream; every stage but the first sends the previous one m gradients on the
  // backward stream. Interleaved, p = 2, v = 2, m = 4: the stages form a ring (the last stage's
  // chunk 0 feeds the first stage's chunk 1); stage 0 sends activations from both chunks (virtual
  // stages 0 and 2), stage 1 from chunk 0 only (virtual stage 3 is the last).
  struct Case {
    Scenario scenario;
    std::vector<std::size_t> activations_sent;  // per stage
    std::vector<std::size_t> gradients_sent;
  };
  const std::vector<Case> cases = {
      {pipeline_scenario(Schedule::one_f_one_b, 4, 1, 4), {4, 4, 4, 0}, {0, 4, 4, 4}},
      {pipeline_scenario(Schedule::interleaved, 2, 2, 4), {8, 4}, {4, 8}},
  };
  for (const Case& c : cases) {
    const int p = c.scenario.pp;
    CAPTURE(c.scenario.vpp);
    std::vector<Program> programs;
    for (int stage = 0; stage < p; ++stage)
      programs.push_back(stage_program(c.scenario, stage));
    for (int stage = 0; stage < p; ++stage) {
      CAPTURE(stage);
      const Program& here = programs[stage];
      const Program& next = programs[(stage + 1) % p];
      const std::vector<Transfer> activations = transfers(here, OpKind::send, next_stage_slot, Stream::pp_comm);
      const std::vector<Transfer> gradients = transfers(here, OpKind::send, previous_stage_slot, Stream::pp_bwd);
      CHECK(activations.size() == c.activations_sent[stage]);
      CHECK(gradients.size() == c.gradients_sent[stage]);
      CHECK(activations == transfers(next, OpKind::recv, previous_stage_slot, Stream::pp_comm));
      CHECK(transfers(next, OpKind::send, previous_stage_slot, Stream::pp_bwd) ==
            transfers(here, OpKind::recv, next_stage_slot, Stream::pp_bwd));
      // Nothing else travels between the stages, and no two messages share a tag.
      CHECK(transfers(here, OpKind::send, next_stage_slot).size() == activations.size());
      CHECK(transfers(here, OpKind::send, previous_stage_slot).size() == gradients.size());
      for (std::size_t i = 1; i < activations.size(); ++i)
        CHECK(activations[i - 1].tag != activations[i].tag);
      for (std::size_t i = 1; i < gradients.size(); ++i)
        CHECK(gradients[i - 1].tag != gradients[i].tag);
    }
  }
}

TEST_CASE("a stage boundary carries the hidden states, b x s x h x 2 bytes, split over tp under SP") {
  // The activation between two stages is the layer output of b = 2 sequences of s = 32 tokens of
  // h = 64 bf16 values: 8192 bytes, and its gradient the same. Tensor-parallel ranks each hold it
  // whole; under sequence parallelism each holds (and sends) its 1/t of the sequence.
  for (const bool sequence_parallel : {false, true}) {
    CAPTURE(sequence_parallel);
    Scenario scenario = pipeline_scenario(Schedule::one_f_one_b, 2, 1, 2);
    scenario.tp = 2;
    scenario.sp = sequence_parallel;
    const double expected = b * s * h * 2 / (sequence_parallel ? 2 : 1);
    for (int stage = 0; stage < 2; ++stage) {
      CAPTURE(stage);
      int transfers_seen = 0;
      for (const Op& op : stage_program(scenario, stage).ops)
        if (op.kind == OpKind::send || op.kind == OpKind::recv) {
          CHECK(op.bytes == expected);
          ++transfers_seen;
        }
      CHECK(transfers_seen == 4);  // two micro-batches: their activations one way, gradients the other
    }
  }
}

TEST_CASE("at its peak a stage holds the activations of the micro-batches the schedule keeps in flight") {
  // Two layers per stage (8 over p = 4). 1F1B, m = 8: stage s holds p - s micro-batches when its
  // first backward starts (Narayanan et al. 2021); GPipe holds all m.
  const double two_layers = 2 * layer_activations;
  const Scenario one_f_one_b = pipeline_scenario(Schedule::one_f_one_b, 4, 1, 8);
  CHECK(activations_at_peak(stage_program(one_f_one_b, 0)) == doctest::Approx(4 * (two_layers + embedding_activations)));
  CHECK(activations_at_peak(stage_program(one_f_one_b, 1)) == doctest::Approx(3 * two_layers));
  CHECK(activations_at_peak(stage_program(one_f_one_b, 2)) == doctest::Approx(2 * two_layers));
  CHECK(activations_at_peak(stage_program(one_f_one_b, 3)) == doctest::Approx(1 * (two_layers + head_activations)));
  const Scenario gpipe = pipeline_scenario(Schedule::gpipe, 4, 1, 8);
  CHECK(activations_at_peak(stage_program(gpipe, 0)) == doctest::Approx(8 * (two_layers + embedding_activations)));
  CHECK(activations_at_peak(stage_program(gpipe, 2)) == doctest::Approx(8 * two_layers));

  // Interleaved, p = 2, v = 2, m = 4 (two layers per chunk): stage 0 warms up with 4 chunk
  // forwards and holds 5 once the first steady forward is done. Its steps (see the schedule test)
  // hold {0c0 1c0 0c1 1c1 2c0}, then {0c0 1c0 1c1 2c0 3c0} and {0c0 1c0 2c0 3c0 2c1}: five
  // chunks each time, at most four of them chunk 0, which keeps the embedding's mask.
  const Scenario interleaved = pipeline_scenario(Schedule::interleaved, 2, 2, 4);
  CHECK(activations_at_peak(stage_program(interleaved, 0)) ==
        doctest::Approx(5 * two_layers + 4 * embedding_activations));
  // Stage 1 holds at most 3 chunks ({0c0 1c0 0c1} and alike), one of them its chunk 1, the last
  // virtual stage with the head.
  CHECK(activations_at_peak(stage_program(interleaved, 1)) == doctest::Approx(3 * two_layers + head_activations));

  // ZB-H1, p = 2, m = 4 (four layers per stage): the last stage runs F(x), B(x), W(x - 1) in slot
  // x (Qi et al. 2024), so after F(x) it holds x's activations and what x - 1's W needs. W needs
  // each linear layer's input and output gradient (2 bytes each): inputs h (QKV), h (projection),
  // h (FC1), 4h (FC2); output gradients 3h, h, 4h, h: 16 sbh per layer; the head's, its input h
  // and the logits' gradient V: 2 sbh + 2 b s V.
  const double four_layers = 4 * layer_activations;
  const double held_for_w = 4 * 32 * sbh + 2 * sbh + 2 * b * s * vocab;
  const Scenario zb_h1 = pipeline_scenario(Schedule::zb_h1, 2, 1, 4);
  CHECK(activations_at_peak(stage_program(zb_h1, 1)) == doctest::Approx(four_layers + head_activations + held_for_w));
  // Its first stage runs each W right after its B: 1F1B's p micro-batches.
  CHECK(activations_at_peak(stage_program(zb_h1, 0)) ==
        doctest::Approx(2 * (four_layers + embedding_activations)));
}

TEST_CASE("each chunk's gradients are reduced over data parallelism once its last backward is done") {
  // Interleaved, p = 2, v = 2, m = 4, dp = 2. Stage 0 holds virtual stages 0 (embedding + 2
  // layers) and 2 (2 layers); stage 1 holds 1 (2 layers) and 3 (2 layers + final norm + output
  // layer). A GPT layer has 12h^2 + 13h parameters (QKV, projection, MLP, their biases, two
  // LayerNorms); the embedding V h + 64 h (learned positions), the head 2h + V h. Gradients are
  // fp32: 4 bytes each, one bucket (25 MiB) per chunk. ZeRO-1 (Megatron's distributed optimizer)
  // reduce-scatters them instead of all-reducing, and all-gathers the updated parameters.
  const double layer = 12 * h * h + 13 * h;
  const double embedding = vocab * h + 64 * h, head = 2 * h + vocab * h;
  const std::vector<std::vector<double>> chunk_parameters = {{2 * layer + embedding, 2 * layer},
                                                             {2 * layer, 2 * layer + head}};
  for (const int zero : {0, 1}) {
    CAPTURE(zero);
    Scenario scenario = pipeline_scenario(Schedule::interleaved, 2, 2, 4);
    scenario.dp = 2;
    scenario.zero = zero;
    const Collective reduction = zero == 0 ? Collective::all_reduce : Collective::reduce_scatter;
    for (int stage = 0; stage < 2; ++stage) {
      CAPTURE(stage);
      const Program program = stage_program(scenario, stage);
      std::vector<OpId> reductions;
      const OpId step = optimizer_step(program);
      for (OpId id = 0; id < program.ops.size(); ++id) {
        const Op& op = program.ops[id];
        if (op.kind != OpKind::collective || op.stream != Stream::dp_comm || op.collective == Collective::all_gather)
          continue;
        CHECK(op.collective == reduction);
        reductions.push_back(id);
      }
      REQUIRE(reductions.size() == 2);  // one per chunk
      for (const OpId id : reductions) {
        const Op& op = program.ops[id];
        // It follows the last op of micro-batch 3's backward of its chunk, and is issued before
        // any later compute, so that it overlaps the backwards still to come.
        REQUIRE(op.deps.size() == 1);
        const OpId producer = op.deps[0];
        const Op& last = program.ops[producer];
        CHECK(last.kind == OpKind::compute);
        CHECK(last.phase == Phase::backward);
        const std::string chunk = step_of(last).substr(1);
        CHECK(step_of(last).front() == '3');
        for (OpId later = producer + 1; later < program.ops.size(); ++later)
          if (program.ops[later].kind == OpKind::compute && program.ops[later].phase == Phase::backward)
            CHECK_MESSAGE(step_of(program.ops[later]).substr(1) != chunk, program.ops[later].name);
        for (OpId between = producer + 1; between < id; ++between)
          CHECK(program.ops[between].kind != OpKind::compute);
        const int c = chunk == ".c0" ? 0 : 1;
        CHECK(op.bytes == doctest::Approx(4 * chunk_parameters[stage][c]));
      }
      // The optimizer step waits for both reductions.
      REQUIRE(step > 0);
      CHECK(program.ops[step].deps == reductions);
      // ZeRO-1: the updated halves are all-gathered after the step, in bf16: 2 bytes per parameter of the stage.
      double gathered = 0;
      for (const Op& op : program.ops)
        if (op.kind == OpKind::collective && op.collective == Collective::all_gather) {
          CHECK(op.deps == std::vector<OpId>{step});
          gathered += op.bytes;
        }
      CHECK(gathered ==
            doctest::Approx(zero == 1 ? 2 * (chunk_parameters[stage][0] + chunk_parameters[stage][1]) : 0.0));
    }
  }
}

TEST_CASE("DualPipe's ranks hold two copies of the model's stages and sum their gradients with their mirror") {
  // p = 2, m = 4, dp = 2: micro-batches 0 and 1 go down (rank 0's chunk 0 is stage 0: embedding
  // + 4 layers; rank 1's is stage 1: 4 layers + final norm + output layer), 2 and 3 go up, each
  // rank's chunk 1 being the other stage: both ranks hold the whole model, each stage once going
  // down on one rank and once going up on the other. Parameters as in the interleaved test above.
  const double layer = 12 * h * h + 13 * h;
  const double embedding = vocab * h + 64 * h, head = 2 * h + vocab * h;
  const double first_stage = embedding + 4 * layer, last_stage = 4 * layer + head;
  const std::vector<std::vector<double>> chunk_parameters = {{first_stage, last_stage}, {last_stage, first_stage}};
  for (const int zero : {0, 1}) {
    CAPTURE(zero);
    Scenario scenario = pipeline_scenario(Schedule::dualpipe, 2, 2, 4);
    scenario.dp = 2;
    scenario.zero = zero;
    std::vector<std::vector<double>> mirror_bytes(2);
    for (int stage = 0; stage < 2; ++stage) {
      CAPTURE(stage);
      const Program program = stage_program(scenario, stage, true);
      // Both copies' weights, bf16: 2 bytes per parameter of the whole model.
      CHECK(memory_in_program_order(program).gpu().at_peak[static_cast<int>(MemCategory::weights)] ==
            doctest::Approx(2 * (first_stage + last_stage)));
      std::map<OpId, int> reduced_chunk;  // each chunk's data-parallel reduction
      std::vector<OpId> mirror_sums;
      for (OpId id = 0; id < program.ops.size(); ++id) {
        const Op& op = program.ops[id];
        if (op.kind != OpKind::collective || op.collective == Collective::all_gather)
          continue;
        if (op.group == copies_slot) {
          mirror_sums.push_back(id);
          continue;
        }
        CHECK(op.group == gradient_slot);
        reduced_chunk[id] = op.name.find(".c0") != std::string::npos ? 0 : 1;
        CHECK(op.bytes == doctest::Approx(4 * chunk_parameters[stage][static_cast<std::size_t>(reduced_chunk[id])]));
      }
      REQUIRE(reduced_chunk.size() == 2);
      REQUIRE(mirror_sums.size() == 2);
      // Each chunk's reduced gradients (under ZeRO-1 the rank's half) summed with the mirror's
      // copy right after its reduction, all-reduced over the pair; the step waits for the sums.
      for (const OpId id : mirror_sums) {
        const Op& op = program.ops[id];
        CHECK(op.collective == Collective::all_reduce);
        REQUIRE(op.deps.size() == 1);
        REQUIRE(reduced_chunk.count(op.deps[0]) == 1);
        const double chunk = chunk_parameters[stage][static_cast<std::size_t>(reduced_chunk[op.deps[0]])];
        CHECK(op.bytes == doctest::Approx(4 * chunk / (zero == 1 ? 2 : 1)));
        mirror_bytes[static_cast<std::size_t>(stage)].push_back(op.bytes);
      }
      const OpId step = optimizer_step(program);
      REQUIRE(step > 0);
      CHECK(program.ops[step].deps == mirror_sums);
    }
    // The two mirror ranks issue their sums in the same order, the same stage each time, as
    // collectives on one communicator must.
    CHECK(mirror_bytes[0] == mirror_bytes[1]);
  }
}

TEST_CASE("under a split backward the gradients are reduced after the last weight-gradient pass") {
  // ZB-H1, p = 2, m = 4, dp = 2: the last stage's W of micro-batch 3 is its last pass; its
  // gradients are final only then, however early the B passes ended.
  Scenario scenario = pipeline_scenario(Schedule::zb_h1, 2, 1, 4);
  scenario.dp = 2;
  const Program program = stage_program(scenario, 1);
  std::vector<OpId> reductions;
  for (OpId id = 0; id < program.ops.size(); ++id)
    if (program.ops[id].kind == OpKind::collective && program.ops[id].stream == Stream::dp_comm)
      reductions.push_back(id);
  REQUIRE(reductions.size() == 1);
  const Op& reduction = program.ops[reductions[0]];
  REQUIRE(reduction.deps.size() == 1);
  const Op& producer = program.ops[reduction.deps[0]];
  CHECK(producer.phase == Phase::weight_gradient);
  CHECK(step_of(producer) == "3");
  for (OpId later = reduction.deps[0] + 1; later < program.ops.size(); ++later)
    CHECK_MESSAGE(program.ops[later].phase != Phase::weight_gradient, program.ops[later].name);
}

TEST_CASE("overlapped parameter all-gathers are cut per chunk and waited for by the chunk's first forward") {
  // Interleaved, p = 2, v = 2, dp = 2, ZeRO-1 with Megatron's overlap_param_gather, buckets of
  // 200,000 bytes of fp32 gradients = 50,000 parameters. Stage 1 holds virtual stage 1 (layers 2
  // and 3, 49,984 parameters each: 99,968) and virtual stage 3 (layers 6 and 7, then the head's
  // 2h + V h = 8,320: 108,288). Cut in backward order, chunk 0's buckets are gathered as 49,968
  // then 50,000 parameters, chunk 1's as 8,288, 50,000, 50,000, in bf16 (2 bytes each). Layer 2
  // ends 49,984 parameters into the chunk, past the first bucket gathered (49,968): it waits for
  // chunk 0's second; layer 6 ends 58,304 before chunk 1's end, in its backward bucket 1 (gathered
  // second); layer 7 and the head end in backward bucket 0, gathered third.
  Scenario scenario = overlapped_gathers(Schedule::interleaved);
  scenario.bucket_bytes = 200'000;
  const Program program = stage_program(scenario, 1);
  std::map<std::string, std::vector<OpId>> gathers;  // by chunk
  std::map<std::string, std::vector<double>> bytes;
  for (OpId id = 0; id < program.ops.size(); ++id) {
    const Op& op = program.ops[id];
    if (op.kind != OpKind::collective || op.collective != Collective::all_gather)
      continue;
    CHECK(op.deps.empty());  // from the step's start, not after the optimizer
    const std::string chunk = op.name.substr(std::string("param-allgather.").size(), 2);
    gathers[chunk].push_back(id);
    bytes[chunk].push_back(op.bytes);
  }
  CHECK(bytes["c0"] == std::vector<double>{2 * 49'968, 2 * 50'000});
  CHECK(bytes["c1"] == std::vector<double>{2 * 8'288, 2 * 50'000, 2 * 50'000});
  const auto waits = [&](const std::string& name, OpId gather) { return waits_for(program, name, gather); };
  CHECK(waits("L2.fwd.mb0.c0", gathers["c0"][1]));
  CHECK(waits("L3.fwd.mb0.c0", gathers["c0"][1]));
  CHECK(waits("L6.fwd.mb0.c1", gathers["c1"][1]));
  CHECK(waits("L7.fwd.mb0.c1", gathers["c1"][2]));
  CHECK(waits("head.fwd.mb0.c1", gathers["c1"][2]));
  // Later micro-batches find the parameters there.
  for (const OpId gather : gathers["c1"])
    CHECK_FALSE(waits("L6.fwd.mb1.c1", gather));
}

TEST_CASE("under DualPipe each chunk's first micro-batch waits for its overlapped parameter all-gathers") {
  // p = 2, m = 4, dp = 2, ZeRO-1, overlap_param_gather: rank 0's chunk 0 first runs micro-batch
  // 0 (going down), its chunk 1 micro-batch 2 (the first going up); every gather is waited for,
  // and each rank gathers its chunks in the order it first runs them.
  const Program program = stage_program(overlapped_gathers(Schedule::dualpipe), 0, true);
  std::vector<OpId> gathers;
  for (OpId id = 0; id < program.ops.size(); ++id)
    if (program.ops[id].kind == OpKind::collective && program.ops[id].collective == Collective::all_gather)
      gathers.push_back(id);
  REQUIRE(gathers.size() == 2);  // one bucket per chunk
  CHECK(waits_for(program, "embedding.fwd.mb0.c0", gathers[0]));
  CHECK(waits_for(program, "L4.fwd.mb2.c1", gathers[1]));
  CHECK_FALSE(waits_for(program, "L4.fwd.mb3.c1", gathers[1]));
  // Rank 1, in the second half, runs its chunk 1 (the first stage going up) first: its gathers
  // come first.
  const Program last = stage_program(overlapped_gathers(Schedule::dualpipe), 1, true);
  std::vector<std::string> gathered;
  for (const Op& op : last.ops)
    if (op.kind == OpKind::collective && op.collective == Collective::all_gather)
      gathered.push_back(op.name.substr(0, std::string("param-allgather.c1").size()));
  CHECK(gathered == std::vector<std::string>{"param-allgather.c1", "param-allgather.c0"});
}

TEST_CASE("with scatter/gather each tp rank sends 1/tp of a boundary and the receiving stage all-gathers it over tp") {
  // Narayanan et al. 2021, section 4.1: without SP the tp ranks of a stage hold the same boundary
  // tensor (8192 bytes here); each sends 8192 / 2 bytes to its peer and the receiving stage
  // all-gathers the 8192 bytes over its tp group before the tensor is used.
  Scenario scenario = pipeline_scenario(Schedule::one_f_one_b, 2, 1, 2);
  scenario.tp = 2;
  scenario.pp_scatter_gather = true;
  const double whole = b * s * h * 2;
  for (int stage = 0; stage < 2; ++stage) {
    CAPTURE(stage);
    const Program program = stage_program(scenario, stage);
    int receives = 0;
    for (OpId id = 0; id < program.ops.size(); ++id) {
      const Op& op = program.ops[id];
      if (op.kind == OpKind::send || op.kind == OpKind::recv)
        CHECK(op.bytes == whole / 2);
      if (op.kind != OpKind::recv)
        continue;
      ++receives;
      // The next op gathers what was received, and waits for it.
      REQUIRE(id + 1 < program.ops.size());
      const Op& gather = program.ops[id + 1];
      CHECK(gather.kind == OpKind::collective);
      CHECK(gather.collective == Collective::all_gather);
      CHECK(gather.group == tp_slot);
      CHECK(gather.bytes == whole);
      CHECK(std::find(gather.deps.begin(), gather.deps.end(), id) != gather.deps.end());
    }
    CHECK(receives == 2);  // stage 1 receives two activations, stage 0 two gradients
  }
}

TEST_CASE("the first and last pipeline ranks take their own layer counts and the others share the rest") {
  // Megatron-Core's --decoder-first/last-pipeline-num-layers (get_num_layers_to_build): the
  // small GPT's 8 layers over pp = 3 with 2 on each end leave 4 to the middle rank; over pp = 2
  // with vpp = 2 and 2 on the first rank, the last rank takes 6, each rank's chunks half of its
  // layers (virtual stages in the order chunk x pp + rank).
  const ModelSpec model = small_gpt();
  Scenario ends = pipeline_scenario(Schedule::one_f_one_b, 3, 1, 3);
  ends.first_stage_layers = 2;
  ends.last_stage_layers = 2;
  CHECK(layers_per_virtual_stage(ends, model) == std::vector<long long>{2, 4, 2});
  Scenario interleaved = pipeline_scenario(Schedule::interleaved, 2, 2, 4);
  interleaved.first_stage_layers = 2;
  CHECK(layers_per_virtual_stage(interleaved, model) == std::vector<long long>{1, 3, 1, 3});
  // 3 on the first rank leave 5 to two others: refused, as is a rank whose layers its chunks cannot share.
  Scenario uneven = pipeline_scenario(Schedule::one_f_one_b, 3, 1, 3);
  uneven.first_stage_layers = 3;
  CHECK_THROWS_WITH_AS(layers_per_virtual_stage(uneven, model),
                       doctest::Contains("leave 5 of model small's 8 layers to 2 other pipeline ranks"), InputError);
  interleaved.first_stage_layers = 3;
  interleaved.last_stage_layers = 5;
  CHECK_THROWS_WITH_AS(layers_per_virtual_stage(interleaved, model),
                       doctest::Contains("pipeline rank 0 has 3 layers, not divisible by vpp = 2"), InputError);
  // The stages' programs hold those layers: the middle rank of the first case runs L2 to L5.
  const Program middle = stage_program(ends, 1);
  CHECK(std::any_of(middle.ops.begin(), middle.ops.end(), [](const Op& op) { return op.name.rfind("L5.fwd", 0) == 0; }));
  CHECK(std::none_of(middle.ops.begin(), middle.ops.end(), [](const Op& op) { return op.name.rfind("L6.fwd", 0) == 0; }));
}

TEST_CASE("where ZB-V's V turns, a chunk waits for the other chunk's pass on the same rank") {
  // p = 2, the small GPT's 8 layers in 4 virtual stages of 2: rank 1 holds virtual stages 1
  // (layers 2-3, chunk 0) and 2 (layers 4-5, chunk 1). Nothing travels between them, yet chunk 1's
  // forward needs chunk 0's output, which under tp (without SP) its all-reduce completes on the
  // tp stream; and chunk 0's input gradients need chunk 1's.
  Scenario scenario = pipeline_scenario(Schedule::zb_v, 2, 2, 4);
  scenario.tp = 2;
  const Program program = stage_program(scenario, 1);
  const auto id_of = [&](const std::string& name) { return test::op_id_named(program, name); };
  const Op& chunk1_forward = program.ops[id_of("L4.fwd.mb0.c1.attn")];
  CHECK(chunk1_forward.deps == std::vector<OpId>{id_of("L3.fwd.mb0.c0.mlp.tp-allreduce")});
  // Chunk 1's input gradients end with layer 4's attention block; chunk 0's begin with layer 3.
  const OpId chunk1_input_gradients = id_of("L4.bwd-input.mb0.c1.attn.before");
  const Op& chunk0_backward = program.ops[id_of("L3.bwd-input.mb0.c0.mlp.to-column")];
  CHECK(chunk0_backward.deps == std::vector<OpId>{chunk1_input_gradients});
  // No transfer at the turn: rank 1 sends activations only to rank 0 (chunk 1's forward output)
  // and gradients only to rank 0 (chunk 0's input gradients).
  for (const Op& op : program.ops)
    if (op.kind == OpKind::send)
      CHECK(op.peer == previous_stage_slot);
}

TEST_CASE("DualPipeV's overlapped pairs of a dense model run forward then backward, once both inputs are in") {
  // p = 2, m = 4, rank 1 (virtual stages 1 and 2, where the V turns). Without an
  // expert all-to-all to hide, a pair's forward runs before its backward, as without the overlap;
  // everything on the one compute stream after a pair-wait that waits for both inputs.
  Scenario scenario = pipeline_scenario(Schedule::dualpipev, 2, 2, 4);
  scenario.overlap_pairs = true;
  const Program paired = stage_program(scenario, 1);
  scenario.overlap_pairs = false;
  const Program apart = stage_program(scenario, 1);
  CHECK(steps_of(paired) == steps_of(apart));
  int pairs = 0, received = 0;
  for (const Op& op : paired.ops) {
    if (op.kind == OpKind::compute)
      CHECK(op.stream == Stream::compute);
    if (op.name.rfind("pair-wait", 0) != 0)
      continue;
    ++pairs;
    std::set<std::string> inputs;
    for (const OpId dep : op.deps)
      inputs.insert(paired.ops[dep].name.substr(0, paired.ops[dep].name.find(".mb")));
    // Received, or at the V's turn this rank's own chunk 0 output (its last layer, L3).
    CAPTURE(op.name);
    if (inputs == std::set<std::string>{"recv.act", "recv.grad"})
      ++received;
    else
      CHECK(inputs == std::set<std::string>{"L3.fwd"});
  }
  CHECK(received > 0);
  // One pair-wait per backward the schedule runs beside a forward.
  long long beside = 0;
  for (const PipelineStep& step : pipeline_schedule(Schedule::dualpipev, 2, 2, 4, 1, 0))
    beside += step.beside_previous ? 1 : 0;
  CHECK(beside > 0);
  CHECK(pairs == beside);
}

TEST_CASE("interleaving a pair cuts each pass after its expert exchanges and keeps every dep on the same op") {
  // Forward: f0, its exchange fx, f1 (pieces [f0 fx] [f1]); backward: b0, bx, b1, DeepEP's two legs
  // by (rail) and bz (node), b2 (pieces [b0 bx] [b1 by bz] [b2]). The backward's first piece ends
  // in an exchange: it leads; then the pass with the smaller share taken (ties to the leader):
  // B 1/3 | F 0/2 -> F; B 1/3 < F 1/2 -> B; F 1/2 < B 2/3 -> F; then the rest of B.
  ProgramWriter w;
  const OpId before = w.compute("before", Work{}, Phase::other);
  const auto first = static_cast<OpId>(w.size());
  const OpId f0 = w.compute("f0", Work{}, Phase::forward, {before});
  const OpId fx = w.all_to_all(Stream::ep_comm, 0, 8, -1, "fx", {f0});
  const OpId f1 = w.compute("f1", Work{}, Phase::forward, {fx});
  const auto second = static_cast<OpId>(w.size());
  const OpId b0 = w.compute("b0", Work{}, Phase::backward, {before});
  const OpId bx = w.all_to_all(Stream::ep_comm, 0, 8, -1, "bx", {b0});
  const OpId b1 = w.compute("b1", Work{}, Phase::backward, {bx});
  const OpId by = w.all_to_all(Stream::ep_rail, 1, 8, -1, "by", {b1});
  const OpId bz = w.all_to_all(Stream::ep_comm, 0, 8, -1, "bz", {b1});
  const OpId b2 = w.compute("b2", Work{}, Phase::backward, {by, bz});
  w.interleave(first, second);
  w.compute("after", Work{}, Phase::other, {f1, b2});
  const Program program = w.take();
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> waits;
  for (const Op& op : program.ops) {
    order.push_back(op.name);
    for (const OpId dep : op.deps)
      waits[op.name].push_back(program.ops[dep].name);
  }
  CHECK(order == std::vector<std::string>{"before", "b0", "bx", "f0", "fx", "b1", "by", "bz", "f1", "b2", "after"});
  CHECK(waits["f0"] == std::vector<std::string>{"before"});
  CHECK(waits["b1"] == std::vector<std::string>{"bx"});
  CHECK(waits["b2"] == std::vector<std::string>{"by", "bz"});
  CHECK(waits["after"] == std::vector<std::string>{"f1", "b2"});
  // A backward waiting for its own pair's forward is a writer's bug.
  ProgramWriter wrong;
  const auto start = static_cast<OpId>(wrong.size());
  const OpId forward = wrong.compute("f", Work{}, Phase::forward);
  const auto backward = static_cast<OpId>(wrong.size());
  wrong.compute("b", Work{}, Phase::backward, {forward});
  wrong.interleave(start, backward);
  CHECK_THROWS_AS(wrong.take(), std::logic_error);
}
