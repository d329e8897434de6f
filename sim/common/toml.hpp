#pragma once
// The part of TOML that job configuration files use (torchtitan's among them): [table] and
// [dotted.table] headers, bare, quoted and dotted keys, basic and literal strings, integers
// (with '_' separators), floats, booleans, arrays (over several lines, with a trailing comma) and
// inline tables. Array tables, multi-line strings and dates are refused, never misread.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace trainsim {

// The document as JSON, tables as objects. InputError "NAME:LINE: problem" for
// text outside the subset or that is not TOML (a key defined twice, an unclosed string).
nlohmann::json parse_toml(std::string_view text, const std::string& name);

} // namespace trainsim
