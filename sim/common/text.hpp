#pragma once
// Small text helpers shared by the loaders and writers.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainsim {

std::string trim(std::string_view text);

// The name of `value` in a setting's list of accepted names ("" if none).
template <typename Enum>
const char* name_of(const std::vector<std::pair<std::string, Enum>>& names, Enum value) {
  for (const auto& [name, named] : names)
    if (named == value)
      return name.c_str();
  return "";
}
std::vector<std::string> split(std::string_view text, char separator);
// The parts with `separator` between them: join({"a", "b"}, ", ") is "a, b".
std::string join(const std::vector<std::string>& parts, std::string_view separator);
// Orders "gpu2" before "gpu10": platform hosts are ranked in this order.
bool natural_less(std::string_view a, std::string_view b);
// Parses a whole decimal integer; false when the text is anything else.
bool parse_integer(std::string_view text, long long& value);
// Shortest decimal text that reads back as the same double: deterministic output.
std::string format_double(double value);
// The most ranks a layout or a trace may have.
constexpr long long max_ranks = 1'000'000;
// "0-3,8,10-11" <-> {0,1,2,3,8,10,11}; throws std::invalid_argument beyond max_ranks.
std::vector<int> parse_rank_list(std::string_view text);
std::string format_rank_list(const std::vector<int>& ranks);
// Rows as aligned columns, each as wide as its widest cell plus two spaces: `right[c]` aligns
// column c to the right. Every line ends in '\n', without trailing spaces.
std::string aligned_columns(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right);

} // namespace trainsim
