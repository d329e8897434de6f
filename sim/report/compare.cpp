#include "report/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iterator>
#include <limits>
#include <set>

#include "common/text.hpp"
#include "common/units.hpp"
#include "report/svg.hpp"

namespace trainsim {
namespace {

using json = nlohmann::json;
constexpr double missing = std::numeric_limits<double>::quiet_NaN();

std::string printf_string(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

// The number at a dotted path of a summary, or NaN.
double number_at(const json& summary, const std::string& path) {
  const json* node = &summary;
  for (const std::string& part : split(path, '.')) {
    if (!node->is_object() || !node->contains(part))
      return missing;
    node = &(*node)[part];
  }
  return node->is_number() ? node->get<double>() : missing;
}

std::string text_at(const json& summary, const std::string& path) {
  const json* node = &summary;
  for (const std::string& part : split(path, '.')) {
    if (!node->is_object() || !node->contains(part))
      return "";
    node = &(*node)[part];
  }
  return node->is_string() ? node->get<std::string>() : node->is_boolean() ? (node->get<bool>() ? "yes" : "no") : "";
}

// The peak rank's entry of summary.memory.ranks.
const json* peak_rank(const json& summary) {
  const double rank = number_at(summary, "memory.peak_rank");
  if (std::isnan(rank) || !summary.contains("memory") || !summary["memory"].contains("ranks"))
    return nullptr;
  for (const json& entry : summary["memory"]["ranks"])
    if (entry.value("rank", -1.0) == rank)
      return &entry;
  return nullptr;
}

std::string seconds_text(double value) { return format_seconds(value); }
std::string bytes_text(double value) { return format_bytes(value); }
std::string tokens_text(double value) { return format_double(std::round(value)) + " tokens/s"; }
std::string percent_text(double value) { return printf_string("%.1f %%", value * 100); }
std::string count_text(double value) { return format_double(value); }

// Names of the parts any run has, in the first appearance's order.
std::vector<std::string> part_names(const std::vector<ComparedRun>& runs) {
  std::vector<std::string> names;
  for (const ComparedRun& run : runs)
    for (const auto& [name, seconds] : run.parts)
      if (std::find(names.begin(), names.end(), name) == names.end())
        names.push_back(name);
  return names;
}

// A part a run lacks is 0 there.
double part_of(const ComparedRun& run, const std::string& name) {
  for (const auto& [part, seconds] : run.parts)
    if (part == name)
      return seconds;
  return 0;
}

// The change of `value` from `first`, as a fraction (NaN when there is none to speak of).
double change(double first, double value) {
  if (std::isnan(first) || std::isnan(value) || first == 0)
    return missing;
  return (value - first) / first;
}

std::string change_text(double first, double value) {
  if (std::isnan(first) || std::isnan(value) || value == first)
    return "";
  if (first == 0)
    return " (from 0)";
  return printf_string(" (%+.1f %%)", change(first, value) * 100) +
         (std::fabs(change(first, value)) >= large_change ? " *" : "");
}

const char* const run_colour[] = {"#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#9c755f"};
const char* const part_colour[] = {"#4e79a7", "#f28e2b", "#b07aa1", "#e15759", "#76b7b2", "#edc948",
                                   "#ff9da7", "#9c755f", "#bab0ac", "#59a14f", "#d37295", "#8cd17d"};

std::string memory_plot(const std::vector<ComparedRun>& runs) {
  double longest = 0, highest = 0;
  for (const ComparedRun& run : runs)
    for (const auto& [time, bytes] : run.memory) {
      longest = std::max(longest, time);
      highest = std::max(highest, bytes);
    }
  if (longest <= 0 || highest <= 0)
    return "<p>No memory.csv beside the summaries: no memory plot.</p>\n";
  const double width = 760, height = 320, left = 70, right = 20, top = 20, bottom = 50;
  Svg svg(width, height + 30);
  const Scale x{0, longest, left, width - right}, y{0, highest, height - bottom, top};
  svg.x_axis(x, height - bottom, nice_ticks(longest, 6), seconds_text, "time in the step");
  svg.y_axis(y, left, nice_ticks(highest, 5), bytes_text, "");
  std::vector<std::pair<std::string, std::string>> legend;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const char* colour = run_colour[r % std::size(run_colour)];
    std::vector<double> points;
    double previous = 0;
    for (const auto& [time, bytes] : runs[r].memory) {
      // Memory holds its value until the next change: a staircase.
      if (!points.empty())
        points.insert(points.end(), {x(time), y(previous)});
      points.insert(points.end(), {x(time), y(bytes)});
      previous = bytes;
    }
    svg.polyline(points, colour, "stroke-width=\"1.5\"");
    legend.emplace_back(runs[r].name, colour);
  }
  svg.legend(left, height - 5, legend);
  return svg.str();
}

std::string breakdown_plot(const std::vector<ComparedRun>& runs) {
  const std::vector<std::string> names = part_names(runs);
  double longest = 0;
  for (const ComparedRun& run : runs)
    longest = std::max(longest, number_at(run.summary, "step_time_s"));
  if (!(longest > 0) || names.empty())
    return "";
  const double width = 760, left = 150, right = 20, bar = 24, gap = 12, top = 10;
  const double bars_bottom = top + runs.size() * (bar + gap);
  Svg svg(width, bars_bottom + 90);
  const Scale x{0, longest, left, width - right};
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const double y = top + r * (bar + gap);
    svg.text(left - 8, y + bar * 0.7, runs[r].name, "text-anchor=\"end\" font-size=\"12\"");
    double at = 0;
    for (std::size_t p = 0; p < names.size(); ++p) {
      const double seconds = part_of(runs[r], names[p]);
      if (seconds <= 0)
        continue;
      svg.open_group("", runs[r].name + ": " + names[p] + " " + format_seconds(seconds));
      svg.rect(x(at), y, x(at + seconds) - x(at), bar, part_colour[p % std::size(part_colour)]);
      svg.close_group();
      at += seconds;
    }
  }
  svg.x_axis(x, bars_bottom, nice_ticks(longest, 6), seconds_text, "step time by part");
  std::vector<std::pair<std::string, std::string>> legend;
  for (std::size_t p = 0; p < names.size(); ++p)
    legend.emplace_back(names[p], part_colour[p % std::size(part_colour)]);
  svg.set_height(svg.legend(left, bars_bottom + 50, legend) + 10);
  return svg.str();
}

} // namespace

