// Side-by-side comparison of runs (matched by operator label and phase) and of machine roofs.
#include "rafter/roofline/compare.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>

namespace rafter::roofline {

RunComparison compare_runs(std::vector<RunPlacement> placements) {
  RunComparison cmp;
  cmp.columns = std::move(placements);
  std::map<std::string, std::size_t> row_of;
  for (std::size_t c = 0; c < cmp.columns.size(); ++c) {
    std::map<std::string, int> seen;  // repeats of one key within a run match in order
    for (const auto& p : cmp.columns[c].records) {
      std::string key = p.match_key();
      int n = seen[key]++;
      if (n > 0) key += fmt::format("#{}", n + 1);
      auto it = row_of.find(key);
      if (it == row_of.end()) {
        it = row_of.emplace(key, cmp.rows.size()).first;
        cmp.rows.push_back({key, p.display_name(), p.phase, std::vector<const Placement*>(cmp.columns.size())});
      }
      cmp.rows[it->second].cells[c] = &p;
    }
  }
  return cmp;
}

namespace {

CeilingRow& row_for(MachineComparison& cmp, const std::string& kind, const std::string& resource,
                    const std::string& unit) {
  for (auto& r : cmp.rows)
    if (r.kind == kind && r.resource == resource) return r;
  cmp.rows.push_back({kind, resource, unit, std::vector<double>(cmp.roofs.size(), 0.0)});
  return cmp.rows.back();
}

}  // namespace

MachineComparison compare_machines(const std::vector<std::string>& names,
                                   const std::vector<MachineProfile>& profiles, std::string_view device_id) {
  MachineComparison cmp;
  cmp.names = names;
  for (const auto& p : profiles) cmp.roofs.push_back(roofs_for(p, device_id));
  for (std::size_t i = 0; i < cmp.roofs.size(); ++i) {
    const DeviceRoofs& r = cmp.roofs[i];
    for (const auto& c : r.compute) row_for(cmp, "compute", c.precision, "FLOP/s").values[i] = c.flops_per_second;
    for (const auto& m : r.memory) row_for(cmp, "memory", m.name, "B/s").values[i] = m.bytes_per_second;
    for (const auto& l : r.links) row_for(cmp, "link", l.name, "B/s").values[i] = l.bytes_per_second;
    if (r.launch_latency_seconds) row_for(cmp, "latency", "launch", "s").values[i] = *r.launch_latency_seconds;
  }
  return cmp;
}

}  // namespace rafter::roofline
