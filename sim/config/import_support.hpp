#pragma once
// What the importers share (internal to config/): sizes as a scenario writes them, the job's GPU
// count, and a reader of a JSON (or TOML) config's fields with errors that name the file and field.
#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/text.hpp"
#include "config/imports.hpp"

namespace trainsim::import_detail {

using json = nlohmann::json;

// A size in bytes as a scenario writes it: decimal megabytes when whole, else bytes.
std::string bytes_text(double bytes);
// Bytes per element of a precision's name (fp32, fp16, bf16).
int element_bytes(const std::string& precision);
// The GPUs of the job: the user's --gpus, else what the configuration implies (`implied`, 0 for
// nothing, named by `implied_by`), else the cluster; InputError when they disagree or do not fit.
int job_world(ImportWorld world, int implied, const std::string& implied_by);
// The product of counts, saturating at max_count + 1 (which no check accepts) instead of
// overflowing.
long long product(std::initializer_list<long long> counts);

// The largest count an imported setting may hold (GPUs, degrees, batch sizes): beyond it the
// products the importers form could overflow, and no job is that large.
constexpr long long max_count = 1'000'000'000;

// A JSON (or TOML) config's fields by dotted path, read with errors that name the file and the
// field; the paths asked about are remembered, so that the rest can be listed.
class FieldReader {
public:
  // `exact_integers`: whole numbers must be written as integers (TOML); JSON configs write
  // DeepSpeed's sizes as 5e8, which is accepted when whole.
  FieldReader(const json& config, std::string name, bool exact_integers = false)
      : config_(config), name_(std::move(name)), exact_integers_(exact_integers) {}

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw InputError(name_ + ": " + field + ": " + problem);
  }
  // The field at a dotted path, or nullptr; InputError when a part of the path is a value rather
  // than a table ("offload_param": "cpu" where an object belongs).
  const json* find(const std::string& field) const;
  void refuse_auto(const std::string& field, const json& value) const;
  // A whole number from `low` to `high`.
  long long whole(const std::string& field, long long low, long long high = max_count) const;
  long long whole_or(const std::string& field, long long fallback, long long low, long long high = max_count) const {
    return find(field) ? whole(field, low, high) : fallback;
  }
  double number(const std::string& field) const;
  bool flag(const std::string& field, bool fallback) const;
  std::string text(const std::string& field, const std::string& fallback) const;

  bool asked(const std::string& field) const { return asked_.count(field) > 0; }
  // Every setting of the config that was not asked about, as "path: reason", outermost first: a
  // table none of whose settings was read is one entry. `reason` gives a path's reason ("" for
  // none: it is then unknown to the importer).
  std::vector<std::string> unread(const std::function<std::string(const std::string&)>& reason) const;

private:
  void unread_under(const json& node, const std::string& path,
                    const std::function<std::string(const std::string&)>& reason, std::vector<std::string>& out) const;

  const json& config_;
  std::string name_;
  bool exact_integers_;
  mutable std::set<std::string> asked_;
};

} // namespace trainsim::import_detail
