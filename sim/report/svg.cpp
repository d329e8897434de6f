#include "report/svg.hpp"

#include <algorithm>
#include <cmath>

#include "common/text.hpp"

namespace trainsim {
namespace {

std::string number(double value) {
  // Pixels to a hundredth: smaller files, and the same text for the same inputs.
  return format_double(std::round(value * 100.0) / 100.0);
}

bool in_range(const Scale& scale, double value) {
  const double low = std::min(scale.data_min, scale.data_max), high = std::max(scale.data_min, scale.data_max);
  const double tolerance = (high - low) * 1e-9;
  return value >= low - tolerance && value <= high + tolerance;
}

} // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    case '\'': out += "&apos;"; break;
    default: out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double max, int count) {
  if (!(max > 0) || count < 1)
    return {0.0, 1.0};
  const double rough = max / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(rough)));
  double step = magnitude;
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    step = factor * magnitude;
    if (step >= rough)
      break;
  }
  std::vector<double> ticks;
  for (int i = 0;; ++i) {
    ticks.push_back(i * step);
    if (i * step >= max * (1 - 1e-12))
      break;
  }
  return ticks;
}

double text_width(const std::string& text, double font_size) {
  return 0.6 * font_size * static_cast<double>(text.size());
}

double Scale::operator()(double value) const {
  if (data_max == data_min)
    return pixel_min;
  return pixel_min + (value - data_min) / (data_max - data_min) * (pixel_max - pixel_min);
}

Svg::Svg(double width, double height) : width_(width), height_(height) {}

void Svg::rect(double x, double y, double width, double height, const std::string& fill, const std::string& extra) {
  body_ += "<rect x=\"" + number(x) + "\" y=\"" + number(y) + "\" width=\"" + number(width) + "\" height=\"" +
           number(height) + "\" fill=\"" + fill + "\"" + (extra.empty() ? "" : " " + extra) + "/>\n";
}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& stroke, const std::string& extra) {
  body_ += "<line x1=\"" + number(x1) + "\" y1=\"" + number(y1) + "\" x2=\"" + number(x2) + "\" y2=\"" + number(y2) +
           "\" stroke=\"" + stroke + "\"" + (extra.empty() ? "" : " " + extra) + "/>\n";
}

namespace {

std::string point_list(const std::vector<double>& points) {
  std::string list;
  for (std::size_t i = 0; i + 1 < points.size(); i += 2)
    list += (i ? " " : "") + number(points[i]) + "," + number(points[i + 1]);
  return list;
}

} // namespace

void Svg::polygon(const std::vector<double>& points, const std::string& fill, const std::string& extra) {
  body_ += "<polygon points=\"" + point_list(points) + "\" fill=\"" + fill + "\"" + (extra.empty() ? "" : " " + extra) +
           "/>\n";
}

void Svg::polyline(const std::vector<double>& points, const std::string& stroke, const std::string& extra) {
  body_ += "<polyline points=\"" + point_list(points) + "\" fill=\"none\" stroke=\"" + stroke + "\"" +
           (extra.empty() ? "" : " " + extra) + "/>\n";
}

void Svg::text(double x, double y, const std::string& content, const std::string& extra) {
  body_ += "<text x=\"" + number(x) + "\" y=\"" + number(y) + "\"" + (extra.empty() ? "" : " " + extra) + ">" +
           xml_escape(content) + "</text>\n";
}

void Svg::circle(double x, double y, double radius, const std::string& fill, const std::string& extra,
                 const std::string& title) {
  body_ += "<circle cx=\"" + number(x) + "\" cy=\"" + number(y) + "\" r=\"" + number(radius) + "\" fill=\"" + fill +
           "\"" + (extra.empty() ? "" : " " + extra);
  body_ += title.empty() ? "/>\n" : "><title>" + xml_escape(title) + "</title></circle>\n";
}

void Svg::open_group(const std::string& attributes, const std::string& title) {
  body_ += "<g" + (attributes.empty() ? "" : " " + attributes) + ">\n";
  if (!title.empty())
    body_ += "<title>" + xml_escape(title) + "</title>\n";
}

void Svg::close_group() { body_ += "</g>\n"; }

void Svg::x_axis(const Scale& x, double y_pixel, const std::vector<double>& ticks, std::string (*label)(double),
                 const std::string& title) {
  line(x.pixel_min, y_pixel, x.pixel_max, y_pixel, "#333");
  for (double tick : ticks) {
    if (!in_range(x, tick))
      continue;
    const double px = x(tick);
    line(px, y_pixel, px, y_pixel + 4, "#333", "class=\"tick\"");
    text(px, y_pixel + 16, label(tick), "text-anchor=\"middle\"");
  }
  text((x.pixel_min + x.pixel_max) / 2, y_pixel + 32, title, "text-anchor=\"middle\"");
}

void Svg::y_axis(const Scale& y, double x_pixel, const std::vector<double>& ticks, std::string (*label)(double),
                 const std::string& title) {
  line(x_pixel, y.pixel_min, x_pixel, y.pixel_max, "#333");
  for (double tick : ticks) {
    if (!in_range(y, tick))
      continue;
    const double py = y(tick);
    line(x_pixel - 4, py, x_pixel, py, "#333", "class=\"tick\"");
    text(x_pixel - 6, py + 4, label(tick), "text-anchor=\"end\"");
  }
  const double middle = (y.pixel_min + y.pixel_max) / 2;
  text(x_pixel - 66, middle, title,
       "text-anchor=\"middle\" transform=\"rotate(-90 " + number(x_pixel - 66) + " " + number(middle) + ")\"");
}

double Svg::legend(double x, double y, const std::vector<std::pair<std::string, std::string>>& entries) {
  constexpr double square = 12, gap = 4, spacing = 14, line_height = 18, margin = 10;
  const double line_start = x;
  for (const auto& [name, colour] : entries) {
    const double entry_width = square + gap + text_width(name);
    if (x > line_start && x + entry_width > width_ - margin) {
      x = line_start;
      y += line_height;
    }
    rect(x, y - 10, square, square, colour);
    text(x + square + gap, y, name);
    x += entry_width + spacing;
  }
  return y;
}

std::string Svg::str() const {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(width_) + "\" height=\"" + number(height_) +
         "\" viewBox=\"0 0 " + number(width_) + " " + number(height_) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n" + body_ + "</svg>\n";
}

std::string seconds_label(double seconds) {
  if (seconds == 0)
    return "0";
  if (seconds < 1)
    return format_double(std::round(seconds * 1e6) / 1e3) + " ms";
  return format_double(std::round(seconds * 1e3) / 1e3) + " s";
}

std::string gib_label(double bytes) {
  return format_double(std::round(bytes / (1024.0 * 1024 * 1024) * 100) / 100) + " GiB";
}

std::string mib_label(double bytes) {
  return format_double(std::round(bytes / (1024.0 * 1024) * 100) / 100) + " MiB";
}

std::string tib_label(double bytes) {
  return format_double(std::round(bytes / (1024.0 * 1024 * 1024 * 1024) * 100) / 100) + " TiB";
}

} // namespace trainsim
