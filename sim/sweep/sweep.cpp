#include "sweep/sweep.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"

using nlohmann::json;

namespace trainsim {
namespace {

std::string label_of(const Settings& settings) {
  std::string label;
  for (const auto& [key, value] : settings)
    label += (label.empty() ? "" : " ") + key + "=" + value;
  return label;
}

constexpr std::size_t max_configurations = 1'000'000;

} // namespace

std::vector<std::string> keys_of(const std::vector<Variation>& variations) {
  std::vector<std::string> keys;
  for (const Variation& variation : variations)
    keys.push_back(variation.key);
  return keys;
}

std::vector<std::string> keys_of(const Settings& settings) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : settings)
    keys.push_back(key);
  return keys;
}

std::string csv_byte_count(double bytes) {
  char text[400];  // %.0f of the largest double has 309 digits
  std::snprintf(text, sizeof text, "%.0f", bytes);
  return text;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos)
    return text;
  std::string quoted = "\"";
  for (char c : text)
    quoted += c == '"' ? std::string("\"\"") : std::string(1, c == '\n' ? ' ' : c);
  return quoted + "\"";
}

Variation parse_variation(const std::string& text, const std::string& option) {
  const auto equals = text.find('=');
  const std::string key = trim(text.substr(0, equals == std::string::npos ? text.size() : equals));
  if (equals == std::string::npos || key.find('.') == std::string::npos)
    throw InputError(option + " " + text + ": expected section.key=value1,value2,..., e.g. " + option +
                     " parallel.dp=1,2,4");
  Variation variation{key, {}, option == "--zip"};
  for (const std::string& value : split(text.substr(equals + 1), ',')) {
    const std::string trimmed = trim(value);
    if (trimmed.empty())
      throw InputError(option + " " + text + ": an empty value; accepted: comma-separated values");
    if (!variation.zipped && std::find(variation.values.begin(), variation.values.end(), trimmed) != variation.values.end())
      throw InputError(option + " " + text + ": value '" + trimmed + "' is listed twice");
    variation.values.push_back(trimmed);
  }
  return variation;
}

std::string SweepConfig::label() const { return label_of(settings); }
std::string SweepRow::label() const { return label_of(settings); }

std::vector<SweepConfig> expand(const std::vector<Variation>& variations) {
  // Dimensions: each --vary key alone, then the zipped keys together.
  std::vector<std::vector<std::size_t>> dimensions;
  std::vector<std::size_t> zipped;
  for (std::size_t v = 0; v < variations.size(); ++v) {
    for (std::size_t w = 0; w < v; ++w)
      if (variations[w].key == variations[v].key)
        throw InputError(std::string(variations[v].zipped ? "--zip " : "--vary ") + variations[v].key +
                         " is given twice; list all its values once, with --vary or --zip");
    if (!variations[v].zipped) {
      dimensions.push_back({v});
      continue;
    }
    if (!zipped.empty() && variations[v].values.size() != variations[zipped.front()].values.size())
      throw InputError("--zip " + variations[v].key + " has " + std::to_string(variations[v].values.size()) +
                       " values and --zip " + variations[zipped.front()].key + " " +
                       std::to_string(variations[zipped.front()].values.size()) +
                       "; zipped keys vary together: accepted: as many values each");
    zipped.push_back(v);
  }
  if (!zipped.empty())
    dimensions.push_back(zipped);
  std::size_t total = 1;
  for (const auto& dimension : dimensions) {
    total *= variations[dimension.front()].values.size();
    if (total > max_configurations)
      throw InputError("the varied keys make more than " + std::to_string(max_configurations) +
                       " configurations; accepted: at most that many (split the sweep)");
  }
  std::vector<SweepConfig> configs;
  configs.reserve(total);
  for (std::size_t index = 0; index < total; ++index) {
    SweepConfig config;
    config.index = index;
    std::size_t rest = index;
    config.settings.resize(variations.size());
    for (std::size_t d = dimensions.size(); d-- > 0;) {
      const std::size_t count = variations[dimensions[d].front()].values.size();
      for (std::size_t v : dimensions[d])
        config.settings[v] = {variations[v].key, variations[v].values[rest % count]};
      rest /= count;
    }
    configs.push_back(std::move(config));
  }
  return configs;
}

Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  long long index = 0, count = 0;
  if (slash == std::string::npos || !parse_integer(text.substr(0, slash), index) ||
      !parse_integer(text.substr(slash + 1), count) || count < 1 || count > 100000 || index < 1 || index > count)
    throw InputError("--shard " + text + ": expected K/N with 1 <= K <= N, e.g. --shard 3/8");
  return {static_cast<int>(index), static_cast<int>(count)};
}

