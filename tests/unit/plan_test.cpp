// The planner's search without simulation: candidates, the memory check and its shortcut,
// the choice per layout and the explanations.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <tuple>

#include <map>

#include "common/error.hpp"
#include "config/scenario.hpp"
#include "memory/memory_tracker.hpp"
#include "plan/planner.hpp"
#include "program/workload_builder.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {

PlanRequest tiny_request(std::vector<int> gpus, long long global_batch) {
  PlanRequest request;
  const auto model_file = resolve_data_file("tiny-gpt", "models", ".json", ".", "test");
  request.model = load_model(model_file, 128);
  request.base_ini = "[model]\npath = " + model_file.string() + "\n[platform]\nfile = dgx-a100-2n.xml\n"
                     "[memory]\nflash_attention = false\n[training]\nseq_len = 512\nglobal_batch = " +
                     std::to_string(global_batch) + "\n";
  request.gpu_counts = std::move(gpus);
  request.gpus_per_node = 8;
  request.gpu_capacity = 80.0 * 1024 * 1024 * 1024;
  request.gpu_peak = 312e12;
  request.global_batch = global_batch;
  request.seq_len = 512;
  return request;
}

// Peak memory of the candidate with its whole accumulation, as `trainsim memory` computes it.
double full_peak(const PlanRequest& request, const Candidate& candidate) {
  std::vector<std::string> overrides;
  for (const auto& [key, value] : candidate.settings(request))
    overrides.push_back(key + "=" + value);
  const Scenario scenario = parse_scenario(request.base_ini, "full.ini", overrides);
  const Workload workload = build_workload(scenario, request.model, request.gpu_capacity).workload;
  double peak = 0;
  for (std::size_t rank = 0; rank < workload.ranks(); ++rank)
    peak = std::max(peak, memory_in_program_order(workload.program(rank)).gpu().peak);
  return peak;
}

} // namespace

TEST_CASE("candidates use every GPU, divide the model and the batch, and try memory techniques cheapest first") {
  const PlanRequest request = tiny_request({8, 16}, 64);
  const auto candidates = enumerate_candidates(request);
  REQUIRE(!candidates.empty());
  std::map<std::string, std::vector<const Candidate*>> by_layout;
  for (const Candidate& c : candidates) {
    CHECK(c.dp * c.tp * c.pp * c.cp == c.gpus);
    CHECK(request.model.heads % c.tp == 0);
    // DualPipe's two chunks are two copies of the pp stages; the others split the layers pp x vpp ways.
    CHECK(request.model.layers % (c.schedule == "dualpipe" ? c.pp : c.pp * c.vpp) == 0);
    CHECK(request.global_batch % (c.micro_batch * c.dp) == 0);
    if (c.pp > 1)
      CHECK(c.zero <= 1);  // pipelines support ZeRO 0 and 1
    // A pipeline names its schedule: 1F1B or ZB-H1/H2 on one chunk per rank, interleaved, ZB-V,
    // DualPipeV or DualPipe on two; the zero-bubble ones and the DualPipes never with offload
    // (DeepSpeed's, whose pipelines run 1F1B).
    if (c.pp == 1)
      CHECK(c.schedule.empty());
    else if (c.vpp == 1)
      CHECK((c.schedule == "1f1b" || c.schedule == "zb-h1" || c.schedule == "zb-h2"));
    else
      CHECK((c.schedule == "interleaved" ||
             (c.vpp == 2 && (c.schedule == "zb-v" || c.schedule == "dualpipev" || c.schedule == "dualpipe"))));
    // DualPipeV with at least 2p micro-batches, as PyTorch's ScheduleDualPipeV requires.
    if (c.schedule == "dualpipev")
      CHECK(request.global_batch / (c.micro_batch * c.dp) >= 2 * c.pp);
    // DualPipe: half the micro-batches from each end, at least p each (deepseek-ai/DualPipe), on
    // pairs of mirror ranks.
    if (c.schedule == "dualpipe") {
      const long long m = request.global_batch / (c.micro_batch * c.dp);
      CHECK(m >= 2 * c.pp);
      CHECK(m % 2 == 0);
      CHECK(c.pp % 2 == 0);
    }
    if (c.schedule.rfind("zb-", 0) == 0 || c.schedule.rfind("dualpipe", 0) == 0)
      CHECK(c.offload == "none");
    // ZB-H2 only where its warm-up fills: 2p - 1 micro-batches (Qi et al. 2024).
    if (c.schedule == "zb-h2")
      CHECK(request.global_batch / (c.micro_batch * c.dp) >= 2 * c.pp - 1);
    by_layout[c.layout_label()].push_back(&c);
  }
  // Pipeline layouts of one chunk per rank with enough micro-batches are tried under ZB-H2 too.
  int zb_h2 = 0, dualpipe = 0;
  for (const Candidate& c : candidates) {
    zb_h2 += c.schedule == "zb-h2";
    dualpipe += c.schedule == "dualpipe";
  }
  CHECK(zb_h2 > 0);
  CHECK(dualpipe > 0);
  for (const auto& [layout, variants] : by_layout) {
    CAPTURE(layout);
    CHECK(variants.front()->recompute == "none");
    CHECK(variants.front()->zero == 0);
    CHECK(variants.back()->recompute == "full");
  }
}

