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
  void append(const XmlWriter& other) { out_ << other.out_.str(); }

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

// A node's links: PCIe, NICs, the PCIe switches' uplinks, the GPU fabric, the drives'.
void write_node_links(XmlWriter& xml, int depth, const ClusterSpec& c, int node) {
  const NodeLayout n(c, node);
  for (int g = 0; g < c.gpus_per_node; ++g)
    xml.line(depth, n.pcie_link(g));
  for (int k = 0; k < c.nics_per_node; ++k)
    xml.line(depth, n.nic_link(k));
  n.write_uplinks(xml, depth);
  n.write_fabric_links(xml, depth);
  n.write_nvme_links(xml, depth);
}

// A node as one zone: its GPUs, CPU and routes inside, a gateway to the network.
void write_node(XmlWriter& xml, int depth, const ClusterSpec& c, int node) {
  const NodeLayout n(c, node);
  xml.line(depth, "<zone id=\"" + n.name() + "\" routing=\"Full\">");
  for (int g = 0; g < c.gpus_per_node; ++g)
    n.write_gpu_host(xml, depth + 1, g, false);
  n.write_cpu_host(xml, depth + 1);
  xml.line(depth + 1, "<router id=\"" + n.name() + "-gw\"/>");
  for (int a = 0; a < c.gpus_per_node; ++a)
    for (int b = a + 1; b < c.gpus_per_node; ++b)
      xml.line(depth + 1, route(n.gpu(a), n.gpu(b), n.gpu_to_gpu(a, b)));
  for (int g = 0; g < c.gpus_per_node; ++g)
    xml.line(depth + 1, route(n.gpu(g), n.name() + "-gw", n.gpu_to_network(g)));
  for (int g = 0; g < c.gpus_per_node; ++g)
    xml.line(depth + 1, route(n.gpu(g), n.cpu(), n.gpu_to_cpu(g)));
  xml.line(depth + 1, route(n.cpu(), n.name() + "-gw", {ctn(n.uplink(0), "DOWN"), ctn(n.nic(0), "UP")}));
  n.write_nvme_routes(xml, depth + 1);
  xml.line(depth, "</zone>");
}

// A zone's members as its switch sees them: a zone, the router its traffic leaves by, and the
// bandwidth it can send into the switch.
struct Member {
  std::string zone, gateway;
  double bandwidth = 0;
};

// A switch between nodes (or between switches), below the top with one SPLITDUPLEX uplink that
// the traffic leaving its members shares. Its backplane never limits a flow, so what a route
// crosses is two ports, each with half the switch's latency: a SPLITDUPLEX link per member at
// the member's own bandwidth (a node's NICs, a leaf's or pod's uplink), which carries the
// member's traffic as its NICs or uplink do and so never paces a flow, and whose load the
// reports show as a switch port's. One FATPIPE link for the whole switch would pace each flow
// the same, but SimGrid puts every link of a route into its max-min system, and a link on every
// route makes all the flows across the switch one system, solved again at every event (26 % of
// a 2,048-rank data-parallel replay; 5 % with ports).
struct Switch {
  std::string name;
  double uplink = 0;  // 0: the top switch
  // The zone `zone` this switch joins, as a member of the switch above: it leaves by the
  // switch's router, over its uplink.
  Member as_member(const std::string& zone) const { return {zone, name + "-gw", uplink}; }
};

double node_bandwidth(const ClusterSpec& c) { return c.nics_per_node * c.nic_speed; }

constexpr const char* switch_latency = "500ns";
constexpr const char* port_latency = "250ns";

