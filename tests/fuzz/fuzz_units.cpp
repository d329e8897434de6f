// Quantity strings as scenarios and platform properties give them.
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  const std::string text = fuzz::text_of(data, size);
  for (auto parse : {parse_bytes, parse_bandwidth, parse_flops, parse_seconds, parse_count})
    fuzz::guarded([&] { parse(text); });
  format_bytes(static_cast<double>(size) * 1e9);
  return 0;
}
