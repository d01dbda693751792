// From a placement to a chart file, by extension.
#include "rafter/roofline/outputs.hpp"

#include "rafter/collector/error.hpp"
#include "rafter/collector/json_io.hpp"
#include "rafter/roofline/html.hpp"
#include "rafter/roofline/png.hpp"

namespace rafter::roofline {

ChartKind chart_kind_from_string(std::string_view name) {
  if (name == "hierarchical") return ChartKind::Hierarchical;
  if (name == "time") return ChartKind::Time;
  if (name == "time-stacked") return ChartKind::TimeStacked;
  throw InputError("unknown chart kind '" + std::string(name) + "' (hierarchical, time, time-stacked)");
}

std::string chart_svg(const RunPlacement& rp, ChartKind kind, const ChartOptions& options) {
  switch (kind) {
    case ChartKind::Time: return time_roofline_svg(rp, options);
    case ChartKind::TimeStacked: return time_stacked_svg(rp, options);
    case ChartKind::Hierarchical: break;
  }
  return hierarchical_roofline_svg(rp, options);
}

void check_chart_path(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  if (ext == ".png" && !png_supported())
    throw InputError(path.string() + ": PNG output needs librsvg/cairo, which this build lacks (use .svg or .html)");
  if (ext != ".svg" && ext != ".png" && ext != ".html")
    throw InputError(path.string() + ": unknown chart format '" + ext + "' (use .svg, .png or .html)");
  check_writable(path);
}

void write_run_chart(const RunPlacement& rp, ChartKind kind, const std::filesystem::path& path,
                     const ChartOptions& options) {
  check_chart_path(path);
  std::string ext = path.extension().string();
  if (ext == ".html") return write_file_atomic(path, html_report(rp, options));
  std::string svg_text = chart_svg(rp, kind, options);
  if (ext == ".png") return write_png(svg_text, path);
  write_file_atomic(path, svg_text);
}

void write_chart_file(const std::string& svg_text, const std::filesystem::path& path, const std::string& title,
                      const std::string& table_text) {
  check_chart_path(path);
  std::string ext = path.extension().string();
  if (ext == ".html") return write_file_atomic(path, html_page(title, svg_text, table_text));
  if (ext == ".png") return write_png(svg_text, path);
  write_file_atomic(path, svg_text);
}

}  // namespace rafter::roofline