TEST_CASE("the memory check's shortened accumulation finds the same peak as the whole step") {
  // 256 sequences: DP keeps 2 of its micro-batches, pipelines 4 x pp; the peak repeats after the warm-up.
  const PlanRequest request = tiny_request({16}, 256);
  int compared = 0;
  for (const Candidate& c : enumerate_candidates(request)) {
    const bool interesting = (c.pp == 1 && c.tp == 1 && (c.zero == 0 || c.zero == 2 || c.zero == 3) && c.recompute != "selective") ||
                             (c.pp == 4 && c.tp == 1 && c.micro_batch == 1);
    if (!interesting)
      continue;
    CAPTURE(c.layout_label());
    CAPTURE(c.techniques_label());
    const MemoryCheck check = check_memory(request, c);
    REQUIRE(check.valid);
    CHECK(check.peak_bytes == doctest::Approx(full_peak(request, c)).epsilon(1e-12));
    ++compared;
  }
  CHECK(compared >= 10);
}

TEST_CASE("each layout keeps the first variant that fits, and the chain says why the others did not") {
  PlanRequest request = tiny_request({8}, 64);
  const auto candidates = enumerate_candidates(request);
  // A capacity between the layouts' needs: some variants overflow, later ones fit.
  std::vector<MemoryCheck> full;
  for (const Candidate& c : candidates)
    full.push_back(check_memory(request, c));
  double smallest = full.front().peak_bytes, largest = 0;
  for (const MemoryCheck& check : full) {
    smallest = std::min(smallest, check.peak_bytes);
    largest = std::max(largest, check.peak_bytes);
  }
  request.gpu_capacity = (smallest + largest) / 2;
  const auto checks = check_candidates(request, candidates);
  const auto choices = choose_per_layout(candidates, checks);
  REQUIRE(!choices.empty());
  bool some_chain = false;
  for (const LayoutChoice& choice : choices) {
    CHECK(choice.memory.fits);
    CHECK(choice.memory.peak_bytes <= request.gpu_capacity);
    for (const auto& [candidate, check] : choice.tried)
      CHECK((!check.valid || !check.fits));
    const std::string chain = decision_chain(choice, request);
    CHECK(chain.find(choice.chosen.techniques_label() + " fits") != std::string::npos);
    if (!choice.tried.empty()) {
      some_chain = true;
      CHECK(chain.find("overflows rank") != std::string::npos);
    }
  }
  CHECK(some_chain);
  // Skipped variants come only after one that fits.
  for (std::size_t i = 0; i < checks.size(); ++i)
    if (checks[i].reason.rfind("skipped", 0) == 0)
      CHECK(i > 0);

  request.gpu_capacity = smallest / 2;
  const auto none = check_candidates(request, candidates);
  CHECK(choose_per_layout(candidates, none).empty());
  CHECK(nothing_fits(candidates, none, request).rfind("nothing fits: the closest", 0) == 0);
}

