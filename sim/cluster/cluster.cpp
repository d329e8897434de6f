#include "cluster/cluster.hpp"

#include <algorithm>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"

namespace trainsim {
namespace {

constexpr double tera = 1e12, giga = 1e9, gib = 1024.0 * 1024 * 1024;

// Bytes per second as SimGrid reads them ("25GBps"), FLOP/s as "312Tf".
std::string rate(double bytes_per_second) { return format_double(bytes_per_second / giga) + "GBps"; }
std::string flops(double value) { return format_double(value / tera) + "Tf"; }

class XmlWriter {
public:
  void line(int depth, const std::string& text) { out_ << std::string(2 * static_cast<std::size_t>(depth), ' ') << text << '\n'; }
  std::string str() const { return out_.str(); }

private:
  std::ostringstream out_;
};

std::string link(const std::string& id, double bandwidth, const std::string& latency, const std::string& policy) {
  return "<link id=\"" + id + "\" bandwidth=\"" + rate(bandwidth) + "\" latency=\"" + latency +
         "\" sharing_policy=\"" + policy + "\"/>";
}

std::string ctn(const std::string& id, const std::string& direction = "") {
  return "<link_ctn id=\"" + id + "\"" + (direction.empty() ? "" : " direction=\"" + direction + "\"") + "/>";
}

std::string route(const std::string& from, const std::string& to, const std::vector<std::string>& links) {
  std::string text = "<route src=\"" + from + "\" dst=\"" + to + "\">";
  for (const auto& part : links)
    text += part;
  return text + "</route>";
}

// NVMe drive per PCIe generation: sequential read and write, bytes/s (typical data-centre U.2 drives).
std::pair<double, double> nvme_bandwidth(int generation) {
  if (generation <= 3)
    return {3.2 * giga, 2.0 * giga};
  if (generation == 4)
    return {6.8 * giga, 4.0 * giga};
  return {12.0 * giga, 9.0 * giga};
}

void write_node(XmlWriter& xml, const ClusterSpec& c, int node) {
  const std::string n = "node" + std::to_string(node);
  const auto gpu_name = [&](int g) { return n + "-gpu" + std::to_string(g); };
  const int switches = (c.gpus_per_node + c.gpus_per_pcie_switch - 1) / c.gpus_per_pcie_switch;
  const auto switch_of = [&](int g) { return g / c.gpus_per_pcie_switch; };
  const auto nic_of = [&](int g) { return g * c.nics_per_node / c.gpus_per_node; };
  const double pcie = pcie_x16_bandwidth(c.pcie_gen);
  const GpuSpec& gpu = c.gpu;

  xml.line(2, "<zone id=\"" + n + "\" routing=\"Full\">");
  for (int g = 0; g < c.gpus_per_node; ++g) {
    xml.line(3, "<host id=\"" + gpu_name(g) + "\" speed=\"" + flops(gpu.peak_bf16) + "\">");
    xml.line(4, "<prop id=\"gpu\" value=\"" + gpu.model + "\"/>");
    xml.line(4, "<prop id=\"hbm_capacity\" value=\"" + format_double(gpu.hbm_capacity) + "B\"/>");
    xml.line(4, "<prop id=\"hbm_bandwidth\" value=\"" + rate(gpu.hbm_bandwidth) + "\"/>");
    xml.line(4, "<prop id=\"peak_fp32\" value=\"" + flops(gpu.peak_fp32) + "\"/>");
    xml.line(4, "<prop id=\"peak_tf32\" value=\"" + flops(gpu.peak_tf32) + "\"/>");
    xml.line(4, "<prop id=\"peak_fp16\" value=\"" + flops(gpu.peak_fp16) + "\"/>");
    xml.line(4, "<prop id=\"peak_bf16\" value=\"" + flops(gpu.peak_bf16) + "\"/>");
    if (gpu.peak_fp8 > 0)
      xml.line(4, "<prop id=\"peak_fp8\" value=\"" + flops(gpu.peak_fp8) + "\"/>");
    xml.line(3, "</host>");
  }
  // The host CPU: where offloaded optimizer work runs and where the NVMe drives hang.
  xml.line(3, "<host id=\"" + n + "-cpu\" speed=\"2Tf\">");
  xml.line(4, "<prop id=\"role\" value=\"cpu\"/>");
  xml.line(4, "<prop id=\"dram_capacity\" value=\"2TiB\"/>");
  xml.line(4, "<prop id=\"dram_bandwidth\" value=\"200GBps\"/>");
  const auto [read, write] = nvme_bandwidth(c.pcie_gen);
  for (int d = 0; d < c.nvme_per_node; ++d) {
    xml.line(4, "<disk id=\"" + n + "-nvme" + std::to_string(d) + "\" read_bw=\"" + rate(read) + "\" write_bw=\"" +
                    rate(write) + "\">");
    xml.line(5, "<prop id=\"size\" value=\"3840GB\"/>");
    xml.line(4, "</disk>");
  }
  xml.line(3, "</host>");
  xml.line(3, "<router id=\"" + n + "-gw\"/>");

  for (int g = 0; g < c.gpus_per_node; ++g)
    xml.line(3, link(n + "-pcie" + std::to_string(g), pcie, "500ns", "SPLITDUPLEX"));
  for (int s = 0; s < switches; ++s)
    xml.line(3, link(n + "-pcie-up" + std::to_string(s), pcie, "500ns", "SPLITDUPLEX"));
  for (int k = 0; k < c.nics_per_node; ++k)
    xml.line(3, link(n + "-nic" + std::to_string(k), c.nic_speed, "1us", "SPLITDUPLEX"));
  switch (c.fabric) {
  case Fabric::nvswitch:
    for (int g = 0; g < c.gpus_per_node; ++g)
      xml.line(3, link(n + "-nvlink" + std::to_string(g), gpu.gpu_link, "1us", "SPLITDUPLEX"));
    break;
  case Fabric::nvlink_pairs:
    for (int g = 0; g + 1 < c.gpus_per_node; g += 2)
      xml.line(3, link(n + "-bridge" + std::to_string(g / 2), gpu.gpu_link, "1us", "SPLITDUPLEX"));
    break;
  case Fabric::mesh:
    for (int a = 0; a < c.gpus_per_node; ++a)
      for (int b = a + 1; b < c.gpus_per_node; ++b)
        xml.line(3, link(n + "-mesh" + std::to_string(a) + "-" + std::to_string(b), gpu.gpu_link, "1us", "SPLITDUPLEX"));
    break;
  case Fabric::pcie: break;
  }

  // Between two GPUs of the node: over the fabric, or through PCIe (and the switches' uplinks
  // to the CPU's root complex when the GPUs sit behind different switches).
  const auto over_pcie = [&](int a, int b) {
    std::vector<std::string> links = {ctn(n + "-pcie" + std::to_string(a), "UP")};
    if (switch_of(a) != switch_of(b)) {
      links.push_back(ctn(n + "-pcie-up" + std::to_string(switch_of(a)), "UP"));
      links.push_back(ctn(n + "-pcie-up" + std::to_string(switch_of(b)), "DOWN"));
    }
    links.push_back(ctn(n + "-pcie" + std::to_string(b), "DOWN"));
    return links;
  };
  for (int a = 0; a < c.gpus_per_node; ++a) {
    for (int b = a + 1; b < c.gpus_per_node; ++b) {
      std::vector<std::string> links;
      switch (c.fabric) {
      case Fabric::nvswitch:
        links = {ctn(n + "-nvlink" + std::to_string(a), "UP"), ctn(n + "-nvlink" + std::to_string(b), "DOWN")};
        break;
      case Fabric::nvlink_pairs:
        links = a / 2 == b / 2 && b == a + 1 ? std::vector<std::string>{ctn(n + "-bridge" + std::to_string(a / 2), "UP")}
                                             : over_pcie(a, b);
        break;
      case Fabric::mesh:
        links = {ctn(n + "-mesh" + std::to_string(a) + "-" + std::to_string(b), "UP")};
        break;
      case Fabric::pcie: links = over_pcie(a, b); break;
      }
      xml.line(3, route(gpu_name(a), gpu_name(b), links));
    }
  }
  // Out of the node: GPUDirect RDMA through the GPU's PCIe switch to its NIC.
  for (int g = 0; g < c.gpus_per_node; ++g)
    xml.line(3, route(gpu_name(g), n + "-gw",
                      {ctn(n + "-pcie" + std::to_string(g), "UP"), ctn(n + "-nic" + std::to_string(nic_of(g)), "UP")}));
  // To host memory: through the GPU's switch and its uplink to the CPU.
  for (int g = 0; g < c.gpus_per_node; ++g)
    xml.line(3, route(gpu_name(g), n + "-cpu",
                      {ctn(n + "-pcie" + std::to_string(g), "UP"),
                       ctn(n + "-pcie-up" + std::to_string(switch_of(g)), "UP")}));
  xml.line(3, route(n + "-cpu", n + "-gw", {ctn(n + "-pcie-up0", "DOWN"), ctn(n + "-nic0", "UP")}));
  xml.line(2, "</zone>");
}

} // namespace

const std::vector<GpuSpec>& gpu_catalog() {
  // Dense (not sparse) tensor peaks; fp16/bf16 with fp32 accumulation.
  static const std::vector<GpuSpec> catalog = {
      {"a100-40gb", "A100-SXM4-40GB", 19.5 * tera, 156 * tera, 312 * tera, 312 * tera, 0, 40 * gib, 1555 * giga,
       300 * giga, "nvswitch", 4, 25 * giga, "NVIDIA A100 datasheet; NVLink 3: 600 GB/s per GPU"},
      {"a100-80gb", "A100-SXM4-80GB", 19.5 * tera, 156 * tera, 312 * tera, 312 * tera, 0, 80 * gib, 2039 * giga,
       300 * giga, "nvswitch", 4, 25 * giga, "NVIDIA A100 datasheet; NVLink 3: 600 GB/s per GPU"},
      {"h100-sxm", "H100-SXM5-80GB", 67 * tera, 494 * tera, 989 * tera, 989 * tera, 1979 * tera, 80 * gib,
       3350 * giga, 450 * giga, "nvswitch", 5, 50 * giga, "NVIDIA H100 datasheet; NVLink 4: 900 GB/s per GPU"},
      {"h100-pcie", "H100-PCIe-80GB", 51 * tera, 378 * tera, 756 * tera, 756 * tera, 1513 * tera, 80 * gib,
       2000 * giga, 300 * giga, "nvlink-pairs", 5, 50 * giga, "NVIDIA H100 datasheet; NVLink bridge: 600 GB/s per pair"},
      {"h200", "H200-SXM-141GB", 67 * tera, 494 * tera, 989 * tera, 989 * tera, 1979 * tera, 141 * giga, 4800 * giga,
       450 * giga, "nvswitch", 5, 50 * giga, "NVIDIA H200 datasheet; NVLink 4: 900 GB/s per GPU"},
      {"b200", "B200-SXM-180GB", 80 * tera, 1100 * tera, 2250 * tera, 2250 * tera, 4500 * tera, 180 * giga,
       7700 * giga, 900 * giga, "nvswitch", 5, 50 * giga, "NVIDIA HGX B200 datasheet (per GPU); NVLink 5: 1.8 TB/s"},
      {"mi300x", "MI300X-192GB", 163.4 * tera, 653.7 * tera, 1307.4 * tera, 1307.4 * tera, 2614.9 * tera, 192 * giga,
       5300 * giga, 64 * giga, "mesh", 5, 50 * giga,
       "AMD Instinct MI300X datasheet; Infinity Fabric: 7 links of 128 GB/s per GPU, a full mesh of 8"},
      {"rtx4090", "RTX-4090-24GB", 82.6 * tera, 82.6 * tera, 165.2 * tera, 165.2 * tera, 330.3 * tera, 24 * gib,
       1008 * giga, 0, "pcie", 4, 12.5 * giga, "NVIDIA Ada whitepaper (fp32 accumulation); no NVLink"},
      {"v100-32gb", "V100-SXM2-32GB", 15.7 * tera, 15.7 * tera, 125 * tera, 15.7 * tera, 0, 32 * gib, 900 * giga,
       150 * giga, "nvswitch", 3, 12.5 * giga,
       "NVIDIA V100 datasheet; no TF32 or bf16 tensor cores (they run at the fp32 rate); DGX-2 NVSwitch: 300 GB/s"},
  };
  return catalog;
}

const GpuSpec& find_gpu(const std::string& key, const std::string& where) {
  std::string accepted;
  for (const GpuSpec& spec : gpu_catalog()) {
    if (spec.key == key)
      return spec;
    accepted += (accepted.empty() ? "" : ", ") + spec.key;
  }
  throw InputError(where + ": unknown GPU '" + key + "'; accepted: " + accepted);
}

const char* to_string(Fabric fabric) {
  switch (fabric) {
  case Fabric::nvswitch: return "nvswitch";
  case Fabric::nvlink_pairs: return "nvlink-pairs";
  case Fabric::mesh: return "mesh";
  case Fabric::pcie: return "pcie";
  }
  return "?";
}

const char* to_string(Topology topology) { return topology == Topology::single_switch ? "single-switch" : "fat-tree"; }

double pcie_x16_bandwidth(int generation) {
  // 16 lanes: gen3 8 GT/s, each generation doubles; 128b/130b encoding.
  return 16.0 * 8e9 * static_cast<double>(1 << std::max(0, generation - 3)) * (128.0 / 130.0) / 8.0;
}

std::string describe(const ClusterSpec& c) {
  return std::to_string(c.nodes) + " x " + std::to_string(c.gpus_per_node) + " " + c.gpu.model + ", " +
         to_string(c.fabric) + ", " + std::to_string(c.nics_per_node) + " x " + format_double(c.nic_speed * 8 / giga) +
         " Gb/s NICs per node, " + to_string(c.topology);
}

std::string platform_xml(const ClusterSpec& c) {
  XmlWriter xml;
  xml.line(0, "<?xml version='1.0'?>");
  xml.line(0, "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">");
  xml.line(0, "<!-- Generated by trainsim platform: " + describe(c) + ", PCIe gen" + std::to_string(c.pcie_gen) + ", " +
                  std::to_string(c.nvme_per_node) + " NVMe drive(s) per node.");
  xml.line(0, "     GPU numbers: " + c.gpu.source + ".");
  xml.line(0, "     Each node is a zone: GPU hosts (speed = dense 16-bit peak), a CPU host with the drives, PCIe");
  xml.line(0, "     switches of " + std::to_string(c.gpus_per_pcie_switch) +
                  " GPUs with uplinks to the CPU, NICs reached through the GPUs' switches. -->");
  xml.line(0, "<platform version=\"4.1\">");
  xml.line(1, "<zone id=\"cluster\" routing=\"Full\">");
  for (int node = 0; node < c.nodes; ++node)
    write_node(xml, c, node);
  const double node_bandwidth = c.nics_per_node * c.nic_speed;
  const int leaves = (c.nodes + c.nodes_per_leaf - 1) / c.nodes_per_leaf;
  if (c.nodes > 1) {
    if (c.topology == Topology::single_switch) {
      xml.line(2, link("fabric", node_bandwidth * c.nodes, "500ns", "FATPIPE"));
    } else {
      for (int l = 0; l < leaves; ++l) {
        xml.line(2, link("leaf" + std::to_string(l), node_bandwidth * c.nodes_per_leaf, "500ns", "FATPIPE"));
        xml.line(2, link("leaf" + std::to_string(l) + "-up", node_bandwidth * c.nodes_per_leaf / c.oversubscription,
                         "500ns", "SPLITDUPLEX"));
      }
      xml.line(2, link("spine", node_bandwidth * c.nodes, "500ns", "FATPIPE"));
    }
  }
  for (int a = 0; a < c.nodes; ++a) {
    for (int b = a + 1; b < c.nodes; ++b) {
      std::string links;
      if (c.topology == Topology::single_switch) {
        links = ctn("fabric");
      } else if (a / c.nodes_per_leaf == b / c.nodes_per_leaf) {
        links = ctn("leaf" + std::to_string(a / c.nodes_per_leaf));
      } else {
        const std::string la = "leaf" + std::to_string(a / c.nodes_per_leaf), lb = "leaf" + std::to_string(b / c.nodes_per_leaf);
        links = ctn(la) + ctn(la + "-up", "UP") + ctn("spine") + ctn(lb + "-up", "DOWN") + ctn(lb);
      }
      const std::string na = "node" + std::to_string(a), nb = "node" + std::to_string(b);
      xml.line(2, "<zoneRoute src=\"" + na + "\" dst=\"" + nb + "\" gw_src=\"" + na + "-gw\" gw_dst=\"" + nb + "-gw\">" +
                      links + "</zoneRoute>");
    }
  }
  xml.line(1, "</zone>");
  xml.line(0, "</platform>");
  return xml.str();
}

} // namespace trainsim
