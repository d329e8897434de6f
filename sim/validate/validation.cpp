#include "validate/validation.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cluster/cluster.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "config/scenario.hpp"
#include "config/scenario_options.hpp"
#include "model/model.hpp"

namespace fs = std::filesystem;

namespace trainsim {
namespace {

const std::vector<std::string>& columns() {
  static const std::vector<std::string> names = {
      "set", "label", "gpu", "nodes", "gpus_per_node", "model", "seq_len", "micro_batch", "global_batch",
      "tp", "pp", "dp", "cp", "vpp", "sp", "zero", "recompute", "precision", "flash_attention", "settings",
      "measured_kind", "measured", "source", "not_simulated"};
  return names;
}

std::string column_list(const char* separator) {
  std::string all;
  for (const std::string& name : columns())
    all += (all.empty() ? "" : separator) + name;
  return all;
}

const std::vector<std::pair<MeasuredKind, const char*>>& kind_names() {
  static const std::vector<std::pair<MeasuredKind, const char*>> names = {
      {MeasuredKind::step_time_s, "step_time_s"},
      {MeasuredKind::tokens_per_s_per_gpu, "tokens_per_s_per_gpu"},
      {MeasuredKind::samples_per_s_per_gpu, "samples_per_s_per_gpu"},
      {MeasuredKind::megatron_tflops_per_gpu, "megatron_tflops_per_gpu"},
      {MeasuredKind::megatron_mfu, "megatron_mfu"},
      {MeasuredKind::megatron_core_tflops_per_gpu, "megatron_core_tflops_per_gpu"},
      {MeasuredKind::megatron_core_2025_tflops_per_gpu, "megatron_core_2025_tflops_per_gpu"}};
  return names;
}

// One CSV record: fields split at commas outside double quotes, "" inside quotes a quote.
// False when a quote is left open.
bool split_record(const std::string& line, std::vector<std::string>& fields) {
  fields.assign(1, "");
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      fields.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return !quoted;
}

// A record's fields by column name, with where it came from for messages.
class Record {
public:
  Record(std::string where, std::map<std::string, std::string> fields) : where_(std::move(where)), fields_(std::move(fields)) {}

  const std::string& where() const { return where_; }
  const std::string& text(const std::string& column) const { return fields_.at(column); }

  [[noreturn]] void fail(const std::string& column, const std::string& problem) const {
    throw InputError(where_ + ": column '" + column + "' = '" + text(column) + "': " + problem);
  }

  std::string required(const std::string& column) const {
    if (text(column).empty())
      fail(column, "empty; accepted: " + std::string(column == "model" ? "a model in models/" : "any text"));
    return text(column);
  }

  long long integer(const std::string& column, long long min, long long max) const {
    long long value = 0;
    if (!parse_integer(text(column), value) || value < min || value > max)
      fail(column, "accepted: a whole number from " + std::to_string(min) + " to " + std::to_string(max));
    return value;
  }

  double positive(const std::string& column) const {
    try {
      std::size_t used = 0;
      const double value = std::stod(text(column), &used);
      if (used == text(column).size() && std::isfinite(value) && value > 0)
        return value;
    } catch (const std::exception&) {
    }
    fail(column, "accepted: a positive number such as 137 or 13.75");
  }

