#include <doctest/doctest.h>

#include "common/error.hpp"
#include "config/scenario.hpp"
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
  CHECK(contains(efficiency, "(0, 1]"));
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
  CHECK(contains(error_of("setkey.ini", valid, {"parallel.ep=2"}), "unknown key 'parallel.ep'"));
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