std::vector<ComparedValue> compared_values(const std::vector<ComparedRun>& runs) {
  std::vector<ComparedValue> rows;
  const auto add = [&](const std::string& label, std::string (*format)(double), int better, auto value_of) {
    ComparedValue row{label, {}, format, better};
    for (const ComparedRun& run : runs)
      row.values.push_back(value_of(run));
    // A quantity no run has (or has at all: no bubble without a pipeline) is left out.
    if (std::any_of(row.values.begin(), row.values.end(), [](double v) { return !std::isnan(v) && v != 0; }))
      rows.push_back(std::move(row));
  };
  const auto field = [](const char* path) { return [path](const ComparedRun& run) { return number_at(run.summary, path); }; };
  add("step time", seconds_text, -1, field("step_time_s"));
  add("throughput", tokens_text, +1, field("tokens_per_s"));
  add("per GPU", tokens_text, +1, [](const ComparedRun& run) {
    return number_at(run.summary, "tokens_per_s") / number_at(run.summary, "platform.gpus_used");
  });
  add("MFU", percent_text, +1, field("mfu"));
  add("GPUs", count_text, 0, field("platform.gpus_used"));
  add("time to train", seconds_text, -1, field("time_to_train_s"));
  add("peak memory", bytes_text, -1, field("memory.peak_bytes"));
  // Memory at the peak by category, in the order of the first run that has each.
  std::vector<std::string> categories;
  for (const ComparedRun& run : runs)
    if (const json* rank = peak_rank(run.summary); rank && rank->contains("at_peak"))
      for (const auto& [category, bytes] : (*rank)["at_peak"].items())
        if (std::find(categories.begin(), categories.end(), category) == categories.end())
          categories.push_back(category);
  for (const std::string& category : categories)
    add("  " + category, bytes_text, -1, [&category](const ComparedRun& run) {
      const json* rank = peak_rank(run.summary);
      return rank && rank->contains("at_peak") ? (*rank)["at_peak"].value(category, 0.0) : missing;
    });
  add("  reserve", bytes_text, -1, field("memory.reserve_bytes"));
  for (const std::string& part : part_names(runs))
    add("step: " + part, seconds_text, -1, [&part](const ComparedRun& run) { return part_of(run, part); });
  // Communication by kind: all of it, and what the step waited for.
  std::vector<std::string> kinds;
  for (const ComparedRun& run : runs)
    if (run.summary.contains("time") && run.summary["time"].contains("comm"))
      for (const auto& [kind, entry] : run.summary["time"]["comm"].items())
        if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end())
          kinds.push_back(kind);
  for (const std::string& kind : kinds) {
    add("comm " + kind + " total", seconds_text, -1,
        [&kind](const ComparedRun& run) { return number_at(run.summary, "time.comm." + kind + ".total_s"); });
    add("comm " + kind + " exposed", seconds_text, -1,
        [&kind](const ComparedRun& run) { return number_at(run.summary, "time.comm." + kind + ".exposed_s"); });
  }
  return rows;
}