  std::string boolean(const std::string& column) const {
    if (text(column) != "true" && text(column) != "false")
      fail(column, "accepted: true, false");
    return text(column);
  }

private:
  std::string where_;
  std::map<std::string, std::string> fields_;
};

MeasuredKind measured_kind(const Record& record) {
  std::string accepted;
  for (const auto& [kind, name] : kind_names()) {
    if (record.text("measured_kind") == name)
      return kind;
    accepted += (accepted.empty() ? "" : ", ") + std::string(name);
  }
  record.fail("measured_kind", "accepted: " + accepted);
}

// "key=value key=value": scenario keys the source states beyond the columns.
Settings extra_settings(const Record& record) {
  Settings settings;
  for (const std::string& item : split(record.text("settings"), ' ')) {
    if (trim(item).empty())
      continue;
    const auto equals = item.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == item.size())
      record.fail("settings", "'" + item + "' is not key=value; accepted: scenario keys such as comm.pp_scatter_gather=true, "
                              "separated by spaces");
    const std::string key = item.substr(0, equals);
    require_scenario_key(key, record.where() + ": column 'settings'");
    settings.emplace_back(key, item.substr(equals + 1));
  }
  return settings;
}

PublishedRow row_from(const Record& record, std::size_t line) {
  PublishedRow row;
  row.line = line;
  row.set = record.required("set");
  row.label = record.required("label");
  row.gpu = record.required("gpu");
  find_gpu(row.gpu, record.where() + ": column 'gpu'");
  row.nodes = static_cast<int>(record.integer("nodes", 1, 100000));
  row.gpus_per_node = static_cast<int>(record.integer("gpus_per_node", 1, 64));
  row.model = record.required("model");
  row.seq_len = record.integer("seq_len", 1, 1 << 24);
  row.micro_batch = record.integer("micro_batch", 1, 1 << 20);
  row.global_batch = record.integer("global_batch", 1, 1 << 30);
  row.tp = static_cast<int>(record.integer("tp", 1, 1 << 20));
  row.pp = static_cast<int>(record.integer("pp", 1, 1 << 20));
  row.dp = static_cast<int>(record.integer("dp", 1, 1 << 20));
  row.cp = static_cast<int>(record.integer("cp", 1, 1 << 20));
  row.vpp = static_cast<int>(record.integer("vpp", 1, 1 << 20));
  row.zero = static_cast<int>(record.integer("zero", 0, 3));
  row.sp = record.boolean("sp");
  row.flash_attention = record.boolean("flash_attention");
  row.recompute = record.required("recompute");
  row.precision = record.required("precision");
  const Settings extra = extra_settings(record);
  const Settings from_columns = scenario_settings(row);
  for (const auto& setting : extra) {
    const std::string& key = setting.first;
    if (key == "comm.fidelity" ||
        std::any_of(from_columns.begin(), from_columns.end(), [&key](const auto& s) { return s.first == key; }))
      record.fail("settings", key + " is set by " + (key == "comm.fidelity" ? "trainsim validate --fidelity" : "its own column") +
                                  "; accepted: keys no column sets");
  }
  row.extra = extra;
  row.kind = measured_kind(record);
  row.measured = record.positive("measured");
  row.source = record.required("source");
  row.not_simulated = record.text("not_simulated");
  const long long ranks = 1LL * row.tp * row.pp * row.dp * row.cp;
  if (ranks != row.gpus())
    record.fail("dp", "tp x pp x dp x cp = " + std::to_string(ranks) + " ranks but nodes x gpus_per_node = " +
                          std::to_string(row.gpus()) + " GPUs; accepted: a layout of every GPU, as the source ran it");
  return row;
}

// The row as `trainsim run` will see it, checked in process: a setting the scenario refuses is
// an error of the file, named at the row's line.
void check_scenario(const PublishedRow& row, const std::string& where) {
  std::vector<std::string> overrides;
  for (const auto& [key, value] : scenario_settings(row))
    overrides.push_back(key + "=" + value);
  try {
    const Scenario scenario = parse_scenario("", "validation-row.ini", overrides);
    if (row.kind == MeasuredKind::megatron_core_tflops_per_gpu ||
        row.kind == MeasuredKind::megatron_core_2025_tflops_per_gpu) {
      const ModelSpec model = load_model(scenario.model_file, scenario.vocab_multiple, scenario.mtp_layers);
      if (model.mla() || !model.dense_layers.empty())
        throw InputError("measured_kind " + std::string(to_string(row.kind)) +
                         ": simulated for Megatron-LM's formula of every layer alike with grouped-query attention; "
                         "accepted: models without latent attention or dense layers among experts");
    }
  } catch (const InputError& error) {
    throw InputError(where + " (" + row.set + " " + row.label + "): " + error.what());
  }
}

// "+12.3%", "-4%", or without the sign for magnitudes.
std::string percent(double fraction, bool sign = true) {
  const double rounded = std::round(fraction * 1000) / 10;
  return (sign && rounded > 0 ? "+" : "") + format_double(rounded == 0 ? 0.0 : rounded) + "%";
}

// `digits` significant digits in plain decimal notation (no exponent, no trailing zeros):
// published figures carry two to six, a prediction is shown with four.
std::string significant(double value, int digits) {
  if (!(value > 0) || !std::isfinite(value))
    return format_double(value);
  const int decimals = digits - 1 - static_cast<int>(std::floor(std::log10(value)));
  if (decimals < 0)
    value = std::round(value / std::pow(10.0, -decimals)) * std::pow(10.0, -decimals);
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(std::max(0, decimals));
  out << value;
  std::string text = out.str();
  if (text.find('.') != std::string::npos) {
    text.erase(text.find_last_not_of('0') + 1);
    if (text.back() == '.')
      text.pop_back();
  }
  return text;
}

} // namespace

