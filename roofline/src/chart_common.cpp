// Roof drawing with de-collided labels, titles and legend helpers shared by the charts.
#include "chart_common.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <memory>

#include "rafter/roofline/format.hpp"

namespace rafter::roofline::detail {

using svg::num;

std::vector<ComputeRoof> roofs_to_draw(const DeviceRoofs& roofs, const std::vector<std::string>& precisions,
                                       bool all) {
  std::vector<ComputeRoof> out;
  for (const auto& c : roofs.compute)
    if (all || precisions.empty() || std::find(precisions.begin(), precisions.end(), c.precision) != precisions.end())
      out.push_back(c);
  if (out.empty()) out = roofs.compute;  // the run uses no precision the machine has: show them all
  return out;
}

svg::Attrs frame_attrs(const PlotFrame& f) {
  return {{"class", "plot"},
          {"data-plot", fmt::format("{} {} {} {}", num(f.left), num(f.top), num(f.right), num(f.bottom))},
          {"data-x-decades", fmt::format("{} {}", f.x.decade_lo, f.x.decade_hi)},
          {"data-y-decades", fmt::format("{} {}", f.y.decade_lo, f.y.decade_hi)}};
}

void begin_log_plot(svg::Writer& w, const PlotFrame& f, const std::string& x_title, const std::string& y_title) {
  w.clip_rect("plot-clip", f.left, f.top, f.right - f.left, f.bottom - f.top);
  w.open_group(frame_attrs(f));
  w.rect(f.left, f.top, f.right - f.left, f.bottom - f.top, "none", {{"stroke", "#1a1a1a"}, {"stroke-width", "1"}});
  svg::draw_log_axis(w, f.x, true, f.bottom, f.top, f.bottom, x_title);
  svg::draw_log_axis(w, f.y, false, f.left, f.left, f.right, y_title);
}

OrientedBox text_box(double x, double y, const std::string& text, double size_px, double angle_deg,
                     const std::string& anchor) {
  double a = angle_deg * M_PI / 180, dx = std::cos(a), dy = std::sin(a), nx = dy, ny = -dx;
  double width = svg::text_width_px(text, size_px);
  double shift = anchor == "end" ? width : anchor == "middle" ? width / 2 : 0;
  double sx = x - dx * shift, sy = y - dy * shift;
  return {sx + dx * width / 2 + nx * 0.26 * size_px, sy + dy * width / 2 + ny * 0.26 * size_px, width / 2 + 3,
          0.5 * size_px + 2.5, angle_deg};  // margins: the white halo and a little air
}

namespace {

constexpr double kLabelPx = 12;

std::string box_text(const OrientedBox& b) {
  return fmt::format("{} {} {} {} {}", num(b.cx), num(b.cy), num(b.hw), num(b.hh), num(b.angle_deg));
}

struct LabelCandidate {
  double x, y;
  std::string anchor;
};

// Places one label among candidates and returns its markup (with a white halo for legibility).
std::string placed_label(LabelPlacer& placer, const std::vector<LabelCandidate>& cands, const std::string& text,
                         double angle_deg, const std::string& colour, const svg::Attrs& extra, int own_line) {
  std::vector<OrientedBox> boxes;
  for (const auto& c : cands) boxes.push_back(text_box(c.x, c.y, text, kLabelPx, angle_deg, c.anchor));
  std::size_t i = placer.place(boxes, own_line);
  const auto& c = cands[i];
  svg::Attrs attrs = extra;
  attrs.insert(attrs.end(), {{"data-box", box_text(boxes[i])}, {"fill", colour}, {"stroke", "#ffffff"},
                             {"stroke-width", "3"}, {"paint-order", "stroke"}, {"stroke-linejoin", "round"}});
  std::string rot = angle_deg != 0 ? fmt::format(" transform=\"rotate({} {} {})\"", num(angle_deg), num(c.x), num(c.y)) : "";
  return fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"{}\" text-anchor=\"{}\"{}{}>{}</text>\n", num(c.x), num(c.y),
                     num(kLabelPx), c.anchor, rot, svg::attrs_text(attrs), xml_escape(text));
}

std::string source_suffix(Source s) { return s == Source::Datasheet ? " (datasheet)" : ""; }

struct Range {
  double xlo, xhi, ylo, yhi;
};

Range value_range(const PlotFrame& f) {
  return {std::pow(10.0, f.x.decade_lo), std::pow(10.0, f.x.decade_hi), std::pow(10.0, f.y.decade_lo),
          std::pow(10.0, f.y.decade_hi)};
}

// One ceiling line in px, with what its label needs.
struct RoofLine {
  double x1, y1, x2, y2;
  bool compute;
  std::string text, colour;  // text without the machine tag
  std::string tag;
  svg::Attrs line_attrs, label_attrs;
  int id = -1;
};

std::vector<RoofLine> roof_lines(const PlotFrame& f, const DeviceRoofs& roofs, const std::vector<ComputeRoof>& compute,
                                 const RoofStyle& style) {
  Range r = value_range(f);
  double top_peak = 0, top_bw = roofs.top_memory_bytes_per_second();
  for (const auto& c : compute) top_peak = std::max(top_peak, c.flops_per_second);
  std::vector<RoofLine> lines;
  for (const auto& c : compute) {
    if (c.flops_per_second < r.ylo || c.flops_per_second > r.yhi) continue;
    double xa = std::max(r.xlo, top_bw > 0 ? c.flops_per_second / top_bw : r.xlo), y = f.y(c.flops_per_second);
    lines.push_back({f.x(xa), y, f.right, y, true,
                     fmt::format("{} {}{}{}{}", svg::upper(c.precision), format_flops_per_second(c.flops_per_second),
                                 c.emulated ? " (emulated)" : "",
                                 c.emulated_via.empty() ? "" : " (via " + c.emulated_via + ")", source_suffix(c.source)),
                     "#303030", style.tag,
                     {{"class", "ceiling ceiling-compute"}, {"data-precision", c.precision},
                      {"data-value", fmt::format("{:g}", c.flops_per_second)}, {"data-machine", style.tag}},
                     {{"class", "ceiling-label"}, {"data-precision", c.precision}, {"data-machine", style.tag}}});
  }
  for (std::size_t i = 0; i < roofs.memory.size(); ++i) {
    const auto& m = roofs.memory[i];
    double bw = m.bytes_per_second;
    double xa = std::max(r.xlo, r.ylo / bw), xb = std::min({r.xhi, r.yhi / bw, top_peak > 0 ? top_peak / bw : r.xhi});
    if (!(xa < xb)) continue;
    lines.push_back({f.x(xa), f.y(xa * bw), f.x(xb), f.y(xb * bw), false,
                     fmt::format("{} {}{}", m.name, format_bytes_per_second(bw), source_suffix(m.source)),
                     svg::level_colour(m.name, i), style.tag,
                     {{"class", "ceiling ceiling-memory"}, {"data-level", m.name}, {"data-value", fmt::format("{:g}", bw)},
                      {"data-machine", style.tag}},
                     {{"class", "ceiling-label"}, {"data-level", m.name}, {"data-machine", style.tag}}});
  }
  for (auto& l : lines)
    if (!style.dash.empty()) l.line_attrs.push_back({"stroke-dasharray", style.dash});
  return lines;
}

// Candidates: compute labels right-aligned above or below their line, sliding left but never past
// the line's start; bandwidth labels along their diagonal, above first, then below.
std::vector<LabelCandidate> label_candidates(const RoofLine& l, const std::string& text) {
  std::vector<LabelCandidate> cands;
  if (l.compute) {  // rows further from the line are for crowds of nearly equal ceilings
    double width = svg::text_width_px(text, kLabelPx);
    for (int row = 0; row < 3; ++row)
      for (double x = l.x2 - 6; x - width >= l.x1 - 2 || x == l.x2 - 6; x -= 35) {
        cands.push_back({x, l.y1 - 6 - row * 15, "end"});
        cands.push_back({x, l.y1 + 6 + 0.76 * kLabelPx + row * 15, "end"});
      }
    return cands;
  }
  double a = std::atan2(l.y2 - l.y1, l.x2 - l.x1), nx = std::sin(a), ny = -std::cos(a);
  for (int below = 0; below < 2; ++below)
    for (double t = 0.04; t < 0.85; t += 0.06) {
      double off = below ? -(5 + 0.76 * kLabelPx) : 5;
      cands.push_back({l.x1 + t * (l.x2 - l.x1) + nx * off, l.y1 + t * (l.y2 - l.y1) + ny * off, "start"});
    }
  return cands;
}

}  // namespace

