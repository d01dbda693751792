// rafter report RUN.json --machine machine.json [--csv|--json] [-o FILE]: the placement table.
#include <filesystem>
#include <fmt/core.h>

#include "commands.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/collector/json_io.hpp"
#include "rafter/roofline/inputs.hpp"
#include "rafter/roofline/placement.hpp"
#include "rafter/roofline/report.hpp"

namespace rafter::cli {

namespace {

struct ReportArgs {
  std::string run;
  std::string machine;
  bool csv = false;
  bool json = false;
  std::string out;
};

void run_report(const ReportArgs& a) {
  if (!a.out.empty()) check_writable(a.out);
  roofline::RunPlacement rp = roofline::place_run(roofline::load_run(a.run), roofline::load_machine(a.machine),
                                                  roofline::input_name(a.run));
  std::string text = a.json  ? roofline::report_json(rp).dump(2) + "\n"
                     : a.csv ? roofline::format_report_csv(rp)
                             : roofline::format_report_table(rp);
  if (a.out.empty()) {
    fmt::print("{}", text);
  } else {
    write_file_atomic(a.out, text);
    fmt::print("rafter: wrote {}\n", a.out);
  }
}

}  // namespace

// The machine profile next to the run (the default job writes both into one folder).
std::string default_machine_for(const std::string& run_path) {
  std::filesystem::path guess = std::filesystem::path(run_path).parent_path() / "machine.json";
  if (!std::filesystem::exists(guess))
    throw InputError("--machine not given and " + guess.string() + " does not exist");
  return guess.string();
}

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  auto* sub = app.add_subcommand("report", "Judge a run against a machine profile: table of bound, efficiency, gap");
  sub->add_option("run", args->run, "run.json written by `rafter profile`")->required();
  sub->add_option("--machine,-m", args->machine,
                  "machine.json to judge against (default: machine.json beside the run; another machine's "
                  "profile gives the what-if)");
  auto* csv = sub->add_flag("--csv", args->csv, "CSV instead of the console table");
  sub->add_flag("--json", args->json, "JSON instead of the console table")->excludes(csv);
  sub->add_option("-o,--output", args->out, "Write to this file (atomically) instead of stdout");
  sub->callback([args] {
    if (args->machine.empty()) args->machine = default_machine_for(args->run);
    run_report(*args);
  });
}

}  // namespace rafter::cli
