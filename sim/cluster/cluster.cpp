#include "cluster/cluster.hpp"

#include <algorithm>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"

namespace trainsim {
namespace {

constexpr double tera = 1e12, giga = 1e9, mib = 1024.0 * 1024;

// Bytes per second as SimGrid reads them ("25GBps").
std::string rate(double bytes_per_second) { return format_double(bytes_per_second / giga) + "GBps"; }

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

std::string joined(const std::vector<std::string>& parts) {
  std::string text;
  for (const auto& part : parts)
    text += part;
  return text;
}

std::string route(const std::string& from, const std::string& to, const std::vector<std::string>& links) {
  return "<route src=\"" + from + "\" dst=\"" + to + "\">" + joined(links) + "</route>";
}

// A route that only goes one way (the way back is declared on its own).
std::string one_way_route(const std::string& from, const std::string& to, const std::vector<std::string>& links) {
  return "<route src=\"" + from + "\" dst=\"" + to + "\" symmetrical=\"NO\">" + joined(links) + "</route>";
}

// NVMe drive per PCIe generation: sequential read and write, bytes/s (typical data-centre U.2 drives).
std::pair<double, double> nvme_bandwidth(int generation) {
  if (generation <= 3)
    return {3.2 * giga, 2.0 * giga};
  if (generation == 4)
    return {6.8 * giga, 4.0 * giga};
  return {12.0 * giga, 9.0 * giga};
}

// The names and link paths of one node, shared by both zone structures.
class NodeLayout {
public:
  NodeLayout(const ClusterSpec& c, int node) : c_(c), n_("node" + std::to_string(node)) {}

  const std::string& name() const { return n_; }
  std::string gpu(int g) const { return n_ + "-gpu" + std::to_string(g); }
  std::string cpu() const { return n_ + "-cpu"; }
  std::string pcie(int g) const { return n_ + "-pcie" + std::to_string(g); }
  std::string uplink(int s) const { return n_ + "-pcie-up" + std::to_string(s); }
  std::string nvme(int d) const { return n_ + "-nvme" + std::to_string(d); }
  std::string nvme_port(int d) const { return nvme(d) + "-port"; }
  std::string nic(int k) const { return n_ + "-nic" + std::to_string(k); }
  int switch_of(int g) const { return g / c_.gpus_per_pcie_switch; }
  int nic_of(int g) const { return g * c_.nics_per_node / c_.gpus_per_node; }
  int switches() const { return (c_.gpus_per_node + c_.gpus_per_pcie_switch - 1) / c_.gpus_per_pcie_switch; }

  // `with_node`: the GPU sits in a zone of its own, so it names its node.
  void write_gpu_host(XmlWriter& xml, int depth, int g, bool with_node) const {
    const GpuSpec& spec = c_.gpu;
    xml.line(depth, "<host id=\"" + gpu(g) + "\" speed=\"" + format_flops(spec.peak_bf16) + "\">");
    xml.line(depth + 1, "<prop id=\"gpu\" value=\"" + spec.model + "\"/>");
    if (with_node)
      xml.line(depth + 1, "<prop id=\"node\" value=\"" + n_ + "\"/>");
    xml.line(depth + 1, "<prop id=\"hbm_capacity\" value=\"" + format_double(spec.hbm_capacity) + "B\"/>");
    xml.line(depth + 1, "<prop id=\"hbm_bandwidth\" value=\"" + rate(spec.hbm_bandwidth) + "\"/>");
    xml.line(depth + 1, "<prop id=\"peak_fp32\" value=\"" + format_flops(spec.peak_fp32) + "\"/>");
    xml.line(depth + 1, "<prop id=\"peak_tf32\" value=\"" + format_flops(spec.peak_tf32) + "\"/>");
    xml.line(depth + 1, "<prop id=\"peak_fp16\" value=\"" + format_flops(spec.peak_fp16) + "\"/>");
    xml.line(depth + 1, "<prop id=\"peak_bf16\" value=\"" + format_flops(spec.peak_bf16) + "\"/>");
    if (spec.peak_fp8 > 0)
      xml.line(depth + 1, "<prop id=\"peak_fp8\" value=\"" + format_flops(spec.peak_fp8) + "\"/>");
    xml.line(depth, "</host>");
  }

