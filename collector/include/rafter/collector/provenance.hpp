// Where a figure comes from, and a measured figure with its statistics.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "rafter/collector/stats.hpp"

namespace rafter {

enum class Source { Measured, Counter, Analytic, Datasheet };

std::string_view to_string(Source s);
Source source_from_string(std::string_view s);  // throws FormatError on an unknown name

// One figure: value (the median where measured) in `unit`, with the spread of its samples.
// Units are SI and spelled out: "B/s", "FLOP/s", "s", "cycles", "Hz", "B".
struct Figure {
  double value = 0;
  std::string unit;
  Source source = Source::Measured;
  Summary stats;  // samples, median, min, max, spread; samples == 0 for analytic/datasheet figures

  static Figure measured(const Summary& s, std::string unit) {
    return Figure{s.median, std::move(unit), Source::Measured, s};
  }
};

class JsonReader;
nlohmann::json to_json(const Summary& s);
Summary summary_from_json(const JsonReader& r);
nlohmann::json to_json(const Figure& f);
Figure figure_from_json(const JsonReader& r);

}  // namespace rafter