SweepRow row_from_summary(const SweepConfig& config, const json& summary) {
  SweepRow row;
  row.index = config.index;
  row.settings = config.settings;
  row.status = "ok";
  row.step_time_s = summary.at("step_time_s").get<double>();
  row.tokens_per_s = summary.value("tokens_per_s", 0.0);
  row.mfu = summary.value("mfu", 0.0);
  const json& memory = summary.at("memory");
  row.peak_bytes = memory.at("peak_bytes").get<double>();
  row.capacity_bytes = memory.at("capacity_bytes").get<double>();
  row.reserve_bytes = memory.at("reserve_bytes").get<double>();
  row.fits = memory.at("fits").get<bool>();
  row.bottleneck = summary.value("bottleneck", "");
  const json& time = summary.at("time");
  row.compute_s = time.at("compute_s").get<double>();
  for (const auto& [kind, comm] : time.at("comm").items())
    row.comm_s += comm.at("total_s").get<double>();
  row.gpu = summary.at("platform").at("gpu").get<std::string>();
  row.step_parts = step_parts_of(summary);
  return row;
}

std::vector<std::pair<std::string, double>> step_parts_of(const json& summary) {
  std::vector<std::pair<std::string, double>> parts;
  const json& breakdown = summary.at("time").at("breakdown");
  for (const char* part : {"compute", "recompute", "optimizer"})
    parts.emplace_back(part, breakdown.at(std::string(part) + "_s").get<double>());
  for (const auto& [kind, seconds] : breakdown.at("exposed_comm_s").items())
    parts.emplace_back("exposed " + kind + " communication", seconds.get<double>());
  double waiting = 0;
  for (const auto& [rank, seconds] : breakdown.at("waiting_s").items())
    waiting += seconds.get<double>();
  parts.emplace_back("waiting for other ranks", waiting);
  parts.emplace_back("pipeline bubble", breakdown.at("bubble_s").get<double>());
  return parts;
}

json to_json(const SweepRow& row) {
  json settings = json::array();
  for (const auto& [key, value] : row.settings)
    settings.push_back({key, value});
  json out = {{"index", row.index}, {"settings", settings}, {"status", row.status}};
  if (row.status == "ok") {
    out["step_time_s"] = row.step_time_s;
    out["tokens_per_s"] = row.tokens_per_s;
    out["mfu"] = row.mfu;
    out["peak_bytes"] = row.peak_bytes;
    out["capacity_bytes"] = row.capacity_bytes;
    out["reserve_bytes"] = row.reserve_bytes;
    out["fits"] = row.fits;
    out["bottleneck"] = row.bottleneck;
    if (!row.gpu.empty())
      out["gpu"] = row.gpu;
  } else {
    out["reason"] = row.reason;
  }
  if (!row.scenario.empty())
    out["scenario"] = row.scenario;
  return out;
}

SweepRow row_from_json(const json& in) {
  SweepRow row;
  // A whole number that fits: a larger one parses as a double, which no index converts from.
  if (!in.at("index").is_number_unsigned())
    throw json::type_error::create(302, "index must be a whole number from 0 to 2^64 - 1", &in.at("index"));
  row.index = in.at("index").get<std::size_t>();
  for (const json& pair : in.at("settings"))
    row.settings.emplace_back(pair.at(0).get<std::string>(), pair.at(1).get<std::string>());
  row.status = in.at("status").get<std::string>();
  if (row.status == "ok") {
    row.step_time_s = in.at("step_time_s").get<double>();
    row.tokens_per_s = in.at("tokens_per_s").get<double>();
    row.mfu = in.at("mfu").get<double>();
    row.peak_bytes = in.at("peak_bytes").get<double>();
    row.capacity_bytes = in.at("capacity_bytes").get<double>();
    row.reserve_bytes = in.at("reserve_bytes").get<double>();
    row.fits = in.at("fits").get<bool>();
    row.bottleneck = in.at("bottleneck").get<std::string>();
    row.gpu = in.value("gpu", "");
  } else {
    row.reason = in.at("reason").get<std::string>();
  }
  row.scenario = in.value("scenario", "");
  return row;
}