  // The host CPU: where offloaded optimizer work runs and where the NVMe drives hang.
  void write_cpu_host(XmlWriter& xml, int depth) const {
    xml.line(depth, "<host id=\"" + cpu() + "\" speed=\"" + format_flops(c_.cpu_speed) + "\">");
    xml.line(depth + 1, "<prop id=\"role\" value=\"cpu\"/>");
    xml.line(depth + 1, "<prop id=\"node\" value=\"" + n_ + "\"/>");
    xml.line(depth + 1, "<prop id=\"dram_capacity\" value=\"" + format_double(c_.host_memory) + "B\"/>");
    xml.line(depth + 1, "<prop id=\"dram_bandwidth\" value=\"" + rate(c_.host_memory_bandwidth) + "\"/>");
    const auto [read, write] = nvme_bandwidth(c_.pcie_gen);
    for (int d = 0; d < c_.nvme_per_node; ++d) {
      xml.line(depth + 1, "<disk id=\"" + nvme(d) + "\" read_bw=\"" + rate(read) + "\" write_bw=\"" + rate(write) + "\">");
      xml.line(depth + 2, "<prop id=\"size\" value=\"3840GB\"/>");
      xml.line(depth + 2, "<prop id=\"pcie_port\" value=\"" + nvme_port(d) + "\"/>");
      xml.line(depth + 1, "</disk>");
    }
    xml.line(depth, "</host>");
    // Each drive's end of the PCIe tree: a host the drive's data leaves from, behind a switch.
    for (int d = 0; d < c_.nvme_per_node; ++d) {
      xml.line(depth, "<host id=\"" + nvme_port(d) + "\" speed=\"1f\">");
      xml.line(depth + 1, "<prop id=\"role\" value=\"nvme-port\"/>");
      xml.line(depth, "</host>");
    }
  }

  // Each drive's PCIe link, one per direction at its read and write rates, and its routes to and
  // from the CPU through the uplink of the switch it hangs on (drives dealt out over switches).
  void write_nvme_links(XmlWriter& xml, int depth) const {
    const auto [read, write] = nvme_bandwidth(c_.pcie_gen);
    for (int d = 0; d < c_.nvme_per_node; ++d) {
      xml.line(depth, link(nvme(d) + "-read", read, "500ns", "SHARED"));
      xml.line(depth, link(nvme(d) + "-write", write, "500ns", "SHARED"));
    }
  }
  void write_nvme_routes(XmlWriter& xml, int depth) const {
    for (int d = 0; d < c_.nvme_per_node; ++d) {
      const std::string up = uplink(d % switches());
      xml.line(depth, one_way_route(nvme_port(d), cpu(), {ctn(nvme(d) + "-read"), ctn(up, "UP")}));
      xml.line(depth, one_way_route(cpu(), nvme_port(d), {ctn(up, "DOWN"), ctn(nvme(d) + "-write")}));
    }
  }

  std::string pcie_link(int g) const { return link(pcie(g), pcie_x16_bandwidth(c_.pcie_gen), "500ns", "SPLITDUPLEX"); }
  std::string nic_link(int k) const { return link(nic(k), c_.nic_speed, "1us", "SPLITDUPLEX"); }

  // The PCIe switches' uplinks to the CPU.
  void write_uplinks(XmlWriter& xml, int depth) const {
    for (int s = 0; s < switches(); ++s)
      xml.line(depth, link(uplink(s), pcie_x16_bandwidth(c_.pcie_gen), "500ns", "SPLITDUPLEX"));
  }

