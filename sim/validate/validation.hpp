#pragma once
// Validation against published end-to-end measurements (validation/published.csv): each row is
// a run someone measured (a GPU, a node count, a model, the parallel settings the source
// states, the measured value); trainsim simulates it with its defaults and compares the
// prediction with the measurement in the source's own quantity, converted from the simulated
// step time by the source's own formula. The figures are never fitted to: they only score the
// defaults. Pure: the processes that simulate the rows are the CLI's business.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweep/sweep.hpp"

namespace trainsim {

struct ModelSpec;

// What a source measured, and so how a simulated step time becomes comparable with it.
enum class MeasuredKind {
  step_time_s,              // seconds per optimizer step
  tokens_per_s_per_gpu,     // global batch x sequence / (GPUs x step time)
  samples_per_s_per_gpu,    // global batch / (GPUs x step time)
  megatron_tflops_per_gpu,  // Narayanan et al. 2021, eq. 3: 96 B s l h^2 (1 + s/6h + V/16lh) / (GPUs x step)
  megatron_mfu,             // Korthikanti et al. 2022: 72 B s l h^2 (1 + s/6h + V/12lh) / (GPUs x step x peak)
  // Megatron-LM's num_floating_point_operations (training.py, 2024: grouped-query attention,
  // SwiGLU, the top-k experts of a mixture) / (GPUs x step), in TFLOP/s
  megatron_core_tflops_per_gpu,
  // The same since Megatron-LM commit 8873b55 (March 2025, first in core_r0.12.0): the attention
  // scores counted causal, half the s x s product
  megatron_core_2025_tflops_per_gpu,
};
const char* to_string(MeasuredKind kind);

struct PublishedRow {
  std::size_t line = 0;     // in the file, for messages
  std::string set, label, gpu, model;
  int nodes = 1, gpus_per_node = 8;
  long long seq_len = 2048, micro_batch = 1, global_batch = 1;
  int tp = 1, pp = 1, dp = 1, cp = 1, vpp = 1, zero = 0;
  std::string sp, recompute, precision, flash_attention;
  Settings extra;           // further scenario keys the source states (the settings column)
  MeasuredKind kind = MeasuredKind::step_time_s;
  double measured = 0;
  std::string source;
  std::string not_simulated;  // why trainsim cannot simulate it; empty: it can

  int gpus() const { return nodes * gpus_per_node; }
};

// The file's rows. InputError "FILE:LINE: column 'C' = 'V': problem; accepted: ..." for a
// missing column, a value of the wrong kind, an unknown scenario key in the settings column or
// a layout that does not use every GPU.
std::vector<PublishedRow> parse_published(const std::string& text, const std::string& file);
std::vector<PublishedRow> read_published(const std::filesystem::path& file);

// The scenario keys that describe the row's run (the cluster, the model, the layout, the batch,
// then the settings column), for `trainsim run --set`.
Settings scenario_settings(const PublishedRow& row);

// The row's quantity from a simulated step time, by the source's formula; `peak_flops` is the
// GPU's dense peak in the row's precision (used by megatron_mfu).
double predicted_quantity(const PublishedRow& row, const ModelSpec& model, double peak_flops, double step_time_s);

struct ValidationResult {
  PublishedRow row;
  std::string status;       // ok | not simulated | invalid (the scenario refused it) | failed
  std::string reason;
  double step_time_s = 0;
  double predicted = 0;
  double error = 0;         // predicted / measured - 1
};

// A row's result from its simulation (`simulated`: the worker's row, as a sweep records it): the
// prediction in the source's quantity and its error when it ran, else its status and reason.
ValidationResult compare(const PublishedRow& row, const SweepRow& simulated);

struct SetSummary {
  std::string set;          // "all" for every set together
  std::size_t rows = 0, simulated = 0;
  double mean_abs_error = 0, max_abs_error = 0;
};
// One summary per set in order of first appearance, then "all".
std::vector<SetSummary> summarize(const std::vector<ValidationResult>& results);

// The printed table: every row with its error, the rows not simulated with their reason, then
// the mean and max |error| per set.
std::string validation_table(const std::vector<ValidationResult>& results);
std::string validation_csv(const std::vector<ValidationResult>& results);
nlohmann::json validation_json(const std::vector<ValidationResult>& results);

} // namespace trainsim
