// Model files (workloads/models/*.json, `rafter profile --model-file`): model_from_json and its
// validation, the parameter count, then the model's step in each phase expanded and every
// operator costed, as `rafter profile --plan` does.
#include "fuzz_common.hpp"
#include "fuzz_suite.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rafter;
  fuzz::expect_typed_errors([&] {
    const auto model = workloads::model_from_json(parse_json_text(fuzz::as_text(data, size), "model.json"), "model.json");
    fuzz::check_quantity(model.parameters(), "parameters");
    fuzz::plan_every_phase(model, fuzz::reference_recipe());
  });
  return 0;
}
