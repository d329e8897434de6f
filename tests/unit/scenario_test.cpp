#include <doctest/doctest.h>

#include <algorithm>

#include "common/error.hpp"
#include "config/scenario.hpp"
#include "config/scenario_options.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {

const char* const valid = test::tiny_scenario_ini;

std::string error_of(const std::string& name, const std::string& content, const std::vector<std::string>& overrides = {}) {
  const auto file = test::write_temp_file(name, content);
  try {
    load_scenario(file, overrides);
  } catch (const InputError& error) {
    return error.what();
  }
  FAIL("the scenario was accepted");
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

} // namespace

TEST_CASE("a valid scenario loads with defaults for missing keys") {
  const Scenario s = load_scenario(test::write_temp_file("valid.ini", valid), {});
  CHECK(s.name == "valid");
  CHECK(s.dp == 4);
  CHECK(s.seq_len == 512);
  CHECK(s.grad_accum == 4);  // 32 / (2 x 4)
  CHECK(s.precision == Precision::bf16);
  CHECK(s.grad_precision == Precision::fp32);  // auto: fp32 gradients for bf16 training
  CHECK(s.flash_attention);
  CHECK(s.tokens == 1e9);
  CHECK(s.bucket_bytes == 25.0 * 1024 * 1024);
  CHECK(s.model_file.filename() == "tiny-gpt.json");
  CHECK(s.platform_file.filename() == "dgx-a100-2n.xml");
}

TEST_CASE("--set overrides win over the file") {
  const Scenario s = load_scenario(test::write_temp_file("override.ini", valid),
                                   {"parallel.dp=8", "training.micro_batch=1", "memory.precision=fp16"});
  CHECK(s.dp == 8);
  CHECK(s.grad_accum == 4);  // 32 / (1 x 8)
  CHECK(s.grad_precision == Precision::fp16);
}

TEST_CASE("global_batch auto means no accumulation") {
  const Scenario s = load_scenario(test::write_temp_file("auto.ini", valid), {"training.global_batch=auto"});
  CHECK(s.global_batch == 8);
  CHECK(s.grad_accum == 1);
}

TEST_CASE("an unknown key names the file, the line and the accepted keys") {
  const std::string message = error_of("unknown.ini", std::string(valid) + "[memory]\nzeroo = 1\n");
  CHECK(contains(message, "unknown.ini:15"));
  CHECK(contains(message, "memory.zeroo"));
  CHECK(contains(message, "accepted"));
  CHECK(contains(message, "memory.zero"));
}

TEST_CASE("a bad value names the key and what is accepted") {
  const std::string precision = error_of("precision.ini", std::string(valid) + "[memory]\nprecision = int4\n");
  CHECK(contains(precision, "memory.precision"));
  CHECK(contains(precision, "fp32, fp16, bf16, fp8"));
  const std::string dp = error_of("dp.ini", valid, {"parallel.dp=zero"});
  CHECK(contains(dp, "--set parallel.dp=zero"));
  CHECK(contains(dp, "whole number"));
  const std::string efficiency = error_of("eff.ini", valid, {"compute.matmul_efficiency=1.5"});
  CHECK(contains(efficiency, "from 0.01 to 1"));
  // Too small to be an efficiency: times of 1e300 seconds, printed with 300 digits.
  CHECK(contains(error_of("tiny_eff.ini", valid, {"compute.memory_efficiency=1e-300"}), "out of range"));
  // Virtual stages without a pipeline would be accepted without effect.
  CHECK(contains(error_of("vpp.ini", valid, {"parallel.vpp=2"}), "needs parallel.pp > 1"));
  // Kernels are timed with their GPU's calibration: a fixed efficiency would be ignored.
  const std::string ignored =
      error_of("kernels_eff.ini", valid, {"compute.model=kernels", "compute.matmul_efficiency=0.6"});
  CHECK(contains(ignored, "compute.matmul_efficiency"));
  CHECK(contains(ignored, "compute.model = roofline or auto"));
  CHECK(contains(error_of("model.ini", valid, {"compute.model=analytic"}), "auto, kernels, roofline"));
  CHECK_NOTHROW(load_scenario(test::write_temp_file("roofline_eff.ini", valid),
                              {"compute.model=roofline", "compute.matmul_efficiency=0.6"}));
}

