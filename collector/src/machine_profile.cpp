// MachineProfile: look-ups, datasheet flags, and machine.json (write and validated read).
#include "rafter/collector/machine_profile.hpp"

#include <fmt/core.h>

#include <set>
#include <utility>

#include "rafter/collector/error.hpp"
#include "rafter/collector/json_io.hpp"

namespace rafter {
using nlohmann::json;

std::string_view to_string(CeilingKind k) {
  switch (k) {
    case CeilingKind::Compute: return "compute";
    case CeilingKind::Bandwidth: return "bandwidth";
    case CeilingKind::Latency: return "latency";
    case CeilingKind::Link: return "link";
  }
  return "compute";
}

CeilingKind ceiling_kind_from_string(std::string_view s) {
  for (CeilingKind k : {CeilingKind::Compute, CeilingKind::Bandwidth, CeilingKind::Latency, CeilingKind::Link})
    if (to_string(k) == s) return k;
  throw FormatError(fmt::format("unknown ceiling kind '{}' (compute, bandwidth, latency, link)", s));
}

double Ceiling::small_operators_below_bytes() const {
  const auto it = params.find("small_operators_below_bytes");
  return it != params.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string Ceiling::id() const {
  const std::string id = fmt::format("{}/{}/{}/{}/{}/{}", device, to_string(kind), resource, operation, isa, scope);
  return regime == "burst" ? id : id + "/" + regime;
}

const Device* MachineProfile::find_device(std::string_view id) const {
  for (const auto& d : devices)
    if (d.id == id) return &d;
  return nullptr;
}

const Ceiling* MachineProfile::best(std::string_view device, CeilingKind kind, std::string_view resource,
                                    std::string_view scope, std::string_view regime) const {
  const Ceiling* found = nullptr;
  for (const auto& c : ceilings) {
    if (c.device != device || c.kind != kind || c.resource != resource || c.scope != scope) continue;
    if (c.regime != regime) continue;
    if (c.emulated) continue;  // an emulated path never stands in for the native roof
    if (c.small_operators_below_bytes() > 0) continue;
    if (c.params.contains("l2_partition")) continue;  // one partition's lines only: no operator reads so
    const bool better = !found || (kind == CeilingKind::Latency ? c.figure.value < found->figure.value
                                                                : c.figure.value > found->figure.value);
    if (better) found = &c;
  }
  return found;
}

std::string other_machine(const MachineProfile& earlier, const MachineProfile& fresh) {
  if (earlier.host != fresh.host)
    return fmt::format("a profile of host '{}', not '{}'", earlier.host, fresh.host);
  for (const auto& d : fresh.devices)
    if (const Device* e = earlier.find_device(d.id); e && e->name != d.name)
      return fmt::format("{} there is '{}', here '{}'", d.id, e->name, d.name);
  return "";
}

MachineProfile merge_earlier(const MachineProfile& earlier, MachineProfile fresh) {
  std::set<std::pair<std::string, std::string>> measured, swept;
  for (const auto& c : fresh.ceilings) measured.emplace(c.device, c.probe);
  for (const auto& s : fresh.sweeps) swept.emplace(s.device, s.probe);
  for (const auto& d : earlier.devices)
    if (!fresh.find_device(d.id)) fresh.devices.push_back(d);
  std::set<std::string> kept_probes;
  std::size_t kept_ceilings = 0, kept_sweeps = 0;
  for (const auto& c : earlier.ceilings) {
    if (measured.contains({c.device, c.probe})) continue;
    Ceiling k = c;
    if (!k.params.contains("measured_at")) k.params["measured_at"] = earlier.timestamp;
    fresh.ceilings.push_back(std::move(k));
    kept_probes.insert(c.device + " " + c.probe);
    ++kept_ceilings;
  }
  for (const auto& s : earlier.sweeps)
    if (!swept.contains({s.device, s.probe})) {
      fresh.sweeps.push_back(s);
      ++kept_sweeps;
    }
  if (kept_ceilings + kept_sweeps > 0)
    fresh.conditions["merged"] = {{"earlier_timestamp", earlier.timestamp},
                                  {"kept_ceilings", kept_ceilings},
                                  {"kept_sweeps", kept_sweeps},
                                  {"kept_probes", kept_probes}};
  return fresh;
}

void apply_flags(Ceiling& c) {
  c.flag.clear();
  if (c.datasheet_value && *c.datasheet_value > 0) {
    c.datasheet_ratio = c.figure.value / *c.datasheet_value;
    if (c.kind == CeilingKind::Latency) c.datasheet_ratio = *c.datasheet_value / c.figure.value;
    if (*c.datasheet_ratio > 1.0) c.flag = "above_datasheet";
    else if (*c.datasheet_ratio < 0.6) c.flag = "below_60pct_datasheet";
  }
  // Steal explains a throttled reading too (the clock chain is robbed as well): it comes first.
  if (c.flag.empty() && c.clocks.steal_fraction >= kStolenFlagFraction) c.flag = "stolen";
  if (c.flag.empty() && c.clocks.throttled) c.flag = "throttled";
  if (c.flag.empty() && c.figure.stats.noisy) c.flag = "noisy";
}

namespace {

json to_json(const ClockState& c) {
  json j = {{"core_hz_before", c.core_hz_before},
            {"core_hz_after", c.core_hz_after},
            {"memory_hz_before", c.memory_hz_before},
            {"memory_hz_after", c.memory_hz_after},
            {"throttled", c.throttled}};
  if (c.steal_fraction >= 0) j["steal_fraction"] = c.steal_fraction;
  return j;
}

json to_json(const Ceiling& c) {
  json j = {{"kind", to_string(c.kind)}, {"device", c.device},   {"resource", c.resource},
            {"operation", c.operation},  {"isa", c.isa},         {"scope", c.scope},
            {"threads", c.threads},      {"figure", rafter::to_json(c.figure)},
            {"frequency_hz", c.frequency_hz}, {"clocks", to_json(c.clocks)},
            {"emulated", c.emulated},    {"probe", c.probe},     {"params", c.params},
            {"flag", c.flag},            {"regime", c.regime}};
  if (c.datasheet_value) {
    j["datasheet"] = {{"value", *c.datasheet_value}, {"unit", c.figure.unit}, {"source", "datasheet"},
                      {"basis", c.datasheet_basis}};
    if (c.datasheet_ratio) j["datasheet"]["ratio"] = *c.datasheet_ratio;
  }
  return j;
}

json to_json(const MemoryLevel& m) {
  return {{"name", m.name}, {"size_bytes", m.size_bytes}, {"line_bytes", m.line_bytes},
          {"shared_by_cores", m.shared_by_cores}, {"instances", m.instances}};
}

json to_json(const Sweep& s) {
  json pts = json::array();
  for (const auto& p : s.points) pts.push_back({{"working_set_bytes", p.working_set_bytes}, {"figure", rafter::to_json(p.figure)}});
  return {{"device", s.device}, {"probe", s.probe}, {"operation", s.operation}, {"isa", s.isa},
          {"threads", s.threads}, {"huge_pages", s.huge_pages}, {"points", pts}};
}

}  // namespace

json to_json(const Device& d) {
  json levels = json::array();
  for (const auto& m : d.memory_levels) levels.push_back(to_json(m));
  return {{"id", d.id},     {"kind", d.kind},         {"name", d.name},
          {"cores", d.cores}, {"threads", d.threads}, {"isa", d.isa},
          {"memory_levels", levels}, {"properties", d.properties}, {"counters", d.counters}};
}

json to_json(const MachineProfile& p) {
  json devices = json::array(), ceilings = json::array(), sweeps = json::array();
  for (const auto& d : p.devices) devices.push_back(to_json(d));
  for (const auto& c : p.ceilings) ceilings.push_back(to_json(c));
  for (const auto& s : p.sweeps) sweeps.push_back(to_json(s));
  json j = {{"schema", {{"name", kMachineSchemaName}, {"version", kMachineSchemaVersion}}},
            {"rafter_version", p.rafter_version},
            {"timestamp", p.timestamp},
            {"host", p.host},
            {"devices", devices},
            {"ceilings", ceilings},
            {"sweeps", sweeps},
            {"topology", p.topology},
            {"conditions", p.conditions}};
  if (!p.interrupted.empty()) j["interrupted"] = p.interrupted;
  return j;
}

namespace {

ClockState clocks_from_json(const JsonReader& r) {
  ClockState c;
  c.core_hz_before = r.quantity_or("core_hz_before", 0);
  c.core_hz_after = r.quantity_or("core_hz_after", 0);
  c.memory_hz_before = r.quantity_or("memory_hz_before", 0);
  c.memory_hz_after = r.quantity_or("memory_hz_after", 0);
  c.throttled = r.boolean_or("throttled", false);
  if (r.has("steal_fraction")) {
    c.steal_fraction = r.number("steal_fraction");
    if (!(c.steal_fraction >= 0 && c.steal_fraction <= 1))
      r.fail("steal_fraction", "expected a share in [0, 1]");
  }
  return c;
}

Ceiling ceiling_from_json(const JsonReader& r) {
  Ceiling c;
  try {
    c.kind = ceiling_kind_from_string(r.string("kind"));
  } catch (const FormatError& e) {
    r.fail("kind", e.what());
  }
  c.device = r.string("device");
  c.resource = r.string("resource");
  c.operation = r.string_or("operation", "");
  c.isa = r.string_or("isa", "");
  c.scope = r.string("scope");
  if (c.scope != "core" && c.scope != "device") r.fail("scope", "expected \"core\" or \"device\"");
  c.threads = static_cast<int>(r.integer_or("threads", 1));
  c.figure = figure_from_json(r.object("figure"));
  if (!(c.figure.value > 0)) r.fail("figure.value", "must be positive (an absent ceiling is left out, never 0)");
  c.frequency_hz = r.quantity_or("frequency_hz", 0);
  if (r.has("clocks")) c.clocks = clocks_from_json(r.object("clocks"));
  c.emulated = r.boolean_or("emulated", false);
  c.probe = r.string_or("probe", "");
  if (r.has("params")) c.params = r.object("params").raw();  // readers look keys up in it
  c.flag = r.string_or("flag", "");
  c.regime = r.string_or("regime", "burst");
  if (c.regime != "burst" && c.regime != "sustained") r.fail("regime", "expected \"burst\" or \"sustained\"");
  if (r.has("datasheet")) {
    JsonReader d = r.object("datasheet");
    c.datasheet_value = d.quantity("value");
    c.datasheet_basis = d.string_or("basis", "");
    if (d.has("ratio")) c.datasheet_ratio = d.quantity("ratio");
  }
  return c;
}

Device device_from_json(const JsonReader& r) {
  Device d;
  d.id = r.string("id");
  d.kind = r.string("kind");
  d.name = r.string_or("name", "");
  d.cores = static_cast<int>(r.integer_or("cores", 0));
  d.threads = static_cast<int>(r.integer_or("threads", 0));
  if (r.has("isa")) {
    for (const auto& x : r.array("isa")) {
      if (!x.is_string()) r.fail("isa", "expected an array of strings");
      d.isa.push_back(x.get<std::string>());
    }
  }
  if (r.has("memory_levels")) {
    for (std::size_t i = 0; i < r.array("memory_levels").size(); ++i) {
      JsonReader m = r.element("memory_levels", i);
      d.memory_levels.push_back({m.string("name"), m.quantity_or("size_bytes", 0), m.quantity_or("line_bytes", 0),
                                 static_cast<int>(m.integer_or("shared_by_cores", 1)),
                                 static_cast<int>(m.integer_or("instances", 1))});
    }
  }
  if (r.has("properties")) d.properties = r.object("properties").raw();
  d.counters = r.string_or("counters", "unavailable");
  return d;
}

Sweep sweep_from_json(const JsonReader& r) {
  Sweep s;
  s.device = r.string("device");
  s.probe = r.string("probe");
  s.operation = r.string_or("operation", "");
  s.isa = r.string_or("isa", "");
  s.threads = static_cast<int>(r.integer_or("threads", 1));
  s.huge_pages = r.boolean_or("huge_pages", false);
  for (std::size_t i = 0; i < r.array("points").size(); ++i) {
    JsonReader p = r.element("points", i);
    s.points.push_back({p.quantity("working_set_bytes"), figure_from_json(p.object("figure"))});
  }
  return s;
}

}  // namespace

Device device_from_json(const nlohmann::json& j, std::string_view where) {
  return device_from_json(JsonReader(j, std::string(where)));
}

MachineProfile machine_profile_from_json(const json& j, std::string_view origin) {
  JsonReader r(j, std::string(origin));
  check_schema(r, kMachineSchemaName, kMachineSchemaVersion);
  MachineProfile p;
  p.rafter_version = r.string("rafter_version");
  p.timestamp = r.string("timestamp");
  p.host = r.string_or("host", "");
  for (std::size_t i = 0; i < r.array("devices").size(); ++i) p.devices.push_back(device_from_json(r.element("devices", i)));
  for (std::size_t i = 0; i < r.array("ceilings").size(); ++i) {
    JsonReader c = r.element("ceilings", i);
    p.ceilings.push_back(ceiling_from_json(c));
    if (!p.find_device(p.ceilings.back().device))
      c.fail("device", fmt::format("'{}' is not among the profile's devices", p.ceilings.back().device));
  }
  if (r.has("sweeps"))
    for (std::size_t i = 0; i < r.array("sweeps").size(); ++i) p.sweeps.push_back(sweep_from_json(r.element("sweeps", i)));
  if (r.has("topology")) p.topology = j.at("topology");
  if (r.has("conditions")) p.conditions = j.at("conditions");
  p.interrupted = r.string_or("interrupted", "");
  return p;
}

}  // namespace rafter
