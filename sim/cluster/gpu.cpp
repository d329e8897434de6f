#include "cluster/gpu.hpp"

#include <cmath>
#include <map>

#include "cluster/cluster.hpp"

#include "common/error.hpp"
#include "common/units.hpp"

namespace trainsim {

namespace {
constexpr GpuArchitecture architectures[] = {GpuArchitecture::volta,  GpuArchitecture::ampere,
                                             GpuArchitecture::ada,    GpuArchitecture::hopper,
                                             GpuArchitecture::blackwell, GpuArchitecture::cdna3};
} // namespace

const char* to_string(GpuArchitecture architecture) {
  switch (architecture) {
  case GpuArchitecture::unknown: return "unknown";
  case GpuArchitecture::volta: return "volta";
  case GpuArchitecture::ampere: return "ampere";
  case GpuArchitecture::ada: return "ada";
  case GpuArchitecture::hopper: return "hopper";
  case GpuArchitecture::blackwell: return "blackwell";
  case GpuArchitecture::cdna3: return "cdna3";
  }
  return "unknown";
}

GpuInfo gpu_from_properties(const std::string& file, const std::string& host, const std::string& node, double speed,
                            const std::function<const char*(const char*)>& property) {
  const auto quantity = [&](const char* name, double (*parse)(std::string_view), const char* accepted) {
    const char* text = property(name);
    if (text == nullptr || *text == '\0')
      throw InputError(file + ": GPU host " + host + " lacks property '" + name + "'; accepted: " + accepted);
    try {
      const double value = parse(text);
      if (!(value > 0))
        throw UnitError(std::string("must be positive; accepted: ") + accepted);
      return value;
    } catch (const UnitError& error) {
      throw InputError(file + ": GPU host " + host + " property '" + name + "' = '" + text + "': " + error.what());
    }
  };
  GpuInfo gpu;
  gpu.host = host;
  gpu.node = node;
  const char* model = property("gpu");
  gpu.model = model ? model : "";
  if (gpu.model.empty())
    throw InputError(file + ": GPU host " + host + " has an empty 'gpu' property; accepted: the GPU model's name");
  if (!(speed > 0))
    throw InputError(file + ": GPU host " + host + " has speed 0; accepted: its dense 16-bit peak, e.g. 312Tf");
  gpu.speed = speed;
  gpu.hbm_capacity = quantity("hbm_capacity", parse_bytes, "a size such as 80GiB");
  gpu.hbm_bandwidth = quantity("hbm_bandwidth", parse_bandwidth, "a bandwidth such as 2039GBps");
  gpu.peak_fp32 = quantity("peak_fp32", parse_flops, "a FLOP rate such as 19.5Tf");
  gpu.peak_tf32 = quantity("peak_tf32", parse_flops, "a FLOP rate such as 156Tf");
  gpu.peak_fp16 = quantity("peak_fp16", parse_flops, "a FLOP rate such as 312Tf");
  gpu.peak_bf16 = quantity("peak_bf16", parse_flops, "a FLOP rate such as 312Tf");
  // Kernel times come from the peak_* properties; the host's speed only scales SimGrid's
  // executions, so a speed that disagrees would look like a slower GPU and change nothing.
  if (std::abs(speed - gpu.peak_bf16) > 1e-9 * gpu.peak_bf16)
    throw InputError(file + ": GPU host " + host + " has speed " + format_flops(speed) + " but peak_bf16 " +
                     format_flops(gpu.peak_bf16) + "; accepted: speed equal to peak_bf16 (a slower GPU lowers its "
                     "peak_* properties, which time its kernels)");
  if (property("peak_fp8") != nullptr)
    gpu.peak_fp8 = quantity("peak_fp8", parse_flops, "a FLOP rate such as 1979Tf");
  if (const GpuSpec* spec = find_gpu_model(gpu.model)) {
    gpu.sm_count = spec->sm_count;
    gpu.architecture = spec->architecture;
  }
  if (property("sm_count") != nullptr)
    gpu.sm_count = static_cast<int>(quantity("sm_count", parse_count, "a whole number of SMs such as 108"));
  if (const char* name = property("architecture")) {
    std::string accepted;
    gpu.architecture = GpuArchitecture::unknown;
    for (GpuArchitecture known : architectures) {
      accepted += std::string(accepted.empty() ? "" : ", ") + to_string(known);
      if (name == std::string(to_string(known)))
        gpu.architecture = known;
    }
    if (gpu.architecture == GpuArchitecture::unknown)
      throw InputError(file + ": GPU host " + host + " property 'architecture' = '" + name + "'; accepted: " + accepted);
  }
  return gpu;
}

std::vector<int> node_numbers(const std::vector<GpuInfo>& gpus) {
  std::map<std::string, int> ids;
  std::vector<int> numbers;
  for (const GpuInfo& gpu : gpus)
    numbers.push_back(ids.emplace(gpu.node, static_cast<int>(ids.size())).first->second);
  return numbers;
}

} // namespace trainsim
