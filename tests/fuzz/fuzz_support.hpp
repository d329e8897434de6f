#pragma once
// Shared by the fuzz targets: input errors are the expected outcome of malformed
// input; anything else escaping a parser (another exception, a crash, a sanitizer
// report, a hang) is a bug the fuzzer must report.
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <string>

#include "common/error.hpp"
#include "common/units.hpp"

namespace trainsim::fuzz {

template <typename Body>
int guarded(Body body) {
  try {
    body();
  } catch (const InputError&) {
  } catch (const UnitError&) {
  } catch (const std::exception& error) {
    std::fprintf(stderr, "unexpected exception: %s\n", error.what());
    std::abort();
  }
  return 0;
}

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

} // namespace trainsim::fuzz
