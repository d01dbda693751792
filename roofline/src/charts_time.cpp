// DESIGN.md's time-based roofline, drawing (a): time per call against arithmetic intensity.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "chart_common.hpp"
#include "rafter/roofline/format.hpp"

namespace rafter::roofline {

using svg::num;

namespace {

constexpr double kWidth = 1000, kLeft = 92, kTop = 64, kBottomMargin = 96;

double compute_floor(const Placement& p) {
  double t = 0;
  for (const auto& b : p.bounds)
    if (b.kind == ResourceKind::Compute && b.has_ceiling()) t = std::max(t, b.seconds);
  return t;
}

// The roof a level sets at the operator's AI there: max(compute floor, bytes_L / BW_L).
double level_roof(const Placement& p, const LevelPoint& l) {
  double t = compute_floor(p);
  if (l.bandwidth_bytes_per_second > 0) t = std::max(t, l.bytes / l.bandwidth_bytes_per_second);
  return t;
}

// The memory level whose floor is largest: the operator's roof curve is drawn for it.
const LevelPoint* tightest_level(const Placement& p) {
  const LevelPoint* best = nullptr;
  for (const auto& l : p.levels)
    if (l.bandwidth_bytes_per_second > 0 && l.ai_flops_per_byte > 0 &&
        (!best || l.bytes / l.bandwidth_bytes_per_second > best->bytes / best->bandwidth_bytes_per_second))
      best = &l;
  return best;
}

// The operators this chart draws: the largest shares of the step, at most kMaxOperators, since
// each brings a roof curve and per-level marks; the rest stay in the table and stacked chart.
constexpr std::size_t kMaxOperators = 12;

std::vector<bool> selected_operators(const RunPlacement& rp) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < rp.records.size(); ++i)
    if (detail::drawable(rp.records[i])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return rp.records[a].step_seconds > rp.records[b].step_seconds; });
  std::vector<bool> shown(rp.records.size(), false);
  for (std::size_t k = 0; k < order.size() && k < kMaxOperators; ++k) shown[order[k]] = true;
  return shown;
}

PlotFrame time_frame(const RunPlacement& rp, const std::vector<bool>& selected, double height) {
  double ai_lo = 1e300, ai_hi = 0, t_lo = 1e300, t_hi = 0;
  for (std::size_t i = 0; i < rp.records.size(); ++i) {
    const Placement& p = rp.records[i];
    if (!selected[i]) continue;
    for (const auto& l : p.levels) {
      if (!(l.ai_flops_per_byte > 0)) continue;
      ai_lo = std::min(ai_lo, l.ai_flops_per_byte);
      ai_hi = std::max(ai_hi, l.ai_flops_per_byte);
      double roof = level_roof(p, l);
      if (roof > 0) t_lo = std::min(t_lo, roof);
    }
    t_lo = std::min(t_lo, p.seconds_per_call);
    t_hi = std::max(t_hi, p.seconds_per_call);
  }
  if (rp.roofs.launch_latency_seconds) t_lo = std::min(t_lo, *rp.roofs.launch_latency_seconds);
  if (t_hi <= 0) t_lo = 1e-6, t_hi = 1e-3;
  if (ai_hi <= 0) ai_lo = 0.1, ai_hi = 100;
  PlotFrame f;
  f.left = kLeft;
  f.top = kTop;
  f.right = kWidth - detail::kPanel;
  f.bottom = height - kBottomMargin;
  f.x = svg::fit_log_scale(ai_lo, ai_hi, f.left, f.right, 2.5, 3);
  f.y = svg::fit_log_scale(t_lo, t_hi, f.bottom, f.top, 1.6, 3);
  return f;
}

// The operator's roof t(AI) = max(F/peak, F/(AI x BW)) at its tightest level, drawn around the
// operator's own points (a decade beyond them each way) so that the curves do not crowd the chart.
// Returns the curve's right end (px), where its number goes.
std::pair<double, double> draw_roof_curve(svg::Writer& w, const PlotFrame& f, const Placement& p,
                                          const LevelPoint& l, int index) {
  double ai_min = 1e300, ai_max = 0;
  for (const auto& pt : p.levels)
    if (pt.ai_flops_per_byte > 0) ai_min = std::min(ai_min, pt.ai_flops_per_byte), ai_max = std::max(ai_max, pt.ai_flops_per_byte);
  double xlo = std::max(std::pow(10.0, f.x.decade_lo), ai_min / 4), xhi = std::min(std::pow(10.0, f.x.decade_hi), ai_max * 4);
  double floor_s = compute_floor(p), bw = l.bandwidth_bytes_per_second, flops = p.total_flops;
  double knee = floor_s > 0 ? flops / (floor_s * bw) : xhi;
  std::vector<std::pair<double, double>> pts;
  for (double ai : {xlo, std::clamp(knee, xlo, xhi), xhi}) pts.push_back({f.x(ai), f.y(std::max(floor_s, flops / (ai * bw)))});
  w.polyline(pts, "#9a9a9a", 1.2, {{"class", "roof-curve"}, {"data-op", p.display_name()}, {"data-level", l.level},
                                  {"data-index", std::to_string(index)}});
  return pts.back();
}

