#include "common/text.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace trainsim {

std::string trim(std::string_view text) {
  std::size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin])))
    ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1])))
    --end;
  return std::string(text.substr(begin, end - begin));
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t next = text.find(separator, start);
    parts.emplace_back(text.substr(start, next == std::string_view::npos ? std::string_view::npos : next - start));
    if (next == std::string_view::npos)
      return parts;
    start = next + 1;
  }
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string joined;
  for (std::size_t i = 0; i < parts.size(); ++i)
    joined += (i ? std::string(separator) : std::string()) + parts[i];
  return joined;
}

bool natural_less(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool a_digit = std::isdigit(static_cast<unsigned char>(a[i]));
    const bool b_digit = std::isdigit(static_cast<unsigned char>(b[j]));
    if (a_digit && b_digit) {
      std::size_t a_end = i, b_end = j;
      while (a_end < a.size() && std::isdigit(static_cast<unsigned char>(a[a_end])))
        ++a_end;
      while (b_end < b.size() && std::isdigit(static_cast<unsigned char>(b[b_end])))
        ++b_end;
      std::string_view a_num = a.substr(i, a_end - i), b_num = b.substr(j, b_end - j);
      while (a_num.size() > 1 && a_num.front() == '0')
        a_num.remove_prefix(1);
      while (b_num.size() > 1 && b_num.front() == '0')
        b_num.remove_prefix(1);
      if (a_num.size() != b_num.size())
        return a_num.size() < b_num.size();
      if (a_num != b_num)
        return a_num < b_num;
      i = a_end;
      j = b_end;
      continue;
    }
    if (a[i] != b[j])
      return a[i] < b[j];
    ++i;
    ++j;
  }
  if ((a.size() - i) != (b.size() - j))
    return (a.size() - i) < (b.size() - j);
  return a < b;
}

bool parse_integer(std::string_view text, long long& value) {
  const std::string trimmed = trim(text);
  if (trimmed.empty())
    return false;
  const char* first = trimmed.data();
  const char* last = first + trimmed.size();
  const auto result = std::from_chars(first, last, value);
  return result.ec == std::errc() && result.ptr == last;
}

std::string format_double(double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::vector<int> parse_rank_list(std::string_view text) {
  std::vector<int> ranks;
  for (const auto& part : split(text, ',')) {
    const auto dash = part.find('-');
    long long first = 0, last = 0;
    if (dash == std::string::npos) {
      if (!parse_integer(part, first))
        throw std::invalid_argument("'" + part + "' is not a rank");
      last = first;
    } else if (!parse_integer(part.substr(0, dash), first) || !parse_integer(part.substr(dash + 1), last)) {
      throw std::invalid_argument("'" + part + "' is not a rank range such as 0-7");
    }
    if (first < 0 || last < first)
      throw std::invalid_argument("'" + part + "' is not an increasing range of non-negative ranks");
    if (last >= max_ranks || static_cast<long long>(ranks.size()) + (last - first) >= max_ranks)
      throw std::invalid_argument("'" + part + "' goes beyond " + std::to_string(max_ranks) + " ranks, the most supported");
    for (long long rank = first; rank <= last; ++rank)
      ranks.push_back(static_cast<int>(rank));
  }
  return ranks;
}

std::string aligned_columns(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<std::size_t> width;
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      width.resize(std::max(width.size(), row.size()), 0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      const bool to_right = c < right.size() && right[c];
      line += (c > 0 ? "  " : "") + (to_right ? pad + row[c] : row[c] + pad);
    }
    out += line.substr(0, line.find_last_not_of(' ') + 1) + '\n';
  }
  return out;
}

std::string format_rank_list(const std::vector<int>& ranks) {
  std::string text;
  std::size_t i = 0;
  while (i < ranks.size()) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    if (!text.empty())
      text += ',';
    text += std::to_string(ranks[i]);
    if (j > i)
      text += '-' + std::to_string(ranks[j]);
    i = j + 1;
  }
  return text;
}

} // namespace trainsim