TEST_CASE("offload is the planner's last resort, for data-parallel layouts on platforms with a CPU host") {
  // Without a CPU host (the hand-written DGX A100 platforms): no offload variant at all.
  for (const Candidate& c : enumerate_candidates(tiny_request({8}, 64)))
    CHECK(c.offload == "none");
  PlanRequest request = tiny_request({8}, 64);
  request.host_capacity = 1e12;
  // DeepSpeed's ZeRO with and without offload, so that only the offload differs (FSDP2's per-layer
  // buckets would otherwise beat DeepSpeed's whole-model bucket of this tiny model).
  request.base_ini = "[model]\npath = " + resolve_data_file("tiny-gpt", "models", ".json", ".", "test").string() +
                     "\n[platform]\nfile = dgx-a100-nvme.xml\n[memory]\nflash_attention = false\n"
                     "[training]\nseq_len = 512\nglobal_batch = 64\nframework = deepspeed\n";
  const auto candidates = enumerate_candidates(request);
  std::map<std::string, std::vector<const Candidate*>> by_layout;
  for (const Candidate& c : candidates)
    by_layout[c.layout_label()].push_back(&c);
  for (const auto& [layout, variants] : by_layout) {
    bool offloading = false;
    for (const Candidate* c : variants) {
      if (c->pp > 1)
        CHECK(c->offload != "optimizer+params");  // ZeRO-3 parameter streaming does not combine with pipelines
      if (c->offload == "optimizer+params")
        CHECK(c->zero == 3);
      // Every variant after the first offloading one offloads too: offload comes after every
      // combination of recompute and ZeRO.
      CHECK((!offloading || c->offload != "none"));
      offloading = offloading || c->offload != "none";
    }
  }
  const std::vector<Candidate> dp_only = [&] {
    std::vector<Candidate> out;
    for (const Candidate& c : candidates)
      if (c.dp == 8 && c.micro_batch == 1)
        out.push_back(c);
    return out;
  }();
  // Offloading lowers the lowest GPU peak (with the allocator's reserve) the layout can reach
  // (ZeRO-3 with full recompute still keeps 16 bytes per parameter / 8 on each GPU); a GPU
  // between the two holds it only offloaded.
  double lowest = 1e300, lowest_offloaded = 1e300;
  for (const Candidate& c : dp_only) {
    const MemoryCheck check = check_memory(request, c);
    REQUIRE(check.valid);
    (c.offload == "none" ? lowest : lowest_offloaded) =
        std::min(c.offload == "none" ? lowest : lowest_offloaded, check.required_bytes());
  }
  REQUIRE(lowest_offloaded < lowest);
  request.gpu_capacity = (lowest + lowest_offloaded) / 2;
  const auto choices = choose_per_layout(dp_only, check_candidates(request, dp_only));
  REQUIRE(choices.size() == 1);
  CHECK(choices[0].chosen.offload != "none");
  CHECK(choices[0].memory.host_bytes > 0);
  CHECK(decision_chain(choices[0], request).find("offloaded to the CPU") != std::string::npos);
  // With too little host memory for the offloaded states, nothing fits, and the answer says why.
  request.host_capacity = 1024;
  const auto checks = check_candidates(request, dp_only);
  CHECK(choose_per_layout(dp_only, checks).empty());
  CHECK(nothing_fits(dp_only, checks, request).find("host memory") != std::string::npos);
}

TEST_CASE("the planner keeps the allocator's reserve free: a peak that fits only without it is not chosen") {
  PlanRequest request = tiny_request({8}, 64);
  Candidate ddp;
  ddp.gpus = 8;
  ddp.dp = 8;
  ddp.micro_batch = 1;
  const MemoryCheck check = check_memory(request, ddp);
  REQUIRE(check.valid);
  // The default reserve, fragmentation 0.15 of what the allocator reserves, is 0.15 / 0.85 of the
  // tensors at the peak: all of it but the CUDA context (512 MiB) and NCCL's buffers of the one
  // dp communicator (16 channels x 9,633,792 bytes).
  const double tensors = check.peak_bytes - 512.0 * 1024 * 1024 - 16 * 9633792.0;
  CHECK(check.reserve_bytes == doctest::Approx(tensors * 0.15 / 0.85));
  // A GPU between the peak and the peak with the reserve: the tensors fit, the reserve does not.
  request.gpu_capacity = check.peak_bytes + check.reserve_bytes / 2;
  CHECK_FALSE(check_memory(request, ddp).fits);
  CHECK(decision_chain({ddp, check_memory(request, ddp), {}}, request).find("overflows rank") != std::string::npos);
  // Without a reserve (plan --reserve 0) the same GPU holds it.
  request.base_ini += "[memory]\nreserve = 0\n";
  const MemoryCheck unreserved = check_memory(request, ddp);
  CHECK(unreserved.reserve_bytes == 0);
  CHECK(unreserved.fits);
}

