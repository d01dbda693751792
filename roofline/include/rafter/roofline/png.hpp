// PNG export: renders a chart's SVG with librsvg + cairo (when rafter was built with them).
#pragma once
#include <filesystem>
#include <string_view>

namespace rafter::roofline {

bool png_supported();  // false when built without librsvg/cairo

// Renders `svg_text` at `scale` (2 = twice the SVG's pixel size) and writes the PNG atomically.
// Throws InputError when PNG is unsupported, the SVG does not parse, or the file cannot be written.
void write_png(std::string_view svg_text, const std::filesystem::path& path, double scale = 2.0);

}  // namespace rafter::roofline
