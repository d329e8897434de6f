#include "common/toml.hpp"

#include <cmath>
#include <cstdlib>
#include <set>
#include <vector>

#include "common/error.hpp"
#include "common/text.hpp"

namespace trainsim {
namespace {

using json = nlohmann::json;

class TomlParser {
public:
  TomlParser(std::string_view text, std::string name) : text_(text), name_(std::move(name)) {}

  json parse() {
    json root = json::object();
    std::vector<std::string> table;  // the current [table]'s path
    for (;;) {
      skip_blank_lines();
      if (at_end())
        return root;
      if (peek() == '[') {
        ++pos_;
        if (peek() == '[')
          fail("array tables ([[name]]) are not read; accepted: [table] headers");
        skip_spaces();
        table = key_path();
        skip_spaces();
        expect(']');
        end_of_line();
        const std::string id = join(table, "\x1f");
        if (!headers_.insert(id).second)
          fail("table [" + join(table, ".") + "] defined twice");
        if (dotted_.count(id))
          fail("table [" + join(table, ".") + "] was defined by dotted keys before");
        refuse_inline(table, table.size());
        object_at(root, table, table.size());
        continue;
      }
      std::vector<std::string> path = key_path();
      skip_spaces();
      expect('=');
      skip_spaces();
      json value = parse_value();
      end_of_line();
      const std::size_t first_dotted = table.size();
      path.insert(path.begin(), table.begin(), table.end());
      refuse_inline(path, path.size());
      for (std::size_t i = first_dotted + 1; i < path.size(); ++i)
        dotted_.insert(join({path.begin(), path.begin() + static_cast<long>(i)}, "\x1f"));
      json& parent = object_at(root, path, path.size() - 1);
      if (parent.contains(path.back()))
        fail("key '" + join(path, ".") + "' defined twice");
      if (value.is_object())
        inline_.insert(join(path, "\x1f"));
      parent[path.back()] = std::move(value);
    }
  }

private:
  // An inline table is whole as written: no header or key may add to it.
  void refuse_inline(const std::vector<std::string>& path, std::size_t count) const {
    for (std::size_t i = 1; i <= count; ++i)
      if (inline_.count(join({path.begin(), path.begin() + static_cast<long>(i)}, "\x1f")))
        fail("'" + join({path.begin(), path.begin() + static_cast<long>(i)}, ".") +
             "' is an inline table: it cannot be extended");
  }
  // A character as an error shows it.
  static std::string shown(char c) {
    return c == '\n' || c == '\r' ? std::string("the end of the line") : "'" + std::string(1, c) + "'";
  }
  [[noreturn]] void fail(const std::string& problem) const {
    int line = 1;
    for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i)
      line += text_[i] == '\n';
    throw InputError(name_ + ":" + std::to_string(line) + ": " + problem);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  void expect(char c) {
    if (peek() != c)
      fail(std::string("expected '") + c + "'" + (at_end() ? " before the end" : ", found " + shown(peek())));
    ++pos_;
  }
  void skip_spaces() {
    while (peek() == ' ' || peek() == '\t')
      ++pos_;
  }
  void skip_comment() {
    if (peek() == '#')
      while (!at_end() && peek() != '\n')
        ++pos_;
  }
  void skip_blank_lines() {
    for (;;) {
      skip_spaces();
      skip_comment();
      if (peek() == '\r' || peek() == '\n')
        ++pos_;
      else
        return;
    }
  }
  void end_of_line() {
    skip_spaces();
    skip_comment();
    if (peek() == '\r')
      ++pos_;
    if (!at_end() && peek() != '\n')
      fail("unexpected " + shown(peek()) + " after a value; accepted: a comment or the end of the line");
  }

  // The object at path[0..count), made where missing.
  json& object_at(json& root, const std::vector<std::string>& path, std::size_t count) {
    json* node = &root;
    for (std::size_t i = 0; i < count; ++i) {
      json& child = (*node)[path[i]];
      if (child.is_null())
        child = json::object();
      if (!child.is_object())
        fail("'" + join({path.begin(), path.begin() + static_cast<long>(i) + 1}, ".") + "' is a value, not a table");
      node = &child;
    }
    return *node;
  }

  std::vector<std::string> key_path() {
    std::vector<std::string> path;
    for (;;) {
      path.push_back(key());
      skip_spaces();
      if (peek() != '.')
        return path;
      ++pos_;
      skip_spaces();
    }
  }
  std::string key() {
    if (peek() == '"' || peek() == '\'')
      return string_value();
    std::string key;
    while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_' || peek() == '-')
      key += text_[pos_++];
    if (key.empty())
      fail(at_end() ? "a key is missing at the end" : "unexpected " + shown(peek()) + " where a key belongs");
    return key;
  }

  json parse_value() {
    const char c = peek();
    if (c == '"' || c == '\'')
      return string_value();
    if (c == '[')
      return array_value();
    if (c == '{')
      return inline_table();
    return scalar_value();
  }