void draw_operator(svg::Writer& w, const PlotFrame& f, const Placement& p, int index,
                   const std::vector<std::string>& levels) {
  w.open_group({{"class", "operator"}, {"data-op", p.display_name()}, {"data-index", std::to_string(index)},
                {"data-precision", p.main_class}});
  double y = f.y(p.seconds_per_call);
  std::vector<std::pair<double, double>> row;
  for (const auto& l : p.levels)
    if (l.ai_flops_per_byte > 0) row.push_back({f.x(l.ai_flops_per_byte), y});
  std::sort(row.begin(), row.end());
  if (row.size() > 1) w.polyline(row, "#7a7a7a", 1.1, {{"class", "join"}});
  for (const auto& l : p.levels) {
    if (!(l.ai_flops_per_byte > 0)) continue;
    auto pos = static_cast<std::size_t>(std::find(levels.begin(), levels.end(), l.level) - levels.begin());
    std::string colour = svg::level_colour(l.level, pos);
    double x = f.x(l.ai_flops_per_byte), roof = level_roof(p, l);
    if (roof > 0) {  // the roof this level sets here, and the distance to it
      double ry = f.y(roof);
      w.line(x, ry, x, y, colour, 1, {{"stroke-dasharray", "2 2"}, {"data-level", l.level}, {"class", "to-roof"}});
      w.line(x - 7, ry, x + 7, ry, colour, 2.4, {{"data-level", l.level}, {"class", "level-roof"}});
    }
    w.marker(svg::precision_marker(p.main_class), x, y, 9, colour, detail::hollow_marker(l),
             {{"class", "point"}, {"data-level", l.level}, {"data-precision", p.main_class},
              {"data-op", p.display_name()}, {"data-ai", fmt::format("{:g}", l.ai_flops_per_byte)},
              {"data-seconds", fmt::format("{:g}", p.seconds_per_call)}},
             fmt::format("{} at {}: {} per call; this level's roof {} (AI {} FLOP/B); bound {}, efficiency {}",
                         p.display_name(), l.level, format_seconds(p.seconds_per_call), format_seconds(roof),
                         format_intensity(l.ai_flops_per_byte), p.binding_name(), format_percent(p.efficiency)),
             p.emulated);
  }
  w.close_group();
}

struct Shown {
  int index;
  const Placement* p;
  std::pair<double, double> curve_end;  // px; (0, 0) without a roof curve
};

void draw_launch_floor(svg::Writer& w, LabelPlacer& placer, const PlotFrame& f, double seconds) {
  double y = f.y(seconds);
  std::string text = fmt::format("launch latency {}", format_seconds(seconds));
  w.line(f.left, y, f.right, y, "#C0392B", 1.6, {{"stroke-dasharray", "6 3"}, {"class", "launch-floor"}});
  placer.add_obstacle(detail::text_box(f.left + 8, y - 6, text, 12, 0, "start"), true);
  w.text(f.left + 8, y - 6, text, 12, "start",
         {{"fill", "#C0392B"}, {"stroke", "#ffffff"}, {"stroke-width", "3"}, {"paint-order", "stroke"}});
}

// Operator numbers, de-collided, beside the points or at the end of the roof curve.
void draw_operator_numbers(svg::Writer& w, LabelPlacer& placer, const PlotFrame& f, const std::vector<Shown>& shown) {
  for (const auto& s : shown) {
    std::string text = std::to_string(s.index);
    double y = f.y(s.p->seconds_per_call), lx = 1e300, rx = 0;
    for (const auto& l : s.p->levels)
      if (l.ai_flops_per_byte > 0) lx = std::min(lx, f.x(l.ai_flops_per_byte)), rx = std::max(rx, f.x(l.ai_flops_per_byte));
    std::vector<std::tuple<double, double, std::string>> cands = {{lx - 8, y + 4, "end"}, {rx + 8, y + 4, "start"},
                                                                  {lx, y - 9, "middle"}, {rx, y - 9, "middle"}};
    if (s.curve_end.first > 0) cands.insert(cands.begin() + 2, {s.curve_end.first + 3, s.curve_end.second + 4, "start"});
    std::vector<OrientedBox> boxes;
    for (const auto& [x, yy, a] : cands) boxes.push_back(detail::text_box(x, yy, text, 11, 0, a));
    const auto& [x, yy, a] = cands[placer.place(boxes)];
    w.text(x, yy, text, 11, a, {{"class", "op-index"}, {"data-op", s.p->display_name()}, {"stroke", "#ffffff"},
                                {"stroke-width", "3"}, {"paint-order", "stroke"}});
  }
}

