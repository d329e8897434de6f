#pragma once
// Sweeps: the cartesian product of varied scenario keys, split into shards, and the rows
// each finished configuration leaves (CSV and JSON-lines). Pure: the processes that run the
// configurations are the CLI's business.
#include <filesystem>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainsim {

struct Variation {
  std::string key;                  // a scenario key, e.g. parallel.dp
  std::vector<std::string> values;
  bool zipped = false;              // --zip: varies together with the other zipped keys, value i with value i
};
// "parallel.dp=1,2,4" as given to `option` (--vary or --zip); InputError naming the option otherwise.
Variation parse_variation(const std::string& text, const std::string& option = "--vary");

using Settings = std::vector<std::pair<std::string, std::string>>;
// The varied keys, in --vary order: the CSV's setting columns.
std::vector<std::string> keys_of(const std::vector<Variation>& variations);
std::vector<std::string> keys_of(const Settings& settings);

struct SweepConfig {
  std::size_t index = 0;            // position in the full product, the same on every machine
  Settings settings;                // one value per varied key, in --vary order
  std::string label() const;        // "parallel.dp=2 memory.zero=1": identifies it across runs
};

// The product of the --vary keys and the zipped keys taken together (one dimension, after the
// others), the last varying fastest. InputError for a key given twice or zipped keys of unequal
// lengths.
std::vector<SweepConfig> expand(const std::vector<Variation>& variations);

// --shard K/N: configurations whose index % N == K - 1.
struct Shard {
  int index = 1;
  int count = 1;
  bool holds(std::size_t config) const { return static_cast<int>(config % static_cast<std::size_t>(count)) == index - 1; }
};
Shard parse_shard(const std::string& text);

// What one configuration gave: ok (simulated), invalid (the scenario refused it, with the
// reason) or failed (the worker crashed or ran out of time, with the reason).
struct SweepRow {
  std::size_t index = 0;
  Settings settings;
  std::string status;
  std::string reason;
  double step_time_s = 0, tokens_per_s = 0, mfu = 0, peak_bytes = 0, capacity_bytes = 0;
  double reserve_bytes = 0;  // the caching allocator's reserve at the peak
  bool fits = false;
  std::string bottleneck;
  // In the JSON lines, not the CSV: the platform's GPU (a merge draws its memory line) and the
  // swept scenario file as given (a merge titles its page with it).
  std::string gpu, scenario;
  // Not in the CSV or the JSON lines (trainsim calibrate reads them): the summary's compute time
  // (recompute and optimizer included), every kind's transfer time summed.
  double compute_s = 0, comm_s = 0;
  // The step of its last rank by part, summing to the step time (summary time.breakdown):
  // compute, recompute, optimizer, exposed communication by kind, waiting for other ranks, bubble.
  std::vector<std::pair<std::string, double>> step_parts;

  std::string label() const;
  // What the GPU has left at the peak with the reserve (negative: short by that much).
  double headroom_bytes() const { return capacity_bytes - peak_bytes - reserve_bytes; }
};

// The row of a simulated configuration, from its summary.json.
SweepRow row_from_summary(const SweepConfig& config, const nlohmann::json& summary);
// A summary.json's step by part (its time.breakdown), summing to the step time.
std::vector<std::pair<std::string, double>> step_parts_of(const nlohmann::json& summary);

nlohmann::json to_json(const SweepRow& row);
SweepRow row_from_json(const nlohmann::json& json);
// A CSV field: quoted when it holds a separator, a quote or a line break.
std::string csv_field(const std::string& text);
// A byte count as a whole number, whatever its size ("141000000000", never "1.41e+11").
std::string csv_byte_count(double bytes);
std::string csv_header(const std::vector<std::string>& keys);
std::string csv_line(const SweepRow& row);

// Appends a finished row to the CSV and the JSON-lines file and flushes both; InputError naming
// the file when it cannot be written (a full disk), so that no row is lost unnoticed.
void append_row(std::ostream& csv, const std::filesystem::path& csv_file, std::ostream& jsonl,
                const std::filesystem::path& jsonl_file, const SweepRow& row);

// Rows of a JSON-lines file; a last line cut short by a kill is ignored. InputError for a
// file that is not a sweep's.
std::vector<SweepRow> read_rows(const std::filesystem::path& jsonl);
// The same from the file's text; `name` names it in errors.
std::vector<SweepRow> parse_rows(const std::string& text, const std::string& name);
// Both files, rows sorted by index; `keys` head the CSV's setting columns.
void write_rows(const std::filesystem::path& csv, const std::filesystem::path& jsonl, const std::vector<std::string>& keys,
                std::vector<SweepRow> rows);
// The rows a resumed sweep keeps from its earlier run (`file`): every row but the failed ones,
// which run again (a crash or a kill says nothing about the configuration; a refusal does).
// InputError when a row is not the configuration of the same index in `configs`: the results
// of another sweep (other --vary values), which resuming would mix with this one.
std::vector<SweepRow> rows_to_keep(std::vector<SweepRow> previous, const std::vector<SweepConfig>& configs,
                                   const std::string& file);
// The JSON-lines file beside a CSV: sweep.csv -> sweep.jsonl.
std::filesystem::path jsonl_beside(const std::filesystem::path& csv);

} // namespace trainsim