const char* to_string(MeasuredKind kind) {
  for (const auto& [candidate, name] : kind_names())
    if (candidate == kind)
      return name;
  return "?";
}

std::vector<PublishedRow> parse_published(const std::string& text, const std::string& file) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> header, fields;
  std::size_t number = 0;
  // The header: the first line that is not blank or a comment.
  while (header.empty() && std::getline(in, line)) {
    ++number;
    if (!trim(line).empty() && trim(line)[0] != '#' && !split_record(trim(line), header))
      throw InputError(file + ":" + std::to_string(number) + ": the header has an unclosed quote");
  }
  if (header.empty())
    throw InputError(file + ": no header line; accepted: a CSV whose first line names the columns " + column_list(","));
  for (std::string& name : header)
    name = trim(name);
  for (const std::string& name : header)
    if (std::find(columns().begin(), columns().end(), name) == columns().end())
      throw InputError(file + ":" + std::to_string(number) + ": unknown column '" + name + "'; accepted: " + column_list(", "));
  for (const std::string& name : columns())
    if (std::count(header.begin(), header.end(), name) != 1)
      throw InputError(file + ":" + std::to_string(number) + ": column '" + name + "' " +
                       (std::count(header.begin(), header.end(), name) ? "appears twice" : "is missing") +
                       "; every column of validation/README.md is needed once");

  std::vector<PublishedRow> rows;
  std::set<std::pair<std::string, std::string>> seen;
  while (std::getline(in, line)) {
    ++number;
    if (trim(line).empty() || trim(line)[0] == '#')
      continue;
    const std::string where = file + ":" + std::to_string(number);
    if (!split_record(line, fields))
      throw InputError(where + ": a quote is not closed; accepted: fields quoted as \"a, b\"");
    if (fields.size() != header.size())
      throw InputError(where + ": " + std::to_string(fields.size()) + " fields; the header names " +
                       std::to_string(header.size()));
    std::map<std::string, std::string> by_name;
    for (std::size_t i = 0; i < header.size(); ++i)
      by_name[header[i]] = trim(fields[i]);
    const PublishedRow row = row_from(Record(where, std::move(by_name)), number);
    if (!seen.insert({row.set, row.label}).second)
      throw InputError(where + ": set '" + row.set + "' already has a row labelled '" + row.label +
                       "'; accepted: labels unique within a set");
    if (row.not_simulated.empty())
      check_scenario(row, where);
    rows.push_back(row);
  }
  if (rows.empty())
    throw InputError(file + ": no rows after the header");
  return rows;
}

std::vector<PublishedRow> read_published(const fs::path& file) {
  std::error_code error;
  if (!fs::is_regular_file(file, error))
    throw InputError(file.string() + ": no such file; expected a CSV of published measurements such as validation/published.csv");
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  if (!in)
    throw InputError(file.string() + ": cannot read the file");
  return parse_published(text.str(), file.string());
}

Settings scenario_settings(const PublishedRow& row) {
  Settings settings = {
      {"model.name", row.model},
      {"platform.gpu", row.gpu},
      {"platform.nodes", std::to_string(row.nodes)},
      {"platform.gpus_per_node", std::to_string(row.gpus_per_node)},
      {"parallel.tp", std::to_string(row.tp)},
      {"parallel.pp", std::to_string(row.pp)},
      {"parallel.dp", std::to_string(row.dp)},
      {"parallel.cp", std::to_string(row.cp)},
      {"parallel.vpp", std::to_string(row.vpp)},
      {"parallel.sp", row.sp},
      {"memory.zero", std::to_string(row.zero)},
      {"memory.recompute", row.recompute},
      {"memory.precision", row.precision},
      {"memory.flash_attention", row.flash_attention},
      {"training.seq_len", std::to_string(row.seq_len)},
      {"training.micro_batch", std::to_string(row.micro_batch)},
      {"training.global_batch", std::to_string(row.global_batch)},
  };
  settings.insert(settings.end(), row.extra.begin(), row.extra.end());
  return settings;
}