  // The GPU-to-GPU fabric.
  void write_fabric_links(XmlWriter& xml, int depth) const {
    const double bandwidth = c_.gpu.gpu_link;
    switch (c_.fabric) {
    case Fabric::nvswitch:
      for (int g = 0; g < c_.gpus_per_node; ++g)
        xml.line(depth, link(n_ + "-nvlink" + std::to_string(g), bandwidth, "1us", "SPLITDUPLEX"));
      break;
    case Fabric::nvlink_pairs:
      for (int g = 0; g + 1 < c_.gpus_per_node; g += 2)
        xml.line(depth, link(n_ + "-bridge" + std::to_string(g / 2), bandwidth, "1us", "SPLITDUPLEX"));
      break;
    case Fabric::mesh:
      for (int a = 0; a < c_.gpus_per_node; ++a)
        for (int b = a + 1; b < c_.gpus_per_node; ++b)
          xml.line(depth, link(mesh(a, b), bandwidth, "1us", "SPLITDUPLEX"));
      break;
    case Fabric::pcie: break;
    }
  }

  // Between two GPUs of the node: over the fabric, or through PCIe (and the switches' uplinks
  // to the CPU's root complex when the GPUs sit behind different switches).
  std::vector<std::string> gpu_to_gpu(int a, int b) const {
    switch (c_.fabric) {
    case Fabric::nvswitch:
      return {ctn(n_ + "-nvlink" + std::to_string(a), "UP"), ctn(n_ + "-nvlink" + std::to_string(b), "DOWN")};
    case Fabric::nvlink_pairs:
      if (a / 2 == b / 2)
        return {ctn(n_ + "-bridge" + std::to_string(a / 2), "UP")};
      break;
    case Fabric::mesh: return {ctn(mesh(a, b), "UP")};
    case Fabric::pcie: break;
    }
    std::vector<std::string> links = {ctn(pcie(a), "UP")};
    if (switch_of(a) != switch_of(b)) {
      links.push_back(ctn(uplink(switch_of(a)), "UP"));
      links.push_back(ctn(uplink(switch_of(b)), "DOWN"));
    }
    links.push_back(ctn(pcie(b), "DOWN"));
    return links;
  }
  // Out of the node: GPUDirect RDMA through the GPU's PCIe switch to its NIC.
  std::vector<std::string> gpu_to_network(int g) const { return {ctn(pcie(g), "UP"), ctn(nic(nic_of(g)), "UP")}; }
  // To host memory: through the GPU's switch and its uplink to the CPU.
  std::vector<std::string> gpu_to_cpu(int g) const { return {ctn(pcie(g), "UP"), ctn(uplink(switch_of(g)), "UP")}; }

private:
  std::string mesh(int a, int b) const { return n_ + "-mesh" + std::to_string(a) + "-" + std::to_string(b); }

