// trainsim import: the scenario written from a DeepSpeed config reads as the one a user would
// write by hand from DeepSpeed's documentation; a Megatron launch script gives a scenario and a
// model that run; what cannot be imported is refused without writing anything.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "cli.hpp"

using namespace trainsim::test;
namespace fs = std::filesystem;

namespace {

const std::string imports = project_file("scenarios/imports");
const std::string fixtures = project_file("tests/fixtures/imports");

} // namespace

TEST_CASE("import deepspeed writes the scenario a user would write by hand") {
  const fs::path dir = fresh_dir("import_deepspeed_out");
  const CliResult imported =
      run_trainsim("import_deepspeed", "import deepspeed " + imports + "/ds-zero3-infinity.json --model llama2-7b "
                                       "--seq-len 4096 --gpu a100-80gb --nodes 2 --nvme-per-node 2 -o " +
                                           (dir / "ds.ini").string());
  REQUIRE_MESSAGE(imported.status == 0, imported.err);
  CHECK(imported.out.find("wrote " + (dir / "ds.ini").string()) != std::string::npos);
  CHECK(imported.out.find("gradient_clipping, optimizer.params, scheduler: no effect on a step's time or memory\n") != std::string::npos);
  // DeepSpeed's documentation, read by hand: 64 sequences = 2 per GPU x 4 accumulation steps x 8
  // GPUs; bf16 with ZeRO keeps bf16 gradients; ZeRO-Infinity's parameter buffers 5 x 1e8 elements
  // x 2 bytes; reduce_bucket_size 5e8 elements x 2 bytes.
  std::ofstream(dir / "hand.ini") << "[model]\nname = llama2-7b\n"
                                     "[platform]\ngpu = a100-80gb\nnodes = 2\nnvme_per_node = 2\n"
                                     "[parallel]\ndp = 8\n"
                                     "[memory]\nzero = 3\nprecision = bf16\ngrad_precision = bf16\n"
                                     "offload_optimizer = cpu\noffload_params = nvme\npinned_buffer_bytes = 1000MB\n"
                                     "recompute = full\n"
                                     "[training]\nseq_len = 4096\nmicro_batch = 2\nglobal_batch = 64\n"
                                     "framework = deepspeed\n"
                                     "[comm]\noverlap_grad_reduce = true\nbucket_size = 1000MB\n";
  const CliResult from_import = run_trainsim("import_deepspeed_config", "memory " + (dir / "ds.ini").string() + " --show-config");
  const CliResult by_hand = run_trainsim("import_deepspeed_hand", "memory " + (dir / "hand.ini").string() + " --show-config");
  REQUIRE_MESSAGE(from_import.status == 0, from_import.err);
  CHECK(from_import.out == by_hand.out);
}

TEST_CASE("import torchtitan reads the job TOML as a user would by hand") {
  const fs::path dir = fresh_dir("import_torchtitan_out");
  const CliResult imported = run_trainsim("import_torchtitan", "import torchtitan " + imports +
                                                                   "/torchtitan-llama3-70b.toml --gpu a100-80gb --nodes 8 -o " +
                                                                   (dir / "tt.ini").string());
  REQUIRE_MESSAGE(imported.status == 0, imported.err);
  // torchtitan's documentation read by hand: llama3 70B; data_parallel_shard_degree -1 fills the
  // 64 GPUs left by 8-way tensor parallelism (FSDP2 over 8), whose plan shards the norms'
  // sequence; bf16 parameters, fp32 reductions; full checkpointing; a local batch of 8 per data-
  // parallel rank; 1000 steps x 64 sequences x 8192 tokens.
  std::ofstream(dir / "hand.ini") << "[model]\nname = llama3-70b\n"
                                     "[platform]\ngpu = a100-80gb\nnodes = 8\n"
                                     "[parallel]\ndp = 8\ntp = 8\nsp = true\n"
                                     "[memory]\nzero = 3\nprecision = bf16\ngrad_precision = fp32\nrecompute = full\n"
                                     "[training]\nframework = fsdp2\nmicro_batch = 8\nglobal_batch = 64\nseq_len = 8192\n"
                                     "tokens = 524288000\n";
  const CliResult from_import = run_trainsim("import_torchtitan_config", "memory " + (dir / "tt.ini").string() + " --show-config");
  const CliResult by_hand = run_trainsim("import_torchtitan_hand", "memory " + (dir / "hand.ini").string() + " --show-config");
  REQUIRE_MESSAGE(from_import.status == 0, from_import.err);
  CHECK(from_import.out == by_hand.out);
}

