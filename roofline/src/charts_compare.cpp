// Comparison charts: machines' roofs overlaid, and runs' per-operator step times side by side.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "chart_common.hpp"
#include "rafter/roofline/format.hpp"

namespace rafter::roofline {

using svg::num;

namespace {

const char* dash_for(std::size_t i) {
  static const char* dashes[] = {"", "8 4", "2 3", "10 3 2 3"};
  return dashes[i % 4];
}

std::string tag_for(std::size_t i) { return std::string(1, static_cast<char>('A' + i)); }

PlotFrame machines_frame(const MachineComparison& cmp, double width, double height) {
  double ai_lo = 1e300, ai_hi = 0, y_lo = 1e300, y_hi = 0;
  for (const auto& r : cmp.roofs)
    for (const auto& c : r.compute) {
      y_hi = std::max(y_hi, c.flops_per_second);
      y_lo = std::min(y_lo, c.flops_per_second / 100);
      for (const auto& m : r.memory) {
        ai_lo = std::min(ai_lo, c.flops_per_second / m.bytes_per_second);
        ai_hi = std::max(ai_hi, c.flops_per_second / m.bytes_per_second);
      }
    }
  PlotFrame f;
  f.left = 92;
  f.top = 64;
  f.right = width - detail::kPanel - 190;  // room for the ceiling-label ladder
  f.bottom = height - 80;
  f.x = svg::fit_log_scale(ai_lo, ai_hi, f.left, f.right, 4, 3);
  f.y = svg::fit_log_scale(y_lo, y_hi, f.bottom, f.top, 1.25, 3);
  return f;
}

}  // namespace

std::string machine_comparison_svg(const MachineComparison& cmp, const ChartOptions& options) {
  const double width = 1180, height = 660;
  PlotFrame f = machines_frame(cmp, width, height);
  svg::Writer w(width, height);
  std::string names;
  for (std::size_t i = 0; i < cmp.names.size(); ++i) names += (i ? " vs " : "") + cmp.names[i];
  detail::draw_title(w, f.left, options.title.empty() ? "Roofs compared: " + names : options.title,
                     "Best measured device-scope ceilings of each machine; line style tells the machines apart.");
  detail::begin_log_plot(w, f, "Arithmetic intensity (FLOP/byte)", "Performance (FLOP/s)");
  LabelPlacer placer(f.left, f.top, f.right, f.bottom);
  detail::RoofDrawing roofs;
  for (std::size_t i = 0; i < cmp.roofs.size(); ++i)
    roofs.add_lines(w, placer, f, cmp.roofs[i], cmp.roofs[i].compute, {tag_for(i), dash_for(i)});
  roofs.add_labels(w, placer, true);
  w.close_group();
  double x = width - detail::kPanel + 16, y = detail::legend_header(w, x, f.top + 6, "Machines (line style)");
  for (std::size_t i = 0; i < cmp.roofs.size(); ++i) {
    svg::Attrs a;
    if (*dash_for(i)) a.push_back({"stroke-dasharray", dash_for(i)});
    w.line(x, y - 4, x + 30, y - 4, "#303030", 1.8, a);
    w.text(x + 38, y, detail::fit_text(tag_for(i) + ": " + cmp.names[i], 12, detail::kPanel - 60), 12);
    w.text(x + 38, y + 15, detail::fit_text(cmp.roofs[i].host + ", " + cmp.roofs[i].device_name, 10.5, detail::kPanel - 60),
           10.5, "start", {{"fill", "#555555"}});
    y += 36;
  }
  std::vector<std::string> levels;
  for (const auto& r : cmp.roofs)
    for (const auto& m : r.memory)
      if (std::find(levels.begin(), levels.end(), m.name) == levels.end()) levels.push_back(m.name);
  detail::draw_level_legend(w, x, y + 8, levels);
  return w.finish();
}

namespace {

const char* work_colour(const std::string& kind) {
  if (kind == "GEMM") return "#4c72b0";
  if (kind == "attention") return "#dd8452";
  if (kind == "quantization") return "#c44e52";
  if (kind == "communication") return "#8172b3";
  return "#55a868";  // memory-bound
}

constexpr double kWorkBarH = 14, kWorkBarGap = 6;

// Height of draw_work_bars' section: a title line, one bar per run, the legend.
double work_bars_height(std::size_t runs) { return 10 + double(runs) * (kWorkBarH + kWorkBarGap) + 22; }

// One stacked bar per run at `y`: its step time by kind of work (work_kinds() order), on a common
// scale from bar_left to bar_right; a legend of the kinds below.
void draw_work_bars(svg::Writer& w, const RunComparison& cmp, double y, double bar_left, double bar_right) {
  double max_step = 0;
  for (const auto& rp : cmp.columns) max_step = std::max(max_step, rp.step_seconds);
  if (!(max_step > 0)) return;
  w.text(bar_left, y, "Step time by kind of work (measured time x count of the timed records)", 12.5);
  y += 10;
  const svg::LinearScale s{0, max_step, bar_left, bar_right};
  for (std::size_t c = 0; c < cmp.columns.size(); ++c) {
    const RunPlacement& rp = cmp.columns[c];
    w.text(bar_left - 8, y + kWorkBarH - 3, fmt::format("[{}]", tag_for(c)), 11, "end");
    double at = 0;
    for (const auto& kind : work_kinds()) {
      auto it = rp.step_seconds_by_work.find(kind);
      if (it == rp.step_seconds_by_work.end() || !(it->second > 0)) continue;
      w.rect(s(at), y, s(at + it->second) - s(at), kWorkBarH, work_colour(kind),
             {{"class", "work-slice"}, {"data-run", tag_for(c)}, {"data-kind", kind}});
      const std::string label = fmt::format("{} {}", kind, format_percent(it->second / rp.step_seconds));
      if (s(at + it->second) - s(at) > 7.0 * double(label.size()))
        w.text((s(at) + s(at + it->second)) / 2, y + kWorkBarH - 3, label, 10, "middle",
               {{"fill", "#ffffff"}});
      at += it->second;
    }
    w.text(s(at) + 4, y + kWorkBarH - 3, format_seconds(rp.step_seconds), 10.5, "start",
           {{"fill", "#333333"}});
    y += kWorkBarH + kWorkBarGap;
  }
  double x = bar_left;
  for (const auto& kind : work_kinds()) {
    w.rect(x, y + 2, 12, 10, work_colour(kind));
    w.text(x + 16, y + 11, kind, 10.5);
    x += 30 + 6.5 * double(kind.size());
  }
}

}  // namespace

std::string run_comparison_svg(const RunComparison& cmp, const ChartOptions& options) {
  const double width = 1040, name_right = 236, bar_left = 246, bar_right = 800;
  const double bar_h = 10, row_gap = 12;
  std::size_t n = cmp.columns.size();
  double row_h = n * (bar_h + 2) + row_gap;
  double top = 64, legend_h = 20.0 * n + 12;
  const double work_top = top + legend_h + 8;
  double rows_top = work_top + work_bars_height(n) + 36;
  double height = rows_top + row_h * cmp.rows.size() + 56;
  svg::Writer w(width, height);
  detail::draw_title(w, 24, options.title.empty() ? "Runs compared: time per step by operator" : options.title,
                     "Bar: measured time x count; black tick: that run's roof floor; grey italic: not timed or absent.");
  double y = top;
  for (std::size_t c = 0; c < n; ++c) {
    const auto& rp = cmp.columns[c];
    w.rect(bar_left, y - 9, 18, 10, svg::series_colour(c));
    w.text(bar_left + 24, y, fmt::format("[{}] {} on {} ({}): step {}, floor {}", tag_for(c), rp.run_name, rp.roofs.host,
                                         rp.roofs.device_name, format_seconds(rp.step_seconds), format_seconds(rp.bound_step_seconds)),
           11.5);
    y += 20;
  }
  draw_work_bars(w, cmp, work_top, bar_left, bar_right);
  double max_s = 0;
  for (const auto& row : cmp.rows)
    for (const Placement* p : row.cells)
      if (p) max_s = std::max({max_s, p->step_seconds, p->bound_seconds * p->count});
  auto ticks = svg::nice_ticks(0, max_s > 0 ? max_s : 1e-3, 6);
  svg::LinearScale s{0, std::max(max_s, ticks.back()), bar_left, bar_right};
  double axis_y = rows_top - 12;
  for (double t : ticks) {
    w.line(s(t), axis_y, s(t), rows_top + row_h * cmp.rows.size(), "#e3e3e3", 0.8);
    w.text(s(t), axis_y - 4, format_seconds(t), 11, "middle");
  }
  w.line(bar_left, axis_y, bar_right, axis_y, "#1a1a1a", 1);
  y = rows_top;
  for (const auto& row : cmp.rows) {
    w.open_group({{"class", "operator-row"}, {"data-op", row.name}});
    w.text(name_right, y + n * (bar_h + 2) / 2 + 4, detail::fit_text(row.name, 12, name_right - 20), 12, "end");
    for (std::size_t c = 0; c < n; ++c) {
      const Placement* p = row.cells[c];
      double by = y + c * (bar_h + 2);
      if (p && p->timed) {
        w.rect(s(0), by, s(p->step_seconds) - s(0), bar_h, svg::series_colour(c),
               {{"class", "measured"}, {"data-run", tag_for(c)}});
        if (p->binding) w.line(s(p->bound_seconds * p->count), by - 1, s(p->bound_seconds * p->count), by + bar_h + 1, "#000000", 2);
        w.text(s(p->step_seconds) + 4, by + bar_h - 1, fmt::format("{} {}", p->precision, format_seconds(p->step_seconds)),
               9.5, "start", {{"fill", "#333333"}});
      } else {
        w.text(s(0) + 4, by + bar_h - 1, fmt::format("[{}] {}", tag_for(c), p ? std::string(to_string(p->status)) : "absent"),
               9.5, "start", {{"fill", "#8a8a8a"}, {"font-style", "italic"}});
      }
    }
    w.close_group();
    y += row_h;
  }
  w.line(bar_left, rows_top - 4, bar_left, y, "#1a1a1a", 1);
  w.text((bar_left + bar_right) / 2, y + 30, "Time per step (s): time per call x count", 13, "middle");
  return w.finish();
}

}  // namespace rafter::roofline
