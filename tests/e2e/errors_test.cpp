// Bad input: one line on stderr naming the file and the key, exit status 2, no outputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "cli.hpp"

using namespace trainsim::test;
namespace fs = std::filesystem;

namespace {

const std::string tiny = project_file("tests/fixtures/tiny-ddp.ini");

void expect_input_error(const std::string& name, const std::string& arguments, const std::vector<std::string>& parts) {
  const CliResult result = run_trainsim(name, arguments);
  CHECK(result.status == 2);
  CHECK_MESSAGE(std::count(result.err.begin(), result.err.end(), '\n') == 1, result.err);
  CHECK(result.err.rfind("trainsim: error: ", 0) == 0);
  for (const auto& part : parts)
    CHECK_MESSAGE(result.err.find(part) != std::string::npos, part, " not in: ", result.err);
  CHECK_FALSE(fs::exists(result.dir / "out" / "summary.json"));
}

fs::path scenario_with(const std::string& name, const std::string& extra) {
  const fs::path dir = fresh_dir(name + "_input");
  std::ifstream in(tiny);
  std::ofstream out(dir / "bad.ini");
  out << in.rdbuf() << extra;
  return dir / "bad.ini";
}

} // namespace

TEST_CASE("an unknown scenario key") {
  const auto file = scenario_with("unknown_key", "\n[parallel]\nxp = 2\n");
  expect_input_error("unknown_key", "run " + file.string() + " --out out", {"bad.ini:20", "parallel.xp", "accepted"});
}

TEST_CASE("a bad value on the command line") {
  expect_input_error("bad_value", "run " + tiny + " --out out --set memory.precision=int4",
                     {"--set memory.precision=int4", "fp32, fp16, bf16, fp8"});
}

TEST_CASE("accumulation steps that are not whole") {
  expect_input_error("accumulation", "run " + tiny + " --out out --set training.global_batch=100",
                     {"training.global_batch", "2 x 16 = 32"});
}

TEST_CASE("a model that does not exist") {
  expect_input_error("no_model", "run " + tiny + " --out out --set model.name=nope", {"model.name", "nope", "llama2-7b"});
}

TEST_CASE("a malformed platform file") {
  expect_input_error("malformed_xml",
                     "run " + tiny + " --out out --set platform.file=" + project_file("tests/fixtures/malformed.xml"),
                     {"malformed.xml"});
}

TEST_CASE("a GPU host without a required property") {
  expect_input_error("missing_property",
                     "run " + tiny + " --out out --set parallel.dp=1 --set training.global_batch=2 --set platform.file=" +
                         project_file("tests/fixtures/missing-property.xml"),
                     {"missing-property.xml", "gpu0", "hbm_capacity"});
}

TEST_CASE("more ranks than GPUs") {
  expect_input_error("too_many_ranks", "run " + tiny + " --out out --set parallel.dp=32 --set training.global_batch=64",
                     {"needs 32 GPUs", "has 16"});
}

TEST_CASE("an unknown SimGrid configuration key") {
  expect_input_error("bad_sg_cfg", "run " + tiny + " --out out --sg-cfg network/nonsense:1",
                     {"--sg-cfg network/nonsense:1", "Bad config key"});
}

