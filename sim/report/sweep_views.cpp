#include "report/sweep_views.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "common/text.hpp"
#include "common/units.hpp"
#include "report/svg.hpp"

namespace trainsim {
namespace {

constexpr double gib = 1024.0 * 1024 * 1024;

std::string tokens_label(double value) { return format_count(value); }

} // namespace

namespace {

// Tableau 10: points coloured by a key's value.
const char* const value_colour[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
                                    "#edc948", "#ff9da7", "#9c755f", "#bab0ac", "#e15759"};
constexpr std::size_t most_colours = std::size(value_colour);

std::string value_of(const SweepRow& row, const std::string& key) {
  for (const auto& [name, value] : row.settings)
    if (name == key)
      return value;
  return "";
}

// The values of `key` among the simulated rows, in the rows' order.
std::vector<std::string> values_of(const std::vector<SweepRow>& rows, const std::string& key) {
  std::vector<std::string> values;
  for (const SweepRow& row : rows)
    if (row.status == "ok" && std::find(values.begin(), values.end(), value_of(row, key)) == values.end())
      values.push_back(value_of(row, key));
  return values;
}

// A point: a circle when it fits, a cross when it does not.
void point(Svg& svg, double px, double py, const SweepRow& row, const std::string& colour, const std::string& tip) {
  if (row.fits) {
    svg.circle(px, py, 4, colour, "class=\"fits\" data-index=\"" + std::to_string(row.index) + "\"", tip);
    return;
  }
  svg.open_group("class=\"infeasible\" data-index=\"" + std::to_string(row.index) + "\"", tip);
  svg.line(px - 4, py - 4, px + 4, py + 4, colour, "stroke-width=\"2\"");
  svg.line(px - 4, py + 4, px + 4, py - 4, colour, "stroke-width=\"2\"");
  svg.close_group();
}

std::string tip_of(const SweepRow& row) {
  return "#" + std::to_string(row.index) + " " + row.label() + ": " + format_count(row.tokens_per_s) + " tokens/s, peak " +
         format_bytes(row.peak_bytes) + (row.fits ? "" : " (does not fit)");
}

// With one varied key: tokens/s against its values, in their order, below the scatter plot.
double by_key_plot(Svg& svg, const std::vector<SweepRow>& rows, const std::string& key, double top, double width,
                   double left, double right) {
  const std::vector<std::string> values = values_of(rows, key);
  double max_tokens = 0;
  for (const SweepRow& row : rows)
    if (row.status == "ok")
      max_tokens = std::max(max_tokens, row.tokens_per_s);
  const double height = 280, bottom = top + height - 56;
  const std::vector<double> y_ticks = nice_ticks(max_tokens, 5);
  const Scale y{0, y_ticks.back(), bottom, top + 30};
  const double step = (width - left - right) / static_cast<double>(values.size());
  const auto x_of = [&](std::size_t i) { return left + step * (static_cast<double>(i) + 0.5); };
  svg.text(left, top + 12, "tokens per second by " + key, "font-weight=\"bold\"");
  svg.open_group("class=\"by-key\" data-values=\"" + std::to_string(values.size()) + "\"");
  std::vector<double> line;
  for (std::size_t i = 0; i < values.size(); ++i) {
    svg.text(x_of(i), bottom + 18, values[i], "text-anchor=\"middle\"");
    for (const SweepRow& row : rows)
      if (row.status == "ok" && value_of(row, key) == values[i]) {
        point(svg, x_of(i), y(row.tokens_per_s), row, value_colour[0], tip_of(row));
        line.insert(line.end(), {x_of(i), y(row.tokens_per_s)});
      }
  }
  svg.polyline(line, value_colour[0], "stroke-opacity=\"0.5\"");
  svg.line(left, bottom, width - right, bottom, "#333");
  svg.text(left + (width - left - right) / 2, bottom + 40, key, "text-anchor=\"middle\"");
  svg.y_axis(y, left, y_ticks, tokens_label, "tokens per second");
  svg.close_group();
  return top + height;
}

} // namespace

std::string sweep_colour_key(const std::vector<SweepRow>& rows) {
  for (const SweepRow& row : rows)
    if (row.status == "ok") {
      for (const auto& [key, value] : row.settings) {
        const std::size_t count = values_of(rows, key).size();
        if (count >= 2 && count <= most_colours)
          return key;
      }
      return "";
    }
  return "";
}

std::string sweep_svg(const std::vector<SweepRow>& rows, const std::string& colour_key) {
  constexpr double width = 760, height = 460, left = 96, right = 30, top = 40, bottom = 56;
  double max_memory = 0, max_tokens = 0;
  std::vector<std::pair<std::string, double>> capacities;  // (GPU, its memory), one line each
  std::size_t simulated = 0, fitting = 0;
  for (const SweepRow& row : rows) {
    if (row.status != "ok")
      continue;
    ++simulated;
    fitting += row.fits;
    max_memory = std::max({max_memory, row.peak_bytes, row.capacity_bytes});
    max_tokens = std::max(max_tokens, row.tokens_per_s);
    const std::pair<std::string, double> capacity{row.gpu.empty() ? "GPU" : row.gpu, row.capacity_bytes};
    if (row.capacity_bytes > 0 && std::find(capacities.begin(), capacities.end(), capacity) == capacities.end())
      capacities.push_back(capacity);
  }
  std::vector<double> x_ticks = nice_ticks(max_memory / gib, 8);
  for (double& tick : x_ticks)
    tick *= gib;
  const std::vector<double> y_ticks = nice_ticks(max_tokens, 6);
  const Scale x{0, x_ticks.back(), left, width - right};
  const Scale y{0, y_ticks.back(), height - bottom, top};
  const std::vector<std::string> colours_by = colour_key.empty() ? std::vector<std::string>() : values_of(rows, colour_key);
  Svg svg(width, height);
  svg.text(left, 18, std::to_string(simulated) + " simulated configurations (" + std::to_string(fitting) + " fit, " +
                         std::to_string(simulated - fitting) + " do not: crosses); " +
                         std::to_string(rows.size() - simulated) + " invalid or failed, not shown",
           "font-weight=\"bold\"");
  svg.open_group("class=\"plot\" data-points=\"" + std::to_string(simulated) + "\" data-x-max=\"" +
                 format_double(x_ticks.back()) + "\" data-y-max=\"" + format_double(y_ticks.back()) + "\"");
  for (std::size_t c = 0; c < capacities.size(); ++c) {
    const auto& [gpu, capacity] = capacities[c];
    svg.line(x(capacity), y(0), x(capacity), y(y_ticks.back()), "#d62728", "stroke-dasharray=\"6 4\" class=\"capacity\"");
    svg.text(x(capacity) - 4, top + 12 + 14 * static_cast<double>(c),
             capacities.size() > 1 || gpu != "GPU" ? gpu + " memory" : "GPU memory",
             "text-anchor=\"end\" fill=\"#d62728\"");
  }
  for (const SweepRow& row : rows) {
    if (row.status != "ok")
      continue;
    // Without a key to colour by, crosses are red; with one, every point has its value's colour.
    const auto at = std::find(colours_by.begin(), colours_by.end(), value_of(row, colour_key));
    const std::string colour = !colours_by.empty() ? value_colour[(at - colours_by.begin()) % most_colours]
                               : row.fits          ? value_colour[0]
                                                   : "#d62728";
    point(svg, x(row.peak_bytes), y(row.tokens_per_s), row, colour, tip_of(row));
  }
  svg.x_axis(x, y(0), x_ticks, gib_label, "peak GPU memory");
  svg.y_axis(y, left, y_ticks, tokens_label, "tokens per second");
  svg.close_group();
  double end = height;
  if (!colours_by.empty()) {
    std::vector<std::pair<std::string, std::string>> legend;
    for (std::size_t v = 0; v < colours_by.size(); ++v)
      legend.emplace_back(colour_key + " = " + colours_by[v], value_colour[v % most_colours]);
    end = svg.legend(left, height + 4, legend) + 16;
  }
  // One varied key: its values against tokens/s.
  const bool one_key = std::all_of(rows.begin(), rows.end(), [](const SweepRow& row) { return row.settings.size() == 1; });
  if (one_key && simulated > 0)
    end = by_key_plot(svg, rows, rows.front().settings.front().first, end + 10, width, left, right);
  svg.set_height(end);
  return svg.str();
}

std::string sweep_html(const std::string& title, const std::vector<SweepRow>& rows, const std::string& colour_key) {
  std::string html =
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<title>trainsim: " + xml_escape(title) + "</title>\n"
      "<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px}"
      "td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:left}th{cursor:pointer;background:#f4f4f4}"
      "tr.invalid,tr.failed{color:#888}tr.nofit td{color:#b22}</style>\n</head>\n<body>\n"
      "<h1>trainsim: " + xml_escape(title) + "</h1>\n" + sweep_svg(rows, colour_key) +
      "<p>Click a column header to sort by it.</p>\n<table id=\"results\">\n<thead><tr><th>index</th><th>status</th>";
  const Settings keys = rows.empty() ? Settings{} : rows.front().settings;
  for (const auto& [key, value] : keys)
    html += "<th>" + xml_escape(key) + "</th>";
  html += "<th>tokens/s</th><th>step time (s)</th><th>MFU</th><th>peak (GiB)</th><th>fits</th><th>bottleneck or reason</th>"
          "</tr></thead>\n<tbody>\n";
  for (const SweepRow& row : rows) {
    const std::string kind = row.status != "ok" ? row.status : row.fits ? "fits" : "nofit";
    html += "<tr class=\"" + kind + "\"><td>" + std::to_string(row.index) + "</td><td>" + xml_escape(row.status) + "</td>";
    for (const auto& [key, value] : row.settings)
      html += "<td>" + xml_escape(value) + "</td>";
    if (row.status == "ok")
      html += "<td>" + format_double(std::round(row.tokens_per_s)) + "</td><td>" +
              format_double(std::round(row.step_time_s * 1000) / 1000) + "</td><td>" +
              format_double(std::round(row.mfu * 1000) / 1000) + "</td><td>" +
              format_double(std::round(row.peak_bytes / gib * 100) / 100) + "</td><td>" + (row.fits ? "yes" : "no") +
              "</td><td>" + xml_escape(row.bottleneck) + "</td>";
    else
      html += "<td></td><td></td><td></td><td></td><td></td><td>" + xml_escape(row.reason) + "</td>";
    html += "</tr>\n";
  }
  // Sorting: numbers as numbers, text as text; a second click reverses.
  html += "</tbody>\n</table>\n<script>//<![CDATA[\n"
          "document.querySelectorAll('#results th').forEach(function (th, column) {\n"
          "  th.addEventListener('click', function () {\n"
          "    var body = document.querySelector('#results tbody');\n"
          "    var rows = Array.prototype.slice.call(body.rows);\n"
          "    var up = th.dataset.order !== 'up'; th.dataset.order = up ? 'up' : 'down';\n"
          "    rows.sort(function (a, b) {\n"
          "      var x = a.cells[column].textContent, y = b.cells[column].textContent;\n"
          "      var nx = parseFloat(x), ny = parseFloat(y);\n"
          "      var order = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : (isNaN(nx) ? 1 : 0) - (isNaN(ny) ? 1 : 0) || x.localeCompare(y);\n"
          "      return up ? order : -order;\n"
          "    });\n"
          "    rows.forEach(function (row) { body.appendChild(row); });\n"
          "  });\n"
          "});\n//]]></script>\n</body>\n</html>\n";
  return html;
}

} // namespace trainsim
