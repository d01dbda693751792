// The `--shape key=value,...` syntax, strict: a typo must fail loudly rather than run a shape the
// user did not ask for.
#include <algorithm>
#include <charconv>
#include <fmt/format.h>

#include "rafter/collector/error.hpp"
#include "rafter/workloads/operator.hpp"

namespace rafter::workloads {
namespace {

bool is_identifier(std::string_view key) {
  if (key.empty() || (key.front() >= '0' && key.front() <= '9')) return false;
  for (const char c : key)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

std::int64_t shape_integer(std::string_view item, std::string_view value) {
  if (!value.empty() && value.front() == '-')
    throw InputError(fmt::format("shape '{}': a shape parameter cannot be negative", item));
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec == std::errc::invalid_argument || end != value.data() + value.size())
    throw InputError(fmt::format("shape '{}': '{}' is not an integer", item, value));
  if (ec == std::errc::result_out_of_range || v > std::uint64_t(kMaxShapeValue))
    throw InputError(fmt::format("shape '{}': too large (at most 2^48 = {})", item, kMaxShapeValue));
  return static_cast<std::int64_t>(v);
}

}  // namespace

Shape parse_shape_string(std::string_view text) {
  Shape shape;
  if (text.empty()) return shape;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) throw InputError(fmt::format("shape: expected key=value, got '{}'", item));
    const std::string_view key = item.substr(0, eq);
    if (!is_identifier(key))
      throw InputError(fmt::format("shape '{}': '{}' is not a parameter name (letters, digits, _)", item, key));
    const std::int64_t value = shape_integer(item, item.substr(eq + 1));
    if (!shape.emplace(std::string(key), value).second)
      throw InputError(fmt::format("shape: '{}' is given twice", key));
    if (comma == text.size()) return shape;
    pos = comma + 1;
  }
}

}  // namespace rafter::workloads