TEST_CASE("accumulation steps must be whole") {
  const std::string message = error_of("accum.ini", valid, {"training.global_batch=30"});
  CHECK(contains(message, "training.global_batch"));
  CHECK(contains(message, "2 x 4 = 8"));
}

TEST_CASE("model needs exactly one of name or path, and the file must exist") {
  CHECK(contains(error_of("nomodel.ini", "[platform]\nfile = dgx-a100.xml\n"), "exactly one of name"));
  const std::string missing = error_of("missing.ini", valid, {"model.name=llama9-1t"});
  CHECK(contains(missing, "llama9-1t"));
  CHECK(contains(missing, "llama2-7b"));  // lists what is available
}

TEST_CASE("a key set twice, a malformed line and an unknown --set key are errors") {
  CHECK(contains(error_of("twice.ini", std::string(valid) + "[parallel]\ndp = 2\n"), "set twice"));
  CHECK(contains(error_of("syntax.ini", std::string(valid) + "this is not ini\n"), "syntax.ini"));
  CHECK(contains(error_of("setkey.ini", valid, {"parallel.xp=2"}), "unknown key 'parallel.xp'"));
  CHECK(contains(error_of("setform.ini", valid, {"dp"}), "section.key=value"));
}

TEST_CASE("ZeRO stages, recompute strategies and gradient sync are read with their aliases") {
  const auto file = test::write_temp_file("strategies.ini", valid);
  const Scenario fsdp = load_scenario(file, {"memory.zero=fsdp", "memory.recompute=every:3"});
  CHECK(fsdp.zero == 3);
  CHECK(fsdp.recompute == Recompute::every);
  CHECK(fsdp.recompute_every == 3);
  CHECK(fsdp.grad_sync == GradSync::every);  // auto: DeepSpeed reduces every micro-batch under ZeRO-2/3
  CHECK(load_scenario(file, {"memory.zero=1"}).grad_sync == GradSync::last);
  const Scenario fp8 = load_scenario(file, {"memory.precision=fp8", "memory.grad_precision=same"});
  CHECK(fp8.grad_precision == Precision::bf16);
  CHECK(contains(error_of("zero.ini", valid, {"memory.zero=4"}), "0, 1, 2, 3, fsdp"));
  CHECK(contains(error_of("every0.ini", valid, {"memory.recompute=every:0"}), "every:4"));
  CHECK(contains(error_of("every.ini", valid, {"memory.recompute=every"}), "every:N"));
  CHECK(contains(error_of("budget.ini", valid, {"memory.activation_budget=-1GB"}), "memory.activation_budget"));
}

TEST_CASE("the option list documents every key with its default") {
  std::ostringstream help;
  help << scenario_options();
  for (const char* key : {"model.name", "platform.file", "parallel.dp", "memory.zero", "memory.recompute",
                          "memory.precision", "memory.flash_attention", "training.seq_len", "training.micro_batch",
                          "training.global_batch", "training.tokens"})
    CHECK(contains(help.str(), key));
  CHECK(contains(help.str(), "(=bf16)"));
  std::ostringstream keys;
  print_scenario_keys(keys);
  CHECK(contains(keys.str(), "[training]"));
  CHECK(contains(keys.str(), "precision = bf16"));
  CHECK(contains(keys.str(), "name = (none)"));
}

TEST_CASE("a model named on the command line replaces the file's model") {
  const auto file = test::write_temp_file("replace.ini", valid);
  const Scenario by_path =
      load_scenario(file, {"model.path=" + (test::source_dir() / "models" / "tiny-llama.json").string()});
  CHECK(by_path.model_file.filename() == "tiny-llama.json");
  const Scenario by_name = load_scenario(file, {"model.name=llama2-7b"});
  CHECK(by_name.model_file.filename() == "llama2-7b.json");
}

