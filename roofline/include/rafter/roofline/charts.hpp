// The charts, as SVG text: the hierarchical roofline, the time-based roofline (time against
// arithmetic intensity, and per-operator measured time stacked beside each resource's floor), and
// the comparison charts. PNG comes from png.hpp, the HTML page from html.hpp.
#pragma once
#include <string>

#include "rafter/roofline/compare.hpp"
#include "rafter/roofline/placement.hpp"
#include "rafter/roofline/svg.hpp"

namespace rafter::roofline {

struct ChartOptions {
  std::string title;            // empty: a title naming the device and the run
  bool all_precisions = false;  // draw every compute roof of the device, not only those the run uses
};

// Log-log FLOP/s against FLOP/byte: one compute ceiling per precision, one bandwidth ceiling per
// memory level, each operator drawn once per level (colour by level, marker by precision) and
// its points joined. Elements carry data-* attributes (op, level, precision) for the HTML page.
std::string hierarchical_roofline_svg(const RunPlacement& rp, const ChartOptions& options = {});

// DESIGN.md drawing (a): time per call against AI; each operator's points per level, the roof
// each level sets at that point, the operator's roof curve t(AI) = max(F/peak, F/(AI x BW)) at its
// tightest level, and the launch-latency floor.
std::string time_roofline_svg(const RunPlacement& rp, const ChartOptions& options = {});

// DESIGN.md drawing (b): the step as a stacked bar of operators, then one row per operator with
// its measured time (split into the part its roof explains and the gap) beside each resource's floor.
std::string time_stacked_svg(const RunPlacement& rp, const ChartOptions& options = {});

// Two or more machines' roofs overlaid (solid, dashed, dotted), labelled per machine.
std::string machine_comparison_svg(const MachineComparison& cmp, const ChartOptions& options = {});

// Runs side by side: per operator, each run's step time with its floor marked.
std::string run_comparison_svg(const RunComparison& cmp, const ChartOptions& options = {});

// The plot frame of a roofline chart: the plot area in px and the two log scales. Charts write it
// on their plot group as data-plot="left top right bottom" data-x-decades="lo hi"
// data-y-decades="lo hi", so tests (and readers) can map values to coordinates.
struct PlotFrame {
  double left = 0, top = 0, right = 0, bottom = 0;
  svg::LogScale x, y;
};

}  // namespace rafter::roofline
