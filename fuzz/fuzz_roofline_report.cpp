// `rafter report` and `rafter plot` minus the files: a run.json and a machine.json (the input
// split at its first NUL byte, which JSON text cannot hold) placed on the roofline, then every
// exporter: console table, CSV, JSON, the three charts and the HTML page. Placement numbers that
// reach the JSON report must be finite.
#include <cstring>

#include "fuzz_common.hpp"
#include "rafter/roofline/charts.hpp"
#include "rafter/roofline/html.hpp"
#include "rafter/roofline/placement.hpp"
#include "rafter/roofline/report.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rafter;
  const auto* nul = static_cast<const std::uint8_t*>(std::memchr(data, 0, size));
  if (!nul) return 0;
  const std::size_t run_size = std::size_t(nul - data);
  fuzz::expect_typed_errors([&] {
    const Run run = run_from_json(parse_json_text(fuzz::as_text(data, run_size), "run.json"));
    const MachineProfile machine =
        machine_profile_from_json(parse_json_text(fuzz::as_text(nul + 1, size - run_size - 1), "machine.json"));
    const roofline::RunPlacement rp = roofline::place_run(run, machine, "run.json");
    roofline::format_report_table(rp);
    roofline::format_report_csv(rp);
    const nlohmann::json report = roofline::report_json(rp);
    fuzz::check_finite_json(report, "report");
    report.dump();
    roofline::hierarchical_roofline_svg(rp);
    roofline::time_roofline_svg(rp);
    roofline::time_stacked_svg(rp);
    roofline::html_report(rp);
  });
  return 0;
}