double predicted_quantity(const PublishedRow& row, const ModelSpec& model, double peak_flops, double step_time_s) {
  const double B = static_cast<double>(row.global_batch), s = static_cast<double>(row.seq_len);
  const double l = static_cast<double>(model.layers), h = static_cast<double>(model.hidden);
  const double V = static_cast<double>(model.vocab), gpus = row.gpus();
  switch (row.kind) {
  case MeasuredKind::step_time_s:
    return step_time_s;
  case MeasuredKind::tokens_per_s_per_gpu:
    return B * s / (gpus * step_time_s);
  case MeasuredKind::samples_per_s_per_gpu:
    return B / (gpus * step_time_s);
  case MeasuredKind::megatron_tflops_per_gpu:
    return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)) / (gpus * step_time_s) / 1e12;
  case MeasuredKind::megatron_mfu:
    return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)) / (gpus * step_time_s * peak_flops);
  case MeasuredKind::megatron_core_tflops_per_gpu:
  case MeasuredKind::megatron_core_2025_tflops_per_gpu: {
    // 12 = 3 GEMMs per weight (forward, input and weight gradients) x 2 GEMMs per block x 2
    // FLOPs per multiply-add; attention counts the whole s x s product (since 2025 half of it,
    // the causal mask's non-zero half); the vocabulary is the padded one Megatron trains.
    const double queries = static_cast<double>(model.heads * model.head_dim) / h;
    const double scores = row.kind == MeasuredKind::megatron_core_2025_tflops_per_gpu ? s / (2 * h) : s / h;
    const double attention = (1 + static_cast<double>(model.kv_heads) / static_cast<double>(model.heads) + scores) * queries;
    const double gated = model.gated_mlp ? 1.5 : 1.0;
    const double routed = model.moe() ? static_cast<double>(model.expert_ffn * model.experts_per_token)
                                      : static_cast<double>(model.ffn);
    const double mlp = (routed + static_cast<double>(model.shared_expert_ffn)) / h * gated;
    const double logits = static_cast<double>(model.padded_vocab) / (2 * l * h);
    return 12 * B * s * l * h * h * (attention + mlp + logits) / (gpus * step_time_s) / 1e12;
  }
  }
  return 0;
}

ValidationResult compare(const PublishedRow& row, const SweepRow& simulated) {
  ValidationResult result{row, simulated.status, simulated.reason};
  if (simulated.status != "ok")
    return result;
  std::vector<std::string> overrides;
  for (const auto& [key, value] : scenario_settings(row))
    overrides.push_back(key + "=" + value);
  const Scenario scenario = parse_scenario("", "validation-row.ini", overrides);
  const ModelSpec model = load_model(scenario.model_file, scenario.vocab_multiple, scenario.mtp_layers);
  const GpuSpec& gpu = find_gpu(row.gpu, "validation row " + row.label);
  const double peak = row.precision == "fp32" ? gpu.peak_fp32
                      : row.precision == "fp16" ? gpu.peak_fp16
                      : row.precision == "fp8"  ? gpu.peak_fp8
                                                : gpu.peak_bf16;
  result.step_time_s = simulated.step_time_s;
  result.predicted = predicted_quantity(row, model, peak, simulated.step_time_s);
  result.error = result.predicted / row.measured - 1;
  return result;
}