TEST_CASE("SimGrid settings that SimGrid would abort on are input errors, checked before any work") {
  // SimGrid 3.32 aborts the process (status 134) on an unknown network model and on a log
  // setting it cannot parse, and throws on an unknown log threshold.
  expect_input_error("bad_sg_model", "run " + tiny + " --out out --sg-cfg network/model:Bogus",
                     {"--sg-cfg network/model:Bogus", "Bogus"});
  expect_input_error("bad_sg_log", "run " + tiny + " --out out --sg-log nonsense", {"--sg-log nonsense", "--help-logs"});
  expect_input_error("bad_sg_threshold", "run " + tiny + " --out out --sg-log root.thres:loud",
                     {"--sg-log root.thres:loud"});
  // A sweep passes them to every worker: refused once, up front, instead of failing every row.
  const CliResult sweep =
      run_trainsim("bad_sg_sweep", "sweep " + tiny + " --vary parallel.dp=2,4 -o out/s.csv --sg-cfg network/model:Bogus");
  CHECK(sweep.status == 2);
  CHECK(sweep.err.rfind("trainsim: error: --sg-cfg network/model:Bogus", 0) == 0);
  CHECK_FALSE(fs::exists(sweep.dir / "out"));
  expect_input_error("bad_sg_replay", "replay . --platform dgx-a100.xml --out out --sg-log nonsense", {"--sg-log nonsense"});
  expect_input_error("bad_sg_plan", "plan --model tiny-gpt --platform dgx-a100.xml --sg-cfg network/model:Bogus",
                     {"--sg-cfg network/model:Bogus"});
  // Valid settings still pass: a run with a log threshold and a model SimGrid knows.
  const CliResult valid = run_trainsim("good_sg_settings", "run " + tiny + " --out out --no-report --sg-log root.thres:error "
                                                           "--sg-cfg network/model:LV08");
  CHECK_MESSAGE(valid.status == 0, valid.err);
}

TEST_CASE("a run on a full disk fails with one line and leaves none of its outputs") {
  const fs::path out = fresh_dir("full_disk_out");
  // memory.csv's temporary name leads to /dev/full, which refuses every write with ENOSPC, as a
  // full disk does.
  fs::create_symlink("/dev/full", out / "memory.csv.tmp");
  const CliResult result = run_trainsim("full_disk", "run " + tiny + " --out " + out.string());
  CHECK(result.status == 2);
  CHECK_MESSAGE(std::count(result.err.begin(), result.err.end(), '\n') == 1, result.err);
  CHECK(result.err.find("memory.csv: write failed (No space left on device)") != std::string::npos);
  CHECK(result.out.empty());  // no summary that looks complete
  // No summary.json without its memory.csv, no report, no temporary left behind.
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(out))
    left.push_back(entry.path().filename().string());
  CHECK_MESSAGE(left.empty(), left.front());
}

TEST_CASE("an unknown command or option") {
  expect_input_error("bad_command", "frobnicate", {"unknown command 'frobnicate'"});
  expect_input_error("bad_option", "run " + tiny + " --colour blue", {"--colour"});
}

TEST_CASE("a trace that deadlocks is reported, not hung") {
  // Rank 0 waits for rank 1 and rank 1 for rank 0 before either sends (each send depends on
  // its rank's receive).
  const fs::path dir = fresh_dir("deadlock_trace");
  std::ofstream(dir / "workload.txt") << "format 1\nranks 2\nprogram a.trace 0\nprogram b.trace 1\n";
  std::ofstream(dir / "a.trace") << "0 recv peer=1 bytes=10\n1 send peer=1 bytes=10 deps=0\n";
  std::ofstream(dir / "b.trace") << "0 recv peer=0 bytes=10\n1 send peer=0 bytes=10 deps=0\n";
  const CliResult result = run_trainsim("deadlock", "replay " + dir.string() + " --platform dgx-a100.xml --out out");
  CHECK(result.status == 2);
  // One line of trainsim's own (not SimGrid's listing of the blocked actors), and no debris: the
  // output folder the run made is gone again.
  CHECK(result.err.find("trainsim: error: the replay deadlocked") == 0);
  CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(result.dir / "out"));
}

TEST_CASE("a malformed trace names the file and line") {
  const fs::path dir = fresh_dir("bad_trace");
  std::ofstream(dir / "workload.txt") << "format 1\nranks 1\nprogram p.trace 0\n";
  std::ofstream(dir / "p.trace") << "0 compute flops=1\n1 compute flops=abc\n";
  expect_input_error("bad_trace_run", "replay " + dir.string() + " --platform dgx-a100.xml --out out",
                     {"p.trace:2", "flops=abc"});
}

