// A small SVG writer for the charts: shapes and text with escaped content, data attributes for
// the HTML page's hover and toggles, and the pieces every chart shares (log axes with decade
// ticks, colours by memory level, markers by precision, text-width estimates).
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rafter::roofline::svg {

// Attribute list; values are escaped when written.
using Attrs = std::vector<std::pair<std::string, std::string>>;

class Writer {
 public:
  Writer(double width_px, double height_px);
  void line(double x1, double y1, double x2, double y2, std::string_view stroke, double width_px,
            const Attrs& extra = {});
  void polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke,
                double width_px, const Attrs& extra = {});
  void rect(double x, double y, double w, double h, std::string_view fill, const Attrs& extra = {});
  // anchor: "start", "middle", "end"; rotate_deg turns the text about (x, y).
  void text(double x, double y, std::string_view content, double size_px, std::string_view anchor = "start",
            const Attrs& extra = {}, double rotate_deg = 0);
  // A marker of `shape` ("circle", "square", "diamond", "triangle", "triangle_down", "cross", "plus",
  // "star") centred at (x, y); hollow markers are drawn with a white fill, dashed ones with a
  // dashed outline.
  void marker(std::string_view shape, double x, double y, double size_px, std::string_view colour, bool hollow,
              const Attrs& extra = {}, std::string_view title = "", bool dashed = false);
  void open_group(const Attrs& attrs);
  void close_group();
  void clip_rect(std::string_view id, double x, double y, double w, double h);  // a <clipPath>
  void raw(std::string_view markup);  // already-valid markup written by this library
  std::string finish() const;         // the complete document
  double width() const { return width_; }
  double height() const { return height_; }

 private:
  double width_, height_;
  std::string defs_, body_;
};

std::string attrs_text(const Attrs& attrs);  // ` key="escaped value"` for each
std::string num(double v);                    // compact coordinates ("12.5")

// Maps log10(value) linearly onto [px_lo, px_hi] (px_hi < px_lo for a y axis).
struct LogScale {
  double decade_lo = 0, decade_hi = 1;  // log10 of the ends: lo a whole decade, hi a 1-2-5 step
  double px_lo = 0, px_hi = 1;
  double operator()(double value) const;
  double px_per_decade() const;
};
// Covers [lo, hi] with `pad` (a factor) around them, at least `min_decades` wide: starts at a
// decade, ends at the next 1-2-5 step (no empty decade above the highest ceiling).
LogScale fit_log_scale(double lo, double hi, double px_lo, double px_hi, double pad = 2.0, int min_decades = 2);

struct LinearScale {
  double lo = 0, hi = 1, px_lo = 0, px_hi = 1;
  double operator()(double value) const;
};
std::vector<double> nice_ticks(double lo, double hi, int target_count);  // 1-2-5 steps

// Draws a log axis with decade ticks labelled 10^k, minor ticks at 2..9, grid lines at decades,
// and a title. `horizontal` for the x axis (drawn at y = cross_px), else the y axis (at x = cross_px).
void draw_log_axis(Writer& w, const LogScale& s, bool horizontal, double cross_px, double grid_from_px,
                   double grid_to_px, std::string_view title);

// Estimated rendered width of `text` in DejaVu/Liberation Sans at `size_px`.
double text_width_px(std::string_view text, double size_px);

std::string level_colour(std::string_view level, std::size_t index);  // colour-blind-safe palette
std::string series_colour(std::size_t index);                          // runs, operators
std::string precision_marker(std::string_view compute_class);          // marker shape name
std::string upper(std::string_view s);                                  // "bf16" -> "BF16"

inline constexpr const char* kFontFamily = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif";

}  // namespace rafter::roofline::svg