TEST_CASE("the planner searches expert parallelism for a mixture, with what is simulated beside it") {
  PlanRequest request = tiny_request({16}, 64);
  request.model = load_model(test::source_dir() / "models" / "mixtral-8x7b.json", 128);
  request.host_capacity = 1e12;  // a CPU host per node: offload is searched too
  request.base_ini = "[model]\nname = mixtral-8x7b\n[platform]\nfile = dgx-a100-2n.xml\n[training]\nseq_len = 512\n"
                     "global_batch = 64\n";
  std::set<int> eps;
  std::set<std::pair<int, int>> unsplit;  // (tp, ep) with experts whole under tp
  std::map<std::tuple<int, std::string, std::string>, Candidate> first_of;  // (zero, offload, dispatcher)
  std::map<std::tuple<int, std::string, std::string, int, int, int, int>, Candidate> layouts;  // and tp, etp, pp, ep
  for (const Candidate& c : enumerate_candidates(request)) {
    eps.insert(c.ep);
    // Experts split as the attention over blocks of dp ranks, or whole over blocks of tp x dp ranks.
    CHECK((c.expert_tp() == c.tp ? c.dp % c.ep : (c.dp * c.tp) % c.ep) == 0);
    if (c.expert_tp() != c.tp) {
      CHECK(c.expert_tp() == 1);
      CHECK(c.ep > 1);
      unsplit.insert({c.tp, c.ep});
    }
    if (c.ep > 1) {
      // ZeRO-2 (DeepSpeed-MoE) dispatches by all-to-all, ZeRO-3 (torchtitan) also by DeepEP; the
      // experts' offload is DeepSpeed's, without pipelines.
      CHECK((c.zero <= 1 || c.dispatcher == "alltoall" || (c.zero == 3 && c.dispatcher == "deepep")));
      if (c.offload != "none") {
        CHECK(c.offload == "optimizer");
        CHECK(c.pp == 1);
        CHECK(c.zero <= 2);
        CHECK(c.dispatcher == "alltoall");
      }
      first_of.emplace(std::make_tuple(c.zero, c.offload, c.dispatcher), c);
      layouts.emplace(std::make_tuple(c.zero, c.offload, c.dispatcher, c.tp, c.expert_tp(), c.pp, c.ep), c);
    }
  }
  // Each expert-parallel candidate is a scenario trainsim accepts.
  for (const auto& [kind, c] : layouts) {
    const MemoryCheck check = check_memory(request, c);
    CHECK_MESSAGE(check.valid, c.layout_label() << ", " << c.techniques_label() << ": " << check.reason);
  }
  CHECK(first_of.count({2, "none", "alltoall"}) == 1);
  CHECK(first_of.count({3, "none", "deepep"}) == 1);
  CHECK(first_of.count({2, "optimizer", "alltoall"}) == 1);
  // Mixtral's 8 experts over up to 16 data-parallel ranks: 1, 2, 4 and 8.
  CHECK(eps == std::set<int>{1, 2, 4, 8});
  // On 16 GPUs at tp 8 (dp 2, pp 1), whole experts go over 2 to 8 of the 16 ranks; with split ones
  // ep stops at dp = 2.
  CHECK(unsplit.count({8, 8}) == 1);
  CHECK(unsplit.count({8, 2}) == 1);
  // The zero-bubble schedules split a mixture's backward too.
  std::set<std::string> schedules;
  for (const Candidate& c : enumerate_candidates(request))
    if (c.ep > 1)
      schedules.insert(c.schedule);
  CHECK(schedules.count("zb-h1"));
  CHECK(schedules.count("zb-v"));
  // A candidate's settings name its ep, and its scenario accepts them.
  const Candidate candidate{16, 16, 1, 1, 1, 1, 1, 1, "none", "none", "", 8};
  const MemoryCheck check = check_memory(request, candidate);
  CHECK_MESSAGE(check.valid, check.reason);
  CHECK(candidate.sizes_label() == "dp=16 tp=1 pp=1 cp=1 ep=8");
  Candidate whole{16, 2, 8, 1, 1, 1, 1, 1, "full", "none", "", 8};
  whole.etp = 1;
  const MemoryCheck whole_check = check_memory(request, whole);
  CHECK_MESSAGE(whole_check.valid, whole_check.reason);
  CHECK(whole.sizes_label() == "dp=2 tp=8+sp pp=1 cp=1 ep=8 etp=1");
  const Settings settings = whole.settings(request);
  CHECK(std::count(settings.begin(), settings.end(), std::pair<std::string, std::string>{"parallel.etp", "1"}) == 1);
  // A dense model gets ep 1 only.
  for (const Candidate& c : enumerate_candidates(tiny_request({16}, 64)))
    CHECK(c.ep == 1);
}