TEST_CASE("a trace whose send and recv disagree on the bytes is refused") {
  const fs::path dir = fresh_dir("p2p_bytes_trace");
  std::ofstream(dir / "workload.txt") << "format 1\nranks 2\nprogram a.trace 0\nprogram b.trace 1\n";
  std::ofstream(dir / "a.trace") << "0 send peer=1 bytes=10\n";
  std::ofstream(dir / "b.trace") << "0 recv peer=0 bytes=12\n";
  expect_input_error("p2p_bytes", "replay " + dir.string() + " --platform dgx-a100.xml --out out",
                     {"send 1 from rank 0 to rank 1 with tag 0 carries 10 bytes but its recv expects 12"});
}

TEST_CASE("an output directory that cannot be created stops the run before it simulates") {
  const CliResult result = run_trainsim("unwritable", "run " + tiny + " --out /proc/trainsim-cannot-write-here");
  CHECK(result.status == 2);
  CHECK(result.err.find("/proc/trainsim-cannot-write-here") != std::string::npos);
  CHECK(result.out.empty());  // no summary that looks complete
}

TEST_CASE("a directory or a missing file given as the scenario") {
  expect_input_error("scenario_is_dir", "run " + project_file("scenarios"), {"is a directory", "INI file"});
  expect_input_error("scenario_missing", "run nowhere.ini", {"nowhere.ini", "no such scenario file"});
}

TEST_CASE("a link with zero bandwidth") {
  // Transfers over it would never end; the platform is refused before any simulation.
  expect_input_error("zero_bandwidth",
                     "run " + tiny + " --out out --set parallel.dp=8 --set platform.file=" +
                         project_file("tests/fixtures/zero-bandwidth.xml"),
                     {"zero-bandwidth.xml", "link node0-nvlink", "positive bandwidth"});
}

TEST_CASE("text that looks like Boost's message placeholders does not hang the parsers") {
  // Found by fuzzing: Boost.Program_options 1.74 substitutes %canonical_option% and
  // %invalid_line% in its messages until none is left, forever when the user's text has one.
  expect_input_error("placeholder_option", "run " + tiny + " --%canonical_option%", {"%canonical_option%"});
  const auto file = scenario_with("placeholder_line", "\n%invalid_line%\n");
  expect_input_error("placeholder_line", "run " + file.string() + " --out out", {"bad.ini:19", "'%invalid_line%' is not a key = value line"});
}

TEST_CASE("offload that the layout or the platform cannot carry") {
  expect_input_error("offload_params_zero2", "run " + tiny + " --out out --set memory.offload_params=cpu",
                     {"memory.offload_params", "memory.zero = 3"});
  expect_input_error("offload_tier", "run " + tiny + " --out out --set memory.offload_optimizer=disk",
                     {"memory.offload_optimizer", "none, cpu, nvme"});
  expect_input_error("offload_activations", "run " + tiny + " --out out --set memory.offload_activations=cpu",
                     {"memory.offload_activations", "memory.recompute"});
  expect_input_error("offload_activations_pp",
                     "run " + tiny + " --out out --set parallel.pp=2 --set parallel.dp=8 --set memory.recompute=full"
                     " --set memory.offload_activations=cpu",
                     {"memory.offload_activations", "without pipelines"});
  // The hand-written DGX A100 platform has no CPU host: the offloaded step has nowhere to run.
  expect_input_error("offload_no_cpu", "run " + tiny + " --out out --set memory.offload_optimizer=cpu",
                     {"dgx-a100-2n.xml", "rank 0", "CPU host", "role"});
  // A generated cluster without drives cannot hold NVMe offload.
  expect_input_error("offload_no_nvme",
                     "run " + tiny + " --out out --set platform.gpu=a100-80gb --set platform.nodes=2"
                     " --set memory.offload_optimizer=nvme",
                     {"generated cluster", "rank 0", "NVMe drive", "platform.nvme_per_node"});
  // trainsim memory refuses the same input with the same line: one check for every command.
  const std::string no_drives = "--set platform.gpu=a100-80gb --set platform.nodes=2 --set memory.offload_optimizer=nvme";
  const CliResult run = run_trainsim("offload_no_nvme_run", "run " + tiny + " --out out " + no_drives);
  const CliResult memory = run_trainsim("offload_no_nvme_memory", "memory " + tiny + " " + no_drives);
  CHECK(memory.status == 2);
  CHECK(memory.out.empty());  // no "nvme ... of an unknown capacity — fits"
  CHECK(memory.err == run.err);
  const CliResult trace = run_trainsim("offload_no_nvme_trace", "trace " + tiny + " --out out " + no_drives);
  CHECK(trace.status == 2);
  CHECK(trace.err == run.err);
}

