#include "platform/resources.hpp"

namespace trainsim {

LinkClass link_class(const std::string& link_name) {
  const auto has = [&](const char* part) { return link_name.find(part) != std::string::npos; };
  if (has("__loopback__"))
    return LinkClass::loopback;
  if (has("nvlink") || has("nvswitch") || has("bridge") || has("mesh"))
    return LinkClass::nvlink;
  if (has("nvme"))
    return LinkClass::pcie_nvme;
  if (has("pcie-up"))
    return LinkClass::pcie_uplink;
  if (has("pcie"))
    return LinkClass::pcie_gpu;
  if (has("nic"))
    return LinkClass::nic;
  return LinkClass::network;
}

bool nvswitch_port(const std::string& link_name) {
  const auto has = [&](const char* part) { return link_name.find(part) != std::string::npos; };
  return link_class(link_name) == LinkClass::nvlink && !has("bridge") && !has("mesh");
}

const char* to_string(LinkClass link_class) {
  switch (link_class) {
  case LinkClass::loopback: return "";
  case LinkClass::nvlink: return "nvlink";
  case LinkClass::pcie_nvme: return "pcie-nvme";
  case LinkClass::pcie_uplink: return "pcie-uplink";
  case LinkClass::pcie_gpu: return "pcie-gpu";
  case LinkClass::nic: return "nic";
  case LinkClass::network: return "network";
  }
  return "";
}

} // namespace trainsim
