// Gathers one device's roofs from a machine profile (the best device-scope ceiling per resource).
#include "rafter/roofline/roofs.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "rafter/collector/error.hpp"
#include "rafter/collector/ranks.hpp"

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

std::optional<double> write_fraction_of(std::string_view operation) {
  if (operation == "load" || operation == "read") return 0.0;
  if (operation == "triad") return 1.0 / 3;
  if (operation == "copy") return 0.5;
  if (operation == "store" || operation == "nt_store" || operation == "write") return 1.0;
  return std::nullopt;
}

namespace {
// `field` of the mixes at write fraction w: linear between the two nearest, the nearest beyond them.
double interpolate(const std::vector<MixPoint>& mixes, double w, double MixPoint::*field) {
  if (w <= mixes.front().write_fraction) return mixes.front().*field;
  if (w >= mixes.back().write_fraction) return mixes.back().*field;
  for (std::size_t i = 1; i < mixes.size(); ++i)
    if (w <= mixes[i].write_fraction) {
      const MixPoint &a = mixes[i - 1], &b = mixes[i];
      const double t = (w - a.write_fraction) / (b.write_fraction - a.write_fraction);
      return a.*field + t * (b.*field - a.*field);
    }
  return mixes.back().*field;
}
}  // namespace

double BandwidthRoof::at_mix(std::optional<double> write_fraction) const {
  if (!write_fraction || mixes.empty()) return bytes_per_second;
  return interpolate(mixes, *write_fraction, &MixPoint::bytes_per_second);
}

double BandwidthRoof::at(std::optional<double> write_fraction, double bytes) const {
  const double roof = at_mix(write_fraction);
  if (!write_fraction || small_mixes.empty()) return roof;
  if (!(bytes < interpolate(small_mixes, *write_fraction, &MixPoint::below_bytes))) return roof;
  return std::max(roof, interpolate(small_mixes, *write_fraction, &MixPoint::bytes_per_second));
}

const BandwidthRoof* DeviceRoofs::link_for(std::string_view link) const {
  for (const auto& l : links)
    if (l.name == link) return &l;
  return nullptr;
}

const CollectiveRoof* DeviceRoofs::collective_for(std::string_view operation, int ranks,
                                                  std::string_view type) const {
  const CollectiveRoof* any = nullptr;
  for (const auto& c : collectives) {
    if (c.operation != operation || c.ranks != ranks) continue;
    if (c.type == type) return &c;
    if (!any) any = &c;
  }
  return any;
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

// The comm probes' ceilings of `device`: a link (bus bandwidth) or latency ceiling named after a
// collective, with params.ranks. Several runs of one probe: the best of each.
void add_collective_roofs(const MachineProfile& profile, const std::string& device,
                          std::vector<CollectiveRoof>& out) {
  for (const auto& c : profile.ceilings) {
    if (c.device != device || (c.kind != CeilingKind::Link && c.kind != CeilingKind::Latency) ||
        !collective_from_name(c.operation) || !c.params.contains("ranks") || !(c.figure.value > 0))
      continue;
    const int ranks = c.params["ranks"].get<int>();
    auto it = std::find_if(out.begin(), out.end(), [&](const CollectiveRoof& r) {
      return r.resource == c.resource && r.operation == c.operation && r.type == c.isa && r.ranks == ranks;
    });
    if (it == out.end())
      it = out.insert(out.end(), CollectiveRoof{c.resource, c.operation, c.isa, ranks, 0, {}, c.id()});
    if (c.kind == CeilingKind::Link && c.figure.value > it->bus_bytes_per_second) {
      it->bus_bytes_per_second = c.figure.value;
      it->ceiling_id = c.id();
      const auto bytes = c.params.find("bytes");
      it->largest_bytes = bytes != c.params.end() && bytes->is_number() ? bytes->get<double>() : 0.0;
    } else if (c.kind == CeilingKind::Latency &&
               (!it->latency_seconds || c.figure.value < *it->latency_seconds)) {
      it->latency_seconds = c.figure.value;
    }
  }
}

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
  return BandwidthRoof{c.resource, c.figure.value, c.figure.source, c.id(), {}, {}};
}