TEST_CASE("a sliding attention window shorter than the sequence is refused under context parallelism") {
  const fs::path dir = fresh_dir("sliding_window_model");
  std::ofstream(dir / "windowed.json")
      << R"({"model_type": "mistral", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
             "num_hidden_layers": 4, "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 4096,
             "sliding_window": 256})";
  const std::string model = " --set model.path=" + (dir / "windowed.json").string();
  expect_input_error("sliding_window", "run " + tiny + " --out out" + model + " --set parallel.cp=2 --set parallel.dp=8",
                     {"sliding window of 256 tokens", "parallel.cp = 1", "training.seq_len at most 256"});
  // Without context parallelism the window is simulated (FlashAttention skips the blocks outside
  // it; this scenario's eager attention computes every score).
  const CliResult simulated = run_trainsim("sliding_window_simulated", "memory " + tiny + model);
  CHECK_MESSAGE(simulated.status == 0, simulated.err);
}

TEST_CASE("help for a command is the same whichever way it is asked") {
  const CliResult help_run = run_trainsim("help_run", "help run");
  const CliResult run_help = run_trainsim("run_help", "run --help");
  CHECK(help_run.status == 0);
  CHECK(help_run.out == run_help.out);
  CHECK(help_run.out.find("Usage: trainsim run SCENARIO") != std::string::npos);
  const CliResult help_merge = run_trainsim("help_merge", "help sweep merge");
  CHECK(help_merge.status == 0);
  CHECK(help_merge.out == run_trainsim("merge_help", "sweep merge --help").out);
  const CliResult top = run_trainsim("help_top", "help");
  CHECK(top.out.find("sweep merge") != std::string::npos);
  CHECK(top.out.find("Examples:") != std::string::npos);
}

TEST_CASE("a missing scenario or trace directory is named as the usage line names it") {
  expect_input_error("run_no_scenario", "run", {"an argument is missing", "usage: trainsim run SCENARIO"});
  expect_input_error("replay_no_dir", "replay --platform dgx-a100.xml", {"usage: trainsim replay DIR"});
  for (const char* command : {"run", "replay --platform dgx-a100.xml"}) {
    const CliResult result = run_trainsim("no_hidden_option", command);
    CHECK(result.err.find("--scenario") == std::string::npos);
    CHECK(result.err.find("--trace-dir") == std::string::npos);
  }
}

TEST_CASE("token counts take units on the command line too") {
  const CliResult plan = run_trainsim(
      "plan_tokens_units", "plan --model llama3-70b --platform dgx-a100.xml --gpus 1 --global-batch 8 --tokens 300B -o out");
  CHECK_MESSAGE(plan.status == 0, plan.err);
  expect_input_error("plan_tokens_absurd",
                     "plan --model llama3-70b --platform dgx-a100.xml --gpus 1 --global-batch 8 --tokens 1e308 -o out",
                     {"--tokens 1e308", "1000T"});
}

TEST_CASE("GPUs without a route between them are refused naming the two hosts, not a crash") {
  // Four ranks all-reduce over a ring 0 -> 1 -> 2 -> 3 -> 0. Without any route SimGrid 3.32
  // crashes looking one up; with only gpu0 -> gpu1 it aborts once gpu1 sends to gpu2.
  const std::string four = " --out out --set parallel.dp=4 --set training.global_batch=8 --set platform.file=";
  expect_input_error("no_routes", "run " + tiny + four + project_file("tests/fixtures/no-routes.xml"),
                     {"no-routes.xml", "no route from gpu0 to gpu1", "accepted"});
  expect_input_error("partial_routes", "run " + tiny + four + project_file("tests/fixtures/partial-routes.xml"),
                     {"partial-routes.xml", "no route from gpu1 to gpu2", "accepted"});
}