struct RoofDrawing::Impl {
  std::vector<RoofLine> lines;
  double top = 0, bottom = 1e9;  // the plot area's, for the label ladder
};

RoofDrawing::RoofDrawing() : impl_(std::make_unique<Impl>()) {}
RoofDrawing::~RoofDrawing() = default;

void RoofDrawing::add_lines(svg::Writer& w, LabelPlacer& placer, const PlotFrame& f, const DeviceRoofs& roofs,
                            const std::vector<ComputeRoof>& compute, const RoofStyle& style) {
  impl_->top = f.top;
  impl_->bottom = f.bottom;
  w.open_group({{"clip-path", "url(#plot-clip)"}, {"class", "roofs"}});
  for (auto& l : roof_lines(f, roofs, compute, style)) {
    w.line(l.x1, l.y1, l.x2, l.y2, l.colour, l.compute ? 1.8 : 2, l.line_attrs);
    l.id = placer.add_line(l.x1, l.y1, l.x2, l.y2);
    impl_->lines.push_back(std::move(l));
  }
  w.close_group();
}

namespace {

std::string ladder_labels(svg::Writer& w, const std::vector<std::pair<const RoofLine*, std::string>>& compute,
                          double top, double bottom) {
  std::vector<double> desired;
  for (const auto& [l, tags] : compute) desired.push_back(l->y1 + 4);
  auto ys = spread_positions(desired, 17.5, top + 8, bottom);  // the label boxes' height with margins
  std::string labels;
  for (std::size_t i = 0; i < compute.size(); ++i) {
    const auto& [l, tags] = compute[i];
    std::string text = tags.empty() ? l->text : tags + ": " + l->text;
    w.polyline({{l->x2, l->y1}, {l->x2 + 8, l->y1}, {l->x2 + 16, ys[i] - 4}, {l->x2 + 20, ys[i] - 4}}, "#8a8a8a", 0.8,
               {{"class", "leader"}});
    OrientedBox box = text_box(l->x2 + 23, ys[i], text, kLabelPx, 0, "start");
    svg::Attrs attrs = l->label_attrs;
    attrs.push_back({"data-box", box_text(box)});
    w.text(l->x2 + 23, ys[i], text, kLabelPx, "start", attrs);
  }
  return labels;
}

}  // namespace