TEST_CASE("a setting changed where it has no effect is refused, naming what it needs") {
  const std::string budget = error_of("budget_none.ini", valid, {"memory.activation_budget=40GiB"});
  CHECK(contains(budget, "memory.activation_budget"));
  CHECK(contains(budget, "needs memory.recompute = optimal"));
  const std::string prefetch = error_of("prefetch.ini", valid, {"memory.zero=2", "memory.prefetch_depth=2"});
  CHECK(contains(prefetch, "memory.prefetch_depth"));
  CHECK(contains(prefetch, "memory.zero = 3"));
  const std::string pinned = error_of("pinned.ini", valid, {"memory.pinned_buffer_bytes=64MiB"});
  CHECK(contains(pinned, "memory.pinned_buffer_bytes"));
  CHECK(contains(pinned, "nvme"));
  CHECK(contains(error_of("schedule.ini", valid, {"parallel.schedule=gpipe"}), "parallel.pp > 1"));
  CHECK(contains(error_of("grad_copy.ini", valid, {"memory.fp32_grad_copy=true"}), "16-bit gradients"));
  CHECK(contains(error_of("tf32.ini", valid, {"compute.allow_tf32=false"}), "memory.precision = fp32"));
  CHECK(contains(error_of("sync.ini", valid, {"training.global_batch=8", "comm.grad_sync=every"}),
                 "gradient accumulation"));
  CHECK(contains(error_of("scatter.ini", valid, {"comm.pp_scatter_gather=true"}), "parallel.pp > 1"));
  const std::string leaf = error_of("leaf.ini", "[model]\nname = tiny-gpt\n[platform]\ngpu = a100-80gb\n"
                                                "oversubscription = 2\n");
  CHECK(contains(leaf, "platform.oversubscription"));
  CHECK(contains(leaf, "fat-tree or rail-optimized"));
  // Where they apply, they are read; written out at their defaults they change nothing and pass.
  const auto file = test::write_temp_file("applies.ini", valid);
  CHECK(load_scenario(file, {"memory.recompute=optimal", "memory.activation_budget=40GiB"}).activation_budget ==
        40.0 * 1024 * 1024 * 1024);
  CHECK(load_scenario(file, {"memory.zero=3", "memory.prefetch_depth=2"}).prefetch_depth == 2);
  CHECK_NOTHROW(load_scenario(file, {"memory.prefetch_depth=1", "memory.activation_budget=auto"}));
  CHECK(load_scenario(file, {"memory.precision=fp16", "memory.fp32_grad_copy=true"}).fp32_grad_copy);
  CHECK_NOTHROW(load_scenario(file, {"memory.fp32_grad_copy=no", "compute.allow_tf32=yes"}));
  CHECK(load_scenario(file, {"parallel.dp=1", "parallel.tp=2", "parallel.pp=2", "training.global_batch=8",
                             "comm.pp_scatter_gather=true"})
            .pp_scatter_gather);
}

TEST_CASE("a leading UTF-8 byte-order mark is skipped") {
  const Scenario s = load_scenario(test::write_temp_file("bom.ini", "\xEF\xBB\xBF" + std::string(valid)), {});
  CHECK(s.dp == 4);
  CHECK(s.model_file.filename() == "tiny-gpt.json");
}

TEST_CASE("malformed lines are named by their line number") {
  // valid has 13 lines; the bad line is the 14th.
  const std::string no_equals = error_of("noequals.ini", std::string(valid) + "this is not ini\n");
  CHECK(contains(no_equals, "noequals.ini:14"));
  CHECK(contains(no_equals, "key = value"));
  const std::string unclosed = error_of("unclosed.ini", std::string(valid) + "[memory\nzero = 1\n");
  CHECK(contains(unclosed, "unclosed.ini:14"));
  CHECK(contains(unclosed, "closing ']'"));
  CHECK(contains(error_of("twice_line.ini", std::string(valid) + "[parallel]\ndp = 2\n"), "twice_line.ini:15"));
  CHECK(contains(error_of("empty_section.ini", std::string(valid) + "[ ]\n"), "[model], [platform], [parallel]"));
}

TEST_CASE("an unknown key suggests the closest keys, not every key") {
  const std::string message = error_of("closest.ini", std::string(valid) + "[memory]\nzeroo = 1\n");
  CHECK(contains(message, "closest accepted: memory.zero,"));
  CHECK_FALSE(contains(message, "training.tokens"));
  CHECK(contains(error_of("closest_set.ini", valid, {"comm.bucket=1MiB"}), "comm.bucket_size"));
}

TEST_CASE("model.name is a catalog name, never a path") {
  const std::string message = error_of("traversal.ini", valid, {"model.name=../../../etc/passwd"});
  CHECK(contains(message, "model.name"));
  CHECK(contains(message, "not a path"));
  CHECK(contains(message, "model.path"));
  CHECK(contains(error_of("json_name.ini", valid, {"model.name=llama9"}), "no 'llama9' in models/"));
  CHECK(load_scenario(test::write_temp_file("json_name_ok.ini", valid), {"model.name=llama2-7b.json"})
            .model_file.filename() == "llama2-7b.json");
}