// The switch `s` that joins `members` into a zone: its links (written to `links`, the zone that
// declares them) and the zone's routes (to `routes`). Every route between two members crosses
// their ports; below the top, every member also reaches the zone's way out, `name`-gw, over its
// own port, the way out's (`name`-out, at the uplink's bandwidth) and the uplink. The router sits
// in a zone of its own because SimGrid routes between zones, not from a zone to a router. Routes
// grow with the members squared, so nested switches keep a large cluster's routes to a few per
// node.
void write_switch(XmlWriter& links, XmlWriter& routes, int depth, const Switch& s, const std::vector<Member>& members) {
  const Member out = s.as_member(s.name + "-top");
  const auto port = [&](const Member& member) { return s.name + "-" + member.zone; };
  const std::string out_port = s.name + "-out";
  for (const Member& member : members)
    links.line(3, link(port(member), member.bandwidth, port_latency, "SPLITDUPLEX"));
  if (s.uplink > 0) {
    links.line(3, link(out_port, s.uplink, port_latency, "SPLITDUPLEX"));
    links.line(3, link(s.name + "-up", s.uplink, switch_latency, "SPLITDUPLEX"));
    routes.line(depth, "<zone id=\"" + out.zone + "\" routing=\"Full\"><router id=\"" + out.gateway + "\"/></zone>");
  }
  for (std::size_t a = 0; a < members.size(); ++a)
    for (std::size_t b = a + 1; b < members.size(); ++b)
      routes.line(depth, zone_route(members[a].zone, members[b].zone, members[a].gateway, members[b].gateway,
                                    {ctn(port(members[a]), "UP"), ctn(port(members[b]), "DOWN")}));
  if (s.uplink > 0)
    for (const Member& member : members)
      routes.line(depth, zone_route(member.zone, out.zone, member.gateway, out.gateway,
                                    {ctn(port(member), "UP"), ctn(out_port, "DOWN"), ctn(s.name + "-up", "UP")}));
}

// The switches of a fat tree, from the leaves up. An uplink carries its switch's downlink
// bandwidth over that tier's oversubscription, sized for a full leaf (pod) also when the last is
// not (the switches are).
class FatTree {
public:
  explicit FatTree(const ClusterSpec& c)
      : c_(c), leaves_(fat_tree_leaves(c)), pods_(fat_tree_pods(c)), leaves_per_pod_(pods_ == 1 ? leaves_ : c.leaves_per_pod) {}

  int leaves() const { return leaves_; }
  int pods() const { return pods_; }
  int first_node(int leaf) const { return leaf * c_.nodes_per_leaf; }
  int end_node(int leaf) const { return std::min(c_.nodes, (leaf + 1) * c_.nodes_per_leaf); }
  int first_leaf(int pod) const { return pod * leaves_per_pod_; }
  int end_leaf(int pod) const { return std::min(leaves_, (pod + 1) * leaves_per_pod_); }

  Switch leaf(int l) const { return {"leaf" + std::to_string(l), leaf_bandwidth() / c_.oversubscription}; }
  Switch pod(int p) const {
    return {"pod" + std::to_string(p) + "-spine", leaf(0).uplink * leaves_per_pod_ / c_.pod_oversubscription};
  }
  // The spine of a two-tier tree, the core of a three-tier one.
  Switch top() const { return {pods_ == 1 ? "spine" : "core", 0}; }

private:
  double leaf_bandwidth() const { return node_bandwidth(c_) * c_.nodes_per_leaf; }

  const ClusterSpec& c_;
  int leaves_, pods_, leaves_per_pod_;
};

Member node_member(const ClusterSpec& c, int node) {
  return {"node" + std::to_string(node), "node" + std::to_string(node) + "-gw", node_bandwidth(c)};
}

