// Tensor, sequence, context and pipeline parallelism end to end: the simulated pipeline
// bubbles against Narayanan et al.'s formulas, and the layouts' errors.
#include <doctest/doctest.h>

#include "cli.hpp"

using namespace trainsim::test;
using nlohmann::json;

namespace {

const std::string pipeline = project_file("tests/fixtures/pipeline.ini");
const std::string tiny = project_file("tests/fixtures/tiny-ddp.ini");

json run(const std::string& name, const std::string& scenario, const std::string& arguments) {
  const CliResult result = run_trainsim(name, "run " + scenario + " --out out " + arguments);
  REQUIRE_MESSAGE(result.status == 0, result.err);
  return read_json(result.dir / "out/summary.json");
}

} // namespace

TEST_CASE("with free communication and uniform stages the bubble matches Narayanan et al.") {
  // Narayanan et al. 2021, section 2.2 (REFERENCES.md): the bubble is (p-1)/m of the ideal
  // compute time for GPipe and 1F1B, (p-1)/(v m) for the interleaved schedule. Ideal compute
  // time is the forward and backward compute of a stage (the optimizer step is not pipelined).
  struct Case {
    const char* schedule;
    int p, m, v;
  };
  for (const Case& c : {Case{"gpipe", 4, 8, 1}, Case{"1f1b", 4, 8, 1}, Case{"1f1b", 2, 4, 1}, Case{"1f1b", 8, 16, 1},
                        Case{"interleaved", 4, 8, 2}, Case{"interleaved", 2, 8, 4}, Case{"interleaved", 4, 4, 4}}) {
    CAPTURE(c.schedule);
    CAPTURE(c.p);
    CAPTURE(c.m);
    CAPTURE(c.v);
    const json summary =
        run(std::string("bubble_") + c.schedule + std::to_string(c.p) + "_" + std::to_string(c.m) + "_" +
                std::to_string(c.v),
            pipeline,
            "--set parallel.schedule=" + std::string(c.schedule) + " --set parallel.pp=" + std::to_string(c.p) +
                " --set parallel.vpp=" + std::to_string(c.v) + " --set training.global_batch=" + std::to_string(c.m));
    const json& time = summary["time"];
    const double ideal = time["compute_s"].get<double>() - time["optimizer_s"].get<double>();
    const double expected = (c.p - 1.0) / (c.v * c.m);
    CHECK(time["bubble_s"].get<double>() / ideal == doctest::Approx(expected).epsilon(0.01));
    // The breakdown accounts for the whole step.
    const json& parts = time["breakdown"];
    double sum = parts["compute_s"].get<double>() + parts["recompute_s"].get<double>() +
                 parts["optimizer_s"].get<double>() + parts["bubble_s"].get<double>();
    for (const auto& [kind, seconds] : parts["exposed_comm_s"].items())
      sum += seconds.get<double>();
    CHECK(sum == doctest::Approx(summary["step_time_s"].get<double>()).epsilon(1e-9));
  }
}

TEST_CASE("stage 0 holds m micro-batches under GPipe, p under 1F1B, ZB-H1 and ZB-V, 2p - 1 under ZB-H2, and (1 + (p-1)/(pv)) L layers interleaved") {
  // Korthikanti et al. 2022, section 4 (REFERENCES.md); Qi et al. 2024, sections 2 and 6 (p M_B
  // under ZB-H1 and ZB-V, (2p - 1) M_B under ZB-H2). One micro-batch of one stage keeps 16/p layers of
  // activations; the memory summary's stage 0 peak minus its model states and buffers, over
  // that, counts micro-batches in flight.
  const auto activations_on_stage0 = [&](const std::string& name, const std::string& arguments) {
    const json summary = run(name, pipeline, arguments);
    return summary["memory"]["ranks"][0]["at_peak"]["activations"].get<double>();
  };
  const double one_layer = activations_on_stage0("one_layer", "--set parallel.pp=1 --set training.global_batch=1 "
                                                              "--set parallel.layers_per_stage=uniform") / 16;
  const double gpipe = activations_on_stage0("stage0_gpipe", "--set parallel.schedule=gpipe");
  const double one_f_one_b = activations_on_stage0("stage0_1f1b", "--set parallel.schedule=1f1b");
  const double interleaved = activations_on_stage0("stage0_interleaved", "--set parallel.vpp=2");
  const double zb_h1 = activations_on_stage0("stage0_zb_h1", "--set parallel.schedule=zb-h1");
  const double zb_h2 = activations_on_stage0("stage0_zb_h2", "--set parallel.schedule=zb-h2");
  const double zb_v = activations_on_stage0("stage0_zb_v", "--set parallel.schedule=zb-v");
  const double dualpipev = activations_on_stage0("stage0_dualpipev", "--set parallel.schedule=dualpipev");
  const double dualpipe = activations_on_stage0("stage0_dualpipe", "--set parallel.schedule=dualpipe");
  // pp = 4 stages of 4 layers, m = 8 micro-batches.
  CHECK(gpipe / (4 * one_layer) == doctest::Approx(8).epsilon(0.01));
  CHECK(one_f_one_b / (4 * one_layer) == doctest::Approx(4).epsilon(0.01));
  CHECK(zb_h1 / (4 * one_layer) == doctest::Approx(4).epsilon(0.01));
  CHECK(zb_h2 / (4 * one_layer) == doctest::Approx(7).epsilon(0.01));
  CHECK(zb_v / (4 * one_layer) == doctest::Approx(4).epsilon(0.01));  // 2p chunks of two layers
  CHECK(dualpipev / (4 * one_layer) == doctest::Approx(4.5).epsilon(0.01));  // 2p + 1 chunks
  // DeepSeek-AI 2024, Table 2: DualPipe's PP + 1, its chunks being whole stages.
  CHECK(dualpipe / (4 * one_layer) == doctest::Approx(5).epsilon(0.01));
  CHECK(interleaved / one_layer == doctest::Approx(16 * (1 + 3.0 / 8)).epsilon(0.01));
}

