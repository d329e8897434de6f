// workload.txt, a line "%%", then the text every program file it names reads as;
// the workload is then accounted in program order as `trainsim memory` does.
#include "fuzz_support.hpp"
#include "memory/memory_tracker.hpp"
#include "program/trace_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  return fuzz::guarded([&] {
    const std::string input = fuzz::text_of(data, size);
    const auto separator = input.find("\n%%\n");
    const std::string workload_text = input.substr(0, separator);
    const std::string program_text = separator == std::string::npos ? "" : input.substr(separator + 4);
    const Workload workload =
        parse_trace(workload_text, "fuzz/workload.txt", [&](const std::string&) { return program_text; });
    memory_in_program_order(workload.program(0));
  });
}
