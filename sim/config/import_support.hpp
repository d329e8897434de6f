#pragma once
// What the importers share (internal to config/): sizes as a scenario writes them, the job's GPU
// count, and a reader of a JSON (or TOML) config's fields with errors that name the file and field.
#include <cmath>
#include <set>
#include <string>

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

// A JSON (or TOML) config's fields by dotted path, read with errors that name the file and the
// field; the paths asked about are remembered, so that the rest can be listed.
class FieldReader {
public:
  FieldReader(const json& config, std::string name) : config_(config), name_(std::move(name)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw InputError(name_ + ": " + field + ": " + problem);
  }
  // The field at a dotted path, or nullptr.
  const json* find(const std::string& field) const {
    asked_.insert(field);
    const json* node = &config_;
    for (const std::string& part : split(field, '.')) {
      if (!node->is_object() || !node->contains(part))
        return nullptr;
      node = &(*node)[part];
    }
    return node->is_null() ? nullptr : node;
  }
  void refuse_auto(const std::string& field, const json& value) const {
    if (value.is_string() && value.get<std::string>() == "auto")
      fail(field, "\"auto\" is filled in by another tool (the Hugging Face Trainer, Accelerate) from its own "
                  "arguments; accepted: the number or setting it would use");
  }
  long long whole(const std::string& field, long long low) const {
    const json& value = *find(field);
    refuse_auto(field, value);
    if (!value.is_number() || value.get<double>() != std::floor(value.get<double>()) || value.get<double>() < low ||
        value.get<double>() > 1e15)
      fail(field, value.dump() + " is not a whole number of at least " + std::to_string(low));
    return static_cast<long long>(value.get<double>());
  }
  long long whole_or(const std::string& field, long long fallback, long long low) const {
    return find(field) ? whole(field, low) : fallback;
  }
  double number(const std::string& field) const {
    const json& value = *find(field);
    refuse_auto(field, value);
    if (!value.is_number())
      fail(field, value.dump() + " is not a number");
    return value.get<double>();
  }
  bool flag(const std::string& field, bool fallback) const {
    const json* value = find(field);
    if (!value)
      return fallback;
    refuse_auto(field, *value);
    if (!value->is_boolean())
      fail(field, value->dump() + " is not true or false");
    return value->get<bool>();
  }
  std::string text(const std::string& field, const std::string& fallback) const {
    const json* value = find(field);
    if (!value)
      return fallback;
    refuse_auto(field, *value);
    if (!value->is_string())
      fail(field, value->dump() + " is not a string");
    return value->get<std::string>();
  }

  bool asked(const std::string& field) const { return asked_.count(field) > 0; }

private:
  const json& config_;
  std::string name_;
  mutable std::set<std::string> asked_;
};

} // namespace trainsim::import_detail