TEST_CASE("the zero-bubble schedules: ZB-H1's bubble as Qi et al. give it, ZB-H2 and ZB-V only the pipeline's fill") {
  // Qi et al. 2024, section 2 (handcrafted schedules, a synchronous optimizer step): 1F1B idles
  // (p-1)(T_F + T_B + T_W) per step, ZB-H1 (p-1)(T_F + T_B - T_W). ZB-H2 runs without a gap once
  // a stage has started (the paper's parallelogram); a step that ends at one optimizer step, as
  // here, keeps the (p-1) T_F its last stage waits for the first forward (the paper removes it
  // with its optimizer post-validation, not simulated).
  // ZB-V (section 6) runs two chunks of half a stage per rank in a V and, with T_F = T_B = T_W, no
  // gap once the V is full. Its last rank waits for (p-1) chunk forwards at the start and its
  // first for a drain of (p-1) chunk input-gradient passes at the end; with T_B >= T_F (here) the
  // W passes fill the fill and the drain is left: (p-1) T_B / 2 in a stage's units. Compute is not
  // slowed by communication beside it (compute.comm_slowdown = 0): under ZB-V a chunk-1 sender
  // may wait for its receiver, and a waiting send would count as such communication.
  // T_F : T_B : T_W by hand, the roofline taking model FLOPs on compute-bound layers (the uniform
  // model: h = 2048, SwiGLU f = 8192, 16 heads, s = 2048, b = 1; vocabulary 128, negligible). In
  // units of 2 s h^2: QKV 3, output projection 1, MLP 3 x 4 = 12, attention core 4 b s^2 h = 2.
  // T_F = 18; W, the linear layers' weight gradients, as many FLOPs as their forward: T_W = 16;
  // B, the rest of a backward of twice the forward: T_B = 36 - 16 = 20.
  // DualPipe (DeepSeek-AI 2024, Table 2): (PP/2 - 1)(F&B + B - 3W), B a whole backward, F&B a
  // forward and a backward run as a pair, each pair starting once both its inputs are in (the
  // reference receives both first). Its figure's forward and input-gradient cells are equal; by
  // hand from the schedule of p = 4 (test "DualPipe runs each rank's chunks in the order of ...")
  // with T_F and T_B apart: rank 0 waits a forward's time before each of its pairs F6' + BW0 and
  // F7' + BW1 (for the gradients of micro-batches 0 and 1 coming back from rank 1) and B_i - W
  // before BW3 at the drain (rank 1 sends B3's gradient after its input-gradient pass B7', while
  // rank 0 runs the whole BW2), and each further pair of ranks adds as much: (p/2 - 1)(2 T_F +
  // T_B - T_W), the table's where T_F = T_B. Ranks 0 and p - 1 also run the embedding and the
  // output layer of both directions, a little more compute than the others: within 2.5 %.
  const double forward = 18, input = 20, weight = 16, work = forward + input + weight;
  const double dualpipe_wait = 2 * forward + input - weight;
  struct Case {
    const char* schedule;
    int p, m;
    double bubble;  // per stage, in the units above
    double tolerance = 0.01;
  };
  for (const Case& c : {Case{"zb-h1", 4, 8, 3 * (forward + input - weight)},
                        Case{"zb-h1", 2, 6, 1 * (forward + input - weight)},
                        Case{"zb-h1", 8, 16, 7 * (forward + input - weight)},
                        Case{"zb-h2", 4, 8, 3 * forward}, Case{"zb-h2", 4, 16, 3 * forward},
                        Case{"zb-v", 2, 6, 1 * input / 2}, Case{"zb-v", 4, 8, 3 * input / 2},
                        Case{"zb-v", 4, 16, 3 * input / 2},
                        Case{"1f1b", 4, 8, 3 * work},
                        Case{"dualpipe", 4, 8, 1 * dualpipe_wait, 0.025}, Case{"dualpipe", 4, 16, 1 * dualpipe_wait, 0.025},
                        Case{"dualpipe", 8, 16, 3 * dualpipe_wait, 0.025}, Case{"dualpipe", 8, 32, 3 * dualpipe_wait, 0.025}}) {
    CAPTURE(c.schedule);
    CAPTURE(c.p);
    CAPTURE(c.m);
    const json summary = run(std::string("zero_bubble_") + c.schedule + std::to_string(c.p) + "_" + std::to_string(c.m),
                             pipeline,
                             "--set compute.model=roofline --set compute.comm_slowdown=0 --set parallel.schedule=" +
                                 std::string(c.schedule) +
                                 " --set parallel.pp=" + std::to_string(c.p) +
                                 " --set training.global_batch=" + std::to_string(c.m));
    const json& time = summary["time"];
    const double ideal = time["compute_s"].get<double>() - time["optimizer_s"].get<double>();
    CHECK(time["bubble_s"].get<double>() / ideal == doctest::Approx(c.bubble / (c.m * work)).epsilon(c.tolerance));
  }
}

