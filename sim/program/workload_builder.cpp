#include "program/workload_builder.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "model/costs.hpp"
#include "model/routing.hpp"
#include "program/data_parallel_writer.hpp"
#include "program/pipeline_writer.hpp"
#include "program/pipeline_schedule.hpp"
#include "program/runtime_memory.hpp"

namespace trainsim {
namespace {

// Expert parallelism needs experts to split; a mixture's MLP is not simulated with what rewrites
// a dense MLP's parts (op-level recompute, the tp overlap) or with a shared
// expert under tensor parallelism without expert parallelism (run as one dense MLP there, its own
// tp collectives are not written).
// A routing file's rows: one per expert layer (or one for all), a count per expert, none more
// than a top-k-th of the row (a token's copies go to different experts).
void check_routing_file(const ExpertRouting& routing, const ModelSpec& model) {
  if (routing.layer_loads.empty())
    return;
  const std::string where = routing.file.string() + ": ";
  const long long expert_layers = model.layers - static_cast<long long>(model.dense_layers.size());
  const auto rows = static_cast<long long>(routing.layer_loads.size());
  if (rows != 1 && rows != expert_layers)
    throw InputError(where + std::to_string(rows) + " rows; model " + model.name + " has " +
                     std::to_string(expert_layers) + " expert layers; accepted: a row per expert layer, or one for all");
  for (std::size_t row = 0; row < routing.layer_loads.size(); ++row) {
    const std::vector<double>& counts = routing.layer_loads[row];
    const std::string which = where + "row " + std::to_string(row + 1) + ": ";
    if (static_cast<long long>(counts.size()) != model.experts)
      throw InputError(which + std::to_string(counts.size()) + " counts; model " + model.name + " has " +
                       std::to_string(model.experts) + " experts; accepted: a count per expert");
    const double copies = std::accumulate(counts.begin(), counts.end(), 0.0);
    for (std::size_t e = 0; e < counts.size(); ++e)
      if (counts[e] * static_cast<double>(model.experts_per_token) > copies * (1 + 1e-9))
        throw InputError(which + "expert " + std::to_string(e) + " has " + format_double(counts[e]) + " of the " +
                         format_double(copies) + " token copies, more than 1/" +
                         std::to_string(model.experts_per_token) + " (top-k) of them, which the router cannot send "
                         "it (a token's copies go to different experts); accepted: counts of a real run");
  }
}

void check_experts(const Scenario& s, const ModelSpec& model) {
  const std::string where = s.file.string() + ": ";
  if (model.attention_chunk > 0 && s.seq_len > model.attention_chunk)
    throw InputError(where + "training.seq_len = " + std::to_string(s.seq_len) + " is longer than model " + model.name +
                     "'s attention chunks of " + std::to_string(model.attention_chunk) +
                     " tokens, and attention across chunks is not simulated; accepted: at most " +
                     std::to_string(model.attention_chunk));
  if (model.mtp_layers > 0 && s.tp > 1)
    throw InputError(where + "parallel.tp = " + std::to_string(s.tp) + " with multi-token prediction (model.mtp_layers = " +
                     std::to_string(model.mtp_layers) + "), whose embedding and projection collectives over tp are not "
                     "simulated; accepted: parallel.tp = 1, or model.mtp_layers = 0");
  if (s.ep > 1 && !model.moe())
    throw InputError(where + "parallel.ep = " + std::to_string(s.ep) + " splits experts, and model " + model.name +
                     " is dense; accepted: 1, or a mixture of experts (mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3, llama4)");
  if (!model.moe() && (!s.routing.uniform() || s.routing.capacity_factor > 0))
    throw InputError(where + "moe.routing and moe.capacity_factor spread tokens over experts, and model " + model.name +
                     " is dense; accepted with it: moe.routing = uniform, moe.capacity_factor = none");
  if (s.routing.fp8_dispatch && s.ep == 1)
    throw InputError(where + "moe.dispatch_precision = fp8 sets what the expert-parallel all-to-all carries, and " +
                     "parallel.ep = 1 has none; accepted: moe.dispatch_precision = activations, or parallel.ep > 1");
  if (s.routing.dispatcher != TokenDispatcher::all_to_all && s.ep == 1)
    throw InputError(where + "moe.dispatcher = " +
                     (s.routing.dispatcher == TokenDispatcher::all_gather ? "allgather" : "deepep") +
                     " sends the tokens over the expert-parallel group, and parallel.ep = 1 has none; accepted: "
                     "moe.dispatcher = alltoall, or parallel.ep > 1");
  if (s.routing.dispatcher == TokenDispatcher::deepep && s.ep > 1 && !deepep_buffer_bytes(s.ep, 0))
    throw InputError(where + "moe.dispatcher = deepep: DeepEP's kernels are configured for expert-parallel groups of " +
                     deepep_group_sizes() + " ranks, and parallel.ep = " + std::to_string(s.ep) +
                     "; accepted: one of those, or moe.dispatcher = alltoall");
  if (!model.moe())
    return;
  check_routing_file(s.routing, model);
  if (model.experts % s.ep != 0)
    throw InputError(where + "model " + model.name + " has " + std::to_string(model.experts) +
                     " experts, not divisible by parallel.ep = " + std::to_string(s.ep));
  const auto refuse = [&](const std::string& setting, const std::string& accepted) {
    throw InputError(where + setting + " is not simulated with a mixture of experts (model " + model.name +
                     "); accepted: " + accepted);
  };
  if (s.recompute == Recompute::op)
    refuse("memory.recompute = op", "none, selective, full, every:N or optimal");
  // Under expert parallelism the attention overlaps its tp collectives as a dense layer's and the
  // experts' own go around them; without it the MLP would need a userbuffers model of its own.
  if (s.tp_comm_overlap && s.ep == 1)
    refuse("comm.tp_comm_overlap = true without expert parallelism", "false, or parallel.ep > 1");
  if (s.tp > 1 && !s.sp)
    throw InputError(where + "model " + model.name + " is a mixture of experts, with which Megatron-Core needs "
                     "sequence parallelism under tensor parallelism; accepted: parallel.sp = true, or parallel.tp = 1");
  if (model.shared_expert_ffn > 0 && s.tp > 1 && s.ep == 1)
    refuse("parallel.tp = " + std::to_string(s.tp) + " without expert parallelism, with its shared expert",
           "parallel.tp = 1, or parallel.ep > 1 (the shared expert's own tp collectives are written there)");
}

void check_layout(const Scenario& s, const ModelSpec& model) {
  const std::string where = s.file.string() + ": ";
  const auto clash = [&](const std::string& what) { throw InputError(where + what); };
  if (model.heads % s.tp != 0)
    clash("model " + model.name + " has " + std::to_string(model.heads) + " attention heads, not divisible by parallel.tp = " +
          std::to_string(s.tp));
  if (model.kv_heads % s.tp != 0)
    clash("model " + model.name + " has " + std::to_string(model.kv_heads) +
          " key/value heads, not divisible by parallel.tp = " + std::to_string(s.tp));
  const long long mlp = model.moe() ? model.expert_ffn : model.ffn;
  // Under expert parallelism the experts split over etp, not tp.
  const bool experts_by_etp = model.moe() && s.ep > 1;
  const int mlp_split = experts_by_etp ? s.etp : s.tp;
  if (model.shared_expert_ffn % s.tp != 0)
    clash("model " + model.name + " has a shared expert of " + std::to_string(model.shared_expert_ffn) +
          ", not divisible by parallel.tp = " + std::to_string(s.tp));
  if (mlp % mlp_split != 0)
    clash("model " + model.name + " has " + (model.moe() ? "experts" : "an MLP") + " of " + std::to_string(mlp) +
          ", not divisible by parallel." + (experts_by_etp ? "etp" : "tp") + " = " + std::to_string(mlp_split));
  if (!model.dense_layers.empty() && model.ffn % s.tp != 0)
    clash("model " + model.name + " has dense layers with an MLP of " + std::to_string(model.ffn) +
          ", not divisible by parallel.tp = " + std::to_string(s.tp));
  if (model.mla() && (s.tp > 1 || s.cp > 1))
    clash("model " + model.name + " has multi-head latent attention, which trainsim simulates without tensor or " +
          "context parallelism (DeepSeek-V3 was trained without them); accepted: parallel.tp = 1 and parallel.cp = 1");
  check_experts(s, model);
  if (model.learned_positions && s.seq_len > model.max_positions)
    clash("training.seq_len = " + std::to_string(s.seq_len) + " is longer than the " +
          std::to_string(model.max_positions) + " learned positions of model " + model.name + "; accepted: at most " +
          std::to_string(model.max_positions));
  if (model.attention_window > 0 && s.seq_len > model.attention_window && s.cp > 1)
    clash("model " + model.name + " attends over a sliding window of " + std::to_string(model.attention_window) +
          " tokens, which trainsim simulates without context parallelism (its ring would skip the blocks "
          "outside the window); accepted: parallel.cp = 1, or training.seq_len at most " +
          std::to_string(model.attention_window));
  if (s.recompute == Recompute::every) {
    // Each rank's layers (a pipeline stage's chunk) are one checkpoint_sequential: its last
    // segment is not checkpointed, so a segment as long as the chunk would recompute nothing.
    long long fewest = model.layers + model.mtp_layers;
    if (s.pp > 1)
      for (long long layers : layers_per_virtual_stage(s, model))
        fewest = std::min(fewest, layers);
    if (s.recompute_every >= fewest)
      clash("memory.recompute = every:" + std::to_string(s.recompute_every) + " recomputes nothing: the last " +
            "segment is not checkpointed (torch checkpoint_sequential) and " +
            (s.pp > 1 ? "the smallest pipeline stage has " : "the model has ") + std::to_string(fewest) +
            " layers; accepted: " +
            (fewest > 2 ? "every:1 to every:" + std::to_string(fewest - 1) : fewest == 2 ? "every:1" : "full or none"));
  }
  if (s.recompute == Recompute::nth) {
    long long most = (model.layers + model.mtp_layers) / s.pp / s.vpp;
    if (s.pp > 1)
      for (long long layers : layers_per_virtual_stage(s, model))
        most = std::max(most, layers);
    if (s.recompute_every > most)
      clash("memory.recompute = nth:" + std::to_string(s.recompute_every) + " checkpoints no layer: " +
            (s.pp > 1 ? "the largest pipeline stage has " : "the model has ") + std::to_string(most) +
            " layers; accepted: nth:1 to nth:" + std::to_string(most));
  }
  const double ops_per_rank = static_cast<double>(s.grad_accum) * static_cast<double>(model.layers) * 20.0 / s.pp;
  if (ops_per_rank > 50e6)
    clash(std::to_string(s.grad_accum) + " micro-batches x " + std::to_string(model.layers) +
          " layers makes a program of about " + format_count(ops_per_rank) +
          " ops per rank; accepted: at most 50M (fewer accumulation steps or layers)");
}

// The pairs of pipeline ranks holding copies of the same parameters, which sum their gradients:
// under DualPipe each rank r < pp / 2 and its mirror pp - 1 - r (kind `mirror`); else, when the
// first and last stages both hold the embedding (tied, or read by multi-token prediction: Megatron-
// Core's last stage keeps a copy), those two (kind `emb`; ZB-V and DualPipeV hold both ends on
// the first rank).
std::vector<int> copies_groups(const Scenario& s, const ModelSpec& model, const Layout& layout, LayoutGroups& groups) {
  std::vector<int> of_rank(static_cast<std::size_t>(layout.world()), -1);
  const bool mirrors = two_directions(s.schedule);
  if (!mirrors && (!head_reads_embedding(model) || s.pp == 1 || v_placement(s.schedule)))
    return of_rank;
  const std::string kind = mirrors ? "mirror" : "emb";
  int count = 0;
  for (int rank = 0; rank < layout.world(); ++rank) {
    const RankCoords c = layout.coords(rank);
    if (mirrors ? c.pp >= s.pp / 2 : c.pp != 0)
      continue;
    RankCoords partner_coords = c;
    partner_coords.pp = s.pp - 1 - c.pp;
    const int partner = layout.rank_of(partner_coords);
    of_rank[rank] = of_rank[partner] = static_cast<int>(groups.groups.size());
    groups.groups.push_back({kind + std::to_string(count++), kind, {rank, partner}});
  }
  return of_rank;
}

// What the program slots (GroupSlot, PeerSlot) are on `rank`; the tp ring's neighbours only
// when `tp_ring` (comm.tp_comm_overlap), unused slots before them unbound (-1).
Binding binding_of(const Layout& layout, const LayoutGroups& groups, const std::vector<int>& copies, int rank,
                   bool tp_ring) {
  Binding binding;
  binding.groups = {groups.gradient[rank], groups.tp[rank], groups.cp[rank], copies[rank]};
  if (layout.ep > 1) {
    binding.groups.push_back(groups.ep[rank]);
    binding.groups.push_back(groups.expert_gradient[rank]);
    const bool deepep = !groups.ep_node.empty();
    if (layout.expert_tp() != layout.tp || deepep)  // else the tp slot
      binding.groups.push_back(groups.expert_tp[rank]);
    if (deepep) {
      binding.groups.push_back(groups.ep_node[rank]);
      binding.groups.push_back(groups.ep_rail[rank]);
    }
  }
  const RankCoords coords = layout.coords(rank);
  // The ranks before and after this one along one dimension, cyclically.
  const auto neighbours = [&](int RankCoords::*dimension, int size) {
    RankCoords neighbour = coords;
    neighbour.*dimension = (coords.*dimension + size - 1) % size;
    binding.peers.push_back(layout.rank_of(neighbour));
    neighbour.*dimension = (coords.*dimension + 1) % size;
    binding.peers.push_back(layout.rank_of(neighbour));
  };
  if (layout.pp > 1)
    neighbours(&RankCoords::pp, layout.pp);
  else if (tp_ring)
    binding.peers = {-1, -1};
  if (tp_ring)
    neighbours(&RankCoords::tp, layout.tp);
  return binding;
}

// Under DeepEP's dispatch: each ep group's members on a node and along its rails; returns the
// nodes a group spans.
long long expert_node_groups(const Scenario& scenario, const std::vector<int>& node_of_rank,
                             LayoutGroups& groups) {
  if (scenario.routing.dispatcher != TokenDispatcher::deepep)
    return 1;
  if (node_of_rank.size() < groups.ep.size())
    throw std::logic_error("deepep dispatch needs the node of every rank");
  long long nodes = 1;
  try {
    nodes = add_expert_node_groups(groups, node_of_rank);
  } catch (const InputError& error) {
    throw InputError(scenario.file.string() + ": moe.dispatcher = deepep: on the platform's nodes, " + error.what());
  }
  return nodes;
}

} // namespace

WorkloadBuild build_workload(const Scenario& scenario, const ModelSpec& model, double gpu_capacity,
                             const std::vector<int>& node_of_rank) {
  check_layout(scenario, model);
  WorkloadBuild build;
  build.layout = layout_of(scenario);
  const Layout& layout = build.layout;
  LayoutGroups groups = groups_of(layout);
  const long long ep_nodes = expert_node_groups(scenario, node_of_rank, groups);
  const std::vector<int> copies = copies_groups(scenario, model, layout, groups);
  // Under uneven routing the ranks of an ep group hold experts of different loads: costs (and
  // programs) per place in the group, their kernel sets in one list. The first place's costs
  // stand for the rest where one is needed (its experts are the most popular under zipf).
  const bool uneven = model.moe() && !scenario.routing.uniform();
  std::vector<ModelCosts> costs_of_place;
  for (int place = 0; place < (uneven ? scenario.ep : 1); ++place) {
    Sharding sharding{scenario.tp,
                            scenario.sp,
                            scenario.cp,
                            scenario.ep,
                            place,
                            uneven ? expert_shares(scenario.routing, model.experts, model.experts_per_token) : std::vector<double>{},
                            scenario.routing.fp8_dispatch,
                            scenario.routing.dispatcher,
                            ep_nodes,
                            scenario.etp,
                            {}};
    if (routing_per_layer(scenario.routing))
      for (long long layer = 0; layer < model.layers - static_cast<long long>(model.dense_layers.size()); ++layer)
        sharding.layer_expert_shares.push_back(
            expert_shares(scenario.routing, model.experts, model.experts_per_token, layer));
    costs_of_place.push_back(compute_costs(model, scenario.micro_batch, scenario.seq_len, scenario.precision,
                                           scenario.grad_precision, scenario.flash_attention, sharding,
                                           place > 0 ? &costs_of_place.back() : nullptr));
  }
  const ModelCosts& costs = costs_of_place.front();
  // A rank's place in its ep group (the members in group order hold the experts in order).
  const auto place_of = [&](int rank) {
    if (!uneven || scenario.ep == 1)
      return 0;
    const std::vector<int>& members = groups.groups[static_cast<std::size_t>(groups.ep[rank])].ranks;
    return static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  };
  build.states = plan_model_states(scenario, scenario.dp * scenario.cp);
  const ModelStatePlan& states = build.states;
  if (scenario.ep > 1)
    build.expert_states = plan_model_states(scenario, scenario.expert_data_parallel());
  const ModelStatePlan* experts = scenario.ep > 1 ? &*build.expert_states : nullptr;

  Workload& workload = build.workload;
  workload.step.model = model.name;
  const ParameterCounts counts = count_parameters(model);
  workload.step.parameters = static_cast<double>(counts.total + counts.mtp);  // what is trained
  workload.step.tokens_per_step = static_cast<double>(scenario.global_batch * scenario.seq_len);
  workload.step.model_flops_per_step =
      costs.model_flops_per_micro_batch * static_cast<double>(scenario.grad_accum) * scenario.dp;
  workload.step.precision = scenario.precision;
  workload.step.efficiency = scenario.efficiency;
  workload.kernel_sets = costs_of_place.back().kernel_sets;
  workload.all_to_all_splits = costs_of_place.back().all_to_all_splits;
  for (int rank = 0; rank < layout.world(); ++rank) {
    build.coords.push_back(layout.coords(rank));
    workload.bindings.push_back(binding_of(layout, groups, copies, rank, scenario.tp_comm_overlap));
  }
  workload.groups = groups.groups;
  std::vector<RuntimeMemory> runtime;
  for (int rank = 0; rank < layout.world(); ++rank)
    runtime.push_back(runtime_memory(scenario, runtime_communicators(workload, rank, build.coords[rank], scenario),
                                     costs.tp_collective_bytes, static_cast<double>(model.hidden)));
  // What the tensors may take of the GPU for the optimal recompute budget: the runtime memory and
  // the allocator's reserve are not theirs (the first rank's runtime, as the budget is the first
  // pipeline stage's).
  // At least a byte: 0 would read as an unknown capacity, whose budget is unbounded.
  if (gpu_capacity > 0)
    gpu_capacity = std::max(1.0, scenario.reserve.allocatable(gpu_capacity - runtime.front().total()));

  if (scenario.pp == 1) {
    double budget = 0;
    if (scenario.recompute == Recompute::optimal)
      budget = scenario.activation_budget > 0
                   ? scenario.activation_budget
                   : data_parallel_activation_budget(scenario, model, costs, states, experts, gpu_capacity);
    build.recompute = plan_recompute(scenario, costs.layers_from(0, costs.layer_count()), budget);
    // Ranks differ only in their groups, which their bindings name: one program for all (per
    // place in the ep group under uneven routing).
    std::vector<std::shared_ptr<const Program>> of_place;
    for (const ModelCosts& place_costs : costs_of_place)
      of_place.push_back(std::make_shared<const Program>(
          build_data_parallel_program(scenario, model, place_costs, states, build.recompute, gradient_slot,
                                      model_parallel_groups(scenario, experts), runtime.front())));
    std::vector<double> recomputed_by_place;
    for (const ModelCosts& place_costs : costs_of_place)
      recomputed_by_place.push_back(recompute_flops(build.recompute, place_costs.layers_from(0, place_costs.layer_count())));
    for (int rank = 0; rank < layout.world(); ++rank) {
      workload.programs.push_back(of_place[static_cast<std::size_t>(place_of(rank))]);
      build.recompute_flops += recomputed_by_place[static_cast<std::size_t>(place_of(rank))];
    }
    return build;
  }

  // Pipeline: one plan per chunk; an optimal plan shares the budget among the micro-batches the
  // schedule keeps in flight on the first stage.
  const std::vector<long long> stage_layers = layers_per_virtual_stage(scenario, model);
  const std::vector<long long> stage_first = first_layer_of_virtual_stages(scenario, stage_layers);
  // The layers of a stage's chunk, in the costs of one place of the ep group.
  const auto chunk_layers = [&](int chunk, int stage, const ModelCosts& of) {
    const auto vs = static_cast<std::size_t>(virtual_stage(scenario.schedule, scenario.pp, chunk, stage));
    return of.layers_from(stage_first[vs], stage_layers[vs]);
  };
  double budget = 0;
  if (scenario.recompute == Recompute::optimal) {
    const long long in_flight =
        peak_in_flight(pipeline_schedule(scenario.schedule, scenario.pp, scenario.vpp, scenario.grad_accum, 0,
                                         scenario.microbatch_group));
    // What the first stage's layers keep in model states is not theirs to use.
    double parameters = 0, expert_parameters = 0;
    for (int chunk = 0; chunk < scenario.vpp; ++chunk)
      for (const LayerCosts* layer : chunk_layers(chunk, 0, costs)) {
        parameters += layer->parameters;
        expert_parameters += layer->expert_parameters;
      }
    const double total = scenario.activation_budget > 0 ? scenario.activation_budget
                         : gpu_capacity > 0
                             ? gpu_capacity - states.gpu_bytes(parameters) -
                                   (experts ? experts->gpu_bytes(expert_parameters) : 0.0)
                             : std::numeric_limits<double>::infinity();
    budget = total / static_cast<double>(std::max(1LL, in_flight));
  }
  PipelinePlacement placement{&layout, &groups, copies, runtime, experts};
  // The ranks of a stage differ only in their groups and neighbours: one program per stage (and
  // place in the ep group under uneven routing).
  std::vector<std::shared_ptr<const Program>> of_stage(static_cast<std::size_t>(scenario.pp) * costs_of_place.size());
  std::vector<std::vector<RecomputePlan>> plans_of_stage(static_cast<std::size_t>(scenario.pp));  // the same for every place
  for (int rank = 0; rank < layout.world(); ++rank) {
    const int stage = build.coords[rank].pp;
    auto& program = of_stage[static_cast<std::size_t>(stage) * costs_of_place.size() +
                             static_cast<std::size_t>(place_of(rank))];
    const ModelCosts& rank_costs = costs_of_place[static_cast<std::size_t>(place_of(rank))];
    std::vector<RecomputePlan>& plans = plans_of_stage[static_cast<std::size_t>(stage)];
    if (plans.empty())
      for (int chunk = 0; chunk < scenario.vpp; ++chunk)
        plans.push_back(plan_recompute(scenario, chunk_layers(chunk, stage, costs), budget));
    if (!program) {
      if (stage == 0)
        build.recompute = plans.front();
      program = std::make_shared<const Program>(
          build_pipeline_program(scenario, model, rank_costs, states, plans, placement, rank));
    }
    workload.programs.push_back(program);
    // Per micro-batch of the pipeline: under DualPipe each chunk runs half of them.
    const double share = two_directions(scenario.schedule) ? 0.5 : 1.0;
    for (int chunk = 0; chunk < scenario.vpp; ++chunk)
      build.recompute_flops +=
          share * recompute_flops(plans[static_cast<std::size_t>(chunk)], chunk_layers(chunk, stage, rank_costs));
  }
  return build;
}

} // namespace trainsim
