#pragma once
// A small SVG writer for trainsim's plots: shapes, text and axes with readable ticks. It
// writes well-formed XML (every attribute quoted, text escaped), so plots embed as-is in
// the HTML report.
#include <string>
#include <vector>

namespace trainsim {

// Text safe inside XML elements and attribute values.
std::string xml_escape(const std::string& text);

// Tick values for an axis from 0 to `max`: 1, 2 or 5 times a power of ten apart, at most
// `count` + 1 of them, the last at or above `max`.
std::vector<double> nice_ticks(double max, int count);

// The width `text` takes in pixels, estimated for the plots' sans-serif font: 0.6 em per
// character is the average of DejaVu Sans and Liberation Sans over letters and digits (Chromium
// draws "exposed nvme_write", 18 characters at 12 px, 124 px wide: 0.575 em).
double text_width(const std::string& text, double font_size = 12);

// A linear map from data to pixels.
struct Scale {
  double data_min = 0, data_max = 1;
  double pixel_min = 0, pixel_max = 1;
  double operator()(double value) const;
};

class Svg {
public:
  Svg(double width, double height);
  // Plots whose height depends on what they hold (legend lines, rows) set it once drawn.
  void set_height(double height) { height_ = height; }

  void rect(double x, double y, double width, double height, const std::string& fill,
            const std::string& extra = "");
  void line(double x1, double y1, double x2, double y2, const std::string& stroke, const std::string& extra = "");
  // A closed shape through the points (x0, y0, x1, y1, ...).
  void polygon(const std::vector<double>& points, const std::string& fill, const std::string& extra = "");
  // An open line through the points (x0, y0, x1, y1, ...).
  void polyline(const std::vector<double>& points, const std::string& stroke, const std::string& extra = "");
  void text(double x, double y, const std::string& text, const std::string& extra = "");
  // A circle; `title` (when given) is its tooltip.
  void circle(double x, double y, double radius, const std::string& fill, const std::string& extra = "",
              const std::string& title = "");
  // A tooltip for the shape written just before it is not part of SVG 1.1 shapes; `open_group`
  // with a <title> gives one to a group of shapes.
  void open_group(const std::string& attributes, const std::string& title = "");
  void close_group();
  // Axes with ticks and labels: x along the bottom of the plot area, y along its left side. Ticks
  // outside the scale's data range are left out: they would fall outside the plot.
  void x_axis(const Scale& x, double y_pixel, const std::vector<double>& ticks,
              std::string (*label)(double), const std::string& title);
  void y_axis(const Scale& y, double x_pixel, const std::vector<double>& ticks,
              std::string (*label)(double), const std::string& title);
  // Coloured squares with names (name, colour), left to right from (x, y) and on a new line when the
  // next would pass the right edge of the canvas; returns the y of the last line.
  double legend(double x, double y, const std::vector<std::pair<std::string, std::string>>& entries);

  std::string str() const;

private:
  double width_, height_;
  std::string body_;
};

// Axis labels: seconds as "1.5 s" / "250 ms", bytes as "40 GiB".
std::string seconds_label(double seconds);
std::string gib_label(double bytes);
std::string tib_label(double bytes);
std::string mib_label(double bytes);

} // namespace trainsim
