#pragma once
// Boost.Program_options error messages, described without calling what(): Boost 1.74 loops
// forever substituting placeholders such as %canonical_option% when the user's own text
// contains one (found by fuzzing), so messages are built from the exception's parts instead.
#include <string>

#include <boost/program_options/errors.hpp>

namespace trainsim {

std::string describe_option_error(const boost::program_options::error& error);

} // namespace trainsim