std::vector<std::pair<std::string, std::vector<std::string>>> differing_settings(const std::vector<ComparedRun>& runs) {
  // summary.json's settings: "section.key": "value", as the scenario has them.
  const auto setting = [](const ComparedRun& run, const std::string& key) {
    const json* settings = run.summary.contains("settings") ? &run.summary["settings"] : nullptr;
    return settings && settings->contains(key) && (*settings)[key].is_string() ? (*settings)[key].get<std::string>()
                                                                              : std::string("-");
  };
  std::set<std::string> keys;
  for (const ComparedRun& run : runs)
    if (run.summary.contains("settings") && run.summary["settings"].is_object())
      for (const auto& [key, value] : run.summary["settings"].items())
        keys.insert(key);
  std::vector<std::pair<std::string, std::vector<std::string>>> differing;
  for (const std::string& key : keys) {
    std::vector<std::string> values;
    for (const ComparedRun& run : runs)
      values.push_back(setting(run, key));
    if (std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) != values.end())
      differing.emplace_back(key, values);
  }
  return differing;
}

std::vector<std::string> step_differences(const std::vector<ComparedRun>& runs) {
  std::vector<std::string> lines;
  const double first = number_at(runs.front().summary, "step_time_s");
  for (std::size_t r = 1; r < runs.size(); ++r) {
    const double step = number_at(runs[r].summary, "step_time_s");
    if (std::isnan(first) || std::isnan(step) || first <= 0)
      continue;
    const double delta = step - first;
    std::string line = runs[r].name + "'s step is " + format_seconds(std::fabs(delta)) +
                       printf_string(" (%.1f %%) ", std::fabs(delta) / first * 100) +
                       (delta >= 0 ? "longer" : "shorter") + " than " + runs.front().name + "'s";
    // The part whose change goes most the same way as the step's.
    std::string largest;
    double largest_change = 0;
    for (const std::string& part : part_names(runs)) {
      const double part_change = part_of(runs[r], part) - part_of(runs.front(), part);
      if (part_change * (delta >= 0 ? 1 : -1) > std::fabs(largest_change)) {
        largest = part;
        largest_change = part_change;
      }
    }
    if (!largest.empty() && delta != 0)
      line += ", most of it " + largest + " (" + (largest_change >= 0 ? "+" : "-") +
              format_seconds(std::fabs(largest_change)) + ")";
    lines.push_back(line);
  }
  return lines;
}