std::string csv_header(const std::vector<std::string>& keys) {
  std::string header = "index,status";
  for (const std::string& key : keys)
    header += "," + csv_field(key);
  return header + ",step_time_s,tokens_per_s,mfu,peak_bytes,reserve_bytes,capacity_bytes,fits,bottleneck,reason\n";
}

std::string csv_line(const SweepRow& row) {
  std::string line = std::to_string(row.index) + "," + row.status;
  for (const auto& [key, value] : row.settings)
    line += "," + csv_field(value);
  if (row.status == "ok")
    line += "," + format_double(row.step_time_s) + "," + format_double(row.tokens_per_s) + "," + format_double(row.mfu) +
            "," + csv_byte_count(row.peak_bytes) + "," + csv_byte_count(row.reserve_bytes) + "," +
            csv_byte_count(row.capacity_bytes) + "," +
            (row.fits ? "true" : "false") + "," + csv_field(row.bottleneck) + ",";
  else
    line += ",,,,,,,,," + csv_field(row.reason);
  return line + "\n";
}

void append_row(std::ostream& csv, const std::filesystem::path& csv_file, std::ostream& jsonl,
                const std::filesystem::path& jsonl_file, const SweepRow& row) {
  const auto append = [&row](std::ostream& out, const std::filesystem::path& file, const std::string& text) {
    if (!(out << text << std::flush))
      throw InputError(file.string() + ": cannot append the result of configuration " + std::to_string(row.index) +
                       " (" + std::strerror(errno) + ")");
  };
  append(csv, csv_file, csv_line(row));
  append(jsonl, jsonl_file, to_json(row).dump() + "\n");
}

std::vector<SweepRow> read_rows(const std::filesystem::path& jsonl) {
  std::ifstream in(jsonl);
  if (!in)
    throw InputError(jsonl.string() + ": cannot read the sweep results");
  std::stringstream text;
  text << in.rdbuf();
  return parse_rows(text.str(), jsonl.string());
}

std::vector<SweepRow> parse_rows(const std::string& text, const std::string& name) {
  std::vector<SweepRow> rows;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (trim(line).empty())
      continue;
    try {
      rows.push_back(row_from_json(json::parse(line)));
    } catch (const json::exception& error) {
      if (in.peek() == std::char_traits<char>::eof() && text.back() != '\n')
        break;  // a row cut short when the sweep was killed
      throw InputError(name + ":" + std::to_string(number) + ": not a sweep result row (" + error.what() + ")");
    }
  }
  return rows;
}

std::filesystem::path jsonl_beside(const std::filesystem::path& csv) {
  std::filesystem::path jsonl = csv;
  return jsonl.replace_extension(".jsonl");
}

void write_rows(const std::filesystem::path& csv, const std::filesystem::path& jsonl, const std::vector<std::string>& keys,
                std::vector<SweepRow> rows) {
  std::sort(rows.begin(), rows.end(), [](const SweepRow& a, const SweepRow& b) { return a.index < b.index; });
  std::string csv_text = csv_header(keys), json_text;
  for (const SweepRow& row : rows) {
    csv_text += csv_line(row);
    json_text += to_json(row).dump() + "\n";
  }
  write_file_atomically(csv, csv_text);
  write_file_atomically(jsonl, json_text);
}

std::vector<SweepRow> rows_to_keep(std::vector<SweepRow> previous, const std::vector<SweepConfig>& configs,
                                   const std::string& file) {
  std::vector<SweepRow> kept;
  std::set<std::size_t> seen;
  for (SweepRow& row : previous) {
    if (!seen.insert(row.index).second)
      throw InputError(file + ": configuration " + std::to_string(row.index) +
                       " has two rows; these are not the results of one sweep; choose another --out");
    const std::string expected = row.index < configs.size() ? "'" + configs[row.index].label() + "'" : "absent";
    if (expected != "'" + row.label() + "'")
      throw InputError(file + ": configuration " + std::to_string(row.index) + " is '" + row.label() +
                       "' there but " + expected + " in this sweep; resume with the same --vary values, or choose another --out");
    if (row.status != "failed")
      kept.push_back(std::move(row));
  }
  return kept;
}

} // namespace trainsim
