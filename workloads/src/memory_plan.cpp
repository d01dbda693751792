// Planning an instance's device memory (see memory_plan.hpp).
#include "rafter/workloads/memory_plan.hpp"

#include <fmt/format.h>

#include <cmath>

#include "rafter/workloads/backend.hpp"

namespace rafter::workloads {
namespace {

// Slices are whole multiples of this (when at least twice as large): kernels vectorize over the
// streaming parameter, and a round slice keeps their fast paths.
constexpr std::int64_t kSliceAlign = 256;
// The slice is sized to this share of the free memory: allocations round up, and the driver and
// libraries take a little as they go.
constexpr double kFreeShare = 0.9;

double needed_bytes(const OperatorDef& op, const OpInstance& inst, const ExtraBytesFn& extra,
                    const std::vector<MemoryLevel>& levels) {
  const double footprint = op.footprint_bytes(inst, op.cost(inst, levels));
  return footprint + (extra ? extra(inst, footprint) : 0.0);
}

std::int64_t aligned_down(std::int64_t v) { return v >= 2 * kSliceAlign ? v / kSliceAlign * kSliceAlign : v; }

}  // namespace

std::string format_gib(double bytes) { return fmt::format("{:.3g} GiB", bytes / double(1ull << 30)); }

MemoryPlan plan_memory(const OperatorDef& op, const OpInstance& inst, double free_bytes, const ExtraBytesFn& extra,
                       const std::vector<MemoryLevel>& levels) {
  MemoryPlan plan;
  plan.run = inst;
  plan.free_bytes = free_bytes > 0 ? free_bytes : 0;
  plan.needed_bytes = needed_bytes(op, inst, extra, levels);
  if (free_bytes <= 0 || plan.needed_bytes <= free_bytes) return plan;

  const std::string axis = op.slice_axis(inst);
  const std::int64_t full = axis.empty() ? 0 : shape_value(inst, axis);
  const std::string label = inst.label.empty() ? inst.op : inst.label;
  if (full > 1) {
    const double budget = kFreeShare * free_bytes;
    OpInstance slice = inst;
    std::int64_t s = aligned_down(std::min<std::int64_t>(
        full - 1, static_cast<std::int64_t>(std::floor(double(full) * budget / plan.needed_bytes))));
    // Needs are near-linear in the axis but carry fixed parts (weights, workspaces): shrink until it fits.
    for (; s >= 1; s = aligned_down(s * 9 / 10)) {
      slice.shape[axis] = s;
      if (needed_bytes(op, slice, extra, levels) <= budget) break;
      if (s == 1) s = 0;
    }
    if (s >= 1) {
      const double full_bytes = op.cost(inst, levels).compulsory_bytes;
      const double slice_bytes = op.cost(slice, levels).compulsory_bytes;
      plan.verdict = MemoryPlan::Verdict::Sliced;
      plan.run = slice;
      plan.scaled = ScaledFrom{axis, s, full, slice_bytes > 0 ? full_bytes / slice_bytes : double(full) / double(s),
                               plan.needed_bytes, free_bytes};
      plan.note = fmt::format("{} needs {} of device memory, {} free: timed on {}={} of {} and scaled by {:.4g}x", label,
                              format_gib(plan.needed_bytes), format_gib(free_bytes), axis, s, full,
                              plan.scaled->factor);
      return plan;
    }
  }
  plan.verdict = MemoryPlan::Verdict::DoesNotFit;
  plan.note = fmt::format("{} {} [{}] needs {} of device memory; {} free{}", label, inst.precision,
                          format_shape(inst.shape), format_gib(plan.needed_bytes), format_gib(free_bytes),
                          axis.empty() ? "" : " (no slice fits either)");
  return plan;
}

MemoryPlan plan_memory_on(const Backend& backend, const OpInstance& inst, double free_bytes,
                          const std::vector<MemoryLevel>& levels) {
  const OperatorDef& op = OperatorRegistry::instance().get(inst.op);
  return plan_memory(
      op, normalize_instance(op, inst), free_bytes,
      [&backend](const OpInstance& i, double footprint) { return backend.extra_memory_bytes(i, footprint); }, levels);
}

}  // namespace rafter::workloads
