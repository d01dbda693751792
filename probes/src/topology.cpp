// hwloc topology summary: CPU side (packages, cores, PUs, caches, NUMA) and I/O side (PCI GPUs and
// NICs, with the NUMA nodes they hang off, so that a GPU's or NIC's locality reads at a glance).
#include "rafter/probes/topology.hpp"

#include <fmt/format.h>

#include "hwloc_topology.hpp"

namespace rafter::probes {
namespace {

using nlohmann::json;

json numa_nodes_of(const HwlocTopology& t, hwloc_const_nodeset_t nodeset) {
  json nodes = json::array();
  if (nodeset == nullptr) return nodes;
  for (int i = 0; i < t.count(HWLOC_OBJ_NUMANODE); ++i) {
    hwloc_obj_t node = t.object(HWLOC_OBJ_NUMANODE, i);
    if (hwloc_bitmap_isset(nodeset, node->os_index)) nodes.push_back(node->os_index);
  }
  return nodes;
}

json caches_json(const HwlocTopology& t) {
  json caches = json::array();
  for (const CacheLevelInfo& level : data_cache_levels(t)) {
    caches.push_back({{"level", fmt::format("L{}", level.depth)},
                      {"size_bytes", level.size_bytes},
                      {"line_bytes", level.line_bytes},
                      {"instances", level.instances},
                      {"shared_by_cores", level.shared_by_cores},
                      {"cores_per_instance", level.cores_per_instance}});
  }
  return caches;
}

json numa_json(const HwlocTopology& t) {
  json nodes = json::array();
  for (int i = 0; i < t.count(HWLOC_OBJ_NUMANODE); ++i) {
    hwloc_obj_t node = t.object(HWLOC_OBJ_NUMANODE, i);
    json cores = json::array();
    for (int c = 0; c < t.count(HWLOC_OBJ_CORE); ++c)
      if (hwloc_bitmap_intersects(t.object(HWLOC_OBJ_CORE, c)->cpuset, node->cpuset)) cores.push_back(c);
    nodes.push_back({{"os_index", node->os_index},
                     {"memory_bytes", static_cast<double>(node->attr->numanode.local_memory)},
                     {"cores", cores}});
  }
  return nodes;
}

// PCI class 0x03xx is a display/3D controller (GPU), 0x02xx a network controller, 0x12xx a
// processing accelerator; InfiniBand HCAs report 0x0207.
std::string io_kind(unsigned class_id) {
  const unsigned base = class_id >> 8;
  if (base == 0x03 || base == 0x12) return "gpu";
  if (base == 0x02) return "nic";
  return "";
}

json pci_json(const HwlocTopology& t) {
  json devices = json::array();
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(t.get(), nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(t.get(), pci)) {
    const std::string kind = io_kind(pci->attr->pcidev.class_id);
    if (kind.empty()) continue;
    json os_devices = json::array();
    for (hwloc_obj_t child = pci->io_first_child; child != nullptr; child = child->next_sibling)
      if (child->type == HWLOC_OBJ_OS_DEVICE && child->name != nullptr) os_devices.push_back(child->name);
    hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(t.get(), pci);
    const auto& a = pci->attr->pcidev;
    const char* name = hwloc_obj_get_info_by_name(pci, "PCIDevice");
    const char* vendor = hwloc_obj_get_info_by_name(pci, "PCIVendor");
    devices.push_back({{"kind", kind},
                       {"bus_id", fmt::format("{:04x}:{:02x}:{:02x}.{:x}", a.domain, a.bus, a.dev, a.func)},
                       {"vendor", vendor ? vendor : fmt::format("0x{:04x}", a.vendor_id)},
                       {"name", name ? name : fmt::format("0x{:04x}", a.device_id)},
                       {"class_id", fmt::format("0x{:04x}", a.class_id)},
                       {"os_devices", os_devices},
                       {"numa_nodes", numa_nodes_of(t, anchor ? anchor->nodeset : nullptr)}});
  }
  return devices;
}

}  // namespace

json topology_summary() {
  const HwlocTopology t(true);
  hwloc_obj_t root = hwloc_get_root_obj(t.get());
  const char* model = hwloc_obj_get_info_by_name(root, "CPUModel");
  if (model == nullptr && t.count(HWLOC_OBJ_PACKAGE) > 0)
    model = hwloc_obj_get_info_by_name(t.object(HWLOC_OBJ_PACKAGE, 0), "CPUModel");
  return {{"source", "hwloc " HWLOC_VERSION},
          {"cpu_model", model ? model : ""},
          {"packages", t.count(HWLOC_OBJ_PACKAGE)},
          {"cores", t.count(HWLOC_OBJ_CORE)},
          {"pus", t.count(HWLOC_OBJ_PU)},
          {"memory_bytes", t.total_memory_bytes()},
          {"caches", caches_json(t)},
          {"numa_nodes", numa_json(t)},
          {"pci_devices", pci_json(t)}};
}

std::string format_topology(const json& s) {
  auto bytes = [](double b) {
    if (b >= 1 << 30) return fmt::format("{:.1f} GiB", b / (1 << 30));
    if (b >= 1 << 20) return fmt::format("{:.0f} MiB", b / (1 << 20));
    return fmt::format("{:.0f} KiB", b / 1024);
  };
  std::string out = fmt::format("{}\npackages {}  cores {}  hardware threads {}  memory {}\n\n",
                                s.value("cpu_model", ""), s["packages"].get<int>(), s["cores"].get<int>(),
                                s["pus"].get<int>(), bytes(s["memory_bytes"].get<double>()));
  out += fmt::format("{:<6}{:>12}{:>8}{:>11}{:>9}  {}\n", "cache", "size", "line", "instances", "shared",
                     "cores per instance");
  for (const auto& c : s["caches"]) {
    std::string groups;
    for (const auto& g : c["cores_per_instance"]) groups += fmt::format("{} ", g.dump());
    out += fmt::format("{:<6}{:>12}{:>6} B{:>11}{:>9}  {}\n", c["level"].get<std::string>(),
                       bytes(c["size_bytes"].get<double>()), c["line_bytes"].get<double>(),
                       c["instances"].get<int>(), c["shared_by_cores"].get<int>(), groups);
  }
  out += "\nNUMA node   memory      cores\n";
  for (const auto& n : s["numa_nodes"])
    out += fmt::format("{:<12}{:<12}{}\n", n["os_index"].get<int>(), bytes(n["memory_bytes"].get<double>()),
                       n["cores"].dump());
  out += "\nPCI GPUs and NICs\n";
  if (s["pci_devices"].empty()) out += "  (none found)\n";
  for (const auto& d : s["pci_devices"])
    out += fmt::format("  {:<4} {}  {} {}  os: {}  NUMA: {}\n", d["kind"].get<std::string>(),
                       d["bus_id"].get<std::string>(), d["vendor"].get<std::string>(),
                       d["name"].get<std::string>(), d["os_devices"].dump(), d["numa_nodes"].dump());
  return out;
}

}  // namespace rafter::probes