TEST_CASE("tensor, sequence, context and pipeline parallelism combine on two nodes") {
  struct Case {
    const char* name;
    const char* arguments;
  };
  for (const Case& c : {Case{"tp", "--set parallel.tp=8 --set parallel.dp=2"},
                        Case{"tp_sp", "--set parallel.tp=4 --set parallel.sp=true --set parallel.dp=4"},
                        Case{"cp", "--set parallel.cp=4 --set parallel.dp=4"},
                        Case{"pp", "--set parallel.pp=4 --set parallel.dp=4"},
                        Case{"tp_pp_dp", "--set parallel.tp=2 --set parallel.pp=2 --set parallel.dp=4"},
                        Case{"all", "--set parallel.tp=2 --set parallel.sp=true --set parallel.cp=2 --set parallel.pp=2 "
                                    "--set parallel.dp=2 --set parallel.vpp=2"}}) {
    CAPTURE(c.name);
    const json summary = run(std::string("combo_") + c.name, tiny, c.arguments);
    CHECK(summary["platform"]["gpus_used"] == 16);
    CHECK(summary["step_time_s"].get<double>() > 0);
    CHECK(summary["placement"].size() == 16);
    for (const char* kind : {"tp", "cp", "pp"})
      if (std::string(c.arguments).find(std::string("parallel.") + kind + "=") != std::string::npos)
        CHECK(summary["time"]["comm"][kind]["bytes"].get<double>() > 0);
  }
}

TEST_CASE("context parallelism divides activations by cp") {
  const double one = run("cp1", tiny, "--set parallel.dp=4")["memory"]["ranks"][0]["at_peak"]["activations"];
  const double four = run("cp4", tiny, "--set parallel.dp=4 --set parallel.cp=4")["memory"]["ranks"][0]["at_peak"]["activations"];
  CHECK(four / one == doctest::Approx(0.25).epsilon(0.05));
}