TEST_CASE("import megatron writes a scenario and its model that run") {
  const fs::path dir = fresh_dir("import_megatron_out");
  const CliResult imported = run_trainsim("import_megatron", "import megatron " + imports +
                                                                 "/megatron-llama2-7b.sh --gpu a100-80gb --nodes 2 -o " +
                                                                 (dir / "llama.ini").string());
  REQUIRE_MESSAGE(imported.status == 0, imported.err);
  const nlohmann::json model = read_json(dir / "llama-model.json");
  CHECK(model.at("hidden_size") == 4096);
  CHECK(model.at("num_hidden_layers") == 32);
  const CliResult memory = run_trainsim("import_megatron_memory", "memory " + (dir / "llama.ini").string());
  REQUIRE_MESSAGE(memory.status == 0, memory.err);
  // The script's dimensions are Llama 2 7B's: 6,738,415,616 parameters (Hugging Face's
  // meta-llama/Llama-2-7b-hf; its vocabulary of 32000 is already a multiple of 128). torchrun
  // starts 8 x 2 = 16 processes: dp = 16 / (tp 2 x pp 2) = 4.
  CHECK_MESSAGE(memory.out.find("(6.74B parameters)") != std::string::npos, memory.out);
  CHECK(memory.out.find("dp=4 tp=2+sp pp=2 cp=1 (1f1b), ZeRO-1") != std::string::npos);
}

namespace {

// Imports a DeepSpeed config for Llama 2 7B on one A100 node; checks that it is refused with one
// line holding `expected` and that no scenario is written.
void expect_refused(const std::string& name, const fs::path& config, const std::string& expected) {
  const fs::path out = fresh_dir(name + "_out") / "ds.ini";
  const CliResult result = run_trainsim(name, "import deepspeed " + config.string() +
                                                  " --model llama2-7b --seq-len 2048 --gpu a100-80gb -o " + out.string());
  CHECK(result.status == 2);
  CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
  CHECK_MESSAGE(result.err.find(expected) != std::string::npos, result.err);
  CHECK_FALSE(fs::exists(out));
}

} // namespace

TEST_CASE("import refuses what it cannot simulate, writing nothing") {
  expect_refused("import_refused_auto", fixtures + "/ds-hf-auto.json", "ds-hf-auto.json: train_batch_size: \"auto\"");
  // A scenario the importer builds but trainsim refuses names the setting it came from: ZeRO-3's
  // parameters offloaded without the optimizer.
  const fs::path dir = fresh_dir("import_refused_configs");
  std::ofstream(dir / "params.json") << R"({"train_batch_size": 8, "bf16": {"enabled": true},
    "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}})";
  expect_refused("import_refused_params", dir / "params.json",
                 "(memory.offload_params comes from zero_optimization.offload_param.device)");
  // And one the cluster cannot run: NVMe offload on nodes without NVMe drives.
  std::ofstream(dir / "nvme.json") << R"({"train_batch_size": 8, "bf16": {"enabled": true},
    "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}})";
  expect_refused("import_refused_nvme", dir / "nvme.json", "needs an NVMe drive");
}

TEST_CASE("import megatron takes a long command line, options written with '=', and refuses a folder for -o") {
  const fs::path dir = fresh_dir("import_cli_out");
  const std::string arguments =
      "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --micro-batch-size 1 "
      "--global-batch-size 64 --bf16 --swiglu --normalization RMSNorm --position-embedding-type rope --vocab-size 32000 "
      "--tokenizer-type NullTokenizer --tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer";
  REQUIRE(arguments.size() > 255);  // longer than a file name may be
  fs::create_directories(dir / "my dir");
  const CliResult imported = run_trainsim("import_cli", "import megatron '" + arguments + "' --gpu a100-80gb '--out=" +
                                                            (dir / "my dir" / "x.ini").string() + "'");
  REQUIRE_MESSAGE(imported.status == 0, imported.err);
  CHECK(fs::exists(dir / "my dir" / "x.ini"));
  CHECK(fs::exists(dir / "my dir" / "x-model.json"));
  fs::create_directories(dir / "folder.ini");
  const CliResult refused = run_trainsim("import_cli_folder", "import megatron '" + arguments + "' --gpu a100-80gb -o " +
                                                                  (dir / "folder.ini").string());
  CHECK(refused.status == 2);
  CHECK(refused.err.find("is a folder") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "folder-model.json"));
  const CliResult missing = run_trainsim("import_cli_missing", "import megatron run_llama.sh --gpu a100-80gb");
  CHECK(missing.status == 2);
  CHECK(missing.err.find("run_llama.sh: no such launch script") != std::string::npos);
}
