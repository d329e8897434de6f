#pragma once
// Input errors are values that reach the user as one line and exit status 2;
// anything else escaping to main is a bug (exit status 3).
#include <stdexcept>
#include <string>

namespace trainsim {

class InputError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace trainsim
