// Number formatting with SI prefixes and escaping for XML/HTML/CSV.
#include "rafter/roofline/format.hpp"

#include "rafter/collector/text_table.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace rafter::roofline {

std::string format_si(double v, std::string_view unit) { return rafter::format_si(v, unit, 3); }

std::string format_seconds(double seconds) { return format_si(seconds, "s"); }
std::string format_flops_per_second(double v) { return format_si(v, "FLOP/s"); }
std::string format_bytes_per_second(double v) { return format_si(v, "B/s"); }

std::string format_percent(double fraction) {
  if (!std::isfinite(fraction)) return "-";
  double pct = 100.0 * fraction;
  if (pct > 0 && pct < 0.01) return "<0.01%";  // small but not nothing
  if (pct > 0 && pct < 0.095) return fmt::format("{:.2f}%", pct);
  return fmt::format("{:.{}f}%", pct, pct < 9.95 ? 1 : 0);
}

std::string format_intensity(double ai) {
  if (!(ai > 0) || !std::isfinite(ai)) return "-";
  if (ai >= 1e4 || ai < 1e-2) return fmt::format("{:.1e}", ai);
  if (ai >= 100) return fmt::format("{:.0f}", ai);
  if (ai >= 10) return fmt::format("{:.1f}", ai);
  return fmt::format("{:.2f}", ai);
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        // XML 1.0 forbids most control characters even when escaped.
        if (static_cast<unsigned char>(ch) >= 0x20 || ch == '\n' || ch == '\t') out += ch;
    }
  }
  return out;
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

}  // namespace rafter::roofline