void draw_time_legend(svg::Writer& w, double x, double y, const RunPlacement& rp, double height,
                      const std::vector<bool>& selected) {
  y = detail::draw_level_legend(w, x, y, rp.memory_levels());
  y = detail::draw_precision_legend(w, x, y, detail::marker_precisions(rp), detail::marker_key(rp));
  y = detail::legend_header(w, x, y, "Roofs");
  w.line(x, y - 4, x + 22, y - 4, "#9a9a9a", 1.2);
  w.text(x + 30, y, "operator's roof, tightest level", 11.5);
  y += 17;
  w.line(x + 4, y - 4, x + 18, y - 4, "#555555", 2.4);
  w.text(x + 30, y, "roof each level sets at the point", 11.5);
  y += 17;
  w.line(x, y - 4, x + 22, y - 4, "#C0392B", 1.6, {{"stroke-dasharray", "6 3"}});
  w.text(x + 30, y, "launch-latency floor", 11.5);
  detail::draw_operator_key(w, x, y + 24, rp, height - 30, selected);
}

}  // namespace

std::string time_roofline_svg(const RunPlacement& rp, const ChartOptions& options) {
  auto levels = rp.memory_levels();
  double height = std::clamp(kTop + 180 + 17.0 * (levels.size() + 4) + 16.0 * rp.records.size() + 60, 640.0, 1100.0);
  auto selected = selected_operators(rp);
  PlotFrame f = time_frame(rp, selected, height);
  svg::Writer w(kWidth, height);
  detail::draw_title(w, f.left,
                     options.title.empty() ? "Time-based roofline: " + detail::run_subject(rp)
                                           : options.title,
                     detail::device_subject(rp) + ". Roof t(AI) = max(F/peak, F/(AI x BW)); a point above its level's roof "
                     "is time no resource explains.");
  detail::begin_log_plot(w, f, "Arithmetic intensity (FLOP/byte)", "Time per call (s)");
  w.open_group({{"clip-path", "url(#plot-clip)"}, {"class", "operators"}});
  LabelPlacer placer(f.left, f.top, f.right, f.bottom);
  std::vector<Shown> shown;
  int index = 0;
  for (const auto& p : rp.records) {
    ++index;
    if (!selected[static_cast<std::size_t>(index - 1)]) continue;
    Shown s{index, &p, {0, 0}};
    if (const LevelPoint* l = tightest_level(p)) s.curve_end = draw_roof_curve(w, f, p, *l, index);
    for (const auto& l : p.levels)
      if (l.ai_flops_per_byte > 0) placer.add_obstacle({f.x(l.ai_flops_per_byte), f.y(p.seconds_per_call), 5, 5, 0});
    shown.push_back(s);
  }
  if (rp.roofs.launch_latency_seconds) draw_launch_floor(w, placer, f, *rp.roofs.launch_latency_seconds);
  for (const auto& s : shown) draw_operator(w, f, *s.p, s.index, levels);
  w.close_group();
  draw_operator_numbers(w, placer, f, shown);
  w.close_group();
  draw_time_legend(w, f.right + 28, f.top + 6, rp, height, selected);
  std::vector<std::string> notes;
  auto drawable_count = std::count_if(rp.records.begin(), rp.records.end(), [](const auto& p) { return detail::drawable(p); });
  auto hidden = drawable_count - std::count(selected.begin(), selected.end(), true);
  if (hidden > 0) notes.push_back(fmt::format("the {} largest operators drawn, {} smaller ones in the table", kMaxOperators, hidden));
  if (!rp.roofs.launch_latency_seconds) notes.push_back("launch latency not in the machine profile: no floor drawn");
  if (!notes.empty())
    w.text(f.left, height - 16, fmt::format("Note: {}.", fmt::join(notes, "; ")), 11.5, "start", {{"fill", "#555555"}});
  return w.finish();
}

}  // namespace rafter::roofline