TEST_CASE("layouts that do not divide are refused with the numbers that clash") {
  struct Case {
    const char* name;
    const char* arguments;
    const char* message;
  };
  for (const Case& c :
       {Case{"heads", "--set parallel.tp=16 --set parallel.dp=1", "8 attention heads, not divisible by parallel.tp = 16"},
        Case{"layers", "--set parallel.pp=3 --set parallel.dp=4", "4 layers, not divisible by pp x vpp = 3 x 1"},
        Case{"interleaved", "--set parallel.pp=2 --set parallel.vpp=2 --set parallel.dp=2 --set training.global_batch=12",
             "not a multiple of pp = 2"},
        Case{"microbatch_group_small", "--set parallel.pp=2 --set parallel.vpp=2 --set parallel.dp=2 "
                                       "--set training.global_batch=12 --set parallel.microbatch_group_size=1",
             "parallel.microbatch_group_size = '1': is fewer than pp = 2"},
        Case{"microbatch_group_rest", "--set parallel.pp=2 --set parallel.vpp=2 --set parallel.dp=2 "
                                      "--set training.global_batch=28 --set parallel.microbatch_group_size=3",
             "leaves a last group of 1 of the 7 micro-batches per pipeline, fewer than pp = 2"},
        Case{"microbatch_group_1f1b", "--set parallel.pp=2 --set parallel.dp=2 --set parallel.microbatch_group_size=2",
             "it needs parallel.schedule = interleaved"},
        Case{"dualpipev", "--set parallel.pp=2 --set parallel.dp=2 --set parallel.schedule=dualpipev --set training.global_batch=12",
             "dualpipev needs at least 2 x pp = 4"},
        Case{"dualpipev_vpp", "--set parallel.pp=2 --set parallel.dp=2 --set parallel.schedule=dualpipev --set parallel.vpp=4",
             "places two model chunks on each pipeline rank"},
        Case{"dualpipe_odd_pp", "--set parallel.pp=3 --set parallel.dp=4 --set parallel.schedule=dualpipe",
             "dualpipe pairs each pipeline rank r with its mirror pp - 1 - r; accepted with it: an even number"},
        Case{"dualpipe_odd_m", "--set parallel.pp=2 --set parallel.dp=8 --set parallel.schedule=dualpipe --set training.global_batch=80",
             "gives 5 micro-batches per pipeline; dualpipe feeds half from each end and needs an even number of at "
             "least 2 x pp = 4"},
        Case{"dualpipe_stages", "--set parallel.pp=2 --set parallel.dp=8 --set parallel.schedule=dualpipe "
                                "--set parallel.layers_per_stage=1,1,1,1",
             "gives 4 stages but dualpipe passes pp = 2 in each direction; accepted: pp counts"},
        Case{"sp", "--set parallel.sp=true", "needs parallel.tp > 1"},
        Case{"cp", "--set parallel.cp=3 --set parallel.dp=4", "not divisible by parallel.cp = 3"},
        Case{"zero", "--set parallel.pp=2 --set parallel.dp=8 --set memory.zero=2", "with pp > 1 accepted: 0 or 1"},
        Case{"world", "--set parallel.tp=4 --set parallel.dp=8", "needs 32 GPUs"},
        Case{"stages", "--set parallel.pp=2 --set parallel.dp=8 --set parallel.layers_per_stage=1,2",
             "adds up to 3 layers"},
        Case{"first_stage", "--set parallel.pp=2 --set parallel.dp=8 --set parallel.first_stage_layers=4",
             "leave 0 of model tiny-gpt's 4 layers to 1 other pipeline ranks"},
        Case{"first_stage_no_pipeline", "--set parallel.first_stage_layers=2", "it needs parallel.pp > 1"},
        Case{"zero_bubble_deepspeed",
             "--set parallel.pp=2 --set parallel.dp=8 --set parallel.schedule=zb-h1 --set training.framework=deepspeed",
             "zb-h1 is not in DeepSpeed's pipeline engine"},
        Case{"zero_bubble_cp", "--set parallel.pp=2 --set parallel.cp=2 --set parallel.dp=4 --set parallel.schedule=zb-h2",
             "not simulated with context parallelism"},
        Case{"zb_v_chunks", "--set parallel.pp=2 --set parallel.dp=8 --set parallel.schedule=zb-v --set parallel.vpp=4",
             "zb-v places two model chunks on each pipeline rank"},
        Case{"zb_v_last_stage", "--set parallel.pp=2 --set parallel.dp=8 --set parallel.schedule=zb-v "
                                "--set parallel.last_stage_layers=1",
             "under zb-v the last pipeline rank holds the middle of the model"}}) {
    CAPTURE(c.name);
    const CliResult result = run_trainsim(std::string("layout_error_") + c.name, "run " + tiny + " --out out " + c.arguments);
    CHECK(result.status == 2);
    CHECK_MESSAGE(result.err.find(c.message) != std::string::npos, result.err);
  }
}

TEST_CASE("fast fidelity times collectives inside a node like the simulated flows") {
  // With tensor parallelism inside each DGX node and nothing else on NVLink, the ring formula
  // over the routes and the simulated flows agree; only cross-node traffic stays simulated.
  const std::string layout = "--set parallel.tp=8 --set parallel.dp=2 --set model.name=llama3.2-1b "
                             "--set training.seq_len=1024 --set training.micro_batch=1 --set training.global_batch=4 ";
  const json flows = run("fidelity_flows", tiny, layout + "--set comm.fidelity=flows");
  const json fast = run("fidelity_fast", tiny, layout + "--set comm.fidelity=fast");
  CHECK(fast["step_time_s"].get<double>() == doctest::Approx(flows["step_time_s"].get<double>()).epsilon(0.01));
  CHECK(fast["time"]["comm"]["tp"]["bytes"] == flows["time"]["comm"]["tp"]["bytes"]);
  CHECK(fast["time"]["comm"]["tp"]["total_s"].get<double>() ==
        doctest::Approx(flows["time"]["comm"]["tp"]["total_s"].get<double>()).epsilon(0.02));
  // The report says which fidelity produced it.
  CHECK(flows["fidelity"] == "flows");
  CHECK(fast["fidelity"] == "fast");
}

TEST_CASE("fast fidelity times Mixtral's all-to-alls across two nodes like their simulated flows") {
  // Every ep member runs one program, so the load its pairs put on the links paces each call as
  // the flows' max-min sharing does (the NICs, which the 8 ranks of each ep group share with
  // nothing else here): the same step, the same ep traffic.
  const std::string scenario = project_file("scenarios/mixtral-8x7b-ep8.ini");
  const json flows = run("mixtral_flows", scenario, "--set comm.fidelity=flows");
  const json fast = run("mixtral_fast", scenario, "--set comm.fidelity=fast");
  CHECK(fast["step_time_s"].get<double>() == doctest::Approx(flows["step_time_s"].get<double>()).epsilon(1e-6));
  CHECK(fast["time"]["comm"]["ep"]["bytes"] == flows["time"]["comm"]["ep"]["bytes"]);
  CHECK(fast["time"]["comm"]["ep"]["total_s"].get<double>() ==
        doctest::Approx(flows["time"]["comm"]["ep"]["total_s"].get<double>()).epsilon(1e-6));
  for (const char* kind : {"nic", "nvlink"})
    CHECK(fast["resources"][kind]["bytes"].get<double>() ==
          doctest::Approx(flows["resources"][kind]["bytes"].get<double>()).epsilon(1e-9));
}

