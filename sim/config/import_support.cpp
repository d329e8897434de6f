#include "config/import_support.hpp"

#include <algorithm>
#include <cmath>

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
