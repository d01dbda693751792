// Precision recipe files (workloads/recipes/*.json, `rafter profile --precision FILE`):
// recipe_from_json, then the recipe applied to a Llama-2 7B step in each phase and every operator
// costed, as `rafter profile --plan` does.
#include "fuzz_common.hpp"
#include "fuzz_suite.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rafter;
  fuzz::expect_typed_errors([&] {
    const auto recipe = workloads::recipe_from_json(parse_json_text(fuzz::as_text(data, size), "recipe.json"), "recipe.json");
    fuzz::plan_every_phase(fuzz::reference_model(), recipe);
  });
  return 0;
}