void RoofDrawing::add_labels(svg::Writer& w, LabelPlacer& placer, bool ladder) {
  // Ceilings equal on several machines share one label ("A, B: FP32 55.0 TFLOP/s").
  std::vector<std::pair<const RoofLine*, std::string>> unique;
  for (const auto& l : impl_->lines) {
    auto same = std::find_if(unique.begin(), unique.end(), [&](const auto& u) {
      return u.first->compute == l.compute && u.first->text == l.text && std::fabs(u.first->y1 - l.y1) < 1 &&
             std::fabs(u.first->x1 - l.x1) < 1;
    });
    if (same == unique.end()) unique.push_back({&l, l.tag});
    else same->second += ", " + l.tag;
  }
  std::string labels;
  if (ladder) {
    std::vector<std::pair<const RoofLine*, std::string>> compute;
    for (const auto& u : unique)
      if (u.first->compute) compute.push_back(u);
    std::stable_sort(compute.begin(), compute.end(), [](const auto& a, const auto& b) { return a.first->y1 < b.first->y1; });
    ladder_labels(w, compute, impl_->top, impl_->bottom);
  }
  for (int pass = ladder ? 1 : 0; pass < 2; ++pass)  // compute labels first: they have the fewest good places
    for (const auto& [l, tags] : unique) {
      if (l->compute != (pass == 0)) continue;
      std::string text = tags.empty() ? l->text : tags + ": " + l->text;
      double angle = l->compute ? 0 : std::atan2(l->y2 - l->y1, l->x2 - l->x1) * 180 / M_PI;
      labels += placed_label(placer, label_candidates(*l, text), text, angle, l->compute ? "#1a1a1a" : l->colour,
                             l->label_attrs, l->id);
    }
  w.open_group({{"class", "ceiling-labels"}});
  w.raw(labels);
  w.close_group();
}

void draw_roof_set(svg::Writer& w, LabelPlacer& placer, const PlotFrame& f, const DeviceRoofs& roofs,
                   const std::vector<ComputeRoof>& compute, const RoofStyle& style) {
  RoofDrawing drawing;
  drawing.add_lines(w, placer, f, roofs, compute, style);
  drawing.add_labels(w, placer);
}

std::string run_subject(const RunPlacement& rp) {
  std::vector<std::string> parts;
  for (const char* key : {"model", "phase", "precision"})
    if (rp.suite.contains(key) && rp.suite[key].is_string()) parts.push_back(rp.suite[key].get<std::string>());
  if (parts.empty()) return rp.run_name;
  return fmt::format("{}, {}", fmt::join(parts, " "), rp.run_name);
}

std::string device_subject(const RunPlacement& rp) {
  return fmt::format("{} on {} ({} compute roofs)", rp.roofs.device_name.empty() ? rp.roofs.device_id : rp.roofs.device_name,
                     rp.roofs.host, rp.roofs.compute_regime);
}

