// The SVG writer and the axis, colour and marker helpers shared by the charts.
#include "rafter/roofline/svg.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "rafter/roofline/format.hpp"

namespace rafter::roofline::svg {

std::string num(double v) {
  if (!std::isfinite(v)) v = 0;
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

std::string attrs_text(const Attrs& attrs) {
  std::string out;
  for (const auto& [k, v] : attrs) out += fmt::format(" {}=\"{}\"", k, xml_escape(v));
  return out;
}

Writer::Writer(double width_px, double height_px) : width_(width_px), height_(height_px) {}

void Writer::line(double x1, double y1, double x2, double y2, std::string_view stroke, double width_px,
                  const Attrs& extra) {
  body_ += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\"{}/>\n",
                       num(x1), num(y1), num(x2), num(y2), stroke, num(width_px), attrs_text(extra));
}

void Writer::polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke,
                      double width_px, const Attrs& extra) {
  std::string pts;
  for (const auto& [x, y] : points) pts += fmt::format("{}{},{}", pts.empty() ? "" : " ", num(x), num(y));
  body_ += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{}/>\n", pts,
                       stroke, num(width_px), attrs_text(extra));
}

void Writer::rect(double x, double y, double w, double h, std::string_view fill, const Attrs& extra) {
  body_ += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"{}/>\n", num(x), num(y),
                       num(std::max(0.0, w)), num(std::max(0.0, h)), fill, attrs_text(extra));
}

void Writer::text(double x, double y, std::string_view content, double size_px, std::string_view anchor,
                  const Attrs& extra, double rotate_deg) {
  std::string rot = rotate_deg != 0 ? fmt::format(" transform=\"rotate({} {} {})\"", num(rotate_deg), num(x), num(y)) : "";
  body_ += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"{}\" text-anchor=\"{}\"{}{}>{}</text>\n", num(x), num(y),
                       num(size_px), anchor, rot, attrs_text(extra), xml_escape(content));
}

void Writer::marker(std::string_view shape, double x, double y, double size_px, std::string_view colour,
                    bool hollow, const Attrs& extra, std::string_view title, bool dashed) {
  double r = size_px / 2;
  std::string fill = hollow ? "#ffffff" : std::string(colour);
  const double stroke_width = hollow || dashed ? 1.6 : 0.7;
  std::string common = fmt::format("fill=\"{}\" stroke=\"{}\" stroke-width=\"{}\"{}{}", fill,
                                   hollow ? std::string(colour) : std::string("#1a1a1a"), stroke_width,
                                   dashed ? " stroke-dasharray=\"2.2 1.4\"" : "", attrs_text(extra));
  std::string t = title.empty() ? "" : fmt::format("<title>{}</title>", xml_escape(title));
  auto poly = [&](std::vector<std::pair<double, double>> pts) {
    std::string p;
    for (const auto& [dx, dy] : pts) p += fmt::format("{}{},{}", p.empty() ? "" : " ", num(x + dx * r), num(y + dy * r));
    body_ += fmt::format("<polygon points=\"{}\" {}>{}</polygon>\n", p, common, t);
  };
  if (shape == "square") {
    poly({{-0.85, -0.85}, {0.85, -0.85}, {0.85, 0.85}, {-0.85, 0.85}});
  } else if (shape == "diamond") {
    poly({{0, -1.2}, {1.1, 0}, {0, 1.2}, {-1.1, 0}});
  } else if (shape == "triangle") {
    poly({{0, -1.2}, {1.1, 0.8}, {-1.1, 0.8}});
  } else if (shape == "triangle_down") {
    poly({{0, 1.2}, {1.1, -0.8}, {-1.1, -0.8}});
  } else if (shape == "plus") {
    poly({{-0.35, -1.1}, {0.35, -1.1}, {0.35, -0.35}, {1.1, -0.35}, {1.1, 0.35}, {0.35, 0.35}, {0.35, 1.1},
          {-0.35, 1.1}, {-0.35, 0.35}, {-1.1, 0.35}, {-1.1, -0.35}, {-0.35, -0.35}});
  } else if (shape == "cross") {
    poly({{-1, -0.6}, {-0.6, -1}, {0, -0.4}, {0.6, -1}, {1, -0.6}, {0.4, 0}, {1, 0.6}, {0.6, 1}, {0, 0.4},
          {-0.6, 1}, {-1, 0.6}, {-0.4, 0}});
  } else if (shape == "star") {
    std::vector<std::pair<double, double>> pts;
    for (int i = 0; i < 10; ++i) {
      double a = -M_PI / 2 + i * M_PI / 5, rr = i % 2 ? 0.5 : 1.25;
      pts.push_back({rr * std::cos(a), rr * std::sin(a)});
    }
    poly(pts);
  } else {
    body_ += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"{}\" {}>{}</circle>\n", num(x), num(y), num(r), common, t);
  }
}

void Writer::open_group(const Attrs& attrs) { body_ += fmt::format("<g{}>\n", attrs_text(attrs)); }
void Writer::close_group() { body_ += "</g>\n"; }

void Writer::clip_rect(std::string_view id, double x, double y, double w, double h) {
  defs_ += fmt::format("<clipPath id=\"{}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath>\n",
                       xml_escape(id), num(x), num(y), num(w), num(h));
}

void Writer::raw(std::string_view markup) { body_ += markup; }

std::string Writer::finish() const {
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"{2}\" fill=\"#1a1a1a\">\n"
      "<defs>\n{3}</defs>\n<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n{4}</svg>\n",
      num(width_), num(height_), kFontFamily, defs_, body_);
}

double LogScale::operator()(double value) const {
  double t = (std::log10(value) - decade_lo) / (decade_hi - decade_lo);
  return px_lo + t * (px_hi - px_lo);
}

double LogScale::px_per_decade() const { return std::fabs(px_hi - px_lo) / (decade_hi - decade_lo); }

LogScale fit_log_scale(double lo, double hi, double px_lo, double px_hi, double pad, int min_decades) {
  if (!(lo > 0)) lo = hi > 0 ? hi / 1000 : 1;
  if (!(hi > 0)) hi = lo * 1000;
  // The low end starts at a decade; the high end stops at the next 1-2-5 step above the padded
  // maximum, so that no empty decade sits above the highest ceiling.
  double dlo = std::floor(std::log10(lo / pad));
  double top = hi * pad, mag = std::pow(10.0, std::floor(std::log10(top)));
  double nice = top <= mag * 1.0000001 ? mag : top <= 2 * mag ? 2 * mag : top <= 5 * mag ? 5 * mag : 10 * mag;
  double dhi = std::log10(nice);
  if (dhi - dlo < min_decades) dlo = std::floor(dhi - min_decades);
  return LogScale{dlo, dhi, px_lo, px_hi};
}

double LinearScale::operator()(double value) const {
  return hi == lo ? px_lo : px_lo + (value - lo) / (hi - lo) * (px_hi - px_lo);
}

std::vector<double> nice_ticks(double lo, double hi, int target_count) {
  if (!(hi > lo)) return {lo};
  double raw = (hi - lo) / std::max(1, target_count);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  return ticks;
}

}  // namespace rafter::roofline::svg