  const ClusterSpec& c_;
  std::string n_;
};

std::string zone_route(const std::string& from, const std::string& to, const std::string& gw_from,
                       const std::string& gw_to, const std::vector<std::string>& links) {
  return "<zoneRoute src=\"" + from + "\" dst=\"" + to + "\" gw_src=\"" + gw_from + "\" gw_dst=\"" + gw_to + "\">" +
         joined(links) + "</zoneRoute>";
}

// A node as one zone: its GPUs, CPU, links and routes inside, a gateway to the network.
void write_node(XmlWriter& xml, const ClusterSpec& c, int node) {
  const NodeLayout n(c, node);
  xml.line(2, "<zone id=\"" + n.name() + "\" routing=\"Full\">");
  for (int g = 0; g < c.gpus_per_node; ++g)
    n.write_gpu_host(xml, 3, g, false);
  n.write_cpu_host(xml, 3);
  xml.line(3, "<router id=\"" + n.name() + "-gw\"/>");
  for (int g = 0; g < c.gpus_per_node; ++g)
    xml.line(3, n.pcie_link(g));
  for (int k = 0; k < c.nics_per_node; ++k)
    xml.line(3, n.nic_link(k));
  n.write_uplinks(xml, 3);
  n.write_fabric_links(xml, 3);
  n.write_nvme_links(xml, 3);
  for (int a = 0; a < c.gpus_per_node; ++a)
    for (int b = a + 1; b < c.gpus_per_node; ++b)
      xml.line(3, route(n.gpu(a), n.gpu(b), n.gpu_to_gpu(a, b)));
  for (int g = 0; g < c.gpus_per_node; ++g)
    xml.line(3, route(n.gpu(g), n.name() + "-gw", n.gpu_to_network(g)));
  for (int g = 0; g < c.gpus_per_node; ++g)
    xml.line(3, route(n.gpu(g), n.cpu(), n.gpu_to_cpu(g)));
  xml.line(3, route(n.cpu(), n.name() + "-gw", {ctn(n.uplink(0), "DOWN"), ctn(n.nic(0), "UP")}));
  n.write_nvme_routes(xml, 3);
  xml.line(2, "</zone>");
}

// Rail-optimised: each GPU is a zone of its own (with its PCIe link and NIC), so that traffic
// between nodes is routed by rail: GPU k of every node reaches GPU k of the others through rail
// switch k; other pairs climb from their rail switch to the spine and down another.
void write_rail_optimized(XmlWriter& xml, const ClusterSpec& c) {
  const auto gpu_zone = [](const NodeLayout& n, int g) { return n.gpu(g) + "-zone"; };
  const auto nic_router = [](const NodeLayout& n, int g) { return n.gpu(g) + "-out"; };
  std::vector<NodeLayout> nodes;
  for (int node = 0; node < c.nodes; ++node)
    nodes.emplace_back(c, node);
  for (const NodeLayout& n : nodes) {
    for (int g = 0; g < c.gpus_per_node; ++g) {
      xml.line(2, "<zone id=\"" + gpu_zone(n, g) + "\" routing=\"Full\">");
      n.write_gpu_host(xml, 3, g, true);
      xml.line(3, "<router id=\"" + nic_router(n, g) + "\"/>");
      xml.line(3, n.pcie_link(g));
      xml.line(3, n.nic_link(g));
      xml.line(3, route(n.gpu(g), nic_router(n, g), n.gpu_to_network(g)));
      xml.line(2, "</zone>");
    }
    // The CPU's zone holds the switch uplinks, which its drives' routes cross.
    xml.line(2, "<zone id=\"" + n.cpu() + "-zone\" routing=\"Full\">");
    n.write_cpu_host(xml, 3);
    n.write_uplinks(xml, 3);
    n.write_nvme_links(xml, 3);
    n.write_nvme_routes(xml, 3);
    xml.line(2, "</zone>");
  }
  for (const NodeLayout& n : nodes)
    n.write_fabric_links(xml, 2);
  const double rail_ports = c.nodes * c.nic_speed;
  for (int r = 0; r < c.gpus_per_node; ++r) {
    xml.line(2, link("rail" + std::to_string(r), rail_ports, "500ns", "FATPIPE"));
    xml.line(2, link("rail" + std::to_string(r) + "-up", rail_ports / c.oversubscription, "500ns", "SPLITDUPLEX"));
  }
  xml.line(2, link("spine", rail_ports * c.gpus_per_node, "500ns", "FATPIPE"));
  for (std::size_t a = 0; a < nodes.size(); ++a) {
    const NodeLayout& n = nodes[a];
    for (int g = 0; g < c.gpus_per_node; ++g) {
      for (int h = g + 1; h < c.gpus_per_node; ++h)
        xml.line(2, zone_route(gpu_zone(n, g), gpu_zone(n, h), n.gpu(g), n.gpu(h), n.gpu_to_gpu(g, h)));
      xml.line(2, zone_route(gpu_zone(n, g), n.cpu() + "-zone", n.gpu(g), n.cpu(), n.gpu_to_cpu(g)));
    }
    for (std::size_t b = a + 1; b < nodes.size(); ++b) {
      const NodeLayout& m = nodes[b];
      for (int g = 0; g < c.gpus_per_node; ++g) {
        for (int h = 0; h < c.gpus_per_node; ++h) {
          const std::string rg = "rail" + std::to_string(g), rh = "rail" + std::to_string(h);
          const std::vector<std::string> links =
              g == h ? std::vector<std::string>{ctn(rg)}
                     : std::vector<std::string>{ctn(rg), ctn(rg + "-up", "UP"), ctn("spine"), ctn(rh + "-up", "DOWN"), ctn(rh)};
          xml.line(2, zone_route(gpu_zone(n, g), gpu_zone(m, h), nic_router(n, g), nic_router(m, h), links));
        }
      }
    }
  }
}

// HBM capacity as the device reports it to the software above it: nvidia-smi's (rocm-smi's)
// memory total, in MiB, not the marketing "80 GB" or "141 GB", so that every GPU is given in the
// same unit and none is credited with memory it does not show.
double reported_capacity(double mebibytes) { return mebibytes * mib; }

} // namespace

const std::vector<GpuSpec>& gpu_catalog() {
  // Dense (not sparse) tensor peaks; fp16/bf16 with fp32 accumulation. Capacities: see
  // reported_capacity; each line says where its figure was published. SM counts: the same
  // datasheets and whitepapers (A100 108, H100 and H800 SXM 132, H100 PCIe 114, B200 148, MI300X 304
  // compute units, RTX 4090 128, V100 80).
  static const std::vector<GpuSpec> catalog = {
      {"a100-40gb", "A100-SXM4-40GB", 19.5 * tera, 156 * tera, 312 * tera, 312 * tera, 0,
       reported_capacity(40960),  // nvidia-smi, A100-SXM4-40GB: 40960MiB (modal-labs/modal-client PR #2797)
       1555 * giga,
       300 * giga, "nvswitch", 4, 25 * giga, "NVIDIA A100 datasheet; NVLink 3: 600 GB/s per GPU", GpuArchitecture::ampere, 108},
      {"a100-80gb", "A100-SXM4-80GB", 19.5 * tera, 156 * tera, 312 * tera, 312 * tera, 0,
       reported_capacity(81920),  // nvidia-smi, A100-SXM4-80GB: 81920MiB (modal-labs/modal-client PR #2797)
       2039 * giga,
       300 * giga, "nvswitch", 4, 25 * giga, "NVIDIA A100 datasheet; NVLink 3: 600 GB/s per GPU", GpuArchitecture::ampere, 108},
      {"h100-sxm", "H100-SXM5-80GB", 67 * tera, 494 * tera, 989 * tera, 989 * tera, 1979 * tera,
       reported_capacity(81559),  // nvidia-smi, H100 80GB HBM3: 81559MiB (wilicc/gpu-burn issue #114, NVIDIA/nccl issue #1264)
       3350 * giga, 450 * giga, "nvswitch", 5, 50 * giga, "NVIDIA H100 datasheet; NVLink 4: 900 GB/s per GPU", GpuArchitecture::hopper, 132},
      // China's export variant of the H100 SXM: the same SMs, tensor peaks and HBM3, NVLink cut
      // from 900 to 400 GB/s per GPU, eight 400 Gb/s InfiniBand NICs per node (DeepSeek-AI 2025,
      // "Insights into DeepSeek-V3", arXiv 2505.09343, section 4.1).
      {"h800-sxm", "H800-SXM5-80GB", 67 * tera, 494 * tera, 989 * tera, 989 * tera, 1979 * tera,
       reported_capacity(81559),  // the H100 SXM5 80GB's HBM3, as nvidia-smi reports it (above)
       3350 * giga, 200 * giga, "nvswitch", 5, 50 * giga, "NVIDIA H100 datasheet (compute, HBM); arXiv 2505.09343: NVLink 400 GB/s per GPU", GpuArchitecture::hopper, 132},
      {"h100-pcie", "H100-PCIe-80GB", 51 * tera, 378 * tera, 756 * tera, 756 * tera, 1513 * tera,
       reported_capacity(81559),  // nvidia-smi, NVIDIA H100 PCIe: 81559MiB (published nvidia-smi outputs)
       2000 * giga, 300 * giga, "nvlink-pairs", 5, 50 * giga, "NVIDIA H100 datasheet; NVLink bridge: 600 GB/s per pair", GpuArchitecture::hopper, 114},
      {"h200", "H200-SXM-141GB", 67 * tera, 494 * tera, 989 * tera, 989 * tera, 1979 * tera,
       reported_capacity(143771),  // nvidia-smi, NVIDIA H200: 143771MiB (published nvidia-smi outputs)
       4800 * giga,
       450 * giga, "nvswitch", 5, 50 * giga, "NVIDIA H200 datasheet; NVLink 4: 900 GB/s per GPU", GpuArchitecture::hopper, 132},
      {"b200", "B200-SXM-180GB", 80 * tera, 1100 * tera, 2250 * tera, 2250 * tera, 4500 * tera,
       reported_capacity(183359),  // nvidia-smi, NVIDIA B200: 183359MiB (NVIDIA/TensorRT-LLM issue #10278)
       7700 * giga, 900 * giga, "nvswitch", 5, 50 * giga, "NVIDIA HGX B200 datasheet (per GPU); NVLink 5: 1.8 TB/s", GpuArchitecture::blackwell, 148},
      {"mi300x", "MI300X-192GB", 163.4 * tera, 653.7 * tera, 1307.4 * tera, 1307.4 * tera, 2614.9 * tera,
       reported_capacity(196288),  // rocm-smi --showmeminfo vram, MI300X: 205822885888 B = 196288MiB
       5300 * giga, 64 * giga, "mesh", 5, 50 * giga,
       "AMD Instinct MI300X datasheet; Infinity Fabric: 7 links of 128 GB/s per GPU, a full mesh of 8",
       GpuArchitecture::cdna3, 304},
      {"rtx4090", "RTX-4090-24GB", 82.6 * tera, 82.6 * tera, 165.2 * tera, 165.2 * tera, 330.3 * tera,
       reported_capacity(24564),  // nvidia-smi, GeForce RTX 4090: 24564MiB (RLinf/RLinf issue #255)
       1008 * giga, 0, "pcie", 4, 12.5 * giga, "NVIDIA Ada whitepaper (fp32 accumulation); no NVLink", GpuArchitecture::ada, 128},
      {"v100-32gb", "V100-SXM2-32GB", 15.7 * tera, 15.7 * tera, 125 * tera, 15.7 * tera, 0,
       reported_capacity(32768),  // nvidia-smi, Tesla V100-SXM2-32GB: 32768MiB (published nvidia-smi outputs)
       900 * giga,
       150 * giga, "nvswitch", 3, 12.5 * giga,
       "NVIDIA V100 datasheet; no TF32 or bf16 tensor cores (they run at the fp32 rate); DGX-2 NVSwitch: 300 GB/s",
       GpuArchitecture::volta, 80},
  };
  return catalog;
}

const GpuSpec* find_gpu_model(const std::string& model) {
  for (const GpuSpec& spec : gpu_catalog())
    if (spec.model == model)
      return &spec;
  return nullptr;
}

const GpuSpec& find_gpu(const std::string& key, const std::string& where) {
  for (const GpuSpec& spec : gpu_catalog())
    if (spec.key == key)
      return spec;
  throw InputError(where + ": unknown GPU '" + key + "'; accepted: " + gpu_keys(", "));
}

std::string gpu_keys(const std::string& separator) {
  std::string keys;
  for (const GpuSpec& spec : gpu_catalog())
    keys += (keys.empty() ? "" : separator) + spec.key;
  return keys;
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

const char* to_string(Topology topology) {
  switch (topology) {
  case Topology::single_switch: return "single-switch";
  case Topology::fat_tree: return "fat-tree";
  case Topology::rail_optimized: return "rail-optimized";
  }
  return "?";
}

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
  xml.line(0, "     Host per node: " + format_bytes(c.host_memory) + " of DRAM at " + rate(c.host_memory_bandwidth) +
                  ", CPUs at " + format_flops(c.cpu_speed) + ".");
  xml.line(0, "     Each node is a zone: GPU hosts (speed = dense 16-bit peak), a CPU host with the drives, PCIe");
  xml.line(0, "     switches of " + std::to_string(c.gpus_per_pcie_switch) +
                  " GPUs with uplinks to the CPU, NICs reached through the GPUs' switches. -->");
  xml.line(0, "<platform version=\"4.1\">");
  xml.line(1, "<zone id=\"cluster\" routing=\"Full\">");
  if (c.topology == Topology::rail_optimized) {
    write_rail_optimized(xml, c);
    xml.line(1, "</zone>");
    xml.line(0, "</platform>");
    return xml.str();
  }
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
