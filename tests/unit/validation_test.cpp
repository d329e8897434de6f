// The table of published measurements: its parsing and errors, the sources' formulas that turn a
// simulated step time into their quantity, the error summary, and the model files it names.
#include <doctest/doctest.h>

#include <cmath>

#include "common/error.hpp"
#include "model/model.hpp"
#include "validate/validation.hpp"
#include "test_support.hpp"

using namespace trainsim;

namespace {

const std::string header =
    "set,label,gpu,nodes,gpus_per_node,model,seq_len,micro_batch,global_batch,tp,pp,dp,cp,vpp,sp,zero,recompute,"
    "precision,flash_attention,settings,measured_kind,measured,source,not_simulated\n";
const std::string simulated_row =
    "demo,tiny,a100-80gb,1,8,tiny-gpt,512,2,32,2,1,4,1,1,true,1,selective,bf16,true,comm.overlap_grad_reduce=true comm.bucket_size=50MiB,"
    "step_time_s,0.5,\"a paper, Table 9\",\n";
const std::string listed_row =
    "demo,huge,h100-sxm,2048,8,no-such-model,8192,1,2048,8,16,128,1,1,false,0,none,bf16,true,,megatron_mfu,0.41,"
    "a report,\"too big, for now\"\n";

// The message of the InputError that parsing `text` throws ("" when it parses).
std::string parse_error(const std::string& text) {
  try {
    parse_published(text, "table.csv");
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

// `simulated_row` with field `column` (0-based) replaced.
std::string with_field(std::size_t column, const std::string& value) {
  std::string row = "demo,tiny,a100-80gb,1,8,tiny-gpt,512,2,32,2,1,4,1,1,true,1,selective,bf16,true,,step_time_s,0.5,src,\n";
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (std::size_t comma = row.find(','); comma != std::string::npos; comma = row.find(',', start)) {
    fields.push_back(row.substr(start, comma - start));
    start = comma + 1;
  }
  fields.push_back(row.substr(start));
  fields[column] = value;
  std::string joined;
  for (std::size_t i = 0; i < fields.size(); ++i)
    joined += (i ? "," : "") + fields[i];
  return joined;
}

PublishedRow row_of(MeasuredKind kind, long long global_batch, long long seq_len, int gpus) {
  PublishedRow row;
  row.kind = kind;
  row.global_batch = global_batch;
  row.seq_len = seq_len;
  row.nodes = gpus / 8;
  row.gpus_per_node = 8;
  return row;
}

ModelSpec gpt(long long hidden, long long layers, long long vocab) {
  ModelSpec model;
  model.hidden = hidden;
  model.layers = layers;
  model.vocab = vocab;
  return model;
}

} // namespace

TEST_CASE("a table's rows: every column read, quoted fields with commas, rows not simulated kept with their reason") {
  const auto rows = parse_published("# comment\n" + header + simulated_row + "\n" + listed_row, "table.csv");
  REQUIRE(rows.size() == 2);
  const PublishedRow& row = rows[0];
  CHECK(row.line == 3);
  CHECK(row.set == "demo");
  CHECK(row.gpus() == 8);
  CHECK(row.tp == 2);
  CHECK(row.dp == 4);
  CHECK(row.micro_batch == 2);
  CHECK(row.global_batch == 32);
  CHECK(row.zero == 1);
  CHECK(row.sp == "true");
  CHECK(row.kind == MeasuredKind::step_time_s);
  CHECK(row.measured == 0.5);
  CHECK(row.source == "a paper, Table 9");
  CHECK(row.not_simulated.empty());
  REQUIRE(row.extra.size() == 2);  // space-separated
  CHECK(row.extra[0].first == "comm.overlap_grad_reduce");
  CHECK(row.extra[1].first == "comm.bucket_size");
  CHECK(rows[1].not_simulated == "too big, for now");
  CHECK(rows[1].gpus() == 16384);

  // What `trainsim run` is given: the cluster, the model, the layout and batch, then the extras.
  const Settings settings = scenario_settings(row);
  const auto value = [&](const std::string& key) {
    for (const auto& [k, v] : settings)
      if (k == key)
        return v;
    return std::string("(absent)");
  };
  CHECK(value("platform.gpu") == "a100-80gb");
  CHECK(value("platform.nodes") == "1");
  CHECK(value("parallel.tp") == "2");
  CHECK(value("parallel.sp") == "true");
  CHECK(value("memory.recompute") == "selective");
  CHECK(value("training.global_batch") == "32");
  CHECK(settings.back().first == "comm.bucket_size");
  CHECK(settings.back().second == "50MiB");
}

TEST_CASE("a bad table is refused with one line naming the file, the line and the column") {
  CHECK(parse_error("") == "table.csv: no header line; accepted: a CSV whose first line names the columns set,label,gpu,"
                           "nodes,gpus_per_node,model,seq_len,micro_batch,global_batch,tp,pp,dp,cp,vpp,sp,zero,recompute,"
                           "precision,flash_attention,settings,measured_kind,measured,source,not_simulated");
  CHECK(parse_error(header) == "table.csv: no rows after the header");
  CHECK(parse_error("set,label,colour\n").find("table.csv:1: unknown column 'colour'; accepted: set, label,") == 0);
  CHECK(parse_error("set,label\n").find("table.csv:1: column 'gpu' is missing") == 0);
  CHECK(parse_error(header + "demo,tiny\n") == "table.csv:2: 2 fields; the header names 24");
  CHECK(parse_error(header + "demo,\"tiny\n") == "table.csv:2: a quote is not closed; accepted: fields quoted as \"a, b\"");
  CHECK(parse_error(header + with_field(9, "two")) ==
        "table.csv:2: column 'tp' = 'two': accepted: a whole number from 1 to 1048576");
  CHECK(parse_error(header + with_field(15, "4")) == "table.csv:2: column 'zero' = '4': accepted: a whole number from 0 to 3");
  CHECK(parse_error(header + with_field(14, "yes")) == "table.csv:2: column 'sp' = 'yes': accepted: true, false");
  CHECK(parse_error(header + with_field(21, "-3")) ==
        "table.csv:2: column 'measured' = '-3': accepted: a positive number such as 137 or 13.75");
  CHECK(parse_error(header + with_field(20, "seconds")) ==
        "table.csv:2: column 'measured_kind' = 'seconds': accepted: step_time_s, tokens_per_s_per_gpu, samples_per_s_per_gpu, "
        "megatron_tflops_per_gpu, megatron_mfu, megatron_core_tflops_per_gpu, megatron_core_2025_tflops_per_gpu");
  CHECK(parse_error(header + with_field(2, "a99")).find("table.csv:2: column 'gpu'") == 0);
  CHECK(parse_error(header + with_field(19, "comm.colour=red")).find("table.csv:2: column 'settings': unknown key 'comm.colour'") == 0);
  CHECK(parse_error(header + with_field(19, "comm.fidelity")).find("table.csv:2: column 'settings' = 'comm.fidelity': 'comm.fidelity' is "
                                                                   "not key=value") == 0);
  CHECK(parse_error(header + with_field(19, "parallel.tp=4")) ==
        "table.csv:2: column 'settings' = 'parallel.tp=4': parallel.tp is set by its own column; accepted: keys no column sets");
  CHECK(parse_error(header + with_field(19, "comm.fidelity=fast")).find("comm.fidelity is set by trainsim validate --fidelity") !=
        std::string::npos);
  // 2 x 1 x 2 x 1 = 4 ranks on 8 GPUs: the source used every GPU, so this is a typo.
  CHECK(parse_error(header + with_field(11, "2")) ==
        "table.csv:2: column 'dp' = '2': tp x pp x dp x cp = 4 ranks but nodes x gpus_per_node = 8 GPUs; accepted: a "
        "layout of every GPU, as the source ran it");
  CHECK(parse_error(header + simulated_row + simulated_row) ==
        "table.csv:3: set 'demo' already has a row labelled 'tiny'; accepted: labels unique within a set");
  // The scenario's own checks, at the row's line: a recompute mode it does not know, a model
  // missing from models/ (rows not simulated are not checked: they are only listed).
  const std::string bad_recompute = parse_error(header + with_field(16, "sometimes"));
  CHECK(bad_recompute.find("table.csv:2 (demo tiny): --set memory.recompute=sometimes") == 0);
  CHECK(parse_error(header + with_field(5, "no-such-model")).find("table.csv:2 (demo tiny): ") == 0);
  CHECK(parse_error(header + listed_row).empty());
}

TEST_CASE("predictions in the sources' quantities, from their formulas") {
  // Korthikanti et al. 2022, Table 5: the 22B model (h 6144, 48 layers, V 51200, global batch 4
  // of 2048 tokens on 8 A100s) takes 1.10 s with sequence parallelism and selective recompute;
  // the Megatron-LM README gives its MFU as 41.5 %. The 1T model (h 25600, 128 layers, batch 512
  // on 512 GPUs) takes 71.49 s: MFU 56.3 %. Both at A100's 312 TFLOP/s.
  CHECK(predicted_quantity(row_of(MeasuredKind::megatron_mfu, 4, 2048, 8), gpt(6144, 48, 51200), 312e12, 1.10) ==
        doctest::Approx(0.415).epsilon(0.005));
  CHECK(predicted_quantity(row_of(MeasuredKind::megatron_mfu, 512, 2048, 512), gpt(25600, 128, 51200), 312e12, 71.49) ==
        doctest::Approx(0.563).epsilon(0.005));
  // Narayanan et al. 2021, eq. 3 for Table 1's first row (1.7B: h 2304, 24 layers, batch 512 of
  // 2048 on 32 GPUs): 96 x 512 x 2048 x 24 x 2304^2 = 1.28247e16, times (1 + 2048/13824 +
  // 51200/(16 x 24 x 2304)) = 1.206019: 1.54668e16 FLOPs per step. At the published 137 TFLOP/s
  // per GPU the step takes 1.54668e16 / (32 x 137e12) = 3.528 s.
  CHECK(predicted_quantity(row_of(MeasuredKind::megatron_tflops_per_gpu, 512, 2048, 32), gpt(2304, 24, 51200), 0, 3.528) ==
        doctest::Approx(137).epsilon(0.001));
  // Megatron-LM's num_floating_point_operations for Mixtral 8x7B (h 4096, 32 layers, 32 heads of
  // 128 with 8 key-value groups, SwiGLU, top-2 of experts with 14336 inner, padded vocabulary
  // 32000), global batch 256 of 4096: 12 x 256 x 4096 x 32 x 4096^2 = 6.75540e15, times
  // attention (1 + 8/32 + 4096/4096) = 2.25, experts 14336/4096 x 2 x 1.5 = 10.5 and logits
  // 32000 / (2 x 32 x 4096) = 0.12207: 8.69560e16 FLOPs per step. At the published 468 TFLOP/s
  // on 64 GPUs the step takes 8.69560e16 / (64 x 468e12) = 2.90318 s.
  ModelSpec mixtral = gpt(4096, 32, 32000);
  mixtral.padded_vocab = 32000;
  mixtral.heads = 32;
  mixtral.kv_heads = 8;
  mixtral.head_dim = 128;
  mixtral.gated_mlp = true;
  mixtral.experts = 8;
  mixtral.experts_per_token = 2;
  mixtral.expert_ffn = 14336;
  CHECK(predicted_quantity(row_of(MeasuredKind::megatron_core_tflops_per_gpu, 256, 4096, 64), mixtral, 0, 2.90318) ==
        doctest::Approx(468).epsilon(0.0001));
  // Megatron-LM since March 2025 (commit 8873b55) counts half the scores: attention (1 + 8/32 +
  // 4096/4096/2) = 1.75 instead of 2.25, so the same step reports 12.37207/12.87207 of it.
  CHECK(predicted_quantity(row_of(MeasuredKind::megatron_core_2025_tflops_per_gpu, 256, 4096, 64), mixtral, 0, 2.90318) ==
        doctest::Approx(468 * 12.37207 / 12.87207).epsilon(0.0001));
  // A dense model takes its MLP once: the same model with a dense 14336 MLP does 2.25 + 5.25 +
  // 0.12207 = 7.62207 of the 12.87207 above per step.
  mixtral.experts = 0;
  mixtral.ffn = 14336;
  CHECK(predicted_quantity(row_of(MeasuredKind::megatron_core_tflops_per_gpu, 256, 4096, 64), mixtral, 0, 2.90318) ==
        doctest::Approx(468 * 7.62207 / 12.87207).epsilon(0.0001));
  // llm-foundry's MPT-125m row on 8 A100-80GB: 640 sequences of 2048 tokens per step at 142,830
  // tokens/s per GPU is a step of 640 x 2048 / (8 x 142830) = 1.14710 s.
  CHECK(predicted_quantity(row_of(MeasuredKind::tokens_per_s_per_gpu, 640, 2048, 8), gpt(768, 12, 50368), 0, 1.14710) ==
        doctest::Approx(142830).epsilon(0.0001));
  CHECK(predicted_quantity(row_of(MeasuredKind::step_time_s, 64, 2048, 64), gpt(12288, 96, 51200), 0, 13.75) == 13.75);
}

TEST_CASE("mean and max |error| per set and over all, counting only the rows simulated") {
  const auto result = [](const std::string& set, const std::string& status, double error) {
    ValidationResult r;
    r.row.set = set;
    r.status = status;
    r.error = error;
    return r;
  };
  const auto sets = summarize({result("a", "ok", 0.1), result("b", "ok", 0.2), result("a", "ok", -0.3),
                               result("b", "failed", 0), result("c", "not simulated", 0)});
  REQUIRE(sets.size() == 4);
  CHECK(sets[0].set == "a");
  CHECK(sets[0].rows == 2);
  CHECK(sets[0].simulated == 2);
  CHECK(sets[0].mean_abs_error == doctest::Approx(0.2));
  CHECK(sets[0].max_abs_error == doctest::Approx(0.3));
  CHECK(sets[1].set == "b");
  CHECK(sets[1].rows == 2);
  CHECK(sets[1].simulated == 1);
  CHECK(sets[1].mean_abs_error == doctest::Approx(0.2));
  CHECK(sets[2].set == "c");
  CHECK(sets[2].simulated == 0);
  CHECK(sets[2].mean_abs_error == 0);
  CHECK(sets[3].set == "all");
  CHECK(sets[3].rows == 5);
  CHECK(sets[3].simulated == 3);
  CHECK(sets[3].mean_abs_error == doctest::Approx(0.2));
  CHECK(sets[3].max_abs_error == doctest::Approx(0.3));
}

TEST_CASE("the validation models have the parameter counts their sources print") {
  // MPT trains its 50,368-token vocabulary unpadded (the table's rows set model.vocab_multiple=1).
  const auto total = [](const std::string& name) {
    const long long multiple = name.rfind("mpt-", 0) == 0 ? 1 : 128;
    return count_parameters(load_model(test::source_dir() / "models" / (name + ".json"), multiple)).total;
  };
  // llm-foundry scripts/train/benchmarking/README.md, column NumParams of the rows at 2048 tokens.
  CHECK(total("mpt-125m") == 125311488);
  CHECK(total("mpt-350m") == 355985408);
  CHECK(total("mpt-760m") == 760470528);
  CHECK(total("mpt-1b") == 1315950592);
  CHECK(total("mpt-3b") == 2651837440);
  CHECK(total("mpt-7b") == 6658859008);
  CHECK(total("mpt-13b") == 12853954560);
  CHECK(total("mpt-30b") == 29975214080);
  CHECK(total("mpt-70b") == 64862437376);
  // Narayanan et al. 2021, Table 1 (billions, from eq. 2), and Korthikanti et al. 2022's 22B.
  const std::vector<std::pair<std::string, double>> billions = {
      {"megatron-1.7b", 1.7},   {"megatron-3.6b", 3.6},   {"megatron-7.5b", 7.5},   {"megatron-18b", 18.4},
      {"megatron-39b", 39.1},   {"megatron-76b", 76.1},   {"megatron-145b", 145.6}, {"megatron-310b", 310.1},
      {"megatron-530b", 529.6}, {"megatron-1t", 1008.0},  {"megatron-22b", 22.0}};
  for (const auto& [name, published] : billions) {
    CAPTURE(name);
    CHECK(std::round(static_cast<double>(total(name)) / 1e8) / 10 == doctest::Approx(published).epsilon(0.005));
  }
}