TEST_CASE("Megatron's allgather dispatcher gathers the ep group's tokens and reduce-scatters the outputs") {
  // Mixtral on 16 H100s, tp 1, dp 16, ep 8, 4 micro-batches of 4096 tokens per rank. Each
  // all-gather gathers the 8 ranks' tokens, 8 x 4096 x 4096 x 2 bytes = 256 MiB, of which each
  // rank sends its own 7/8 share (as a ring), and each reduce-scatter the same back: per layer and
  // micro-batch both in forward, in the full recompute and in backward, 6 x 32 layers x 4
  // micro-batches. The all-to-alls carry each token's 2 copies instead of the 8 ranks' tokens:
  // a quarter of it (top-k / ep).
  const std::string scenario = project_file("scenarios/mixtral-8x7b-ep8.ini");
  const std::string layout = "--set parallel.tp=1 --set parallel.sp=false --set parallel.dp=16 --set training.global_batch=64 ";
  const json gathered = run("allgather_dispatcher", scenario, layout + "--set moe.dispatcher=allgather");
  const json exchanged = run("alltoall_dispatcher", scenario, layout);
  const double sent = 8.0 * 4096 * 4096 * 2 * 7 / 8 * 6 * 32 * 4;
  CHECK(gathered["time"]["comm"]["ep"]["bytes"].get<double>() == doctest::Approx(sent));
  CHECK(exchanged["time"]["comm"]["ep"]["bytes"].get<double>() == doctest::Approx(sent * 2 / 8));
  CHECK(gathered["settings"]["moe.dispatcher"] == "allgather");
  // Refused where it is not simulated: with tensor parallelism, with fp8 dispatch, without ep.
  const std::pair<std::string, std::string> refusals[] = {
      {"--set moe.dispatcher=allgather", "moe.dispatcher = 'allgather': allgather is simulated over the ep group without tensor parallelism"},
      {layout + "--set moe.dispatcher=allgather --set moe.dispatch_precision=fp8", "fp8 quantizes the all-to-all's copies"},
      {layout + "--set moe.dispatcher=allgather --set parallel.ep=1", "parallel.ep = 1 has none"},
      {"--set moe.dispatcher=broadcast", "moe.dispatcher = 'broadcast': unknown value; accepted: alltoall, allgather, deepep"}};
  for (const auto& [settings, message] : refusals) {
    CAPTURE(settings);
    const CliResult refused = run_trainsim("allgather_refused", "memory " + scenario + " " + settings);
    CHECK(refused.status == 2);
    CHECK_MESSAGE(refused.err.find(message) != std::string::npos, refused.err);
  }
}

