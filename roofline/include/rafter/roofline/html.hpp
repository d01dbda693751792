// The self-contained HTML page: every chart inline (SVG), the placement table, hover details and
// toggles for memory levels and precisions. No network: no external script, style, font or image.
#pragma once
#include <string>

#include "rafter/roofline/charts.hpp"

namespace rafter::roofline {

std::string html_report(const RunPlacement& rp, const ChartOptions& options = {});

// A simple page around one chart and a preformatted text table (for comparisons).
std::string html_page(const std::string& title, const std::string& svg_text, const std::string& table_text);

}  // namespace rafter::roofline
