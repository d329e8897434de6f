#pragma once
// The scenario's keys as Boost.Program_options describes them: their defaults and meaning, the
// `--help` text and the check that a key exists. Apart from scenario.hpp so that the files that
// only read a Scenario do not compile Boost.Program_options.
#include <ostream>
#include <string>
#include <utility>

#include <boost/program_options/options_description.hpp>

namespace trainsim {

// Options with their defaults and meaning; the same names are accepted by --set.
const boost::program_options::options_description& scenario_options();
// The same list as people read it: "[section] key = default   meaning".
void print_scenario_keys(std::ostream& out);

// InputError "WHERE: unknown key 'KEY'; accepted: ..." unless `key` is a scenario key.
void require_scenario_key(const std::string& key, const std::string& where);
// A key's default as a scenario would write it ("" for a key without one or an unknown key).
std::string default_of(const std::string& key);
// A --set section.key=value as (key, value); InputError for a malformed one or an unknown key.
std::pair<std::string, std::string> parse_setting(const std::string& assignment);

} // namespace trainsim
