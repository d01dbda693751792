// Source names and the JSON form of Summary and Figure, shared by machine.json and run.json.
#include "rafter/collector/provenance.hpp"

#include <fmt/core.h>

#include "rafter/collector/error.hpp"
#include "rafter/collector/json_io.hpp"

namespace rafter {

std::string_view to_string(Source s) {
  switch (s) {
    case Source::Measured: return "measured";
    case Source::Counter: return "counter";
    case Source::Analytic: return "analytic";
    case Source::Datasheet: return "datasheet";
  }
  return "measured";
}

Source source_from_string(std::string_view s) {
  for (Source v : {Source::Measured, Source::Counter, Source::Analytic, Source::Datasheet})
    if (to_string(v) == s) return v;
  throw FormatError(fmt::format("unknown source '{}' (measured, counter, analytic, datasheet)", s));
}

nlohmann::json to_json(const Summary& s) {
  return {{"samples", s.samples}, {"median", s.median}, {"min", s.min},       {"max", s.max},
          {"mean", s.mean},       {"stddev", s.stddev}, {"spread", s.spread}, {"noisy", s.noisy}};
}

Summary summary_from_json(const JsonReader& r) {
  Summary s;
  s.samples = static_cast<std::size_t>(r.integer("samples"));
  s.median = r.quantity("median");
  s.min = r.quantity("min");
  s.max = r.quantity("max");
  s.mean = r.quantity_or("mean", s.median);
  s.stddev = r.quantity_or("stddev", 0);
  s.spread = r.quantity_or("spread", s.median != 0 ? (s.max - s.min) / s.median : 0);
  s.noisy = r.boolean_or("noisy", false);
  if (s.min > s.max) r.fail("min", "greater than max");
  return s;
}

nlohmann::json to_json(const Figure& f) {
  nlohmann::json j = {{"value", f.value}, {"unit", f.unit}, {"source", to_string(f.source)}};
  if (f.stats.samples > 0) {
    j["stats"] = to_json(f.stats);
    if (f.source == Source::Measured) j["value_is"] = "median";  // of `stats`: Figure::measured's rule
  }
  return j;
}

Figure figure_from_json(const JsonReader& r) {
  Figure f;
  f.value = r.quantity("value");
  f.unit = r.string("unit");
  try {
    f.source = source_from_string(r.string("source"));
  } catch (const FormatError& e) {
    r.fail("source", e.what());
  }
  if (r.has("stats")) f.stats = summary_from_json(r.object("stats"));
  if (f.source == Source::Measured && f.stats.samples == 0) r.fail("stats", "missing for a measured figure");
  return f;
}

}  // namespace rafter
