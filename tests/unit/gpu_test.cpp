#include <doctest/doctest.h>

#include <map>

#include "common/error.hpp"
#include "cluster/gpu.hpp"
#include "platform/resources.hpp"

using namespace trainsim;

namespace {

std::map<std::string, std::string> a100_properties() {
  return {{"gpu", "A100-SXM4-80GB"}, {"hbm_capacity", "80GiB"},  {"hbm_bandwidth", "2039GBps"},
          {"peak_fp32", "19.5Tf"},   {"peak_tf32", "156Tf"},     {"peak_fp16", "312Tf"},
          {"peak_bf16", "312Tf"}};
}

GpuInfo read(const std::map<std::string, std::string>& properties, double speed = 312e12) {
  return gpu_from_properties("p.xml", "gpu0", "node0", speed, [&](const char* key) -> const char* {
    const auto it = properties.find(key);
    return it == properties.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& properties, double speed = 312e12) {
  try {
    read(properties, speed);
  } catch (const InputError& error) {
    return error.what();
  }
  FAIL("accepted");
  return "";
}

} // namespace

TEST_CASE("a GPU host's properties give its capacity, bandwidth and peaks") {
  const GpuInfo gpu = read(a100_properties());
  CHECK(gpu.model == "A100-SXM4-80GB");
  CHECK(gpu.hbm_capacity == 80.0 * 1024 * 1024 * 1024);
  CHECK(gpu.hbm_bandwidth == 2039e9);
  CHECK(gpu.peak_tf32 == 156e12);
  CHECK(matmul_peak(gpu, Precision::bf16, true) == 312e12);
  CHECK(matmul_peak(gpu, Precision::fp32, true) == 156e12);
  CHECK(matmul_peak(gpu, Precision::fp32, false) == 19.5e12);
}

TEST_CASE("a missing, malformed, zero or negative property names the host and the property") {
  auto missing = a100_properties();
  missing.erase("hbm_bandwidth");
  CHECK(error_of(missing).find("gpu0 lacks property 'hbm_bandwidth'") != std::string::npos);
  auto zero = a100_properties();
  zero["hbm_capacity"] = "0GiB";  // a 0-byte GPU
  CHECK(error_of(zero).find("must be positive") != std::string::npos);
  auto malformed = a100_properties();
  malformed["peak_bf16"] = "fast";
  CHECK(error_of(malformed).find("'peak_bf16' = 'fast'") != std::string::npos);
  auto negative = a100_properties();
  negative["peak_fp16"] = "-312Tf";
  CHECK(error_of(negative).find("peak_fp16") != std::string::npos);
  CHECK(error_of(a100_properties(), 0).find("speed 0") != std::string::npos);
}

TEST_CASE("a GPU host whose speed is not its bf16 peak is refused: the peaks time its kernels, not the speed") {
  // Halving only the speed would otherwise be accepted and leave the GPU exactly as fast.
  const std::string error = error_of(a100_properties(), 156e12);
  CAPTURE(error);
  CHECK(error.find("p.xml: GPU host gpu0 has speed 156Tf but peak_bf16 312Tf") != std::string::npos);
  CHECK(error.find("accepted: speed equal to peak_bf16") != std::string::npos);
}

TEST_CASE("links are classed by the names platforms give them") {
  CHECK(link_class("node0-nvlink3_UP") == LinkClass::nvlink);
  CHECK(link_class("node2-bridge1") == LinkClass::nvlink);
  CHECK(link_class("node0-mesh0-5") == LinkClass::nvlink);
  CHECK(link_class("node1-pcie-up2_DOWN") == LinkClass::pcie_uplink);
  CHECK(link_class("node1-pcie6_UP") == LinkClass::pcie_gpu);
  CHECK(link_class("node0-nvme1-read") == LinkClass::pcie_nvme);
  CHECK(link_class("node3-nic7_UP") == LinkClass::nic);
  CHECK(link_class("spine") == LinkClass::network);
  CHECK(link_class("__loopback__") == LinkClass::loopback);
  CHECK(std::string(to_string(LinkClass::pcie_uplink)) == "pcie-uplink");
  CHECK(std::string(to_string(LinkClass::loopback)).empty());
}