std::vector<SetSummary> summarize(const std::vector<ValidationResult>& results) {
  std::vector<SetSummary> sets;
  SetSummary all{"all"};
  double all_sum = 0;
  std::map<std::string, double> sums;
  for (const ValidationResult& result : results) {
    auto it = std::find_if(sets.begin(), sets.end(), [&](const SetSummary& s) { return s.set == result.row.set; });
    if (it == sets.end())
      it = sets.insert(sets.end(), SetSummary{result.row.set});
    ++it->rows;
    ++all.rows;
    if (result.status != "ok")
      continue;
    const double magnitude = std::abs(result.error);
    for (SetSummary* summary : {&*it, &all}) {
      ++summary->simulated;
      summary->max_abs_error = std::max(summary->max_abs_error, magnitude);
    }
    sums[result.row.set] += magnitude;
    all_sum += magnitude;
  }
  for (SetSummary& summary : sets)
    summary.mean_abs_error = summary.simulated ? sums[summary.set] / static_cast<double>(summary.simulated) : 0.0;
  all.mean_abs_error = all.simulated ? all_sum / static_cast<double>(all.simulated) : 0.0;
  sets.push_back(all);
  return sets;
}

std::string validation_table(const std::vector<ValidationResult>& results) {
  std::ostringstream out;
  std::vector<std::vector<std::string>> table = {{"set", "row", "GPUs", "quantity", "measured", "predicted", "error"}};
  for (const ValidationResult& result : results)
    if (result.status == "ok")
      table.push_back({result.row.set, result.row.label, std::to_string(result.row.gpus()), to_string(result.row.kind),
                       significant(result.row.measured, 6), significant(result.predicted, 4), percent(result.error)});
  out << aligned_columns(table, {false, false, true, false, true, true, true});
  bool header = false;
  for (const ValidationResult& result : results)
    if (result.status != "ok") {
      out << (header ? "" : "\nnot simulated:\n") << "  " << result.row.set << " " << result.row.label << " ("
          << result.row.gpus() << " GPUs): " << (result.status == "not simulated" ? "" : result.status + ": ")
          << result.reason << '\n';
      header = true;
    }
  std::vector<std::vector<std::string>> summary_table = {{"set", "rows", "simulated", "mean |error|", "max |error|"}};
  for (const SetSummary& summary : summarize(results))
    summary_table.push_back({summary.set, std::to_string(summary.rows), std::to_string(summary.simulated),
                             summary.simulated ? percent(summary.mean_abs_error, false) : "-",
                             summary.simulated ? percent(summary.max_abs_error, false) : "-"});
  out << '\n' << aligned_columns(summary_table, {false, true, true, true, true});
  return out.str();
}

std::string validation_csv(const std::vector<ValidationResult>& results) {
  std::ostringstream out;
  out << "set,label,gpus,measured_kind,measured,status,reason,step_time_s,predicted,error\n";
  for (const ValidationResult& result : results) {
    const bool ok = result.status == "ok";
    out << csv_field(result.row.set) << ',' << csv_field(result.row.label) << ',' << result.row.gpus() << ','
        << to_string(result.row.kind) << ',' << format_double(result.row.measured) << ',' << csv_field(result.status) << ','
        << csv_field(result.reason) << ',' << (ok ? format_double(result.step_time_s) : "") << ','
        << (ok ? format_double(result.predicted) : "") << ',' << (ok ? format_double(result.error) : "") << '\n';
  }
  return out.str();
}

nlohmann::json validation_json(const std::vector<ValidationResult>& results) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ValidationResult& result : results) {
    nlohmann::json row = {{"set", result.row.set},           {"label", result.row.label},
                          {"gpus", result.row.gpus()},       {"measured_kind", to_string(result.row.kind)},
                          {"measured", result.row.measured}, {"source", result.row.source},
                          {"status", result.status}};
    if (result.status == "ok") {
      row["step_time_s"] = result.step_time_s;
      row["predicted"] = result.predicted;
      row["error"] = result.error;
    } else {
      row["reason"] = result.reason;
    }
    rows.push_back(row);
  }
  nlohmann::json sets = nlohmann::json::array();
  for (const SetSummary& summary : summarize(results))
    sets.push_back({{"set", summary.set},
                    {"rows", summary.rows},
                    {"simulated", summary.simulated},
                    {"mean_abs_error", summary.mean_abs_error},
                    {"max_abs_error", summary.max_abs_error}});
  return {{"rows", rows}, {"sets", sets}};
}

} // namespace trainsim
