// SI-prefixed numbers and content-sized console tables (see text_table.hpp).
#include "rafter/collector/text_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace rafter {

std::string format_si(double v, std::string_view unit, int significant) {
  if (!std::isfinite(v)) return "-";
  const std::string sep = unit.empty() ? "" : " ";
  if (v == 0) return fmt::format("0{}{}", sep, unit);
  static const char* prefixes[] = {"a", "f", "p", "n", "µ", "m", "", "k", "M", "G", "T", "P", "E"};
  significant = std::clamp(significant, 1, 9);
  int exp3 = std::clamp(static_cast<int>(std::floor(std::log10(std::fabs(v)) / 3.0)), -6, 6);
  double scaled = v / std::pow(10.0, 3 * exp3);
  auto decimals = [&](double s) {
    const int int_digits = std::fabs(s) >= 100 ? 3 : std::fabs(s) >= 10 ? 2 : 1;
    return std::max(0, significant - int_digits);
  };
  // Rounding can carry into the next power of 1000 ("999.96" at 4 digits prints "1000.0").
  const double rounding = 0.5 * std::pow(10.0, -decimals(scaled));
  if (std::fabs(scaled) + rounding >= 1000 && exp3 < 6) {
    ++exp3;
    scaled /= 1000;
  }
  return fmt::format("{:.{}f}{}{}{}", scaled, decimals(scaled), sep, prefixes[exp3 + 6], unit);
}

namespace {
std::size_t display_width(const std::string& s) {  // code points, so that "µs" counts as two
  std::size_t n = 0;
  for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
  return n;
}
}  // namespace

std::string format_text_table(const std::vector<std::vector<std::string>>& rows,
                              const std::vector<std::size_t>& left_columns) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (widths.size() <= i) widths.push_back(0);
      widths[i] = std::max(widths[i], display_width(row[i]));
    }
  auto left = [&](std::size_t i) {
    return i == 0 || std::find(left_columns.begin(), left_columns.end(), i) != left_columns.end();
  };
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      const std::string pad(widths[i] - display_width(row[i]), ' ');
      if (i > 0) line += "  ";
      line += left(i) ? row[i] + pad : pad + row[i];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace rafter
