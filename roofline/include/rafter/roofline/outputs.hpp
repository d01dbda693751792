// Writing charts to files in the format the file name asks for (.svg, .png, .html), so that the
// CLI verbs and the default job share one path from a placement to a file.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

#include "rafter/roofline/charts.hpp"

namespace rafter::roofline {

enum class ChartKind { Hierarchical, Time, TimeStacked };
ChartKind chart_kind_from_string(std::string_view name);  // "hierarchical", "time", "time-stacked"
std::string chart_svg(const RunPlacement& rp, ChartKind kind, const ChartOptions& options = {});

// Checks the extension before any work is done: InputError unless .svg, .png (when supported) or .html.
void check_chart_path(const std::filesystem::path& path);

// .svg: the chart; .png: the chart rendered; .html: the full self-contained page (every chart,
// the table, hover details and toggles). Written atomically.
void write_run_chart(const RunPlacement& rp, ChartKind kind, const std::filesystem::path& path,
                     const ChartOptions& options = {});

// For charts that are not a run's (comparisons): .svg, .png, or .html (the SVG and `table_text`
// in a page).
void write_chart_file(const std::string& svg_text, const std::filesystem::path& path, const std::string& title,
                      const std::string& table_text);

}  // namespace rafter::roofline
