// run.json as `rafter report/plot` read it (roofline/inputs.hpp load_run: parse, then
// run_from_json), and the run written back out and read again.
#include "fuzz_common.hpp"
#include "rafter/collector/run_record.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rafter;
  fuzz::expect_typed_errors([&] {
    const Run run = run_from_json(parse_json_text(fuzz::as_text(data, size), "run.json"));
    for (const auto& r : run.records) {
      fuzz::check_quantity(r.total_flops(), "total_flops");
      fuzz::check_quantity(r.outer_bytes(), "outer_bytes");
    }
    const nlohmann::json out = to_json(run);
    fuzz::check_finite_json(out, "run.json (rewritten)");
    run_from_json(parse_json_text(out.dump(), "run.json (rewritten)"));
  });
  return 0;
}