std::string compare_text(const std::vector<ComparedRun>& runs) {
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> header = {""};
  for (const ComparedRun& run : runs)
    header.push_back(run.name);
  table.push_back(header);
  for (const char* path : {"model.name", "layout", "platform.gpu"}) {
    std::vector<std::string> row = {std::string(path) == "model.name" ? "model" : std::string(path) == "layout" ? "layout" : "GPU"};
    for (const ComparedRun& run : runs)
      row.push_back(text_at(run.summary, path));
    table.push_back(row);
  }
  bool any_large = false;
  for (const ComparedValue& value : compared_values(runs)) {
    std::vector<std::string> row = {value.label};
    for (std::size_t r = 0; r < runs.size(); ++r) {
      const double v = value.values[r];
      std::string cell = std::isnan(v) ? "-" : value.format(v);
      if (r > 0 && !std::isnan(v))
        cell += change_text(value.values.front(), v);
      any_large = any_large || cell.find(" *") != std::string::npos;
      row.push_back(cell);
    }
    table.push_back(row);
  }
  std::vector<std::string> fits = {"fits"};
  for (const ComparedRun& run : runs)
    fits.push_back(text_at(run.summary, "memory.fits"));
  table.push_back(fits);
  std::string text = aligned_columns(table, std::vector<bool>(header.size(), false));
  if (any_large)
    text += "* " + format_double(large_change * 100) + " % or more from " + runs.front().name + "\n";
  const auto settings = differing_settings(runs);
  if (!settings.empty()) {
    text += "settings that differ:\n";
    for (const auto& [key, values] : settings)
      text += "  " + key + ": " + join(values, " | ") + "\n";
  }
  for (const std::string& line : step_differences(runs))
    text += line + "\n";
  return text;
}

std::string compare_html(const std::vector<ComparedRun>& runs) {
  std::vector<std::string> names;
  for (const ComparedRun& run : runs)
    names.push_back(run.name);
  const std::string title = "compare " + join(names, ", ");
  std::string html =
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<title>trainsim: " + xml_escape(title) + "</title>\n"
      "<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px}"
      "td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}th{background:#f4f4f4}"
      "td:first-child,th:first-child{text-align:left}td.better{color:#1a7f37;font-weight:bold}"
      "td.worse{color:#b22;font-weight:bold}</style>\n</head>\n<body>\n<h1>trainsim: " + xml_escape(title) + "</h1>\n";
  for (const std::string& line : step_differences(runs))
    html += "<p>" + xml_escape(line) + "</p>\n";
  html += "<table>\n<thead><tr><th></th>";
  for (const std::string& name : names)
    html += "<th>" + xml_escape(name) + "</th>";
  html += "</tr></thead>\n<tbody>\n";
  for (const char* path : {"model.name", "layout", "platform.gpu", "memory.fits"}) {
    html += "<tr><td>" + xml_escape(split(path, '.').back()) + "</td>";
    for (const ComparedRun& run : runs)
      html += "<td>" + xml_escape(text_at(run.summary, path)) + "</td>";
    html += "</tr>\n";
  }
  for (const ComparedValue& value : compared_values(runs)) {
    html += "<tr><td>" + xml_escape(value.label) + "</td>";
    for (std::size_t r = 0; r < runs.size(); ++r) {
      const double v = value.values[r], delta = change(value.values.front(), v);
      std::string kind;
      if (r > 0 && value.better != 0 && !std::isnan(delta) && std::fabs(delta) >= large_change)
        kind = delta * value.better > 0 ? " class=\"better\"" : " class=\"worse\"";
      html += "<td" + kind + ">" +
              xml_escape((std::isnan(v) ? std::string("-") : value.format(v)) +
                         (r > 0 && !std::isnan(v) ? change_text(value.values.front(), v) : "")) +
              "</td>";
    }
    html += "</tr>\n";
  }
  html += "</tbody>\n</table>\n<p>Changes are from " + xml_escape(runs.front().name) + "; * marks " +
          format_double(large_change * 100) + " % or more (green: better, red: worse).</p>\n";
  const auto settings = differing_settings(runs);
  if (!settings.empty()) {
    html += "<h2>Settings that differ</h2>\n<table>\n<tbody>\n";
    for (const auto& [key, values] : settings) {
      html += "<tr><td>" + xml_escape(key) + "</td>";
      for (const std::string& value : values)
        html += "<td>" + xml_escape(value) + "</td>";
      html += "</tr>\n";
    }
    html += "</tbody>\n</table>\n";
  }
  html += "<h2>The step by part</h2>\n" + breakdown_plot(runs) + "<h2>GPU memory of the peak rank</h2>\n" +
          memory_plot(runs) + "</body>\n</html>\n";
  return html;
}

} // namespace trainsim