TEST_CASE("DualPipeV's overlapped pairs hide all-to-alls behind the other pass's compute") {
  // Mixtral on two stages of 8 GPUs (ep 8 inside each node), 8 micro-batches: in the steady state
  // each forward is interleaved with a whole backward of another micro-batch, cut at their
  // all-to-alls, so that one pass's dispatch and combine run while the other computes. The same
  // work (bytes, FLOPs) in less time, with less of the all-to-alls exposed; one after the other,
  // every all-to-all is exposed (nothing else runs beside it on the GPU).
  const std::string scenario = project_file("scenarios/mixtral-8x7b-ep8.ini");
  const std::string layout = "--set parallel.tp=1 --set parallel.sp=false --set parallel.pp=2 --set parallel.dp=8 "
                             "--set parallel.schedule=dualpipev --set training.global_batch=64 ";
  const json apart = run("dualpipev_apart", scenario, layout + "--set parallel.overlap_pairs=false");
  const json paired = run("dualpipev_paired", scenario, layout);  // auto: overlapped
  CHECK(paired["settings"]["parallel.overlap_pairs"] == "true");
  const json& ep_apart = apart["time"]["comm"]["ep"];
  const json& ep_paired = paired["time"]["comm"]["ep"];
  CHECK(ep_paired["bytes"] == ep_apart["bytes"]);
  CHECK(paired["tokens_per_step"] == apart["tokens_per_step"]);
  CHECK(ep_apart["exposed_s"].get<double>() == doctest::Approx(ep_apart["total_s"].get<double>()));
  CHECK(ep_paired["exposed_s"].get<double>() < 0.9 * ep_apart["exposed_s"].get<double>());
  CHECK(paired["step_time_s"].get<double>() < apart["step_time_s"].get<double>());
  // The same recompute, interleaved or not.
  CHECK(paired["time"]["recompute_s"].get<double>() ==
        doctest::Approx(apart["time"]["recompute_s"].get<double>()).epsilon(0.01));
  // Program order is the order the one compute stream runs the pair's pieces, allocations and
  // frees included: `trainsim memory` gives the simulated peak, with the overlap or without
  // (under selective recompute the backward frees activations while the forward allocates).
  const auto memory_peak = [&](const std::string& settings) {
    const CliResult memory = run_trainsim("dualpipev_memory", "memory " + scenario + " --out out " + layout + settings);
    REQUIRE(memory.status == 0);
    return read_json(memory.dir / "out/memory.json")["memory"]["peak_bytes"].get<double>();
  };
  const std::string selective = "--set memory.recompute=selective";
  CHECK(memory_peak(selective) == run("dualpipev_selective", scenario, layout + selective)["memory"]["peak_bytes"].get<double>());
  CHECK(memory_peak("--set parallel.overlap_pairs=false") == apart["memory"]["peak_bytes"].get<double>());
  // With tensor parallelism too, the two passes' tp and ep collectives in turn on their groups'
  // streams: the same traffic as one pass after the other.
  const std::string tp_ep = "--set parallel.tp=2 --set parallel.dp=4 --set parallel.ep=4 --set parallel.pp=2 "
                            "--set parallel.schedule=dualpipev --set training.global_batch=16 ";
  const json tp_paired = run("dualpipev_tp_paired", scenario, tp_ep);
  const json tp_apart = run("dualpipev_tp_apart", scenario, tp_ep + "--set parallel.overlap_pairs=false");
  for (const char* kind : {"tp", "ep"})
    CHECK(tp_paired["time"]["comm"][kind]["bytes"] == tp_apart["time"]["comm"][kind]["bytes"]);
  CHECK(tp_paired["step_time_s"].get<double>() < tp_apart["step_time_s"].get<double>());
  // Pairs are DualPipe's and DualPipeV's: other schedules refuse the overlap.
  const CliResult refused = run_trainsim("overlap_pairs_1f1b", "memory " + scenario +
                                                                   " --set parallel.pp=2 --set parallel.dp=4 --set parallel.ep=4 "
                                                                   "--set parallel.overlap_pairs=true");
  CHECK(refused.status == 2);
  CHECK(refused.err.find("parallel.overlap_pairs") != std::string::npos);
  CHECK(refused.err.find("needs parallel.schedule = dualpipe or dualpipev") != std::string::npos);
}

TEST_CASE("Mixtral with expert parallelism reports its all-to-all traffic apart, and its memory by rank") {
  const json summary = run("mixtral_ep8", project_file("scenarios/mixtral-8x7b-ep8.ini"), "");
  CHECK(summary["layout"].get<std::string>().find("ep=8") != std::string::npos);
  // Each of 16 ranks routes its 4096 / 2 tokens (sequence parallel over tp 2) to 2 experts:
  // 2048 x 2 x 4096 x 2 bytes = 32 MiB per all-to-all, of which 7/8 leave the rank; dispatch and
  // combine in forward, in the full recompute and in backward: 6 per layer and micro-batch, over
  // 32 layers and 8 micro-batches.
  const double sent = 2048.0 * 2 * 4096 * 2 * 7 / 8 * 6 * 32 * 8;
  const json& ep = summary["time"]["comm"]["ep"];
  CHECK(ep["bytes"].get<double>() == doctest::Approx(sent));
  CHECK(ep["total_s"].get<double>() > 0);
  // Without expert parallelism no token leaves its rank, and every rank holds all 8 experts.
  const json whole = run("mixtral_ep1", project_file("scenarios/mixtral-8x7b-ep8.ini"), "--set parallel.ep=1");
  CHECK(!whole["time"]["comm"].contains("ep"));
  CHECK(whole["layout"].get<std::string>().find("ep=") == std::string::npos);
  // The weights on a rank: 1 of 8 experts per layer against all 8 (bf16, split over tp 2):
  // the difference is 7 experts x 3 x 4096 x 14336 / 2 x 2 bytes x 32 layers.
  const auto weights = [](const json& run) { return run["memory"]["ranks"][0]["model_states"]["weights"].get<double>(); };
  CHECK(weights(whole) - weights(summary) == doctest::Approx(7.0 * 3 * 4096 * 14336 / 2 * 2 * 32));
}

