// Placement of operator records against a device's roofs (formulas in placement.hpp / DESIGN.md).
#include "rafter/roofline/placement.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "rafter/collector/ranks.hpp"
#include "rafter/roofline/format.hpp"

namespace rafter::roofline {

std::string_view to_string(ResourceKind k) {
  switch (k) {
    case ResourceKind::Compute: return "compute";
    case ResourceKind::Memory: return "memory";
    case ResourceKind::Link: return "link";
    case ResourceKind::Launch: return "launch";
  }
  return "compute";
}

std::string Placement::display_name() const { return label.empty() ? op : label; }

std::string Placement::binding_name() const {
  if (!binding) return "-";
  if (binding->kind == ResourceKind::Compute) return binding->resource + " compute";
  return binding->resource;
}

std::string Placement::match_key() const { return display_name() + "|" + phase; }

namespace {

bool has_measured_time(const OperatorRecord& r) {
  return r.time && r.time->value > 0 && (r.status == RecordStatus::Ok || r.status == RecordStatus::Invalid);
}

// FLOPs by the compute class that judges them: an emulated record's own class is replaced by the
// class of the path it really ran on.
// Counted FLOPs, where a counted pass ran, place the record; the model's stay beside them.
void collect_flops(const OperatorRecord& r, Placement& p) {
  std::string own = compute_class_of(r.precision);
  const bool counted = !r.flops_counted.empty();
  p.flops_source = counted ? Source::Counter : Source::Analytic;
  for (const auto& [name, flops] : counted ? r.flops_counted : r.flops) {
    if (!(flops > 0)) continue;
    std::string cls = compute_class_of(name);
    if (r.emulated && (cls == own || name == r.precision)) cls = p.judged_as;
    p.flops_by_class[cls] += flops;
    p.total_flops += flops;
  }
  p.model_flops = counted ? r.total_flops() : p.total_flops;
  if (counted && p.total_flops > 0 && std::abs(p.model_flops - p.total_flops) > kModelMismatch * p.total_flops)
    p.remarks.push_back(fmt::format("model/measured FLOPs {:.2f}: the analytic model {} the counted work",
                                    p.model_flops / p.total_flops,
                                    p.model_flops < p.total_flops ? "understates" : "overstates"));
}

// A counted level whose analytic figure is off by more than kModelMismatch (and the floor) gets a
// remark.
void judge_model(const LevelBytes& lb, LevelPoint& pt, Placement& p) {
  pt.model_over_measured = model_over_measured(lb);
  pt.model_mismatch = pt.model_over_measured && std::abs(*pt.model_over_measured - 1) > kModelMismatch &&
                      std::abs(*lb.model_bytes - lb.bytes) > kModelMismatchFloorBytes;
  if (!pt.model_mismatch) return;
  p.remarks.push_back(fmt::format("model/measured {} bytes {:.2f}: the analytic model {} this level's traffic",
                                  lb.level, *pt.model_over_measured,
                                  *pt.model_over_measured < 1 ? "misses part of" : "overstates"));
}

void add_compute_bounds(Placement& p, const DeviceRoofs& roofs) {
  for (const auto& [cls, flops] : p.flops_by_class) {
    ResourceBound b{ResourceKind::Compute, cls, flops, Source::Analytic, 0, 0};
    if (const ComputeRoof* roof = roofs.compute_for(cls)) {
      b.ceiling = roof->flops_per_second;
      b.seconds = flops / roof->flops_per_second;
    } else {
      p.remarks.push_back(fmt::format("no {} compute roof on {}", cls, roofs.device_id));
    }
    p.bounds.push_back(b);
  }
}

int level_rank(const DeviceRoofs& roofs, const std::string& level) {
  for (std::size_t i = 0; i < roofs.memory.size(); ++i)
    if (roofs.memory[i].name == level) return static_cast<int>(i);
  return static_cast<int>(roofs.memory.size());
}

// A collective's link bytes on the roofs measured for that collective, rank count and type: its
// bus bandwidth and, as a floor, its smallest size's time (the comm probes' latency).
bool add_collective_bounds(const OperatorRecord& r, const LevelBytes& lb, Placement& p,
                           const DeviceRoofs& roofs) {
  if (!collective_from_name(r.op) || !is_link_level(lb.level)) return false;
  const auto ranks = r.shape.find("ranks");
  const CollectiveRoof* c =
      ranks == r.shape.end() ? nullptr : roofs.collective_for(r.op, int(ranks->second), r.precision);
  if (!c || !(c->bus_bytes_per_second > 0)) return false;
  const std::string name = c->resource + " " + c->operation;
  p.bounds.push_back({ResourceKind::Link, name, lb.bytes, lb.source, c->bus_bytes_per_second,
                      lb.bytes / c->bus_bytes_per_second});
  if (c->latency_seconds)
    p.bounds.push_back({ResourceKind::Link, name + " latency", 1, Source::Measured, 1 / *c->latency_seconds,
                        *c->latency_seconds});
  if (c->type != r.precision)
    p.remarks.push_back(
        fmt::format("judged on {}'s {} roofs (no {} ones measured)", name, c->type, r.precision));
  // A message past the sweep's largest: NCCL's bus bandwidth may still rise beyond it (2 H100 ranks'
  // all_gather: 261 GB/s at 1 GiB, 295 at 8 GiB), so the roof may understate what the step can reach.
  const auto elements = r.shape.find("elements");
  const double width = r.precision == "fp32" ? 4 : r.precision == "bf16" || r.precision == "fp16" ? 2 : 0;
  if (elements != r.shape.end() && width > 0 && c->largest_bytes > 0 &&
      double(elements->second) * width > c->largest_bytes * 1.0001)
    p.remarks.push_back(
        fmt::format("its {} message is larger than the largest {} was measured at ({}): the "
                    "roof may understate the bus bandwidth there (probe with more memory free)",
                    bytes_label(double(elements->second) * width), name, bytes_label(c->largest_bytes)));
  return true;
}

void add_traffic_bounds(const OperatorRecord& r, Placement& p, const DeviceRoofs& roofs) {
  const ComputeRoof* peak = roofs.compute_for(p.judged_as);
  for (const auto& lb : r.bytes) {
    if (!(lb.bytes > 0)) continue;
    if (add_collective_bounds(r, lb, p, roofs)) continue;
    if (const BandwidthRoof* link = roofs.link_for(lb.level)) {
      p.bounds.push_back({ResourceKind::Link, lb.level, lb.bytes, lb.source, link->bytes_per_second,
                          lb.bytes / link->bytes_per_second});
      continue;
    }
    const BandwidthRoof* roof = roofs.memory_for(lb.level);
    ResourceBound b{ResourceKind::Memory, lb.level, lb.bytes, lb.source, 0, 0};
    LevelPoint pt{lb.level, lb.bytes, lb.source, p.total_flops / lb.bytes, 0, 0, std::nullopt};
    judge_model(lb, pt, p);
    if (roof) {
      // The roof of the record's own read:write mix (a read-heavy stream is not judged on the
      // write-only figure, nor a copy on the read-only one) and, below the operator-sized
      // streams' bytes, of its size.
      const double bandwidth = roof->at(r.write_fraction, lb.bytes);
      b.ceiling = pt.bandwidth_bytes_per_second = bandwidth;
      b.seconds = lb.bytes / bandwidth;
      double memory_roof = pt.ai_flops_per_byte * bandwidth;
      pt.roof_flops_per_second = peak ? std::min(peak->flops_per_second, memory_roof) : memory_roof;
    } else {
      p.remarks.push_back(fmt::format("no bandwidth roof for {} on {}", lb.level, roofs.device_id));
    }
    p.bounds.push_back(b);
    p.levels.push_back(pt);
  }
  std::stable_sort(p.levels.begin(), p.levels.end(), [&](const LevelPoint& a, const LevelPoint& b) {
    return level_rank(roofs, a.level) < level_rank(roofs, b.level);
  });
}

void judge_time(const OperatorRecord& r, Placement& p) {
  p.timed = true;
  p.seconds_per_call = r.time->value;
  p.min_seconds_per_call = r.time->stats.samples ? r.time->stats.min : r.time->value;
  p.max_seconds_per_call = r.time->stats.samples ? r.time->stats.max : r.time->value;
  p.step_seconds = p.seconds_per_call * p.count;
  for (const auto& [cls, flops] : p.flops_by_class) p.flops_per_second_by_class[cls] = flops / p.seconds_per_call;
  p.flops_per_second = p.total_flops / p.seconds_per_call;
  if (!p.binding) return;
  p.efficiency = p.bound_seconds / p.seconds_per_call;
  p.gap_seconds = p.seconds_per_call - p.bound_seconds;
  if (p.efficiency > 1.0 + 1e-9)
    p.remarks.push_back(fmt::format(
        "measured {:.0f}% of its {} floor: faster than the roof allows ({} bytes or the ceiling overstate)",
        100.0 * p.seconds_per_call / p.bound_seconds, p.binding_name(),
        to_string(p.binding->amount_source)));
}

}  // namespace

Placement place_record(const OperatorRecord& r, const DeviceRoofs& roofs) {
  Placement p;
  p.op = r.op;
  p.label = r.label;
  p.phase = r.phase;
  p.backend = r.backend;
  p.device = r.device;
  p.precision = r.precision;
  p.shape = r.shape;
  p.emulated = r.emulated;
  p.emulated_via = r.emulated_via;
  p.status = r.status;
  p.note = r.note;
  p.count = r.count;
  p.judged_as = compute_class_of(r.emulated && !r.emulated_via.empty() ? r.emulated_via : r.precision);
  if (r.emulated)
    p.remarks.push_back(r.emulated_via.empty()
                            ? fmt::format("emulated {} (path not recorded): judged on {} roofs", r.precision,
                                          p.judged_as)
                            : fmt::format("emulated: {} ran via {}, judged on {} roofs", r.precision,
                                          r.emulated_via, p.judged_as));
  if (r.status == RecordStatus::Invalid) p.remarks.push_back("correctness check failed: time shown, result wrong");
  collect_flops(r, p);
  p.main_class = p.judged_as;
  double most = 0;
  for (const auto& [cls, flops] : p.flops_by_class)
    if (flops > most) most = flops, p.main_class = cls;
  add_compute_bounds(p, roofs);
  add_traffic_bounds(r, p, roofs);
  // A GPU operator is at least one kernel launch: the launch floor bounds it like any resource. (A
  // CPU operator small enough to stay on the calling thread never dispatches, so there the floor
  // only names records near it, below.)
  if (roofs.launch_latency_seconds && roofs.device_kind == "cuda")
    p.bounds.push_back({ResourceKind::Launch, "launch", 1, Source::Measured, 1 / *roofs.launch_latency_seconds,
                        *roofs.launch_latency_seconds});
  for (const auto& b : p.bounds)
    if (b.has_ceiling() && (!p.binding || b.seconds > p.binding->seconds)) p.binding = b;
  if (p.binding) p.bound_seconds = p.binding->seconds;
  if (has_measured_time(r)) judge_time(r, p);
  // On a CPU a record faster than the floor stayed on the calling thread: the floor is not its.
  const bool under_floor = roofs.launch_latency_seconds && p.seconds_per_call < *roofs.launch_latency_seconds;
  if (p.timed && roofs.launch_latency_seconds &&
      p.seconds_per_call < kLaunchBoundFactor * *roofs.launch_latency_seconds &&
      !(under_floor && roofs.device_kind != "cuda"))
    p.remarks.push_back(fmt::format("{} per call is within {}x of the launch floor ({}): launch-bound",
                                    format_seconds(p.seconds_per_call), kLaunchBoundFactor,
                                    format_seconds(*roofs.launch_latency_seconds)));
  return p;
}

std::vector<std::string> RunPlacement::memory_levels() const {
  std::vector<std::string> levels;
  for (const auto& m : roofs.memory) levels.push_back(m.name);
  for (const auto& p : records)
    for (const auto& l : p.levels)
      if (std::find(levels.begin(), levels.end(), l.level) == levels.end()) levels.push_back(l.level);
  return levels;
}

std::vector<std::string> RunPlacement::precisions() const {
  std::vector<std::string> out;
  for (const auto& p : records)
    for (const auto& [cls, flops] : p.flops_by_class)
      if (std::find(out.begin(), out.end(), cls) == out.end()) out.push_back(cls);
  return out;
}

RunPlacement place_run(const Run& run, const MachineProfile& machine, std::string run_name) {
  RunPlacement rp;
  rp.run_name = std::move(run_name);
  rp.run_host = run.host;
  rp.run_timestamp = run.timestamp;
  rp.interrupted = run.interrupted;
  rp.suite = run.suite;
  std::string device = run.device.id;
  if (device.empty() && !run.records.empty()) device = run.records.front().device;
  if (device.empty() && !machine.devices.empty()) device = machine.devices.front().id;
  // A training step lives at the power limit: judged on sustained compute roofs where measured.
  const bool sustained = run.suite.is_object() && run.suite.value("phase", std::string()) == "train";
  rp.roofs = roofs_for(machine, device, sustained);
  std::map<std::string, DeviceRoofs> other;
  for (const auto& r : run.records) {
    const DeviceRoofs* roofs = &rp.roofs;
    if (!r.device.empty() && r.device != device) {
      auto it = other.find(r.device);
      if (it == other.end()) it = other.emplace(r.device, roofs_for(machine, r.device, sustained)).first;
      roofs = &it->second;
    }
    rp.records.push_back(place_record(r, *roofs));
    const double flops = r.total_flops() * r.count, bytes = r.outer_bytes() * r.count;
    rp.step_flops += flops;
    rp.step_outer_bytes += bytes;
    if (rp.records.back().timed) {
      rp.timed_step_flops += flops;
      rp.timed_step_outer_bytes += bytes;
    }
  }
  for (const auto& p : rp.records) {
    if (!p.timed) {
      ++rp.untimed_records;
      continue;
    }
    ++rp.timed_records;
    rp.step_seconds += p.step_seconds;
    rp.bound_step_seconds += p.bound_seconds * p.count;
    rp.step_seconds_by_binding[p.binding_name()] += p.step_seconds;
    rp.step_seconds_by_work[work_kind(p.op)] += p.step_seconds;
  }
  rp.gap_step_seconds = rp.step_seconds - rp.bound_step_seconds;
  rp.overlap = overlap_totals(run);
  for (auto& p : rp.records)
    if (p.timed && rp.step_seconds > 0) p.share_of_step = p.step_seconds / rp.step_seconds;
  return rp;
}

const std::vector<std::string>& work_kinds() {
  static const std::vector<std::string> kinds = {"GEMM", "attention", "quantization", "communication",
                                                 "memory-bound"};
  return kinds;
}

std::string work_kind(std::string_view op) {
  if (op == "gemm") return "GEMM";
  if (op.starts_with("attention_") || op.starts_with("gla_")) return "attention";
  if (op == "quantize" || op == "dequantize" || op == "hot_channel_patch") return "quantization";
  if (collective_from_name(op)) return "communication";
  return "memory-bound";
}

}  // namespace rafter::roofline
