// Label de-collision: separating-axis overlap test and a greedy candidate placer.
#include "rafter/roofline/labels.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace rafter::roofline {

namespace {

struct Vec {
  double x, y;
};

std::vector<Vec> corners(const OrientedBox& b) {
  double a = b.angle_deg * M_PI / 180, c = std::cos(a), s = std::sin(a);
  std::vector<Vec> out;
  for (auto [sx, sy] : {std::pair{-1, -1}, {1, -1}, {1, 1}, {-1, 1}})
    out.push_back({b.cx + sx * b.hw * c - sy * b.hh * s, b.cy + sx * b.hw * s + sy * b.hh * c});
  return out;
}

bool separated_on(const std::vector<Vec>& pa, const std::vector<Vec>& pb, Vec axis) {
  auto project = [&](const std::vector<Vec>& p) {
    double lo = 1e300, hi = -1e300;
    for (auto v : p) {
      double d = v.x * axis.x + v.y * axis.y;
      lo = std::min(lo, d);
      hi = std::max(hi, d);
    }
    return std::pair{lo, hi};
  };
  auto [alo, ahi] = project(pa);
  auto [blo, bhi] = project(pb);
  return ahi <= blo + 1e-9 || bhi <= alo + 1e-9;
}

}  // namespace

bool overlaps(const OrientedBox& a, const OrientedBox& b) {
  auto pa = corners(a), pb = corners(b);
  for (const OrientedBox* box : {&a, &b}) {
    double r = box->angle_deg * M_PI / 180;
    for (Vec axis : {Vec{std::cos(r), std::sin(r)}, Vec{-std::sin(r), std::cos(r)}})
      if (separated_on(pa, pb, axis)) return false;
  }
  return true;
}

LabelPlacer::LabelPlacer(double x0, double y0, double x1, double y1) : x0_(x0), y0_(y0), x1_(x1), y1_(y1) {}

void LabelPlacer::add_obstacle(const OrientedBox& box, bool is_label) {
  (is_label ? labels_ : points_).push_back(box);
}

int LabelPlacer::add_line(double x1, double y1, double x2, double y2) {
  double len = std::hypot(x2 - x1, y2 - y1);
  lines_.push_back({(x1 + x2) / 2, (y1 + y2) / 2, len / 2, 1.0, std::atan2(y2 - y1, x2 - x1) * 180 / M_PI});
  return static_cast<int>(lines_.size()) - 1;
}

double LabelPlacer::cost(const OrientedBox& b, int own_line) const {
  double c = 0;
  for (const auto& l : labels_) c += overlaps(b, l) ? 100 : 0;
  for (std::size_t i = 0; i < lines_.size(); ++i)
    if (static_cast<int>(i) != own_line && overlaps(b, lines_[i])) c += 10;
  for (const auto& p : points_) c += overlaps(b, p) ? 1 : 0;
  for (const auto& v : corners(b))
    if (v.x < x0_ || v.x > x1_ || v.y < y0_ || v.y > y1_) c += 1000;
  return c;
}

std::size_t LabelPlacer::place(const std::vector<OrientedBox>& candidates, int own_line) {
  std::size_t best = 0;
  double best_cost = 1e300;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    double c = cost(candidates[i], own_line);
    if (c == 0) {
      best = i;
      break;
    }
    if (c < best_cost) {
      best_cost = c;
      best = i;
    }
  }
  if (!candidates.empty()) labels_.push_back(candidates[best]);
  return best;
}

std::vector<double> spread_positions(const std::vector<double>& desired, double min_gap, double lo, double hi) {
  std::vector<std::size_t> order(desired.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return desired[a] < desired[b]; });
  std::vector<double> pos(desired.size());
  double next = lo;
  for (auto i : order) {  // push forward
    pos[i] = std::max(desired[i], next);
    next = pos[i] + min_gap;
  }
  double limit = hi;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {  // pull back inside the upper bound
    pos[*it] = std::min(pos[*it], limit);
    limit = pos[*it] - min_gap;
  }
  return pos;
}

}  // namespace rafter::roofline
