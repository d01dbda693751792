// The hierarchical roofline chart and the machine-comparison roofline (roofs only).
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "chart_common.hpp"
#include "rafter/roofline/format.hpp"

namespace rafter::roofline {

using detail::fit_text;
using svg::num;

namespace {

constexpr double kWidth = 1000, kLeft = 92, kTop = 64, kBottomMargin = 96;
using detail::drawable;
using detail::kPanel;

PlotFrame make_frame(const RunPlacement& rp, const std::vector<ComputeRoof>& compute, double height) {
  double ai_lo = 1e300, ai_hi = 0, y_lo = 1e300, y_hi = 0;
  for (const auto& p : rp.records) {
    if (!drawable(p)) continue;
    for (const auto& l : p.levels) {
      ai_lo = std::min(ai_lo, l.ai_flops_per_byte);
      ai_hi = std::max(ai_hi, l.ai_flops_per_byte);
    }
    y_lo = std::min(y_lo, p.flops_per_second);
    y_hi = std::max(y_hi, p.flops_per_second);
  }
  for (const auto& c : compute) {
    y_hi = std::max(y_hi, c.flops_per_second);
    y_lo = std::min(y_lo, c.flops_per_second / 10);
    for (const auto& m : rp.roofs.memory) {  // every ridge point inside the frame
      ai_lo = std::min(ai_lo, c.flops_per_second / m.bytes_per_second);
      ai_hi = std::max(ai_hi, c.flops_per_second / m.bytes_per_second);
    }
  }
  if (y_hi <= 0) y_hi = 1e12;
  y_lo = std::max(y_lo, y_hi * 1e-6);  // at most ~7 decades tall: lower points are clipped
  PlotFrame f;
  f.left = kLeft;
  f.top = kTop;
  f.right = kWidth - kPanel;
  f.bottom = height - kBottomMargin;
  f.x = svg::fit_log_scale(ai_lo, ai_hi, f.left, f.right, 2.5, 3);
  f.y = svg::fit_log_scale(y_lo, y_hi, f.bottom, f.top, 1.5, 3);
  return f;
}

std::string point_title(const Placement& p, const LevelPoint& l) {
  return fmt::format("{} [{} {}] at {}: AI {} FLOP/B, {} ({} bytes {}); {} per call, bound {}, efficiency {}",
                     p.display_name(), p.phase, p.precision, l.level, format_intensity(l.ai_flops_per_byte),
                     format_flops_per_second(p.flops_per_second), format_si(l.bytes, "B"), to_string(l.source),
                     format_seconds(p.seconds_per_call), p.binding_name(), format_percent(p.efficiency));
}

struct OperatorMark {
  const Placement* p;
  int index;
  std::vector<std::pair<double, double>> xy;  // per level, px
};

std::vector<OperatorMark> operator_marks(const RunPlacement& rp, const PlotFrame& f, LabelPlacer& placer) {
  std::vector<OperatorMark> marks;
  int index = 0;
  for (const auto& p : rp.records) {
    ++index;
    if (!drawable(p)) continue;
    OperatorMark m{&p, index, {}};
    for (const auto& l : p.levels) {
      double x = l.ai_flops_per_byte > 0 ? f.x(l.ai_flops_per_byte) : 0;
      m.xy.push_back({x, f.y(p.flops_per_second)});
      placer.add_obstacle({x, m.xy.back().second, 5, 5, 0});
    }
    marks.push_back(m);
  }
  return marks;
}

void draw_marks(svg::Writer& w, LabelPlacer& placer, const std::vector<OperatorMark>& marks,
                const std::vector<std::string>& levels) {
  std::string labels;
  for (const auto& m : marks) {
    const Placement& p = *m.p;
    svg::Attrs group = {{"class", "operator"}, {"data-op", p.display_name()}, {"data-index", std::to_string(m.index)},
                        {"data-precision", p.main_class}};
    w.open_group(group);
    std::vector<std::pair<double, double>> row;
    for (const auto& xy : m.xy)
      if (xy.first > 0) row.push_back(xy);
    std::sort(row.begin(), row.end());
    if (row.size() > 1) w.polyline(row, "#7a7a7a", 1.1, {{"class", "join"}});
    for (std::size_t i = 0; i < p.levels.size(); ++i) {
      const auto& l = p.levels[i];
      if (!(l.ai_flops_per_byte > 0)) continue;
      auto pos = std::find(levels.begin(), levels.end(), l.level) - levels.begin();
      w.marker(svg::precision_marker(p.main_class), m.xy[i].first, m.xy[i].second, 9,
               svg::level_colour(l.level, static_cast<std::size_t>(pos)), detail::hollow_marker(l),
               {{"class", "point"}, {"data-level", l.level}, {"data-precision", p.main_class},
                {"data-op", p.display_name()}, {"data-ai", fmt::format("{:g}", l.ai_flops_per_byte)},
                {"data-flops", fmt::format("{:g}", p.flops_per_second)}},
               point_title(p, l), p.emulated);
    }
    w.close_group();
    double lx = row.front().first, rx = row.back().first, y = row.front().second;
    std::string text = std::to_string(m.index);
    std::vector<OrientedBox> boxes = {detail::text_box(lx - 8, y + 4, text, 11, 0, "end"),
                                      detail::text_box(rx + 8, y + 4, text, 11, 0, "start"),
                                      detail::text_box(lx, y - 9, text, 11, 0, "middle"),
                                      detail::text_box(lx, y + 17, text, 11, 0, "middle"),
                                      detail::text_box(rx, y - 9, text, 11, 0, "middle")};
    static const double dx[] = {-8, 8, 0, 0, 0}, dy[] = {4, 4, -9, 17, -9};
    static const char* anchors[] = {"end", "start", "middle", "middle", "middle"};
    std::size_t k = placer.place(boxes);
    double bx = (k == 1 || k == 4) ? rx : lx;
    labels += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"{}\" class=\"op-index\" "
                          "data-op=\"{}\" stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\">{}</text>\n",
                          num(bx + dx[k]), num(y + dy[k]), anchors[k], xml_escape(p.display_name()), text);
  }
  w.raw(labels);
}

}  // namespace

