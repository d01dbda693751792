// Private to the chart sources: drawing roofs into a frame with de-collided labels, legends.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "rafter/roofline/charts.hpp"
#include "rafter/roofline/labels.hpp"
#include "rafter/roofline/roofs.hpp"
#include "rafter/roofline/svg.hpp"

namespace rafter::roofline::detail {

inline constexpr double kPanel = 290;  // width of the legend panel right of a plot

// Timed, with FLOPs and at least one level's AI: it has a place on a roofline chart.
bool drawable(const Placement& p);
// The marker precisions in use (main compute class of each drawable record), first-seen order.
std::vector<std::string> marker_precisions(const RunPlacement& rp);
double draw_level_legend(svg::Writer& w, double x, double y, const std::vector<std::string>& levels);
// Which marker styles a chart uses: solid (counted bytes), hollow (analytic bytes), dashed outline
// (emulated precision).
struct MarkerKey {
  bool counted = false, analytic = false, emulated = false;
};
MarkerKey marker_key(const RunPlacement& rp);
// Hollow unless the level's bytes were counted; dashed for an emulated record.
inline bool hollow_marker(const LevelPoint& l) { return l.source != Source::Counter; }
double draw_precision_legend(svg::Writer& w, double x, double y, const std::vector<std::string>& precisions,
                             const MarkerKey& key);
// Numbered operator list (the numbers that label points), share of step on the right.
// `drawn` (optional, one flag per record) overrides which records count as drawn (black, not grey).
void draw_operator_key(svg::Writer& w, double x, double y, const RunPlacement& rp, double max_y,
                       const std::vector<bool>& drawn = {});

struct RoofStyle {
  std::string tag;   // prefix of labels ("A: "), empty for a single machine
  std::string dash;  // stroke-dasharray, empty = solid
};

// The compute roofs to draw: those of `precisions` (all of them when empty or `all`).
std::vector<ComputeRoof> roofs_to_draw(const DeviceRoofs& roofs, const std::vector<std::string>& precisions, bool all);

// Several machines' roofs in one chart: every set's lines first (so that each label avoids every
// line), then all labels.
class RoofDrawing {
 public:
  RoofDrawing();
  ~RoofDrawing();
  void add_lines(svg::Writer& w, LabelPlacer& placer, const PlotFrame& f, const DeviceRoofs& roofs,
                 const std::vector<ComputeRoof>& compute, const RoofStyle& style);
  // ladder: compute labels outside the plot's right edge, spread apart, with leader lines (for
  // crowded charts such as machine comparisons); else inside, next to their lines.
  void add_labels(svg::Writer& w, LabelPlacer& placer, bool ladder = false);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Draws bandwidth ceilings (diagonals up to the top compute roof) and compute ceilings
// (horizontals from the fastest level's diagonal), labelled with values, labels placed by `placer`.
void draw_roof_set(svg::Writer& w, LabelPlacer& placer, const PlotFrame& f, const DeviceRoofs& roofs,
                   const std::vector<ComputeRoof>& compute, const RoofStyle& style);

// Opens the plot group (recording the frame, see PlotFrame), defines its clip path, and draws the
// border and both log axes. The caller closes the group.
void begin_log_plot(svg::Writer& w, const PlotFrame& f, const std::string& x_title, const std::string& y_title);

// The plot-area group attributes that record the frame (see PlotFrame).
svg::Attrs frame_attrs(const PlotFrame& f);

// "<model> <phase> <precision>, <run name>" and "<device> on <host>": what a run's chart shows.
std::string run_subject(const RunPlacement& rp);
std::string device_subject(const RunPlacement& rp);

// A chart title and a grey subtitle at the top left, each shortened to fit the chart's width.
void draw_title(svg::Writer& w, double x, const std::string& title, const std::string& subtitle);

// A legend block: header then rows of (swatch drawer, text); returns the y below it.
double legend_header(svg::Writer& w, double x, double y, const std::string& text);

// Text shortened to fit `max_px` at `size_px`, with an ellipsis.
std::string fit_text(const std::string& text, double size_px, double max_px);

// The label box of a text starting at baseline (x, y) rotated by angle_deg, anchored start/middle/end.
OrientedBox text_box(double x, double y, const std::string& text, double size_px, double angle_deg,
                     const std::string& anchor);

}  // namespace rafter::roofline::detail
