// Log axes with decade ticks, text-width estimates, and the colour and marker conventions.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "rafter/roofline/format.hpp"
#include "rafter/roofline/svg.hpp"

namespace rafter::roofline::svg {

namespace {

// "10" with the exponent raised: paper-style decade labels.
std::string decade_label(double x, double y, int decade, double size_px, std::string_view anchor) {
  return fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"{}\" text-anchor=\"{}\">10<tspan dy=\"{}\" font-size=\"{}\">{}</tspan></text>\n",
      num(x), num(y), num(size_px), anchor, num(-0.45 * size_px), num(0.72 * size_px), decade);
}

}  // namespace

void draw_log_axis(Writer& w, const LogScale& s, bool horizontal, double cross_px, double grid_from_px,
                   double grid_to_px, std::string_view title) {
  const double font = 13;
  w.open_group({{"class", horizontal ? "axis axis-x" : "axis axis-y"}});
  const double eps = 1e-9;
  for (int d = static_cast<int>(std::ceil(s.decade_lo - eps)); d <= static_cast<int>(std::floor(s.decade_hi + eps)); ++d) {
    double p = s(std::pow(10.0, d));
    if (horizontal) {
      w.line(p, grid_from_px, p, grid_to_px, "#dddddd", 0.8);
      w.line(p, cross_px, p, cross_px + 6, "#1a1a1a", 1);
      w.raw(decade_label(p, cross_px + 22, d, font, "middle"));
    } else {
      w.line(grid_from_px, p, grid_to_px, p, "#dddddd", 0.8);
      w.line(cross_px - 6, p, cross_px, p, "#1a1a1a", 1);
      w.raw(decade_label(cross_px - 9, p + 5, d, font, "end"));
    }
  }
  for (int d = static_cast<int>(std::floor(s.decade_lo)); d <= static_cast<int>(std::floor(s.decade_hi)); ++d)
    for (int k = 2; k <= 9; ++k) {
      double v = std::log10(k * std::pow(10.0, d));
      if (v < s.decade_lo - eps || v > s.decade_hi + eps) continue;
      double q = s(k * std::pow(10.0, d));
      if (horizontal) w.line(q, cross_px, q, cross_px + 3, "#1a1a1a", 0.8);
      else w.line(cross_px - 3, q, cross_px, q, "#1a1a1a", 0.8);
    }
  double mid = (s.px_lo + s.px_hi) / 2;
  if (horizontal) w.text(mid, cross_px + 46, title, 14, "middle", {{"class", "axis-title"}});
  else w.text(cross_px - 52, mid, title, 14, "middle", {{"class", "axis-title"}}, -90);
  w.close_group();
}

double text_width_px(std::string_view text, double size_px) {
  static const double lower_w[] = {.613, .635, .55, .635, .615, .352, .635, .634, .278, .278, .579, .278, .974,
                                   .634, .612, .635, .635, .411, .521, .392, .634, .592, .818, .592, .592, .525};
  static const double upper_w[] = {.684, .686, .698, .77, .632, .575, .775, .752, .295, .295, .656, .557, .863,
                                   .748, .787, .603, .787, .695, .635, .611, .732, .684, .989, .685, .611, .685};
  double em = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    unsigned char ch = static_cast<unsigned char>(text[i]);
    if ((ch & 0xC0) == 0x80) continue;  // continuation byte of a UTF-8 character
    if (ch >= 'a' && ch <= 'z') em += lower_w[ch - 'a'];
    else if (ch >= 'A' && ch <= 'Z') em += upper_w[ch - 'A'];
    else if (ch >= '0' && ch <= '9') em += 0.636;
    else if (ch == ' ' || ch == '.' || ch == ',' || ch == ':' || ch == ';' || ch == '!') em += 0.318;
    else if (ch == '/' || ch == '(' || ch == ')' || ch == '[' || ch == ']' || ch == '-' || ch == '|') em += 0.37;
    else if (ch == '%') em += 0.95;
    else if (ch == '_') em += 0.5;
    else em += (ch & 0x80) ? 0.68 : 0.6;
  }
  return em * size_px;
}

std::string level_colour(std::string_view level, std::size_t index) {
  // Okabe-Ito, fixed per level name so that every chart and page agrees; a GPU draws shared
  // memory and L1 side by side, so they differ too. Unnamed levels take colours no named one uses.
  if (level == "L1") return "#0072B2";
  if (level == "shared" || level == "smem") return "#CC79A7";
  if (level == "L2") return "#009E73";
  if (level == "L3") return "#E69F00";
  if (level == "DRAM" || level == "HBM" || level == "memory") return "#D55E00";
  static const char* others[] = {"#56B4E9", "#8C6D31", "#7F7F7F", "#000000"};
  return others[index % 4];
}

std::string series_colour(std::size_t index) {
  static const char* palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8C6D31", "#555555"};
  return palette[index % 8];
}

std::string precision_marker(std::string_view cls) {
  if (cls == "fp64") return "diamond";
  if (cls == "fp32") return "triangle_down";
  if (cls == "tf32") return "cross";
  if (cls == "bf16") return "circle";
  if (cls == "fp16") return "star";
  if (cls == "fp8") return "square";
  if (cls == "int8") return "plus";
  if (cls == "fp4") return "triangle";
  return "circle";
}

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

}  // namespace rafter::roofline::svg