std::string hierarchical_roofline_svg(const RunPlacement& rp, const ChartOptions& options) {
  auto precisions = rp.precisions();
  auto compute = detail::roofs_to_draw(rp.roofs, precisions, options.all_precisions);
  auto levels = rp.memory_levels();
  double key_rows = static_cast<double>(rp.records.size());
  double height = std::clamp(kTop + 40 + 17.0 * (levels.size() + precisions.size() + 1) + 16 * key_rows + 80, 640.0, 1100.0);
  PlotFrame f = make_frame(rp, compute, height);
  svg::Writer w(kWidth, height);
  std::string title = options.title.empty() ? "Hierarchical roofline: " + detail::run_subject(rp) : options.title;
  const detail::MarkerKey key = detail::marker_key(rp);
  std::string bytes_from = key.counted && key.analytic ? "counters and analytic model"
                           : key.counted               ? "counters"
                                                       : "analytic model";
  detail::draw_title(w, f.left, title,
                     fmt::format("{}. Ceilings: best measured, device scope. Bytes: {}. One point per level, "
                                 "joined per operator.", detail::device_subject(rp), bytes_from));
  detail::begin_log_plot(w, f, "Arithmetic intensity (FLOP/byte)", "Performance (FLOP/s)");
  LabelPlacer placer(f.left, f.top, f.right, f.bottom);
  auto marks = operator_marks(rp, f, placer);
  detail::draw_roof_set(w, placer, f, rp.roofs, compute, {});
  w.open_group({{"clip-path", "url(#plot-clip)"}, {"class", "operators"}});
  draw_marks(w, placer, marks, levels);
  w.close_group();
  w.close_group();
  double lx = f.right + 28, ly = f.top + 6;
  ly = detail::draw_level_legend(w, lx, ly, levels);
  ly = detail::draw_precision_legend(w, lx, ly, detail::marker_precisions(rp), key);
  detail::draw_operator_key(w, lx, ly, rp, height - 30);
  int untimed = rp.untimed_records, no_flops = 0;
  for (const auto& p : rp.records) no_flops += p.timed && !drawable(p);
  std::vector<std::string> missing;
  if (untimed) missing.push_back(fmt::format("{} without a measured time", untimed));
  if (no_flops) missing.push_back(fmt::format("{} without FLOPs or bytes", no_flops));
  if (rp.roofs.compute.empty() && rp.roofs.memory.empty())
    missing.push_back(fmt::format("the machine profile has no device-scope ceiling for {} (points only)", rp.roofs.device_id));
  if (!missing.empty())
    w.text(f.left, height - 16, fmt::format("Not drawn: {} (grey in the list; see the table).", fmt::join(missing, "; ")),
           11.5, "start", {{"fill", "#555555"}});
  return w.finish();
}

}  // namespace rafter::roofline
