#include "config/option_errors.hpp"

namespace po = boost::program_options;

namespace trainsim {

std::string describe_option_error(const po::error& error) {
  if (const auto* line = dynamic_cast<const po::invalid_config_file_syntax*>(&error))
    return "invalid line '" + line->tokens() + "'";
  const auto* named = dynamic_cast<const po::error_with_option_name*>(&error);
  if (named == nullptr)
    return error.what();  // errors that carry no text of the user's
  const std::string name = "'" + named->get_option_name() + "'";
  if (dynamic_cast<const po::unknown_option*>(&error))
    return "unknown option " + name;
  if (dynamic_cast<const po::required_option*>(&error))
    return "missing " + name;
  if (dynamic_cast<const po::multiple_occurrences*>(&error))
    return "option " + name + " is given more than once";
  if (dynamic_cast<const po::invalid_command_line_syntax*>(&error))
    return "option " + name + " is malformed (a value is missing, or given to an option that takes none)";
  if (dynamic_cast<const po::validation_error*>(&error))
    return "invalid value for option " + name;
  return "cannot read option " + name;
}

} // namespace trainsim