// The best device-scope ceiling of each read:write mix measured at `level`: the level's own
// (`small` false) or those of small operators (`small` true).
std::vector<MixPoint> mixes_of(const MachineProfile& profile, const std::string& device,
                               const std::string& level, bool small) {
  std::vector<MixPoint> mixes;
  for (const auto& c : profile.ceilings) {
    if (c.device != device || c.kind != CeilingKind::Bandwidth || c.scope != "device" ||
        c.resource != level || c.emulated || !(c.figure.value > 0) ||
        (c.small_operators_below_bytes() > 0) != small)
      continue;
    const auto w = write_fraction_of(c.operation);
    if (!w) continue;
    const MixPoint point{*w, c.figure.value, c.id(), c.small_operators_below_bytes()};
    auto same = std::find_if(mixes.begin(), mixes.end(), [&](const MixPoint& m) { return m.write_fraction == *w; });
    if (same == mixes.end())
      mixes.push_back(point);
    else if (c.figure.value > same->bytes_per_second)
      *same = point;
  }
  std::sort(mixes.begin(), mixes.end(),
            [](const MixPoint& a, const MixPoint& b) { return a.write_fraction < b.write_fraction; });
  return mixes;
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

DeviceRoofs roofs_for(const MachineProfile& profile, std::string_view device_id, bool sustained) {
  const Device* device = pick_device(profile, device_id);
  if (!device)
    throw InputError("machine profile of host '" + profile.host + "' has no device of kind '" +
                     device_kind_of(device_id) + "' (needed for device '" + std::string(device_id) + "')");
  DeviceRoofs roofs;
  roofs.device_id = device->id;
  roofs.device_kind = device->kind.empty() ? device_kind_of(device->id) : device->kind;
  roofs.device_name = device->name;
  roofs.host = profile.host;
  // One roof per compute class, the class's best ceiling: the CUDA probe measures FP8 as two
  // resources, fp8_e4m3 and fp8_e5m2, and every FP8 record (fp8_e4m3, fp8_e5m2_e4m3, …) is judged
  // on the class "fp8". A class with a held (sustained) ceiling takes its best held one.
  int held = 0, burst_only = 0;
  std::map<std::string, std::pair<const Ceiling*, bool>> by_class;  // best ceiling, held
  for (const auto& r : resources_of(profile, device->id, CeilingKind::Compute)) {
    const Ceiling* c = sustained ? profile.best(device->id, CeilingKind::Compute, r, "device", "sustained") : nullptr;
    const bool is_held = c != nullptr;
    (is_held ? held : burst_only) += sustained;
    if (!c) c = profile.best(device->id, CeilingKind::Compute, r);
    if (!c) continue;
    const std::string cls = compute_class_of(c->resource);
    auto [it, fresh] = by_class.emplace(cls, std::pair{c, is_held});
    if (!fresh && ((is_held && !it->second.second) ||
                   (is_held == it->second.second && c->figure.value > it->second.first->figure.value)))
      it->second = {c, is_held};
  }
  for (const auto& [cls, best] : by_class) {  // ordered by speed below
    const Ceiling* c = best.first;
    roofs.compute.push_back({cls, c->figure.value, c->emulated, c->figure.source, c->id(),
                             c->params.value("emulated_via", std::string())});
  }
  roofs.compute_regime = held == 0 ? "burst" : burst_only == 0 ? "sustained" : "sustained where measured";
  std::sort(roofs.compute.begin(), roofs.compute.end(),
            [](const auto& a, const auto& b) { return a.flops_per_second > b.flops_per_second; });
  for (const auto& r : resources_of(profile, device->id, CeilingKind::Bandwidth))
    if (const Ceiling* c = profile.best(device->id, CeilingKind::Bandwidth, r)) {
      roofs.memory.push_back(bandwidth_roof(*c));
      roofs.memory.back().mixes = mixes_of(profile, device->id, r, false);
      roofs.memory.back().small_mixes = mixes_of(profile, device->id, r, true);
    }
  order_memory(roofs.memory, *device);
  for (const auto& r : resources_of(profile, device->id, CeilingKind::Link))
    if (const Ceiling* c = profile.best(device->id, CeilingKind::Link, r)) roofs.links.push_back(bandwidth_roof(*c));
  add_collective_roofs(profile, device->id, roofs.collectives);
  for (const auto& c : profile.ceilings)
    if (c.device == device->id && c.kind == CeilingKind::Latency &&
        (c.resource == "launch" || c.operation == "launch") && c.figure.value > 0) {
      // A floor is the fastest launch seen, not the typical one: an operator's median can sit below
      // the empty kernel's median (H100, 7B decode: residual add 3.78 us, empty kernel median
      // 3.87, fastest 3.30).
      const double seconds =
          c.figure.stats.samples > 0 && c.figure.stats.min > 0 ? c.figure.stats.min : c.figure.value;
      auto [it, fresh] = roofs.launch_seconds_by_form.emplace(c.operation, seconds);
      if (!fresh) it->second = std::min(it->second, seconds);
    }
  if (auto op = roofs.launch_seconds_by_form.find("operator"); op != roofs.launch_seconds_by_form.end())
    roofs.launch_latency_seconds = op->second;
  else
    for (const auto& [form, seconds] : roofs.launch_seconds_by_form)
      roofs.launch_latency_seconds = std::min(roofs.launch_latency_seconds.value_or(seconds), seconds);
  return roofs;
}

}  // namespace rafter::roofline