TEST_CASE("model.name may be a Hugging Face hub name that a config in models/ gives as its _name_or_path") {
  const auto file = test::write_temp_file("hub_name.ini", valid);
  CHECK(load_scenario(file, {"model.name=meta-llama/Llama-3.1-8B"}).model_file.filename() == "llama3.1-8b.json");
  // As the hub, case aside.
  CHECK(load_scenario(file, {"model.name=qwen/qwen2.5-72b"}).model_file.filename() == "qwen2.5-72b.json");
  const std::string message = error_of("hub_unknown.ini", valid, {"model.name=meta-llama/Llama-9"});
  CHECK(contains(message, "no config in models/ is 'meta-llama/Llama-9'"));
  CHECK(contains(message, "mistralai/Mistral-7B-v0.3"));
  CHECK(resolve_model_file("Qwen/Qwen2.5-7B", ".", "--model").filename() == "qwen2.5-7b.json");
}

TEST_CASE("parallel.dp = auto fills a described cluster with what tp, pp and cp leave") {
  const std::string described = R"([model]
name = tiny-gpt
[platform]
gpu = a100-80gb
nodes = 2
[parallel]
dp = auto
tp = 2
[training]
seq_len = 512
global_batch = 64
)";
  const auto file = test::write_temp_file("dp_auto.ini", described);
  // 2 nodes x 8 GPUs / tp 2 = 8; with 4 nodes, 16.
  CHECK(load_scenario(file, {}).dp == 8);
  CHECK(load_scenario(file, {"platform.nodes=4"}).dp == 16);
  CHECK(contains(error_of("dp_auto_indivisible.ini", described, {"parallel.tp=3"}),
                 "tp x pp x cp = 3 does not divide the cluster's 16 GPUs"));
  // A platform file's GPUs are known only once SimGrid loads it.
  CHECK(contains(error_of("dp_auto_file.ini", valid, {"parallel.dp=auto"}), "auto fills a described cluster"));
}

TEST_CASE("efficiencies that are not fractions say so, not that a count is expected") {
  for (const char* bad : {"nan", "inf", "55%"}) {
    const std::string message = error_of("efficiency.ini", valid, {std::string("compute.matmul_efficiency=") + bad});
    CHECK(contains(message, "from 0.01 to 1"));
    CHECK_FALSE(contains(message, "count"));
  }
  for (const char* bad : {"0", "1.2", "80%"})
    CHECK(contains(error_of("bandwidth.ini", valid, {std::string("comm.bandwidth_efficiency=") + bad}),
                   "comm.bandwidth_efficiency = '" + std::string(bad) + "'"));
  CHECK(load_scenario(test::write_temp_file("bandwidth_ok.ini", valid), {"comm.bandwidth_efficiency=0.8"})
            .bandwidth_efficiency == 0.8);
  const std::string ratio = error_of("ratio.ini", "[model]\nname = tiny-gpt\n[platform]\ngpu = a100-80gb\n"
                                                  "topology = fat-tree\noversubscription = nan\n");
  CHECK(contains(ratio, "1 (non-blocking) to 64"));
  CHECK_FALSE(contains(ratio, "count"));
}

TEST_CASE("byte sizes need their unit and token counts a sane range") {
  const std::string bucket = error_of("bucket.ini", valid, {"comm.bucket_size=25"});
  CHECK(contains(bucket, "comm.bucket_size"));
  CHECK(contains(bucket, "no unit"));
  CHECK(contains(bucket, "25MiB"));
  CHECK(load_scenario(test::write_temp_file("bucket_b.ini", valid), {"comm.bucket_size=1000B"}).bucket_bytes == 1000);
  const std::string tokens = error_of("tokens.ini", valid, {"training.tokens=1e308"});
  CHECK(contains(tokens, "training.tokens"));
  CHECK(contains(tokens, "1000T"));
  CHECK(load_scenario(test::write_temp_file("tokens_ok.ini", valid), {"training.tokens=2T"}).tokens == 2e12);
}

TEST_CASE("a directory given as the scenario is named as one") {
  test::write_temp_file("beside.ini", valid);  // so that the folder exists
  try {
    load_scenario(test::temp_dir(), {});
    FAIL("a directory was accepted");
  } catch (const InputError& error) {
    CHECK(contains(error.what(), "is a directory"));
  }
}