void draw_title(svg::Writer& w, double x, const std::string& title, const std::string& subtitle) {
  double room = w.width() - x - 12;  // bold text runs about 10% wider than the estimate
  w.text(x, 26, fit_text(title, 16 * 1.1, room), 16, "start", {{"font-weight", "bold"}, {"class", "chart-title"}});
  if (!subtitle.empty()) w.text(x, 44, fit_text(subtitle, 11.5, room), 11.5, "start", {{"fill", "#555555"}});
}

double legend_header(svg::Writer& w, double x, double y, const std::string& text) {
  w.text(x, y, text, 12.5, "start", {{"font-weight", "bold"}});
  return y + 18;
}

std::string fit_text(const std::string& text, double size_px, double max_px) {
  if (svg::text_width_px(text, size_px) <= max_px) return text;
  std::string s = text;
  while (!s.empty() && svg::text_width_px(s + "…", size_px) > max_px) {
    s.pop_back();
    while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();  // whole UTF-8 chars
    if (!s.empty() && (static_cast<unsigned char>(s.back()) & 0x80)) s.pop_back();
  }
  return s + "…";
}

bool drawable(const Placement& p) {
  if (!p.timed || !(p.total_flops > 0) || !(p.flops_per_second > 0)) return false;
  return std::any_of(p.levels.begin(), p.levels.end(), [](const LevelPoint& l) { return l.ai_flops_per_byte > 0; });
}

std::vector<std::string> marker_precisions(const RunPlacement& rp) {
  std::vector<std::string> out;
  for (const auto& p : rp.records)
    if (drawable(p) && std::find(out.begin(), out.end(), p.main_class) == out.end()) out.push_back(p.main_class);
  return out;
}

double draw_level_legend(svg::Writer& w, double x, double y, const std::vector<std::string>& levels) {
  y = legend_header(w, x, y, "Memory level (colour)");
  for (std::size_t i = 0; i < levels.size(); ++i) {
    std::string colour = svg::level_colour(levels[i], i);
    w.line(x, y - 4, x + 22, y - 4, colour, 2, {{"data-level", levels[i]}});
    w.marker("circle", x + 11, y - 4, 8, colour, false);
    w.text(x + 30, y, levels[i], 12);
    y += 17;
  }
  return y + 6;
}

double draw_precision_legend(svg::Writer& w, double x, double y, const std::vector<std::string>& precisions,
                             const MarkerKey& key) {
  y = legend_header(w, x, y, "Precision (marker)");
  for (const auto& p : precisions) {
    w.marker(svg::precision_marker(p), x + 11, y - 4, 9, "#8a8a8a", false);
    w.text(x + 30, y, svg::upper(p), 12);
    y += 17;
  }
  auto line = [&](bool hollow, bool dashed, std::string_view text) {
    w.marker("circle", x + 11, y - 4, 9, "#555555", hollow, {}, "", dashed);
    w.text(x + 30, y, text, 11.5);
    y += 17;
  };
  if (key.counted) line(false, false, "solid: bytes counted by hardware");
  if (key.analytic) line(true, false, "hollow: bytes from the analytic model");
  if (key.emulated) line(false, true, "dashed: emulated, on its path's roofs");
  return y + 6;
}

MarkerKey marker_key(const RunPlacement& rp) {
  MarkerKey key;
  for (const auto& p : rp.records) {
    key.emulated = key.emulated || p.emulated;
    for (const auto& l : p.levels) (hollow_marker(l) ? key.analytic : key.counted) = true;
  }
  return key;
}

void draw_operator_key(svg::Writer& w, double x, double y, const RunPlacement& rp, double max_y,
                       const std::vector<bool>& drawn) {
  y = legend_header(w, x, y, "Operators (share of step)");
  int index = 0, hidden = 0;
  for (const auto& p : rp.records) {
    ++index;
    if (y > max_y) {
      ++hidden;
      continue;
    }
    std::string share = p.timed ? format_percent(p.share_of_step) : std::string(to_string(p.status));
    bool shown = drawn.empty() ? drawable(p) : drawn[static_cast<std::size_t>(index - 1)];
    svg::Attrs attrs = {{"data-op", p.display_name()}, {"class", shown ? "key" : "key not-drawn"},
                        {"fill", shown ? "#1a1a1a" : "#8a8a8a"}};
    w.text(x + 18, y, std::to_string(index), 11.5, "end", attrs);
    w.text(x + 24, y, fit_text(p.display_name(), 11.5, kPanel - 100), 11.5, "start", attrs);
    w.text(x + kPanel - 34, y, share, 11.5, "end", {{"fill", "#555555"}});
    y += 16;
  }
  if (hidden) w.text(x, y, fmt::format("… and {} more (see the table)", hidden), 11.5, "start", {{"fill", "#555555"}});
}

}  // namespace rafter::roofline::detail
