// machine.json as `rafter report/plot --machine` reads it (roofline/inputs.hpp load_machine:
// parse, then machine_profile_from_json), and the profile written back out and read again.
#include "fuzz_common.hpp"
#include "rafter/collector/machine_profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rafter;
  fuzz::expect_typed_errors([&] {
    const MachineProfile p = machine_profile_from_json(parse_json_text(fuzz::as_text(data, size), "machine.json"));
    // What was accepted must survive its own writer and reader (rafter rewrites profiles it reads).
    const nlohmann::json out = to_json(p);
    fuzz::check_finite_json(out, "machine.json (rewritten)");
    machine_profile_from_json(parse_json_text(out.dump(), "machine.json (rewritten)"));
  });
  return 0;
}