TEST_CASE("fp8 dispatch sends the tokens to the experts in a byte and a 128th of a scale each, the rest as before") {
  // As the bf16 case above, but the forward dispatch (in forward and in the full recompute: 2 of
  // the 6 all-to-alls per layer and micro-batch) carries 1 + 4/128 bytes per element instead of 2.
  const json summary =
      run("mixtral_fp8_dispatch", project_file("scenarios/mixtral-8x7b-ep8.ini"), "--set moe.dispatch_precision=fp8");
  const double copies = 2048.0 * 2 * 4096 * 7 / 8, per_layer_and_micro_batch = 2 * (1 + 4.0 / 128) + 4 * 2;
  CHECK(summary["time"]["comm"]["ep"]["bytes"].get<double>() ==
        doctest::Approx(copies * per_layer_and_micro_batch * 32 * 8));
  // Without expert parallelism there is nothing to dispatch: refused.
  const CliResult refused = run_trainsim("fp8_dispatch_ep1", "memory " + project_file("scenarios/mixtral-8x7b-ep8.ini") +
                                                                 " --set parallel.ep=1 --set moe.dispatch_precision=fp8");
  CHECK(refused.status == 2);
  CHECK(refused.err.find("moe.dispatch_precision = fp8") != std::string::npos);
  const CliResult unknown = run_trainsim("fp8_dispatch_bad", "memory " + project_file("scenarios/mixtral-8x7b-ep8.ini") +
                                                                 " --set moe.dispatch_precision=fp4");
  CHECK(unknown.status == 2);
  CHECK(unknown.err.find("accepted: activations or fp8") != std::string::npos);
}

TEST_CASE("DeepEP's dispatch sends each token once per node and GPU it reaches, over the rail and NVLink at once") {
  // Mixtral with whole experts (etp 1) on 4 nodes of 4 H100s: an ep group of 8 (the two tp ranks
  // of four places) spans two nodes, 4 members on each. Each rank's 2048 tokens (SP over tp 2) of
  // 4096 bf16 values, 16 MiB: to the other node's rail member 16 MiB x 44/28 / 2 (a token's 2
  // copies reach 44/28 nodes of 2 in expectation, each an even share), to each of its node's 3
  // others 16 MiB x 2 / 4 (the 2 GPUs reached, forwarded for both nodes): 16 MiB x (22/28 + 3/2)
  // per exchange, 6 per layer and micro-batch (forward, full recompute, backward), 32 layers, 8
  // micro-batches.
  const std::string cluster = " --set parallel.etp=1 --set platform.file= --set platform.gpu=h100-sxm "
                              "--set platform.nodes=4 --set platform.gpus_per_node=4";
  const json deepep = run("mixtral_deepep", project_file("scenarios/mixtral-8x7b-ep8.ini"),
                          cluster + " --set moe.dispatcher=deepep");
  const double mib = 1024.0 * 1024;
  CHECK(deepep["time"]["comm"]["ep"]["bytes"].get<double>() ==
        doctest::Approx(16 * mib * (22.0 / 28 + 1.5) * 6 * 32 * 8));
  // The all-to-all sends each copy: half of them over the network, where DeepEP sends 22/28 of
  // a token per token; its ep time is the shorter.
  const json alltoall = run("mixtral_alltoall", project_file("scenarios/mixtral-8x7b-ep8.ini"), cluster);
  CHECK(deepep["time"]["comm"]["ep"]["total_s"].get<double>() < alltoall["time"]["comm"]["ep"]["total_s"].get<double>());
  // Under DualPipeV with overlapped pairs (both passes' legs, the pieces cut after both) over 2 stages: each rank holds 2 chunks of 8 layers and runs 64 / 4 = 16
  // micro-batches, 16 x 16 = 32 x 8 layer passes as above: the same bytes.
  const json paired = run("mixtral_deepep_dualpipev", project_file("scenarios/mixtral-8x7b-ep8.ini"),
                          cluster + " --set moe.dispatcher=deepep --set parallel.pp=2 --set parallel.dp=4 "
                                    "--set parallel.schedule=dualpipev --set parallel.overlap_pairs=true");
  CHECK(paired["time"]["comm"]["ep"]["bytes"].get<double>() ==
        doctest::Approx(16 * mib * (22.0 / 28 + 1.5) * 6 * 16 * 16));
  const CliResult refused = run_trainsim("deepep_etp", "memory " + project_file("scenarios/mixtral-8x7b-ep8.ini") +
                                                           " --set moe.dispatcher=deepep");
  CHECK(refused.status == 2);
  CHECK(refused.err.find("deepep is simulated with whole experts") != std::string::npos);
}

