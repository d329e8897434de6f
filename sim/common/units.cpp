#include "common/units.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "common/text.hpp"

namespace trainsim {
namespace {

struct Suffix {
  std::string_view name;
  double factor;
};

// Splits "12.5GiB" into 12.5 and "GiB"; the number must be finite and non-negative.
std::pair<double, std::string_view> split_number(std::string_view text, std::string_view accepted) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  const std::string owned(text);
  const char* begin = owned.c_str();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  const bool starts_like_a_number = !owned.empty() && (std::isdigit(static_cast<unsigned char>(owned.front())) || owned.front() == '.');
  if (end == begin || !starts_like_a_number)
    throw UnitError("'" + owned + "' is not a quantity; accepted: " + std::string(accepted));
  if (!std::isfinite(value) || value < 0)
    throw UnitError("'" + owned + "' must be a finite, non-negative quantity; accepted: " + std::string(accepted));
  std::string_view suffix = text.substr(static_cast<std::size_t>(end - begin));
  while (!suffix.empty() && suffix.front() == ' ')
    suffix.remove_prefix(1);
  return {value, suffix};
}

double parse_with(std::string_view text, const std::vector<Suffix>& suffixes, std::string_view accepted,
                  bool suffix_required) {
  auto [value, suffix] = split_number(text, accepted);
  if (suffix.empty()) {
    if (suffix_required)
      throw UnitError("'" + std::string(text) + "' has no unit; accepted: " + std::string(accepted));
    return value;
  }
  for (const auto& candidate : suffixes)
    if (candidate.name == suffix)
      return value * candidate.factor;
  throw UnitError("'" + std::string(text) + "' has an unknown unit '" + std::string(suffix) +
                  "'; accepted: " + std::string(accepted));
}

constexpr double kilo = 1e3, mega = 1e6, giga = 1e9, tera = 1e12, peta = 1e15, exa = 1e18;
constexpr double kibi = 1024.0, mebi = kibi * 1024, gibi = mebi * 1024, tebi = gibi * 1024;

std::string printf_string(const char* format, double value, const char* unit) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value, unit);
  return buffer;
}

} // namespace

double parse_bytes(std::string_view text) {
  static const std::vector<Suffix> suffixes = {
      {"B", 1},        {"KB", kilo},     {"kB", kilo},     {"MB", mega},     {"GB", giga},
      {"TB", tera},    {"KiB", kibi},    {"MiB", mebi},    {"GiB", gibi},    {"TiB", tebi}};
  // A size without a unit is refused: "25" meant as 25 MiB would silently be 25 bytes.
  return parse_with(text, suffixes, "a size with its unit such as 25MiB, 80GiB or 1048576B (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)",
                    true);
}

double parse_bandwidth(std::string_view text) {
  static const std::vector<Suffix> suffixes = {
      {"Bps", 1},          {"KBps", kilo},      {"kBps", kilo},      {"MBps", mega},      {"GBps", giga},
      {"TBps", tera},      {"KiBps", kibi},     {"MiBps", mebi},     {"GiBps", gibi},     {"TiBps", tebi},
      {"bps", 0.125},      {"Kbps", kilo / 8},  {"kbps", kilo / 8},  {"Mbps", mega / 8},  {"Gbps", giga / 8},
      {"Tbps", tera / 8}};
  return parse_with(text, suffixes, "a bandwidth such as 25GBps or 200Gbps (Bps, KBps, MBps, GBps, TBps, KiBps.., bps, Mbps, Gbps, Tbps)",
                    true);
}

double parse_flops(std::string_view text) {
  static const std::vector<Suffix> suffixes = {{"f", 1},        {"kf", kilo},     {"Kf", kilo}, {"Mf", mega},
                                               {"Gf", giga},    {"Tf", tera},     {"Pf", peta}, {"Ef", exa}};
  return parse_with(text, suffixes, "a FLOP rate such as 312Tf (f, kf, Mf, Gf, Tf, Pf, Ef)", true);
}

double parse_seconds(std::string_view text) {
  static const std::vector<Suffix> suffixes = {{"s", 1},   {"ms", 1e-3},  {"us", 1e-6}, {"ns", 1e-9},
                                               {"min", 60}, {"h", 3600},  {"d", 86400}};
  return parse_with(text, suffixes, "a duration such as 1us, 2.5ms, 3s (ns, us, ms, s, min, h, d)", false);
}

double parse_count(std::string_view text) {
  static const std::vector<Suffix> suffixes = {{"K", kilo}, {"k", kilo}, {"M", mega}, {"B", giga}, {"G", giga}, {"T", tera}};
  return parse_with(text, suffixes, "a count such as 1e9, 300B or 2T (K, M, B = 1e9, T = 1e12)", false);
}

double parse_tokens(std::string_view text) {
  const double tokens = parse_count(text);
  if (!(tokens > 0 && tokens <= max_tokens))
    throw UnitError("'" + std::string(text) + "' is out of range; accepted: a token count above 0 and at most "
                    "1000T (1e15), such as 1e9, 300B or 2T");
  return tokens;
}

std::string format_bytes(double bytes) {
  const double magnitude = std::fabs(bytes);
  if (magnitude >= tebi)
    return printf_string("%.2f %s", bytes / tebi, "TiB");
  if (magnitude >= gibi)
    return printf_string("%.2f %s", bytes / gibi, "GiB");
  if (magnitude >= mebi)
    return printf_string("%.2f %s", bytes / mebi, "MiB");
  if (magnitude >= kibi)
    return printf_string("%.2f %s", bytes / kibi, "KiB");
  return printf_string("%.0f %s", bytes, "B");
}

std::string format_seconds(double seconds) {
  const double magnitude = std::fabs(seconds);
  if (magnitude >= 86400)
    return printf_string("%.2f %s", seconds / 86400, "days");
  if (magnitude >= 3600)
    return printf_string("%.2f %s", seconds / 3600, "h");
  if (magnitude >= 60)
    return printf_string("%.2f %s", seconds / 60, "min");
  if (magnitude >= 1)
    return printf_string("%.3f %s", seconds, "s");
  if (magnitude >= 1e-3)
    return printf_string("%.3f %s", seconds * 1e3, "ms");
  return printf_string("%.3f %s", seconds * 1e6, "us");
}

std::string format_flops(double flops_per_second) { return format_double(flops_per_second / tera) + "Tf"; }

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds))
    return "?";
  const long long s = std::llround(seconds);
  const auto two_digits = [](long long value) { return (value < 10 ? "0" : "") + std::to_string(value); };
  if (s >= 3600)
    return std::to_string(s / 3600) + "h" + two_digits(s % 3600 / 60) + "m";
  if (s >= 60)
    return std::to_string(s / 60) + "m" + two_digits(s % 60) + "s";
  return std::to_string(s) + "s";
}

std::string format_count(double count) {
  const double magnitude = std::fabs(count);
  if (magnitude >= 1e18)  // a large step's FLOPs
    return printf_string("%.2f%s", count / 1e18, "E");
  if (magnitude >= 1e15)
    return printf_string("%.2f%s", count / 1e15, "P");
  if (magnitude >= tera)
    return printf_string("%.2f%s", count / tera, "T");
  if (magnitude >= giga)
    return printf_string("%.2f%s", count / giga, "B");
  if (magnitude >= mega)
    return printf_string("%.2f%s", count / mega, "M");
  if (magnitude >= kilo)
    return printf_string("%.2f%s", count / kilo, "K");
  return printf_string("%.0f%s", count, "");
}

} // namespace trainsim
