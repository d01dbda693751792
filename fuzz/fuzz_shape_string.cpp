// The `rafter profile --shape key=value,...` parser (workloads parse_shape_string): an accepted
// shape has identifier keys and values in [0, 2^48], and reads back the same from its own text.
#include <fmt/format.h>

#include "fuzz_common.hpp"
#include "rafter/workloads/operator.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rafter;
  fuzz::expect_typed_errors([&] {
    const workloads::Shape shape = workloads::parse_shape_string(fuzz::as_text(data, size));
    std::string text;
    for (const auto& [key, value] : shape) {
      if (key.empty() || value < 0 || value > workloads::kMaxShapeValue) fuzz::bug("accepted shape", key);
      text += fmt::format("{}{}={}", text.empty() ? "" : ",", key, value);
    }
    if (workloads::parse_shape_string(text) != shape) fuzz::bug("shape does not read back", text);
  });
  return 0;
}
