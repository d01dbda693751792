// Plateau detection (see plateau.hpp).
#include "plateau.hpp"

#include <algorithm>
#include <cmath>

namespace rafter::probes::cpu {
namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<std::size_t> window(std::span<const SweepSample> points, double lo, double hi) {
  std::vector<std::size_t> idx;
  for (std::size_t i = 0; i < points.size(); ++i)
    if (points[i].working_set_bytes > lo && points[i].working_set_bytes <= hi) idx.push_back(i);
  return idx;
}

}  // namespace

std::vector<Plateau> detect_plateaus(std::span<const SweepSample> points,
                                     std::span<const LevelCapacity> levels, bool higher_is_better,
                                     double tolerance) {
  std::vector<Plateau> plateaus;
  double inner = 0;
  for (const LevelCapacity& level : levels) {
    const bool unbounded = std::isinf(level.capacity_bytes);
    const double lo = inner * (unbounded ? 4 : 2);
    const double hi = unbounded ? level.capacity_bytes : level.capacity_bytes / 2;
    std::vector<std::size_t> idx = window(points, unbounded ? lo * 0.999 : lo, hi);
    if (idx.empty()) idx = window(points, inner, level.capacity_bytes);
    inner = level.capacity_bytes;
    if (idx.empty()) continue;
    // Contention (preemption, another process in a shared cache) only ever makes a point slower,
    // so the window's best point is the reference and the plateau is what lies near it.
    std::size_t best = idx.front();
    for (std::size_t i : idx)
      if (higher_is_better ? points[i].value > points[best].value : points[i].value < points[best].value)
        best = i;
    const double reference = points[best].value;
    std::vector<std::size_t> flat;
    for (std::size_t i : idx)
      if (std::fabs(points[i].value - reference) <= tolerance * std::fabs(reference)) flat.push_back(i);
    std::vector<double> values;
    Plateau p;
    p.level = level.name;
    p.first = flat.front();
    p.last = flat.back();
    p.points = flat.size();
    p.best = best;
    for (std::size_t i : flat) values.push_back(points[i].value);
    p.median_value = median_of(values);
    plateaus.push_back(p);
  }
  return plateaus;
}

}  // namespace rafter::probes::cpu
