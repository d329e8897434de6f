#include "config/import_support.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>

namespace trainsim {
namespace import_detail {

std::string bytes_text(double bytes) {
  if (std::fmod(bytes, 1e6) == 0)
    return format_double(bytes / 1e6) + "MB";
  return format_double(bytes) + "B";
}

int element_bytes(const std::string& precision) { return precision == "fp32" ? 4 : 2; }

int job_world(ImportWorld world, int implied, const std::string& implied_by) {
  if (world.requested > world.available)
    throw InputError("--gpus " + std::to_string(world.requested) + ": the cluster has " +
                     std::to_string(world.available) + " GPUs; accepted: 1 to " + std::to_string(world.available));
  if (world.requested && implied && implied != world.requested)
    throw InputError(implied_by + " runs on " + std::to_string(implied) + " GPUs, not --gpus " +
                     std::to_string(world.requested) + "; accepted: --gpus " + std::to_string(implied) +
                     " or none");
  if (implied > world.available)
    throw InputError(implied_by + " runs on " + std::to_string(implied) + " GPUs; the cluster has " +
                     std::to_string(world.available) + ": describe a larger one (--nodes) or another --platform");
  return world.requested ? world.requested : implied ? implied : world.available;
}

long long product(std::initializer_list<long long> counts) {
  long long result = 1;
  for (long long count : counts)
    result = count > 0 && result > (max_count + 1) / count ? max_count + 1 : result * count;
  return result;
}

const json* FieldReader::find(const std::string& field) const {
  asked_.insert(field);
  const json* node = &config_;
  std::string path;
  for (const std::string& part : split(field, '.')) {
    if (!node->is_object())
      fail(path, node->dump() + " is a value where a table of settings belongs");
    path += (path.empty() ? "" : ".") + part;
    if (!node->contains(part))
      return nullptr;
    node = &(*node)[part];
  }
  return node->is_null() ? nullptr : node;
}

void FieldReader::refuse_auto(const std::string& field, const json& value) const {
  if (value.is_string() && value.get<std::string>() == "auto")
    fail(field, "\"auto\" is filled in by another tool (the Hugging Face Trainer, Accelerate) from its own "
                "arguments; accepted: the number or setting it would use");
}

long long FieldReader::whole(const std::string& field, long long low, long long high) const {
  const json& value = *find(field);
  refuse_auto(field, value);
  const bool number = exact_integers_ ? value.is_number_integer() : value.is_number();
  if (!number || value.get<double>() != std::floor(value.get<double>()) || value.get<double>() < low ||
      value.get<double>() > high)
    fail(field, value.dump() + " is not a whole number from " + std::to_string(low) + " to " + std::to_string(high));
  return static_cast<long long>(value.get<double>());
}

double FieldReader::number(const std::string& field) const {
  const json& value = *find(field);
  refuse_auto(field, value);
  if (!value.is_number())
    fail(field, value.dump() + " is not a number");
  return value.get<double>();
}

bool FieldReader::flag(const std::string& field, bool fallback) const {
  const json* value = find(field);
  if (!value)
    return fallback;
  refuse_auto(field, *value);
  if (!value->is_boolean())
    fail(field, value->dump() + " is not true or false");
  return value->get<bool>();
}

std::string FieldReader::text(const std::string& field, const std::string& fallback) const {
  const json* value = find(field);
  if (!value)
    return fallback;
  refuse_auto(field, *value);
  if (!value->is_string())
    fail(field, value->dump() + " is not a string");
  return value->get<std::string>();
}

std::vector<std::string> FieldReader::unread(const std::function<std::string(const std::string&)>& reason) const {
  std::vector<std::string> out;
  if (config_.is_object())
    for (const auto& [key, value] : config_.items())
      unread_under(value, key, reason, out);
  return out;
}

void FieldReader::unread_under(const json& node, const std::string& path,
                               const std::function<std::string(const std::string&)>& reason,
                               std::vector<std::string>& out) const {
  // A value asked about was read; a table asked about (to see whether it is there) or with some of
  // its settings read is looked into.
  const auto below = asked_.lower_bound(path + ".");
  const bool partly_read = below != asked_.end() && below->rfind(path + ".", 0) == 0;
  if (asked(path) && !node.is_object())
    return;
  if (!node.is_object() || (!partly_read && !asked(path))) {
    const std::string why = reason(path);
    out.push_back(path + ": " + (why.empty() ? "unknown to the importer; check it has no effect on a step" : why));
    return;
  }
  for (const auto& [key, value] : node.items())
    unread_under(value, path + "." + key, reason, out);
}

} // namespace import_detail

void ImportedScenario::set(const std::string& key, const std::string& value, const std::string& source) {
  for (Line& line : lines)
    if (line.key == key) {
      line.value = value;
      line.source = source;
      return;
    }
  lines.push_back({key, value, source});
}

std::string ImportedScenario::value_of(const std::string& key) const {
  for (const Line& line : lines)
    if (line.key == key)
      return line.value;
  return "";
}

std::string ImportedScenario::source_of(const std::string& key) const {
  for (const Line& line : lines)
    if (line.key == key)
      return line.source;
  return "";
}

std::vector<std::string> ImportedScenario::left_out_lines() const {
  std::vector<std::pair<std::string, std::vector<std::string>>> by_reason;
  for (const std::string& line : left_out) {
    const auto colon = line.find(": ");
    const std::string setting = line.substr(0, colon), reason = colon == std::string::npos ? "" : line.substr(colon + 2);
    auto group = std::find_if(by_reason.begin(), by_reason.end(), [&](const auto& g) { return g.first == reason; });
    if (group == by_reason.end())
      group = by_reason.insert(by_reason.end(), {reason, {}});
    group->second.push_back(setting);
  }
  std::vector<std::string> lines;
  for (const auto& [reason, settings] : by_reason)
    lines.push_back(join(settings, ", ") + (reason.empty() ? "" : ": " + reason));
  return lines;
}

std::string ImportedScenario::ini(const std::vector<std::string>& header) const {
  std::string text;
  for (const std::string& line : header)
    text += "# " + line + "\n";
  if (!left_out.empty()) {
    text += "#\n# Not carried over:\n";
    for (const std::string& line : left_out_lines())
      text += "#   " + line + "\n";
  }
  std::size_t width = 0;
  for (const Line& line : lines)
    width = std::max(width, line.key.size() - line.key.find('.') - 1 + 3 + line.value.size());
  for (const char* section : {"model", "platform", "parallel", "moe", "memory", "training", "compute", "comm"}) {
    bool opened = false;
    for (const Line& line : lines) {
      if (line.key.substr(0, line.key.find('.')) != section)
        continue;
      if (!opened)
        text += std::string("\n[") + section + "]\n";
      opened = true;
      std::string assignment = line.key.substr(line.key.find('.') + 1) + " = " + line.value;
      if (!line.source.empty()) {
        assignment.resize(width, ' ');
        assignment += "  # " + line.source;
      }
      text += assignment + "\n";
    }
  }
  return text;
}


} // namespace trainsim