  std::string string_value() {
    const char quote = text_[pos_++];
    if (peek() == quote && pos_ + 1 < text_.size() && text_[pos_ + 1] == quote)
      fail("multi-line strings are not read; accepted: a string on one line");
    std::string value;
    for (;;) {
      if (at_end() || peek() == '\n')
        fail("a string is not closed on its line");
      const char c = text_[pos_++];
      if (c == quote)
        return value;
      if (c != '\\' || quote == '\'') {
        value += c;
        continue;
      }
      const char escaped = at_end() ? '\0' : text_[pos_++];
      switch (escaped) {
      case '"': value += '"'; break;
      case '\\': value += '\\'; break;
      case 'n': value += '\n'; break;
      case 't': value += '\t'; break;
      case 'r': value += '\r'; break;
      case 'b': value += '\b'; break;
      case 'f': value += '\f'; break;
      case 'u':
      case 'U': append_code_point(escaped == 'u' ? 4 : 8, value); break;
      default: fail(std::string("unknown escape '\\") + escaped + "' in a string");
      }
    }
  }
  void append_code_point(int digits, std::string& out) {
    if (pos_ + static_cast<std::size_t>(digits) > text_.size())
      fail("a \\u escape needs its hexadecimal digits");
    const std::string hex(text_.substr(pos_, static_cast<std::size_t>(digits)));
    if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
      fail("'\\u" + hex + "' is not a Unicode escape; accepted: \\u and four hexadecimal digits, or \\U and eight");
    const unsigned long code = std::strtoul(hex.c_str(), nullptr, 16);
    if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
      fail("'\\u" + hex + "' is not a Unicode scalar value");
    pos_ += static_cast<std::size_t>(digits);
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  json array_value() {
    ++pos_;
    json array = json::array();
    for (;;) {
      skip_blank_lines();
      if (peek() == ']') {
        ++pos_;
        return array;
      }
      array.push_back(parse_value());
      skip_blank_lines();
      if (peek() == ',')
        ++pos_;
      else if (peek() != ']')
        fail(at_end() ? "an array is not closed" : "expected ',' or ']' in an array, found " + shown(peek()));
    }
  }

  json inline_table() {
    ++pos_;
    json table = json::object();
    skip_spaces();
    if (peek() == '}') {
      ++pos_;
      return table;
    }
    for (;;) {
      skip_spaces();
      const std::vector<std::string> path = key_path();
      skip_spaces();
      expect('=');
      skip_spaces();
      json& parent = object_at(table, path, path.size() - 1);
      if (parent.contains(path.back()))
        fail("key '" + join(path, ".") + "' defined twice");
      parent[path.back()] = parse_value();
      skip_spaces();
      if (peek() == '}') {
        ++pos_;
        return table;
      }
      expect(',');
    }
  }

  json scalar_value() {
    std::string token;
    while (!at_end() && (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_' || peek() == '+' ||
                         peek() == '-' || peek() == '.' || peek() == ':'))
      token += text_[pos_++];
    if (token.empty())
      fail(at_end() ? "a value is missing at the end" : "unexpected " + shown(peek()) + " where a value belongs");
    if (token == "true" || token == "false")
      return token == "true";
    if (token.find(':') != std::string::npos || (token.size() >= 10 && token[4] == '-' && token[7] == '-'))
      fail("dates and times are not read; accepted: strings, numbers, booleans, arrays and tables");
    std::string digits;
    for (std::size_t i = 0; i < token.size(); ++i) {
      if (token[i] != '_') {
        digits += token[i];
        continue;
      }
      if (i == 0 || i + 1 == token.size() || !std::isdigit(static_cast<unsigned char>(token[i - 1])) ||
          !std::isdigit(static_cast<unsigned char>(token[i + 1])))
        fail("'" + token + "': an underscore belongs between digits");
    }
    if (!decimal_number(digits))
      fail("'" + token + "' is not a value; accepted: a \"string\", a decimal number (no leading zeros), true, false, "
                         "[array] or {table}");
    if (digits.front() == '+')
      digits.erase(0, 1);
    long long integer = 0;
    if (parse_integer(digits, integer))
      return integer;
    char* end = nullptr;
    const double number = std::strtod(digits.c_str(), &end);
    if (*end != '\0' || !std::isfinite(number))
      fail("'" + token + "' is not a value; accepted: a \"string\", a decimal number, true, false, [array] or {table}");
    return number;
  }

  // TOML's decimal integers and floats: a sign, an integer part without leading zeros, then a
  // fraction with digits on both sides of its point and an exponent, either or both.
  static bool decimal_number(const std::string& text) {
    std::size_t i = text[0] == '+' || text[0] == '-' ? 1 : 0;
    const auto digits = [&] {
      const std::size_t start = i;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
        ++i;
      return i - start;
    };
    const std::size_t integer_start = i;
    const std::size_t integer_digits = digits();
    if (integer_digits == 0 || (integer_digits > 1 && text[integer_start] == '0'))
      return false;
    if (i < text.size() && text[i] == '.') {
      ++i;
      if (digits() == 0)
        return false;
    }
    if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
      ++i;
      if (i < text.size() && (text[i] == '+' || text[i] == '-'))
        ++i;
      if (digits() == 0)
        return false;
    }
    return i == text.size();
  }

  std::string_view text_;
  std::string name_;
  std::size_t pos_ = 0;
  std::set<std::string> headers_;  // tables defined by a [header]
  std::set<std::string> dotted_;   // tables defined by dotted keys
  std::set<std::string> inline_;   // inline tables
};

} // namespace

json parse_toml(std::string_view text, const std::string& name) { return TomlParser(text, name).parse(); }

} // namespace trainsim
