// Sweep result files as `sweep --resume` and `sweep merge` read them, and the option values of
// a sweep (--vary, --shard) on the lines of the input.
#include "fuzz_support.hpp"
#include "sweep/sweep.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  const std::string text = fuzz::text_of(data, size);
  fuzz::guarded([&] {
    for (const SweepRow& row : parse_rows(text, "fuzz.jsonl"))
      csv_line(row);
  });
  fuzz::guarded([&] { expand({parse_variation(text)}); });
  fuzz::guarded([&] { parse_shard(text); });
  return 0;
}
