// What every fuzz target checks: bad input may only end in rafter's typed error (InputError and
// its children) with a one-line message; any other exception, and any non-finite or negative
// number in an accepted result, is a bug and aborts (libFuzzer then saves the input).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "rafter/collector/error.hpp"
#include "rafter/collector/json_io.hpp"

namespace rafter::fuzz {

// What the target was doing, printed with a bug (an input's meaning is not always plain from its bytes).
inline std::string& bug_context() {
  static std::string context;
  return context;
}

[[noreturn]] inline void bug(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "rafter fuzz: %.*s: %.*s\n", int(what.size()), what.data(), int(detail.size()), detail.data());
  if (!bug_context().empty()) std::fprintf(stderr, "rafter fuzz: while %s\n", bug_context().c_str());
  std::abort();
}

// One line, printable: the CLI prints it after `rafter: error: ` and scripts read it as one line.
inline void check_message(const char* message) {
  const std::string_view m(message);
  if (m.empty()) bug("empty error message", "");
  for (unsigned char c : m)
    if (c < 0x20 || c == 0x7f) bug("error message with a control character", m);
}

// Runs `body`; the typed error is the accepted outcome of bad input.
template <class Body>
void expect_typed_errors(Body&& body) {
  try {
    body();
  } catch (const InputError& e) {
    check_message(e.what());
  } catch (const std::exception& e) {
    bug("untyped exception", e.what());
  }
}

inline void check_quantity(double v, std::string_view what) {
  if (!std::isfinite(v) || v < 0) bug("non-finite or negative quantity", std::string(what) + " = " + std::to_string(v));
}

// Every floating-point number in a result that was accepted must be finite.
inline void check_finite_json(const nlohmann::json& j, std::string_view where) {
  if (j.is_number_float() && !std::isfinite(j.get<double>())) bug("non-finite number in JSON", where);
  if (j.is_structured())
    for (const auto& item : j.items()) check_finite_json(item.value(), item.key());
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace rafter::fuzz
