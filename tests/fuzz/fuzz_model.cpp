// A Hugging Face config.json, then the costs of one short micro-batch of it.
#include "fuzz_support.hpp"
#include "model/costs.hpp"
#include "model/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  return fuzz::guarded([&] {
    const ModelSpec model = parse_model(fuzz::text_of(data, size), "fuzz.json", "fuzz", 128);
    count_parameters(model);
    compute_costs(model, 1, 128, Precision::bf16, Precision::fp32, false);
  });
}