TEST_CASE("the planner tries the token dispatchers each expert layout can run") {
  PlanRequest request = tiny_request({16}, 64);
  request.model = load_model(test::source_dir() / "models" / "mixtral-8x7b.json", 128);
  request.base_ini = "[model]\nname = mixtral-8x7b\n[platform]\nfile = dgx-a100-2n.xml\n[training]\nseq_len = 512\n"
                     "global_batch = 64\n";
  // alltoall everywhere; allgather over the ep group without tensor parallelism (as trainsim
  // simulates it); deepep with whole experts (etp = 1).
  std::set<std::string> without_tp, split_experts, whole_experts;
  for (const Candidate& c : enumerate_candidates(request)) {
    if (c.ep == 1)
      continue;
    (c.tp == 1 ? without_tp : c.expert_tp() == c.tp ? split_experts : whole_experts).insert(c.dispatcher);
  }
  CHECK(without_tp == std::set<std::string>{"alltoall", "allgather", "deepep"});
  CHECK(split_experts == std::set<std::string>{"alltoall"});
  CHECK(whole_experts == std::set<std::string>{"alltoall", "deepep"});
  // Each candidate's scenario takes its dispatcher, and the layout names the ones not by default.
  Candidate deepep{16, 16, 1, 1, 1, 1, 1, 1, "none", "none", "", 8};
  deepep.dispatcher = "deepep";
  const MemoryCheck check = check_memory(request, deepep);
  CHECK_MESSAGE(check.valid, check.reason);
  CHECK(deepep.sizes_label() == "dp=16 tp=1 pp=1 cp=1 ep=8 deepep");
  const Settings settings = deepep.settings(request);
  CHECK(std::count(settings.begin(), settings.end(), std::pair<std::string, std::string>{"moe.dispatcher", "deepep"}) == 1);
  Candidate allgather = deepep;
  allgather.dispatcher = "allgather";
  const MemoryCheck gathered = check_memory(request, allgather);
  CHECK_MESSAGE(gathered.valid, gathered.reason);
  // --fix moe.dispatcher keeps those (and the layouts without experts split, which it does not concern).
  request.constraints = {parse_constraint("moe.dispatcher=deepep", false)};
  for (const Candidate& c : enumerate_candidates(request))
    CHECK((c.ep == 1 || c.dispatcher == "deepep"));
  CHECK_THROWS_WITH_AS(parse_constraint("moe.dispatcher=flex", false),
                       doctest::Contains("accepted: alltoall, allgather, deepep"), InputError);
}

