// Scenarios from a DeepSpeed config and a Megatron-LM command line: each documented setting lands
// on its scenario key with the value derived by hand below, and what is not carried over is listed.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/error.hpp"
#include "common/toml.hpp"
#include "config/imports.hpp"

using namespace trainsim;

namespace {

// The examples in scenarios/imports/, or a fixture of tests/fixtures/imports/.
std::string fixture(const std::string& name) {
  const std::string folder = name == "ds-hf-auto.json" ? "/tests/fixtures/imports/" : "/scenarios/imports/";
  std::ifstream stream(std::string(TRAINSIM_SOURCE_DIR) + folder + name);
  REQUIRE(stream);
  std::stringstream text;
  text << stream.rdbuf();
  return text.str();
}

bool lists(const ImportedScenario& scenario, const std::string& start) {
  return std::any_of(scenario.left_out.begin(), scenario.left_out.end(),
                     [&](const std::string& line) { return line.rfind(start, 0) == 0; });
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

} // namespace

TEST_CASE("import deepspeed: ZeRO-Infinity config to scenario keys") {
  const auto config = nlohmann::json::parse(fixture("ds-zero3-infinity.json"));
  const ImportedScenario s = import_deepspeed(config, "ds.json", {0, 16});
  // train_batch_size 64 = micro 2 x accumulation 4 x dp, so dp = 64 / 8 = 8 of the 16 GPUs.
  CHECK(s.value_of("parallel.dp") == "8");
  CHECK(s.value_of("training.micro_batch") == "2");
  CHECK(s.value_of("training.global_batch") == "64");
  CHECK(s.value_of("memory.precision") == "bf16");
  // DeepSpeedEngine.get_data_types: under ZeRO gradients stay in the model's dtype.
  CHECK(s.value_of("memory.grad_precision") == "bf16");
  CHECK(s.value_of("memory.zero") == "3");
  CHECK(s.value_of("memory.offload_optimizer") == "cpu");
  CHECK(s.value_of("memory.offload_params") == "nvme");
  // buffer_count 5 x buffer_size 1e8 elements x 2 bytes (bf16) = 1e9 bytes.
  CHECK(s.value_of("memory.pinned_buffer_bytes") == "1000MB");
  CHECK(s.value_of("comm.overlap_grad_reduce") == "true");
  // reduce_bucket_size 5e8 elements x 2 bytes of bf16 gradients.
  CHECK(s.value_of("comm.bucket_size") == "1000MB");
  CHECK(s.value_of("memory.recompute") == "full");
  CHECK(s.value_of("memory.offload_activations").empty());
  CHECK(s.value_of("training.framework") == "deepspeed");
  CHECK(s.source_of("memory.zero") == "zero_optimization.stage");
  for (const char* field : {"gradient_clipping", "scheduler", "zero_optimization.contiguous_gradients",
                            "zero_optimization.stage3_prefetch_bucket_size", "optimizer.params"})
    CHECK_MESSAGE(lists(s, field), field);
  const std::string ini = s.ini({"header"});
  CHECK(ini.find("# header\n") == 0);
  CHECK(ini.find("[memory]\n") != std::string::npos);
  // Settings left out for the same reason share a line.
  CHECK(ini.find("#   activation_checkpointing.synchronize_checkpoint_boundary, gradient_clipping, optimizer.params, "
                 "scheduler: no effect on a step's time or memory\n") != std::string::npos);
  // Nested settings are listed too, each with its reason.
  CHECK(lists(s, "zero_optimization.offload_param.nvme_path: where the drives are mounted"));
}

TEST_CASE("import deepspeed: batch sizes by DeepSpeed's arithmetic") {
  using json = nlohmann::json;
  // Micro-batch and accumulation on 16 GPUs: train_batch_size = 4 x 2 x 16 = 128.
  ImportedScenario s = import_deepspeed(json{{"train_micro_batch_size_per_gpu", 4}, {"gradient_accumulation_steps", 2}},
                                        "ds.json", {0, 16});
  CHECK(s.value_of("parallel.dp") == "16");
  CHECK(s.value_of("training.global_batch") == "128");
  // The batch alone on --gpus 8: no accumulation, micro-batch 64 / 8 = 8.
  s = import_deepspeed(json{{"train_batch_size", 64}}, "ds.json", {8, 16});
  CHECK(s.value_of("training.micro_batch") == "8");
  CHECK(s.value_of("parallel.dp") == "8");
  // fp32 without ZeRO; bf16 without ZeRO accumulates in fp32 (BF16_Optimizer).
  s = import_deepspeed(json{{"train_batch_size", 8}}, "ds.json", {0, 8});
  CHECK(s.value_of("memory.precision") == "fp32");
  s = import_deepspeed(json{{"train_batch_size", 8}, {"bf16", {{"enabled", true}}}}, "ds.json", {0, 8});
  CHECK(s.value_of("memory.grad_precision") == "fp32");
  s = import_deepspeed(json{{"train_batch_size", 8}, {"fp16", {{"enabled", true}}}, {"zero_optimization", {{"stage", 2}}}},
                       "ds.json", {0, 8});
  CHECK(s.value_of("memory.grad_precision") == "fp16");
}

TEST_CASE("import deepspeed: what cannot be simulated as written is refused") {
  using json = nlohmann::json;
  const auto auto_config = nlohmann::json::parse(fixture("ds-hf-auto.json"));
  CHECK(error_of([&] { import_deepspeed(auto_config, "ds.json", {0, 8}); }).find("ds.json: train_batch_size: \"auto\"") == 0);
  // 64 = 2 x 4 x 8 GPUs, but --gpus 16.
  CHECK(error_of([&] {
          import_deepspeed(json{{"train_batch_size", 64}, {"train_micro_batch_size_per_gpu", 2},
                                {"gradient_accumulation_steps", 4}},
                           "ds.json", {16, 16});
        }).find("runs on 8 GPUs, not --gpus 16") != std::string::npos);
  CHECK(error_of([&] {
          import_deepspeed(json{{"train_batch_size", 8}, {"zero_optimization", {{"stage", 3}, {"zero_quantized_weights", true}}}},
                           "ds.json", {0, 8});
        }).find("zero_optimization.zero_quantized_weights: ZeRO++") != std::string::npos);
  CHECK(error_of([&] {
          import_deepspeed(json{{"train_batch_size", 8}, {"optimizer", {{"type", "Lion"}}}}, "ds.json", {0, 8});
        }).find("optimizer.type: \"Lion\"") != std::string::npos);
  CHECK(error_of([&] { import_deepspeed(json{{"gradient_clipping", 1.0}}, "ds.json", {0, 8}); })
            .find("train_batch_size: missing") != std::string::npos);
}

TEST_CASE("import megatron: a launch script to scenario keys and a model") {
  const ImportedScenario s = import_megatron(fixture("megatron-llama2-7b.sh"), "train.sh", {0, 16}, false);
  // torchrun --nproc_per_node 8 --nnodes 2: 16 GPUs; dp = 16 / (tp 2 x pp 2) = 4.
  CHECK(s.value_of("parallel.dp") == "4");
  CHECK(s.value_of("parallel.tp") == "2");
  CHECK(s.value_of("parallel.pp") == "2");
  CHECK(s.value_of("parallel.sp") == "true");
  CHECK(s.value_of("parallel.schedule") == "1f1b");
  CHECK(s.value_of("memory.zero") == "1");
  CHECK(s.value_of("comm.overlap_grad_reduce") == "true");
  CHECK(s.value_of("comm.overlap_param_gather") == "true");
  CHECK(s.value_of("memory.precision") == "bf16");
  CHECK(s.value_of("memory.grad_precision") == "fp32");
  CHECK(s.value_of("memory.recompute") == "full");
  CHECK(s.value_of("training.seq_len") == "4096");
  CHECK(s.value_of("training.global_batch") == "128");
  // 1000 iterations x 128 sequences x 4096 tokens.
  CHECK(s.value_of("training.tokens") == "524288000");
  CHECK(s.model_config.at("model_type") == "llama");
  CHECK(s.model_config.at("intermediate_size") == 11008);
  CHECK(s.model_config.at("vocab_size") == 32000);
  CHECK(s.model_config.at("tie_word_embeddings") == false);
  CHECK(s.model_config.at("attention_bias") == false);
  CHECK(lists(s, "--lr: no effect"));
  CHECK(lists(s, "--empty-unused-memory-level: unknown to the importer"));
  CHECK_FALSE(lists(s, "--num-layers"));
}

TEST_CASE("import megatron: interleaving, recompute, precision and experts") {
  const std::string base = "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 2048 "
                           "--micro-batch-size 1 ";
  // 32 layers / (pp 4 x 2 layers per virtual stage) = 4 virtual stages.
  ImportedScenario s = import_megatron(base + "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 2",
                                       "args", {0, 8}, false);
  CHECK(s.value_of("parallel.vpp") == "4");
  CHECK(s.value_of("parallel.schedule") == "interleaved");
  CHECK(s.value_of("parallel.dp") == "2");
  CHECK(s.value_of("training.global_batch") == "2");  // micro-batch x dp
  // GPT-2's tokenizer without --vocab-size: 50257; GELU, ffn 4h.
  CHECK(s.model_config.at("model_type") == "gpt2");
  CHECK(s.model_config.at("vocab_size") == 50257);
  CHECK(s.model_config.at("n_inner") == 4 * 4096);
  s = import_megatron(base + "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --fp16",
                      "args", {0, 8}, true);
  CHECK(s.value_of("memory.recompute") == "full");
  CHECK(s.value_of("memory.grad_precision") == "fp16");
  CHECK(s.value_of("memory.fp32_grad_copy") == "true");
  CHECK(s.model_config.is_null());
  CHECK(lists(s, "--hidden-size: the model is --model's"));
  // SwiGLU's default ffn: int(4h x 2/3 / 64) x 64 = int(10922.7 / 64) x 64 = 170 x 64 = 10880.
  s = import_megatron(base + "--swiglu --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 4 "
                             "--moe-token-dispatcher-type flex --moe-enable-deepep --bf16",
                      "args", {0, 8}, false);
  CHECK(s.model_config.at("model_type") == "mixtral");
  CHECK(s.model_config.at("intermediate_size") == 10880);
  CHECK(s.model_config.at("num_local_experts") == 8);
  CHECK(s.value_of("parallel.ep") == "4");
  CHECK(s.value_of("moe.dispatcher") == "deepep");
  // Multi-token prediction's modules, as many as Megatron builds.
  s = import_megatron(base + "--mtp-num-layers 1", "args", {0, 8}, true);
  CHECK(s.value_of("model.mtp_layers") == "1");
  // Without the flag Megatron builds no module, whatever the --model config names.
  s = import_megatron(base, "args", {0, 8}, true);
  CHECK(s.value_of("model.mtp_layers") == "0");
  // Chunks of 4 layers, all recomputed (the last too): uniform:4, not checkpoint_sequential's every:4;
  // block: the first N layers of each rank, one by one (Megatron's default N: 1).
  s = import_megatron(base + "--recompute-granularity full --recompute-method uniform --recompute-num-layers 4",
                      "args", {0, 8}, true);
  CHECK(s.value_of("memory.recompute") == "uniform:4");
  s = import_megatron(base + "--recompute-granularity full --recompute-method block", "args", {0, 8}, true);
  CHECK(s.value_of("memory.recompute") == "block:1");
  CHECK(error_of([&] { import_megatron(base + "--recompute-granularity full --recompute-method chunks", "args", {0, 8}, true); })
            .find("args: --recompute-method: 'chunks'; accepted with --recompute-granularity full: uniform, block") == 0);
  CHECK(error_of([&] { import_megatron(base + "--tensor-model-parallel-size 3", "args", {0, 8}, true); })
            .find("does not divide the 8 GPUs") != std::string::npos);
  CHECK(error_of([&] { import_megatron("torchrun --nproc_per_node $GPUS pretrain_gpt.py " + base, "run.sh", {0, 8}, true); })
            .find("'$GPUS' is a shell variable") != std::string::npos);
  CHECK(error_of([&] { import_megatron("torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py " + base, "run.sh",
                                       {0, 8}, true); })
            .find("runs on 16 GPUs; the cluster has 8") != std::string::npos);
}

TEST_CASE("TOML: the subset job configs use") {
  const nlohmann::json doc = parse_toml(R"(# a comment
title = "job \"one\"\u00e9"   # trailing comment
[training]
steps = 1_000
lr = 3e-4
ratio = -0.5
compile = false
converters = [
  "float8",   # one per line, with a trailing comma
  'literal\n',
]
[parallelism.pipeline]
degree = +4
inline = { a = 1, b.c = "x" }
)", "job.toml");
  CHECK(doc.at("title") == "job \"one\"\xC3\xA9");
  CHECK(doc.at("training").at("steps") == 1000);
  CHECK(doc.at("training").at("lr").get<double>() == doctest::Approx(3e-4));
  CHECK(doc.at("training").at("ratio").get<double>() == -0.5);
  CHECK(doc.at("training").at("compile") == false);
  CHECK(doc.at("training").at("converters") == nlohmann::json::array({"float8", "literal\\n"}));
  CHECK(doc.at("parallelism").at("pipeline").at("degree") == 4);
  CHECK(doc.at("parallelism").at("pipeline").at("inline").at("b").at("c") == "x");
  CHECK(error_of([] { parse_toml("[[layers]]\n", "job.toml"); }).find("job.toml:1: array tables") == 0);
  CHECK(error_of([] { parse_toml("a = 1\na = 2\n", "job.toml"); }).find("job.toml:2: key 'a' defined twice") == 0);
  CHECK(error_of([] { parse_toml("[t]\n[t]\n", "job.toml"); }).find("job.toml:2: table [t] defined twice") == 0);
  CHECK(error_of([] { parse_toml("a = \"open\n", "job.toml"); }).find("job.toml:1: a string is not closed") == 0);
  CHECK(error_of([] { parse_toml("when = 2024-05-01\n", "job.toml"); }).find("dates and times") != std::string::npos);
  CHECK(error_of([] { parse_toml("a = 1 2\n", "job.toml"); }).find("job.toml:1: unexpected '2'") == 0);
}

TEST_CASE("import torchtitan: a job TOML to scenario keys") {
  const nlohmann::json job = parse_toml(fixture("torchtitan-llama3-70b.toml"), "job.toml");
  CHECK(torchtitan_model(job, "job.toml") == "llama3-70b");
  const ImportedScenario s = import_torchtitan(job, "job.toml", {0, 64}, 80);
  // data_parallel_shard_degree -1: the 64 GPUs left over by tensor parallelism 8, so 8.
  CHECK(s.value_of("parallel.dp") == "8");
  CHECK(s.value_of("parallel.tp") == "8");
  CHECK(s.value_of("parallel.sp") == "true");
  CHECK(s.value_of("memory.zero") == "3");
  CHECK(s.value_of("training.framework") == "fsdp2");
  CHECK(s.value_of("memory.recompute") == "full");
  CHECK(s.value_of("memory.precision") == "bf16");
  CHECK(s.value_of("memory.grad_precision") == "fp32");
  CHECK(s.value_of("training.micro_batch") == "8");
  CHECK(s.value_of("training.global_batch") == "64");  // local batch 8 x dp 8
  CHECK(s.value_of("training.seq_len") == "8192");
  CHECK(s.value_of("training.tokens") == "524288000");  // 1000 steps x 64 x 8192
  CHECK(lists(s, "checkpoint: checkpoint files"));
  CHECK(lists(s, "training.max_norm: no effect"));
}

TEST_CASE("import torchtitan: pipelines as torchtitan splits them, recompute and refusals") {
  const auto job = [](const std::string& parallelism, const std::string& more = "") {
    return parse_toml("[parallelism]\n" + parallelism + "\n" + more, "job.toml");
  };
  // Interleaved1F1B takes two stages per rank: 8 stages of 32 layers plus the embedding and the
  // head as a layer each, 34 / 8 = 4 and 2 over: stages of 5, 5, 4, 4, 4, 4, 4, 4, the first and
  // last less their embedding and head.
  ImportedScenario s = import_torchtitan(
      job("pipeline_parallel_degree = 4\npipeline_parallel_schedule = \"Interleaved1F1B\"\n"
          "pipeline_parallel_microbatch_size = 2",
          "[training]\nlocal_batch_size = 8\n"),
      "job.toml", {0, 8}, 32);
  CHECK(s.value_of("parallel.pp") == "4");
  CHECK(s.value_of("parallel.vpp") == "2");
  CHECK(s.value_of("parallel.schedule") == "interleaved");
  CHECK(s.value_of("parallel.layers_per_stage") == "4,5,4,4,4,4,4,3");
  CHECK(s.value_of("parallel.dp") == "2");
  CHECK(s.value_of("training.micro_batch") == "2");
  CHECK(s.value_of("training.global_batch") == "16");  // local batch 8 x dp 2
  // Without [activation_checkpoint], torchtitan's default: selective, every second layer.
  CHECK(s.value_of("memory.recompute") == "nth:2");
  // Replicas only: DDP; op-level selective checkpointing.
  s = import_torchtitan(job("data_parallel_replicate_degree = 8\ndata_parallel_shard_degree = 1",
                            "[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"op\"\n"),
                        "job.toml", {0, 8}, 32);
  CHECK(s.value_of("training.framework") == "ddp");
  CHECK(s.value_of("memory.zero") == "0");
  CHECK(s.value_of("memory.recompute") == "op");
  CHECK(error_of([&] { import_torchtitan(job("data_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 4"),
                                         "job.toml", {0, 8}, 32); })
            .find("job.toml: parallelism.data_parallel_replicate_degree: HSDP") == 0);
  CHECK(error_of([&] { import_torchtitan(job("fsdp_reshard_after_forward = \"never\""), "job.toml", {0, 8}, 32); })
            .find("parallelism.fsdp_reshard_after_forward: \"never\"") != std::string::npos);
  CHECK(error_of([&] { import_torchtitan(job("data_parallel_shard_degree = 4"), "job.toml", {0, 8}, 32); })
            .find("multiply to 4, not the 8 GPUs") != std::string::npos);
  CHECK(error_of([&] { import_torchtitan(job("pipeline_parallel_degree = 2\npipeline_parallel_schedule = \"LoopedBFS\""),
                                         "job.toml", {0, 8}, 32); })
            .find("\"LoopedBFS\" is not simulated") != std::string::npos);
  CHECK(error_of([&] { import_torchtitan(job("", "[model]\nconverters = [\"mx\"]\n"), "job.toml", {0, 8}, 32); })
            .find("model.converters: \"mx\"") != std::string::npos);
}

TEST_CASE("import deepspeed: the old boolean ZeRO, sections of the wrong type, sizes too large") {
  using json = nlohmann::json;
  // DeepSpeed reads "zero_optimization": true as stage 1, whose bf16 gradients stay bf16.
  ImportedScenario s = import_deepspeed(
      json{{"train_batch_size", 32}, {"zero_optimization", true}, {"bf16", {{"enabled", true}}}}, "ds.json", {0, 8});
  CHECK(s.value_of("memory.zero") == "1");
  CHECK(s.value_of("memory.grad_precision") == "bf16");
  // An empty activation_checkpointing configures nothing.
  s = import_deepspeed(json{{"train_batch_size", 8}, {"activation_checkpointing", json::object()}}, "ds.json", {0, 8});
  CHECK(s.value_of("memory.recompute").empty());
  CHECK(lists(s, "activation_checkpointing: {} configures nothing"));
  CHECK(error_of([] {
          import_deepspeed(json{{"train_batch_size", 8}, {"zero_optimization", {{"stage", 3}, {"offload_param", "cpu"}}}},
                           "ds.json", {0, 8});
        }).find("ds.json: zero_optimization.offload_param: \"cpu\" is a value where a table of settings belongs") == 0);
  CHECK(error_of([] {
          import_deepspeed(json{{"train_batch_size", 1024}, {"train_micro_batch_size_per_gpu", 562949953421312LL},
                                {"gradient_accumulation_steps", 32768}},
                           "ds.json", {0, 8});
        }).find("train_micro_batch_size_per_gpu: 562949953421312 is not a whole number from 1 to 1000000000") !=
        std::string::npos);
  CHECK(error_of([] {
          import_deepspeed(json{{"train_batch_size", 8}, {"fp16", {{"enabled", true}, {"fp16_master_weights_and_grads", true}}}},
                           "ds.json", {0, 8});
        }).find("fp16.fp16_master_weights_and_grads") != std::string::npos);
}

TEST_CASE("import megatron: launchers, shell syntax, defaults Megatron applies and flags it cannot run") {
  const std::string base = "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 2048 "
                           "--micro-batch-size 1 ";
  // deepspeed --num_gpus 4 starts 4 processes; srun 2 nodes x 8 tasks, 16.
  CHECK(import_megatron("deepspeed --num_gpus 4 pretrain_gpt.py " + base, "run.sh", {0, 16}, true)
            .value_of("parallel.dp") == "4");
  CHECK(import_megatron("srun -N 2 --ntasks-per-node 8 python pretrain_gpt.py " + base, "run.sh", {0, 16}, true)
            .value_of("parallel.dp") == "16");
  // A script's other commands, a pipe and a redirection are not the training's arguments.
  ImportedScenario s = import_megatron("GPUS=8\nexport NCCL_DEBUG=WARN\ntorchrun --nproc_per_node 8 pretrain_gpt.py " + base +
                                           "--eval-iters 10 2>&1 | tee log.txt\necho done\n",
                                       "run.sh", {0, 8}, true);
  CHECK(s.value_of("parallel.dp") == "8");
  CHECK(lists(s, "--eval-iters: no effect"));
  CHECK_FALSE(lists(s, "--eval-iters: unknown"));
  // --flag=value keeps the value's underscores; a double quote's escapes are the shell's.
  s = import_megatron(base + "--recompute-granularity=selective --recompute-modules=core_attn --data-path \"a \\\"b\\\" c\"",
                      "args", {0, 8}, true);
  CHECK(s.value_of("memory.recompute") == "selective");
  // Megatron's MoE dispatcher is allgather unless told; its vocabulary is padded to 128 x tp.
  s = import_megatron(base + "--num-experts 8 --swiglu --tensor-model-parallel-size 2", "args", {0, 8}, false);
  CHECK(s.value_of("moe.dispatcher") == "allgather");
  CHECK(s.value_of("model.vocab_multiple") == "256");
  // Without tensor parallelism Megatron turns sequence parallelism off.
  s = import_megatron(base + "--sequence-parallel", "args", {0, 8}, true);
  CHECK(s.value_of("parallel.sp").empty());
  CHECK(lists(s, "--sequence-parallel: Megatron turns it off"));
  s = import_megatron(base + "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 4", "args", {0, 8}, true);
  CHECK(s.value_of("parallel.vpp") == "4");
  // fp16 with fp8 keeps fp16 gradients; --grad-reduce-in-bf16 reduces bf16 ones.
  CHECK(import_megatron(base + "--fp16 --fp8-format hybrid", "args", {0, 8}, true).value_of("memory.grad_precision") == "fp16");
  CHECK(import_megatron(base + "--bf16 --grad-reduce-in-bf16", "args", {0, 8}, true).value_of("memory.grad_precision") == "bf16");
  CHECK(error_of([&] { import_megatron(base + "--use-torch-fsdp2", "args", {0, 8}, true); }).find("--use-torch-fsdp2") !=
        std::string::npos);
  CHECK(error_of([&] {
          import_megatron(base + "--tensor-model-parallel-size 1073741824 --pipeline-model-parallel-size 1073741824",
                          "args", {0, 8}, true);
        }).find("--tensor-model-parallel-size: '1073741824' is not a whole number from 1 to 1000000") != std::string::npos);
  CHECK(error_of([&] { import_megatron("torchrun --nproc_per_node 4294967296 pretrain_gpt.py " + base, "run.sh", {0, 8}, true); })
            .find("the launcher's --nproc-per-node '4294967296'") != std::string::npos);
}

TEST_CASE("import torchtitan: no mixed precision without FSDP, DDP alone, expert tensor parallelism of 1") {
  const auto job = [](const std::string& parallelism) { return parse_toml("[parallelism]\n" + parallelism, "job.toml"); };
  // Tensor parallelism without sharding: neither fully_shard's policy nor DDP's autocast, so fp32.
  ImportedScenario s = import_torchtitan(job("tensor_parallel_degree = 8\ndata_parallel_shard_degree = 1"), "job.toml", {0, 8}, 32);
  CHECK(s.value_of("memory.precision") == "fp32");
  s = import_torchtitan(job("expert_parallel_degree = 8"), "job.toml", {0, 8}, 32);
  CHECK(s.value_of("parallel.etp") == "1");
  CHECK(error_of([&] { import_torchtitan(job("data_parallel_replicate_degree = 2\ntensor_parallel_degree = 4\n"
                                             "data_parallel_shard_degree = 1"), "job.toml", {0, 8}, 32); })
            .find("torchtitan's DDP runs without other parallelism") != std::string::npos);
  CHECK(error_of([&] { import_torchtitan(job("data_parallel_replicate_degree = 2\ncontext_parallel_degree = 4\n"
                                             "data_parallel_shard_degree = 1"), "job.toml", {0, 8}, 32); })
            .find("HSDP") != std::string::npos);
  CHECK(error_of([&] { import_torchtitan(parse_toml("[training]\nseq_len = 1e3\n", "job.toml"), "job.toml", {0, 8}, 32); })
            .find("training.seq_len: 1000.0 is not a whole number") != std::string::npos);
}

TEST_CASE("TOML: what the specification refuses is refused") {
  for (const char* bad : {"a = 010\n", "a = .5e4\n", "a = 1.e5\n", "a = \"\\u 032\"\n"})
    CHECK_MESSAGE(!error_of([&] { parse_toml(bad, "job.toml"); }).empty(), bad);
  CHECK(error_of([] { parse_toml("a = {b = 1}\n[a]\nc = 2\n", "job.toml"); }).find("job.toml:2: 'a' is an inline table") == 0);
  CHECK(error_of([] { parse_toml("training.seq_len = 512\n[training]\n", "job.toml"); })
            .find("job.toml:2: table [training] was defined by dotted keys before") == 0);
  // One line, whatever the input: a newline is named, not printed.
  const std::string message = error_of([] { parse_toml("[job\nx = 1\n", "job.toml"); });
  CHECK(message.find('\n') == std::string::npos);
  CHECK(message.find("the end of the line") != std::string::npos);
  CHECK(parse_toml("a = 0\nb = -0.5e-3\nc = 1e3\n", "job.toml").at("c").get<double>() == 1000);
}
