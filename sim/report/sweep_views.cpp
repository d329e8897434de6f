#include "report/sweep_views.hpp"

#include <algorithm>
#include <cmath>

#include "common/text.hpp"
#include "common/units.hpp"
#include "report/svg.hpp"

namespace trainsim {
namespace {

constexpr double gib = 1024.0 * 1024 * 1024;

std::string tokens_label(double value) { return format_count(value); }

} // namespace

std::string sweep_svg(const std::vector<SweepRow>& rows) {
  constexpr double width = 760, height = 460, left = 96, right = 30, top = 40, bottom = 56;
  double max_memory = 0, max_tokens = 0, capacity = 0;
  std::size_t simulated = 0, fitting = 0;
  for (const SweepRow& row : rows) {
    if (row.status != "ok")
      continue;
    ++simulated;
    fitting += row.fits;
    max_memory = std::max({max_memory, row.peak_bytes, row.capacity_bytes});
    max_tokens = std::max(max_tokens, row.tokens_per_s);
    capacity = std::max(capacity, row.capacity_bytes);
  }
  std::vector<double> x_ticks = nice_ticks(max_memory / gib, 8);
  for (double& tick : x_ticks)
    tick *= gib;
  const std::vector<double> y_ticks = nice_ticks(max_tokens, 6);
  const Scale x{0, x_ticks.back(), left, width - right};
  const Scale y{0, y_ticks.back(), height - bottom, top};
  Svg svg(width, height);
  svg.text(left, 18, std::to_string(simulated) + " simulated configurations (" + std::to_string(fitting) + " fit, " +
                         std::to_string(simulated - fitting) + " do not: crosses); " +
                         std::to_string(rows.size() - simulated) + " invalid or failed, not shown",
           "font-weight=\"bold\"");
  svg.open_group("class=\"plot\" data-points=\"" + std::to_string(simulated) + "\" data-x-max=\"" +
                 format_double(x_ticks.back()) + "\" data-y-max=\"" + format_double(y_ticks.back()) + "\"");
  if (capacity > 0) {
    svg.line(x(capacity), y(0), x(capacity), y(y_ticks.back()), "#d62728", "stroke-dasharray=\"6 4\" class=\"capacity\"");
    svg.text(x(capacity) - 4, top + 12, "GPU memory", "text-anchor=\"end\" fill=\"#d62728\"");
  }
  for (const SweepRow& row : rows) {
    if (row.status != "ok")
      continue;
    const double px = x(row.peak_bytes), py = y(row.tokens_per_s);
    const std::string tip = "#" + std::to_string(row.index) + " " + row.label() + ": " + format_count(row.tokens_per_s) +
                            " tokens/s, peak " + format_bytes(row.peak_bytes) + (row.fits ? "" : " (does not fit)");
    if (row.fits) {
      svg.circle(px, py, 4, "#4e79a7", "class=\"fits\" data-index=\"" + std::to_string(row.index) + "\"", tip);
    } else {
      svg.open_group("class=\"infeasible\" data-index=\"" + std::to_string(row.index) + "\"", tip);
      svg.line(px - 4, py - 4, px + 4, py + 4, "#d62728", "stroke-width=\"2\"");
      svg.line(px - 4, py + 4, px + 4, py - 4, "#d62728", "stroke-width=\"2\"");
      svg.close_group();
    }
  }
  svg.x_axis(x, y(0), x_ticks, gib_label, "peak GPU memory");
  svg.y_axis(y, left, y_ticks, tokens_label, "tokens per second");
  svg.close_group();
  return svg.str();
}

std::string sweep_html(const std::string& title, const std::vector<SweepRow>& rows) {
  std::string html =
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<title>trainsim: " + xml_escape(title) + "</title>\n"
      "<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px}"
      "td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:left}th{cursor:pointer;background:#f4f4f4}"
      "tr.invalid,tr.failed{color:#888}tr.nofit td{color:#b22}</style>\n</head>\n<body>\n"
      "<h1>trainsim: " + xml_escape(title) + "</h1>\n" + sweep_svg(rows) +
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
