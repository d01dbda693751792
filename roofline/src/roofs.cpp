// Gathers one device's roofs from a machine profile (the best device-scope ceiling per resource).
#include "rafter/roofline/roofs.hpp"

#include <algorithm>
#include <set>

#include "rafter/collector/error.hpp"

namespace rafter::roofline {

std::string compute_class_of(std::string_view precision) {
  std::string p(precision);
  if (p.starts_with("fp8")) return "fp8";
  if (p == "nvfp4" || p == "mxfp4" || p.starts_with("fp4")) return "fp4";
  if (p.starts_with("int8")) return "int8";
  return p;
}

std::string device_kind_of(std::string_view device_id) {
  auto colon = device_id.find(':');
  return std::string(device_id.substr(0, colon));
}

const ComputeRoof* DeviceRoofs::compute_for(std::string_view precision) const {
  std::string cls = compute_class_of(precision);
  for (const auto& c : compute)
    if (c.precision == cls) return &c;
  return nullptr;
}

const BandwidthRoof* DeviceRoofs::memory_for(std::string_view level) const {
  for (const auto& m : memory)
    if (m.name == level) return &m;
  return nullptr;
}

const BandwidthRoof* DeviceRoofs::link_for(std::string_view link) const {
  for (const auto& l : links)
    if (l.name == link) return &l;
  return nullptr;
}

double DeviceRoofs::top_compute_flops_per_second() const {
  double top = 0;
  for (const auto& c : compute) top = std::max(top, c.flops_per_second);
  return top;
}

double DeviceRoofs::top_memory_bytes_per_second() const {
  double top = 0;
  for (const auto& m : memory) top = std::max(top, m.bytes_per_second);
  return top;
}

namespace {

const Device* pick_device(const MachineProfile& profile, std::string_view device_id) {
  if (const Device* d = profile.find_device(device_id)) return d;
  std::string kind = device_kind_of(device_id);
  for (const auto& d : profile.devices)
    if (d.kind == kind || device_kind_of(d.id) == kind) return &d;
  return nullptr;
}

// Resources (precisions, levels, links) that have at least one device-scope ceiling of `kind`.
std::vector<std::string> resources_of(const MachineProfile& profile, const std::string& device,
                                      CeilingKind kind) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto& c : profile.ceilings)
    if (c.device == device && c.kind == kind && c.scope == "device" && seen.insert(c.resource).second)
      names.push_back(c.resource);
  return names;
}

BandwidthRoof bandwidth_roof(const Ceiling& c) {
  return BandwidthRoof{c.resource, c.figure.value, c.figure.source, c.id()};
}

// Orders memory roofs as the topology lists levels (innermost first); unknown levels go after,
// fastest first, so that a chart's legend reads from the core outwards.
void order_memory(std::vector<BandwidthRoof>& memory, const Device& device) {
  auto rank = [&](const BandwidthRoof& r) {
    for (std::size_t i = 0; i < device.memory_levels.size(); ++i)
      if (device.memory_levels[i].name == r.name) return static_cast<int>(i);
    static const std::vector<std::string> usual = {"L1", "shared", "L2", "L3", "DRAM", "HBM"};
    auto it = std::find(usual.begin(), usual.end(), r.name);
    return 100 + static_cast<int>(it - usual.begin());
  };
  std::stable_sort(memory.begin(), memory.end(), [&](const auto& a, const auto& b) {
    int ra = rank(a), rb = rank(b);
    return ra != rb ? ra < rb : a.bytes_per_second > b.bytes_per_second;
  });
}

}  // namespace

DeviceRoofs roofs_for(const MachineProfile& profile, std::string_view device_id) {
  const Device* device = pick_device(profile, device_id);
  if (!device)
    throw InputError("machine profile of host '" + profile.host + "' has no device of kind '" +
                     device_kind_of(device_id) + "' (needed for device '" + std::string(device_id) + "')");
  DeviceRoofs roofs;
  roofs.device_id = device->id;
  roofs.device_kind = device->kind.empty() ? device_kind_of(device->id) : device->kind;
  roofs.device_name = device->name;
  roofs.host = profile.host;
  for (const auto& r : resources_of(profile, device->id, CeilingKind::Compute))
    if (const Ceiling* c = profile.best(device->id, CeilingKind::Compute, r))
      roofs.compute.push_back({c->resource, c->figure.value, c->emulated, c->figure.source, c->id(),
                               c->params.value("emulated_via", std::string())});
  std::sort(roofs.compute.begin(), roofs.compute.end(),
            [](const auto& a, const auto& b) { return a.flops_per_second > b.flops_per_second; });
  for (const auto& r : resources_of(profile, device->id, CeilingKind::Bandwidth))
    if (const Ceiling* c = profile.best(device->id, CeilingKind::Bandwidth, r))
      roofs.memory.push_back(bandwidth_roof(*c));
  order_memory(roofs.memory, *device);
  for (const auto& r : resources_of(profile, device->id, CeilingKind::Link))
    if (const Ceiling* c = profile.best(device->id, CeilingKind::Link, r)) roofs.links.push_back(bandwidth_roof(*c));
  for (const auto& c : profile.ceilings)
    if (c.device == device->id && c.kind == CeilingKind::Latency &&
        (c.resource == "launch" || c.operation == "launch") && c.figure.value > 0)
      roofs.launch_latency_seconds = roofs.launch_latency_seconds
                                         ? std::min(*roofs.launch_latency_seconds, c.figure.value)
                                         : c.figure.value;
  return roofs;
}

}  // namespace rafter::roofline