// training.framework picks the defaults each framework ships with; the sources are cited where
// scenario.cpp sets them.
TEST_CASE("the framework follows from the strategy unless named, and sets its bucketing and overlap") {
  const auto file = test::write_temp_file("framework.ini", valid);
  const auto load = [&](std::vector<std::string> overrides) { return load_scenario(file, overrides); };

  const Scenario ddp = load({});  // dp only, no ZeRO: PyTorch DDP, 25 MiB buckets launched from backward hooks
  CHECK(ddp.framework == Framework::ddp);
  CHECK(ddp.overlap_grad_reduce);
  CHECK(ddp.bucket_bytes == 25.0 * 1024 * 1024);
  CHECK(ddp.settings.at("training.framework") == "ddp");

  // ZeRO-2: DeepSpeed, reduce_bucket_size 5e8 elements (fp32 gradients: 2e9 bytes), overlap_comm off below stage 3.
  const Scenario zero2 = load({"memory.zero=2"});
  CHECK(zero2.framework == Framework::deepspeed);
  CHECK_FALSE(zero2.overlap_grad_reduce);
  CHECK(zero2.bucket_bytes == 5e8 * 4);

  // ZeRO-3: FSDP2, which reduce-scatters each layer's gradients as backward produces them.
  const Scenario zero3 = load({"memory.zero=3"});
  CHECK(zero3.framework == Framework::fsdp2);
  CHECK(zero3.bucket_per_layer);
  CHECK(zero3.overlap_grad_reduce);
  CHECK(zero3.settings.at("comm.bucket_size") == "each layer");
  CHECK(load({"training.framework=fsdp2"}).zero == 3);  // FSDP2 shards everything unless told otherwise
  const Scenario deepspeed3 = load({"memory.zero=3", "training.framework=deepspeed"});
  CHECK(deepspeed3.overlap_grad_reduce);  // overlap_comm defaults to true at stage 3
  CHECK_FALSE(deepspeed3.bucket_per_layer);

  // Tensor parallelism: Megatron-Core, whose --overlap-grad-reduce is off by default, and then one
  // bucket holds every gradient; with it on, buckets of max(4e7, 1e6 x dp) parameters.
  const Scenario megatron = load({"parallel.tp=2", "parallel.dp=2"});
  CHECK(megatron.framework == Framework::megatron);
  CHECK_FALSE(megatron.overlap_grad_reduce);
  CHECK(megatron.settings.at("comm.bucket_size") == "all gradients");
  const Scenario overlapping = load({"parallel.tp=2", "parallel.dp=2", "comm.overlap_grad_reduce=true"});
  CHECK(overlapping.bucket_bytes == 4e7 * 4);  // fp32 gradients; 1e6 x dp = 2e6 < 4e7
  const Scenario wide = load({"training.framework=megatron", "parallel.dp=64", "training.global_batch=128",
                              "comm.overlap_grad_reduce=true"});
  CHECK(wide.bucket_bytes == 6.4e7 * 4);  // 1e6 x 64 > 4e7
}