TEST_CASE("the memory summary says which experts a rank holds and what their states take") {
  // Mixtral 8x7B, tp 2, ep 8 over dp 8: one expert of each of the 32 layers per rank, split over
  // tp: 32 x 3 x 4096 x 14336 / 2 = 2,818,572,288 parameters, held by no other rank: bf16 weights
  // 5.25 GiB, fp32 gradients 10.5 GiB, and the optimizer's 12 bytes each unsharded, 31.5 GiB.
  const CliResult mixtral = run_trainsim("experts_mixtral", "memory " + project_file("scenarios/mixtral-8x7b-ep8.ini"));
  REQUIRE(mixtral.status == 0);
  CHECK(mixtral.out.find("  experts          1 of 8 per expert layer on each rank (each split over 2 ranks by etp), on "
                         "no other rank; rank 0 holds the most: weights 5.25 GiB, gradients 10.50 GiB, optimizer 31.50 "
                         "GiB\n") != std::string::npos);
  // With ep 4, two ranks hold each expert pair: twice the experts, the optimizer states sharded
  // over the two (ZeRO-1): 21.00 / 2 x 3 = 31.50 GiB.
  const CliResult ep4 = run_trainsim("experts_ep4", "memory " + project_file("scenarios/mixtral-8x7b-ep8.ini") +
                                                        " --set parallel.ep=4");
  REQUIRE(ep4.status == 0);
  CHECK(ep4.out.find("2 of 8 per expert layer on each rank (each split over 2 ranks by etp), each also on 1 other rank; "
                     "rank 0 holds the most: weights 10.50 GiB, gradients 21.00 GiB, optimizer 31.50 GiB\n") !=
        std::string::npos);
  // Whole experts (etp 1) over ep 8 of the 16 ranks: each on 2 ranks, twice the weights and
  // gradients (32 x 3 x 4096 x 14336 = 5,637,144,576 parameters: 10.50 / 21.00 GiB), the optimizer
  // states sharded over the two: 63.00 / 2 = 31.50 GiB.
  const CliResult whole = run_trainsim("experts_whole", "memory " + project_file("scenarios/mixtral-8x7b-ep8.ini") +
                                                          " --set parallel.etp=1");
  REQUIRE(whole.status == 0);
  CHECK(whole.out.find("1 of 8 per expert layer on each rank, each also on 1 other rank; rank 0 holds the most: weights "
                       "10.50 GiB, gradients 21.00 GiB, optimizer 31.50 GiB\n") != std::string::npos);
  const CliResult dense = run_trainsim("experts_dense", "memory " + project_file("scenarios/mixtral-8x7b-ep8.ini") +
                                                          " --set parallel.ep=1");
  CHECK(dense.out.find("  experts ") == std::string::npos);
}

TEST_CASE("under Zipf routing the busiest expert rank sends back more, and the step waits for it") {
  // zipf:1 over Mixtral's 8 experts, one per ep rank: place q computes p_q = (1/(q+1)) / H_8 of
  // the copies (H_8 = 761/280). Each rank sends its 2048 x 2 copies out by the shares, keeping
  // p_q of them, and sends back what its expert computed for the other 7 ranks, 7 x 4096 x p_q
  // copies; each 3 times per layer and micro-batch (forward, recompute, backward), x 32 x 8.
  const json summary =
      run("mixtral_zipf", project_file("scenarios/mixtral-8x7b-ep8.ini"), "--set moe.routing=zipf:1");
  const json even = run("mixtral_even", project_file("scenarios/mixtral-8x7b-ep8.ini"), "");
  const double copies = 2048.0 * 2, row = 4096 * 2, times = 3.0 * 32 * 8, harmonic = 761.0 / 280;
  for (const auto& [rank, place] : {std::pair<int, int>{0, 0}, {2, 1}, {15, 7}}) {
    CAPTURE(rank);
    const double share = 1.0 / (place + 1) / harmonic;
    const double sent = times * row * (copies * (1 - share) + 7 * copies * share);
    CHECK(summary["time"]["ranks"][rank]["comm"]["ep"]["bytes"].get<double>() == doctest::Approx(sent));
  }
  // Place 0 computes 8 / H_8 = 2.94 times an even share: every rank waits for it.
  CHECK(summary["step_time_s"].get<double>() > 1.5 * even["step_time_s"].get<double>());
  // The summary puts the same step with uniform routing beside it (simulated in a worker): the
  // even run's step, and the difference as the imbalance's cost; not under uniform routing or
  // with --no-routing-baseline.
  const json& imbalance = summary["imbalance"];
  CHECK(imbalance["uniform_routing_step_time_s"].get<double>() == even["step_time_s"].get<double>());
  CHECK(imbalance["cost_s"].get<double>() ==
        summary["step_time_s"].get<double>() - even["step_time_s"].get<double>());
  CHECK_FALSE(even.contains("imbalance"));
  const json skipped = run("mixtral_zipf_alone", project_file("scenarios/mixtral-8x7b-ep8.ini"),
                           "--set moe.routing=zipf:1 --no-routing-baseline --no-report");
  CHECK_FALSE(skipped.contains("imbalance"));
  // Without expert parallelism every rank computes every expert's copies: nothing to wait for.
  CHECK_FALSE(run("mixtral_zipf_ep1", project_file("scenarios/mixtral-8x7b-ep8.ini"),
                  "--set moe.routing=zipf:1 --set parallel.ep=1 --no-report")
                  .contains("imbalance"));
  CHECK(skipped["step_time_s"].get<double>() == summary["step_time_s"].get<double>());
  CHECK(summary["time"]["ranks"][0]["finish_s"].get<double>() ==
        doctest::Approx(summary["time"]["ranks"][15]["finish_s"].get<double>()).epsilon(0.01));
}