// The nodes and the network between them as nested zones, each routing only among its members:
// nodes under one switch; or nodes under leaf switches, leaves under a spine (two tiers) or, with
// pods, under their pod's spine and pods under the core (three tiers). Every link is declared in
// the cluster's first zone: SimGrid 3.32 finds a link named in a route by walking the zones from
// the root, so links spread over 16,384 node zones made loading quadratic (2,048 nodes: 72 s;
// 4 s this way).
void write_network(XmlWriter& xml, const ClusterSpec& c) {
  const FatTree tree(c);
  XmlWriter links, zones;
  for (int node = 0; node < c.nodes; ++node)
    write_node_links(links, 3, c, node);
  if (c.topology == Topology::single_switch) {
    std::vector<Member> nodes;
    for (int node = 0; node < c.nodes; ++node) {
      write_node(zones, 2, c, node);
      nodes.push_back(node_member(c, node));
    }
    if (c.nodes > 1)
      write_switch(links, zones, 2, {"fabric", 0}, nodes);
  } else {
    const auto write_leaves = [&](int depth, int first, int end) {
      std::vector<Member> leaves;
      for (int l = first; l < end; ++l) {
        const Switch leaf = tree.leaf(l);
        zones.line(depth, "<zone id=\"" + leaf.name + "\" routing=\"Full\">");
        std::vector<Member> nodes;
        for (int node = tree.first_node(l); node < tree.end_node(l); ++node) {
          write_node(zones, depth + 1, c, node);
          nodes.push_back(node_member(c, node));
        }
        write_switch(links, zones, depth + 1, leaf, nodes);
        zones.line(depth, "</zone>");
        leaves.push_back(leaf.as_member(leaf.name));
      }
      return leaves;
    };
    if (tree.pods() == 1) {
      write_switch(links, zones, 2, tree.top(), write_leaves(2, 0, tree.leaves()));
    } else {
      std::vector<Member> pods;
      for (int p = 0; p < tree.pods(); ++p) {
        const std::string name = "pod" + std::to_string(p);
        const Switch spine = tree.pod(p);
        zones.line(2, "<zone id=\"" + name + "\" routing=\"Full\">");
        write_switch(links, zones, 3, spine, write_leaves(3, tree.first_leaf(p), tree.end_leaf(p)));
        zones.line(2, "</zone>");
        pods.push_back(spine.as_member(name));
      }
      write_switch(links, zones, 2, tree.top(), pods);
    }
  }
  xml.line(2, "<zone id=\"links\" routing=\"None\">");
  xml.append(links);
  xml.line(2, "</zone>");
  xml.append(zones);
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
    xml.line(2, link("rail" + std::to_string(r), rail_ports, switch_latency, "FATPIPE"));
    xml.line(2, link("rail" + std::to_string(r) + "-up", rail_ports / c.oversubscription, switch_latency, "SPLITDUPLEX"));
  }
  xml.line(2, link("spine", rail_ports * c.gpus_per_node, switch_latency, "FATPIPE"));
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

int fat_tree_leaves(const ClusterSpec& c) { return (c.nodes + c.nodes_per_leaf - 1) / c.nodes_per_leaf; }

int fat_tree_pods(const ClusterSpec& c) {
  const int leaves = fat_tree_leaves(c);
  return c.leaves_per_pod == 0 ? 1 : (leaves + c.leaves_per_pod - 1) / c.leaves_per_pod;
}

double pcie_x16_bandwidth(int generation) {
  // 16 lanes: gen3 8 GT/s, each generation doubles; 128b/130b encoding.
  return 16.0 * 8e9 * static_cast<double>(1 << std::max(0, generation - 3)) * (128.0 / 130.0) / 8.0;
}

std::string describe(const ClusterSpec& c) {
  return std::to_string(c.nodes) + " x " + std::to_string(c.gpus_per_node) + " " + c.gpu.model + ", " +
         to_string(c.fabric) + ", " + std::to_string(c.nics_per_node) + " x " + format_double(c.nic_speed * 8 / giga) +
         " Gb/s NICs per node, " + to_string(c.topology) +
         (c.topology == Topology::fat_tree && fat_tree_pods(c) > 1
              ? " of " + std::to_string(fat_tree_pods(c)) + " pods (" + std::to_string(c.leaves_per_pod) + " leaves of " +
                    std::to_string(c.nodes_per_leaf) + " nodes each)"
              : "");
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
  write_network(xml, c);
  xml.line(1, "</zone>");
  xml.line(0, "</platform>");
  return xml.str();
}

} // namespace trainsim