TEST_CASE("a framework refuses the strategies it does not have, and the settings it does not use") {
  CHECK(contains(error_of("ddp_zero.ini", valid, {"training.framework=ddp", "memory.zero=1"}), "training.framework"));
  // Only DeepSpeed has ZeRO-2; FSDP2 is ZeRO-3 alone.
  CHECK(contains(error_of("megatron_zero.ini", valid, {"training.framework=megatron", "memory.zero=2"}),
                 "with memory.zero = 2 accepted: deepspeed"));
  CHECK(contains(error_of("megatron_zero3.ini", valid, {"training.framework=megatron", "memory.zero=3"}),
                 "accepted: deepspeed or fsdp2"));
  CHECK(contains(error_of("fsdp2_zero.ini", valid, {"training.framework=fsdp2", "memory.zero=1"}), "ZeRO-3"));
  CHECK(contains(error_of("fsdp2_offload.ini", valid,
                          {"training.framework=fsdp2", "memory.offload_optimizer=cpu"}), "deepspeed"));
  CHECK(contains(error_of("fsdp2_bucket.ini", valid, {"training.framework=fsdp2", "comm.bucket_size=25MiB"}),
                 "comm.bucket_size"));
  CHECK(contains(error_of("megatron_bucket.ini", valid, {"parallel.tp=2", "parallel.dp=2", "comm.bucket_size=25MiB"}),
                 "overlap_grad_reduce = true"));
  CHECK(contains(error_of("unknown_framework.ini", valid, {"training.framework=jax"}), "megatron"));
  // overlap_param_gather is Megatron-Core's, for its distributed optimizer, with overlap_grad_reduce.
  const std::vector<std::string> distributed = {"training.framework=megatron", "memory.zero=1", "parallel.dp=2",
                                                "comm.overlap_grad_reduce=true", "comm.overlap_param_gather=true"};
  const Scenario overlapped = load_scenario(test::write_temp_file("param_gather.ini", valid), distributed);
  CHECK(overlapped.overlap_param_gather);
  CHECK(overlapped.settings.at("comm.overlap_param_gather") == "true");
  const auto without = [&](const std::string& setting, const std::string& instead) {
    std::vector<std::string> changed = distributed;
    std::replace(changed.begin(), changed.end(), setting, instead);
    return error_of("param_gather_" + instead.substr(0, instead.find('=')) + ".ini", valid, changed);
  };
  CHECK(contains(without("training.framework=megatron", "training.framework=deepspeed"), "Megatron-Core's"));
  CHECK(contains(without("memory.zero=1", "memory.zero=0"), "distributed optimizer"));
  CHECK(contains(without("parallel.dp=2", "parallel.dp=1"), "more than one data-parallel rank"));
  CHECK(contains(without("comm.overlap_grad_reduce=true", "comm.overlap_grad_reduce=false"),
                 "comm.overlap_grad_reduce = true"));
  CHECK_FALSE(load_scenario(test::write_temp_file("param_gather_default.ini", valid), {}).overlap_param_gather);
  // tp_comm_overlap is Megatron-Core's too, under sequence parallelism, without context parallelism.
  const std::vector<std::string> userbuffers = {"parallel.tp=2", "parallel.sp=true", "parallel.dp=2",
                                                "comm.tp_comm_overlap=true"};
  CHECK(load_scenario(test::write_temp_file("tp_overlap.ini", valid), userbuffers).tp_comm_overlap);
  const auto changed = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> overrides = userbuffers;
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    return error_of(name, valid, overrides);
  };
  CHECK(contains(changed("tp_overlap_no_sp.ini", {"parallel.sp=false"}), "parallel.sp = true"));
  CHECK(contains(changed("tp_overlap_cp.ini", {"parallel.cp=2", "parallel.dp=1"}), "parallel.cp = 1"));
  CHECK(contains(changed("tp_overlap_ddp.ini", {"training.framework=deepspeed"}), "Transformer Engine"));
  CHECK(contains(error_of("slowdown.ini", valid, {"compute.comm_slowdown=1.5"}), "0 to 1"));
  CHECK(load_scenario(test::write_temp_file("no_slowdown.ini", valid), {"compute.comm_slowdown=0"}).comm_slowdown == 0);
}

TEST_CASE("the attention kernel follows the framework unless named, and is refused where it has no effect") {
  const auto file = test::write_temp_file("attention_kernel.ini", valid);
  const auto load = [&](std::vector<std::string> overrides) { return load_scenario(file, overrides); };
  // Megatron-Core attends through Transformer Engine, PyTorch frameworks through SDPA's
  // FlashAttention-2 backend.
  CHECK(load({"training.framework=megatron"}).efficiency.attention == AttentionKernel::transformer_engine);
  CHECK(load({}).efficiency.attention == AttentionKernel::fa2);
  const Scenario named = load({"compute.model=kernels", "compute.attention_kernel=fa3"});
  CHECK(named.efficiency.attention == AttentionKernel::fa3);
  CHECK(named.settings.at("compute.attention_kernel") == "fa3");
  CHECK(contains(error_of("attention_roofline.ini", valid, {"compute.attention_kernel=cudnn"}),
                 "compute.attention_kernel = 'cudnn': has no effect here; it needs compute.model = kernels or auto"));
  CHECK(contains(error_of("attention_eager.ini", valid,
                          {"compute.model=kernels", "memory.flash_attention=false", "compute.attention_kernel=fa2"}),
                 "it needs memory.flash_attention = true"));
  CHECK(contains(error_of("attention_bad.ini", valid, {"compute.model=kernels", "compute.attention_kernel=fa4"}),
                 "fa2, fa3, cudnn, te"));
}
