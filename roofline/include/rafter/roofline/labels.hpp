// Label de-collision for the charts: labels are (possibly rotated) boxes; each label offers
// candidate positions in order of preference and the placer takes the first that overlaps no
// label already placed (else the one that overlaps least), also steering clear of data points.
#pragma once
#include <vector>

namespace rafter::roofline {

// A rectangle centred at (cx, cy), half-extents (hw, hh) along its own axes, turned by angle_deg.
struct OrientedBox {
  double cx = 0, cy = 0, hw = 0, hh = 0, angle_deg = 0;
};

// Separating-axis test; boxes that only touch do not overlap.
bool overlaps(const OrientedBox& a, const OrientedBox& b);

class LabelPlacer {
 public:
  // The plot area; candidates leaving it are taken only as a last resort.
  LabelPlacer(double x0, double y0, double x1, double y1);
  void add_obstacle(const OrientedBox& box, bool is_label = false);  // points count less than labels
  // A drawn line (a ceiling): crossing it costs more than covering a point, less than a label.
  // Returns its id, so that a line's own label can ignore it.
  int add_line(double x1, double y1, double x2, double y2);
  // Picks one of `candidates` (index returned) and records it as placed.
  std::size_t place(const std::vector<OrientedBox>& candidates, int own_line = -1);
  const std::vector<OrientedBox>& placed_labels() const { return labels_; }

 private:
  double cost(const OrientedBox& b, int own_line) const;
  double x0_, y0_, x1_, y1_;
  std::vector<OrientedBox> labels_, points_, lines_;
};

// One-dimensional de-collision: positions (e.g. label baselines at a chart's right edge) moved
// apart by at least `min_gap`, kept within [lo, hi] where possible, order preserved.
std::vector<double> spread_positions(const std::vector<double>& desired, double min_gap, double lo, double hi);

}  // namespace rafter::roofline