TEST_CASE("a layer count the pipeline does not divide gives the last stage the rest, as DeepSeek-V3's 61 on 16") {
  // 7 layers: pp 2 as 4 + 3, pp 4 as 2 + 2 + 2 + 1; pp 8 would leave the last stage none. Uneven
  // stages keep one chunk per rank, but under DualPipe, whose two chunks are two copies of them.
  PlanRequest request = tiny_request({8}, 64);
  std::ifstream in(resolve_data_file("tiny-gpt", "models", ".json", ".", "test"));
  std::string gpt((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto layers_at = gpt.find("\"n_layer\"");
  REQUIRE(layers_at != std::string::npos);
  gpt.replace(gpt.find(':', layers_at) + 1, gpt.find_first_of(",}", layers_at) - gpt.find(':', layers_at) - 1, " 7");
  const auto model_file = test::write_temp_file("seven-layers.json", gpt);
  request.model = load_model(model_file, 128);
  REQUIRE(request.model.layers == 7);
  request.base_ini = "[model]\npath = " + model_file.string() + "\n[platform]\nfile = dgx-a100-2n.xml\n"
                     "[memory]\nflash_attention = false\n[training]\nseq_len = 512\nglobal_batch = 64\n";
  std::set<std::pair<int, long long>> uneven, dualpipe;
  for (const Candidate& c : enumerate_candidates(request)) {
    CHECK(c.pp != 8);
    if (c.pp > 1) {
      CHECK((c.vpp == 1 || c.schedule == "dualpipe"));
      (c.vpp == 1 ? uneven : dualpipe).insert({c.pp, c.last_stage_layers});
    }
  }
  CHECK(uneven == std::set<std::pair<int, long long>>{{2, 3}, {4, 1}});
  CHECK(dualpipe == uneven);
  Candidate four;
  for (const Candidate& c : enumerate_candidates(request))
    if (c.pp == 4 && four.pp == 1)
      four = c;
  CHECK(four.sizes_label().find("(last stage: 1 layer)") != std::string::npos);
  const MemoryCheck check = check_memory(request, four);
  CHECK_MESSAGE(check.valid, check.reason);
}

TEST_CASE("--fix and --exclude keep the candidates with the values asked for, ranges included") {
  PlanRequest request = tiny_request({8}, 64);
  const std::vector<Candidate> all = enumerate_candidates(request);
  request.constraints = {parse_constraint("parallel.tp=2..4", false), parse_constraint("memory.zero=0,3", true),
                         parse_constraint("memory.recompute=none", false)};
  const std::vector<Candidate> kept = enumerate_candidates(request);
  REQUIRE(!kept.empty());
  // The same candidates, picked by their fields.
  std::size_t expected = 0;
  for (const Candidate& c : all)
    expected += (c.tp == 2 || c.tp == 4) && c.zero != 0 && c.zero != 3 && c.recompute == "none";
  CHECK(kept.size() == expected);
  for (const Candidate& c : kept) {
    CHECK((c.tp == 2 || c.tp == 4));
    CHECK((c.zero == 1 || c.zero == 2));
    CHECK(c.recompute == "none");
  }
  // Offload as the scenario writes it: the optimizer on the CPU, the parameters too with ZeRO-3.
  Candidate offloaded;
  offloaded.offload = "optimizer+params";
  CHECK(offloaded.value_of("memory.offload_optimizer") == "cpu");
  CHECK(offloaded.value_of("memory.offload_params") == "cpu");
  offloaded.offload = "optimizer";
  CHECK(offloaded.value_of("memory.offload_params") == "none");
}

TEST_CASE("a schedule constrains only pipelines, and a constraint that leaves nothing is refused with the values there were") {
  PlanRequest request = tiny_request({8}, 64);
  request.constraints = {parse_constraint("parallel.schedule=zb-h1", false)};
  bool pipelined = false, unpipelined = false;
  for (const Candidate& c : enumerate_candidates(request)) {
    CHECK((c.pp == 1 || c.schedule == "zb-h1"));
    pipelined = pipelined || c.pp > 1;
    unpipelined = unpipelined || c.pp == 1;
  }
  CHECK(pipelined);
  CHECK(unpipelined);
  // tiny-gpt's 8 heads and 1024-wide MLP divide by every tp the planner tries on a node.
  request.constraints = {parse_constraint("parallel.tp=3", false)};
  CHECK_THROWS_WITH_AS(enumerate_candidates(request),
                       "--fix parallel.tp=3: no candidate is left; the candidates take parallel.tp 1, 2, 4, 8", InputError);
  // After pp = 1 only, no candidate has a schedule to fix.
  request.constraints = {parse_constraint("parallel.pp=1", false), parse_constraint("parallel.schedule=zb-v", false)};
  CHECK_THROWS_WITH_AS(enumerate_candidates(request),
                       doctest::Contains("--fix parallel.schedule=zb-v: no candidate it applies to is left"), InputError);
  // A dense model has no expert tensor parallelism to fix.
  request.constraints = {parse_constraint("parallel.etp=1", false)};
  CHECK_THROWS_AS(enumerate_candidates(request), InputError);
  request.constraints = {parse_constraint("parallel.tp=1,2,4,8", true)};
  CHECK_THROWS_WITH_AS(enumerate_candidates(request), doctest::Contains("no candidate is left"), InputError);
}

TEST_CASE("--fix and --exclude refuse keys the planner does not search and values it cannot take") {
  CHECK_THROWS_WITH_AS(parse_constraint("parallel.sp=true", false), doctest::Contains("--fix parallel.sp=true: accepted keys: parallel.dp"),
                       InputError);
  CHECK_THROWS_WITH_AS(parse_constraint("memory.recompute=optimal", true),
                       "--exclude memory.recompute=optimal: 'optimal' is not a value of memory.recompute; accepted: none, "
                       "selective, full, separated by commas",
                       InputError);
  CHECK_THROWS_WITH_AS(parse_constraint("parallel.tp=x", false), doctest::Contains("accepted: whole numbers and ranges N..M"),
                       InputError);
  CHECK_THROWS_AS(parse_constraint("parallel.pp=4..2", false), InputError);
  CHECK_THROWS_AS(parse_constraint("parallel.pp", false), InputError);
  CHECK_THROWS_AS(parse_constraint("memory.offload_optimizer=nvme", false), InputError);
  CHECK(parse_constraint("parallel.schedule=1f1b, zb-h1", false).values == std::vector<std::string>{"1f1b", "zb-h1"});
}
