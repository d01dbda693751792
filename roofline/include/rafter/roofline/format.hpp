// Human-readable numbers with units (SI prefixes), shared by tables and charts, and escaping of
// names read from input files before they go into SVG, HTML or CSV.
#pragma once
#include <string>
#include <string_view>

namespace rafter::roofline {

std::string format_seconds(double seconds);               // "812 ns", "1.25 ms", "3.40 s"
std::string format_flops_per_second(double v);            // "1.23 TFLOP/s"
std::string format_bytes_per_second(double v);            // "3.35 TB/s"
std::string format_si(double v, std::string_view unit);   // 3 significant digits, SI prefix
std::string format_percent(double fraction);              // "62.5%"
std::string format_intensity(double flops_per_byte);      // "0.25", "12.5", "1.2e+03"

std::string xml_escape(std::string_view text);  // & < > " ' escaped; control characters dropped
std::string csv_field(std::string_view text);   // quoted when it holds , " or a newline

}  // namespace rafter::roofline