TEST_CASE("a trace is written whole or not at all, and replaces an earlier trace's program files") {
  // tiny-ddp is pure data parallelism: one program, program-00000.trace. An earlier trace of a
  // pipeline left program-00003.trace there: it is not part of this trace any more.
  const fs::path out = fresh_dir("trace_replaced_out");
  std::ofstream(out / "program-00003.trace") << "0 compute flops=1\n";
  const CliResult written = run_trainsim("trace_replaced", "trace " + tiny + " --out " + out.string());
  REQUIRE_MESSAGE(written.status == 0, written.err);
  CHECK(fs::exists(out / "workload.txt"));
  CHECK(fs::exists(out / "program-00000.trace"));
  CHECK_FALSE(fs::exists(out / "program-00003.trace"));
  // workload.txt, written last, meets a full disk (/dev/full at its temporary name): the program
  // file already written must not replace the earlier trace's, which stays whole as it was.
  const std::string program = read_file(out / "program-00000.trace");
  const std::string workload = read_file(out / "workload.txt");
  fs::create_symlink("/dev/full", out / "workload.txt.tmp");
  // (A trace of another layout, so that its files differ from the earlier ones.)
  const CliResult full = run_trainsim("trace_full_disk", "trace " + tiny + " --out " + out.string() +
                                                             " --set parallel.dp=8 --set training.global_batch=16");
  CHECK(full.status == 2);
  CHECK_MESSAGE(std::count(full.err.begin(), full.err.end(), '\n') == 1, full.err);
  CHECK(full.err.find("No space left on device") != std::string::npos);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(out))
    left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"program-00000.trace", "workload.txt"});
  CHECK(read_file(out / "program-00000.trace") == program);
  CHECK(read_file(out / "workload.txt") == workload);
}

namespace {

// platforms/dgx-a100-nvme.xml with one piece of text replaced, written into a fresh folder.
std::string nvme_platform_with(const std::string& name, const std::string& from, const std::string& to) {
  std::string text = read_file(project_file("platforms/dgx-a100-nvme.xml"));
  const std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  const fs::path file = fresh_dir(name + "_platform") / (name + ".xml");
  std::ofstream(file) << text;
  return file.string();
}

} // namespace

TEST_CASE("a node's CPU and drives need a speed, bandwidths and sizes: refused, not a crash or 'unknown - fits'") {
  const std::string offload = "run " + project_file("scenarios/llama2-70b-offload-nvme.ini") + " --out out --set platform.file=";
  // A CPU that computes nothing made SimGrid abort once the optimizer step ran on it.
  expect_input_error("cpu_speed_zero", offload + nvme_platform_with("cpu0", "speed=\"4.6Tf\"", "speed=\"0f\""),
                     {"host node0-cpu", "speed must be positive", "accepted"});
  // A drive that reads nothing gave "nvme inf% busy".
  expect_input_error("disk_bandwidth_zero",
                     offload + nvme_platform_with("disk0", "read_bw=\"6.8GBps\"", "read_bw=\"0GBps\""),
                     {"disk node0-nvme0", "read_bw and write_bw must be positive", "accepted"});
  // Offloaded states on a tier of unknown size were reported as fitting.
  expect_input_error("no_dram_capacity",
                     offload + nvme_platform_with("dram", "<prop id=\"dram_capacity\" value=\"1e+12B\"/>", ""),
                     {"host node0-cpu lacks property 'dram_capacity'", "accepted"});
  std::string sizeless = read_file(project_file("platforms/dgx-a100-nvme.xml"));
  for (std::size_t at; (at = sizeless.find("<prop id=\"size\" value=\"3840GB\"/>")) != std::string::npos;)
    sizeless.erase(at, std::string("<prop id=\"size\" value=\"3840GB\"/>").size());
  const fs::path file = fresh_dir("sizeless_platform") / "sizeless.xml";
  std::ofstream(file) << sizeless;
  expect_input_error("no_disk_size", offload + file.string(), {"lack property 'size'", "accepted"});
}
