// DESIGN.md's time-based roofline, drawing (b): the step as a list of operators, each measured
// time (per step: time x count) beside the floor every resource sets, the part its roof explains
// coloured by the binding resource and the rest shown as the gap.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "chart_common.hpp"
#include "rafter/roofline/format.hpp"

namespace rafter::roofline {

using svg::num;

namespace {

constexpr double kWidth = 1040, kNameRight = 236, kBarLeft = 246, kBarRight = 722, kTextLeft = 732;
constexpr double kMainBar = 13, kFloorBar = 4, kFloorStep = 5.5, kRowGap = 11;
constexpr const char* kGapColour = "#d4d4d4";
constexpr const char* kComputeColour = "#4d4d4d";
constexpr const char* kLinkColour = "#882255";    // apart from every memory level's colour
constexpr const char* kLaunchColour = "#C0392B";  // the launch floor's colour in the time chart

std::string resource_colour(const ResourceBound& b, const std::vector<std::string>& levels) {
  if (b.kind == ResourceKind::Compute) return kComputeColour;
  if (b.kind == ResourceKind::Link) return kLinkColour;
  if (b.kind == ResourceKind::Launch) return kLaunchColour;
  auto pos = static_cast<std::size_t>(std::find(levels.begin(), levels.end(), b.resource) - levels.begin());
  return svg::level_colour(b.resource, pos);
}

std::string resource_label(const ResourceBound& b) {
  return b.kind == ResourceKind::Compute ? svg::upper(b.resource) + " compute" : b.resource;
}

int floors_of(const Placement& p) {
  return static_cast<int>(std::count_if(p.bounds.begin(), p.bounds.end(), [](const auto& b) { return b.has_ceiling(); }));
}

double row_height(const Placement& p) { return kMainBar + 3 + floors_of(p) * kFloorStep + kRowGap; }

// The whole step as one bar of operators (own scale), each split into explained and gap.
double draw_step_bar(svg::Writer& w, const RunPlacement& rp, const std::vector<const Placement*>& order,
                     const std::vector<std::string>& levels, double y) {
  w.text(kNameRight, y + 11, "whole step", 12, "end", {{"font-weight", "bold"}});
  if (!(rp.step_seconds > 0)) {
    w.text(kBarLeft, y + 11, "no timed operator in this run", 12, "start", {{"fill", "#555555"}});
    return y + 34;
  }
  svg::LinearScale s{0, rp.step_seconds, kBarLeft, kBarRight};
  double t = 0;
  for (const Placement* p : order) {
    if (!p->timed) continue;
    double explained = std::min(p->bound_seconds, p->seconds_per_call) * p->count;
    std::string colour = p->binding ? resource_colour(*p->binding, levels) : kGapColour;
    svg::Attrs a = {{"class", "step-segment"}, {"data-op", p->display_name()}, {"stroke", "#ffffff"}, {"stroke-width", "0.6"}};
    w.rect(s(t), y, s(t + explained) - s(t), 16, colour, a);
    w.rect(s(t + explained), y, s(t + p->step_seconds) - s(t + explained), 16, kGapColour, a);
    t += p->step_seconds;
  }
  w.rect(kBarLeft, y, kBarRight - kBarLeft, 16, "none", {{"stroke", "#1a1a1a"}, {"stroke-width", "0.8"}});
  w.text(kTextLeft, y + 12, fmt::format("{} ({} on roofs, {} gap)", format_seconds(rp.step_seconds),
                                        format_percent(rp.bound_step_seconds / rp.step_seconds),
                                        format_seconds(rp.gap_step_seconds)), 11.5);
  w.text(kBarLeft, y + 30, "operators in the order below, each split into the time its roof explains and the gap",
         10.5, "start", {{"fill", "#555555"}});
  return y + 44;
}

void draw_legend(svg::Writer& w, double y, const std::vector<std::string>& levels, bool any_link, bool any_launch) {
  double x = kBarLeft;
  auto swatch = [&](const std::string& colour, const std::string& text, double h) {
    w.rect(x, y - 9 + (10 - h) / 2, 18, h, colour);
    w.text(x + 23, y, text, 11.5);
    x += 23 + svg::text_width_px(text, 11.5) + 16;
  };
  swatch(kComputeColour, "compute", 10);
  for (std::size_t i = 0; i < levels.size(); ++i) swatch(svg::level_colour(levels[i], i), levels[i], 10);
  if (any_link) swatch(kLinkColour, "link", 10);
  if (any_launch) swatch(kLaunchColour, "launch", 10);
  swatch(kGapColour, "gap (no roof explains it)", 10);
  w.text(kBarLeft, y + 17, "Thick bar: measured time per step, coloured up to its binding floor; thin bars: each resource's floor.",
         10.5, "start", {{"fill", "#555555"}});
}

void draw_row(svg::Writer& w, const Placement& p, const svg::LinearScale& s, const std::vector<std::string>& levels,
              double y) {
  std::string name = detail::fit_text(p.display_name(), 12, kNameRight - 60);
  w.open_group({{"class", "operator-row"}, {"data-op", p.display_name()}, {"data-precision", p.main_class}});
  w.text(kNameRight, y + 11, fmt::format("{} ×{:g}", name, p.count), 12, "end", {{"data-op", p.display_name()}});
  if (p.timed) {
    double explained = std::min(p.bound_seconds, p.seconds_per_call) * p.count;
    std::string colour = p.binding ? resource_colour(*p.binding, levels) : kGapColour;
    w.rect(s(0), y, s(explained) - s(0), kMainBar, colour, {{"class", "measured"}});
    w.rect(s(explained), y, s(p.step_seconds) - s(explained), kMainBar, kGapColour, {{"class", "gap"}});
    w.rect(s(0), y, s(p.step_seconds) - s(0), kMainBar, "none", {{"stroke", "#1a1a1a"}, {"stroke-width", "0.6"}});
    std::string text = p.binding ? fmt::format("{} ({})  {} bound, eff. {}", format_seconds(p.step_seconds),
                                               format_percent(p.share_of_step), p.binding_name(), format_percent(p.efficiency))
                                 : fmt::format("{} ({})  no roof", format_seconds(p.step_seconds), format_percent(p.share_of_step));
    w.text(kTextLeft, y + 11, text, 11);
  } else {
    w.text(kBarLeft + 4, y + 11, fmt::format("{}: not timed", to_string(p.status)), 11.5, "start",
           {{"fill", "#8a8a8a"}, {"font-style", "italic"}});
    w.text(kTextLeft, y + 11, p.binding ? fmt::format("floor {} ({})", format_seconds(p.bound_seconds * p.count), p.binding_name()) : "no roof",
           11, "start", {{"fill", "#8a8a8a"}});
  }
  double fy = y + kMainBar + 3;
  for (const auto& b : p.bounds) {
    if (!b.has_ceiling()) continue;
    w.rect(s(0), fy, s(b.seconds * p.count) - s(0), kFloorBar, resource_colour(b, levels),
           {{"class", "floor"}, {"data-level", b.kind == ResourceKind::Memory ? b.resource : ""},
            {"data-resource", resource_label(b)}});
    fy += kFloorStep;
  }
  w.close_group();
}

}  // namespace

std::string time_stacked_svg(const RunPlacement& rp, const ChartOptions& options) {
  auto levels = rp.memory_levels();
  std::vector<const Placement*> order;
  for (const auto& p : rp.records) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const Placement* a, const Placement* b) {
    if (a->timed != b->timed) return a->timed;
    return a->step_seconds > b->step_seconds;
  });
  double top = 64, rows_height = 0, max_s = 0;
  bool any_link = false, any_launch = false;
  for (const Placement* p : order) {
    rows_height += row_height(*p);
    max_s = std::max(max_s, p->step_seconds);
    for (const auto& b : p->bounds) {
      if (b.has_ceiling()) max_s = std::max(max_s, b.seconds * p->count);
      any_link = any_link || b.kind == ResourceKind::Link;
      any_launch = any_launch || b.kind == ResourceKind::Launch;
    }
  }
  if (!(max_s > 0)) max_s = 1e-3;
  double height = top + 44 + 40 + 40 + rows_height + 50;
  svg::Writer w(kWidth, height);
  detail::draw_title(w, 24,
                     options.title.empty() ? "Where the step's time goes: " + detail::run_subject(rp)
                                           : options.title,
                     detail::device_subject(rp) + ". Measured time x count beside the floor each resource sets (FLOPs/peak, bytes/bandwidth).");
  double y = draw_step_bar(w, rp, order, levels, top);
  draw_legend(w, y + 4, levels, any_link, any_launch);
  y += 40;
  auto ticks = svg::nice_ticks(0, max_s, 6);
  max_s = std::max(max_s, ticks.back());
  svg::LinearScale s{0, max_s, kBarLeft, kBarRight};
  double axis_y = y + 14, rows_top = axis_y + 10;
  for (double t : ticks) {
    w.line(s(t), axis_y, s(t), rows_top + rows_height, "#e3e3e3", 0.8);
    w.text(s(t), axis_y - 3, format_seconds(t), 11, "middle");
  }
  w.line(kBarLeft, axis_y, kBarRight, axis_y, "#1a1a1a", 1);
  w.text((kBarLeft + kBarRight) / 2, rows_top + rows_height + 28, "Time per step (s): time per call x count", 13, "middle");
  y = rows_top;
  for (const Placement* p : order) {
    draw_row(w, *p, s, levels, y);
    y += row_height(*p);
  }
  w.line(kBarLeft, rows_top - 4, kBarLeft, rows_top + rows_height, "#1a1a1a", 1);
  return w.finish();
}

}  // namespace rafter::roofline
