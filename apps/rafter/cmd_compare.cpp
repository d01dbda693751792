// rafter compare A.json B.json [...]: runs side by side (the same model in BF16 vs FP8 vs NVFP4),
// one run judged against several machines (the what-if: --machine given more than once), or machine
// profiles ceiling by ceiling. A table on stdout (or --csv/--json), and a chart with -o.
#include <fmt/core.h>

#include "commands.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/collector/json_io.hpp"
#include "rafter/roofline/charts.hpp"
#include "rafter/roofline/compare.hpp"
#include "rafter/roofline/inputs.hpp"
#include "rafter/roofline/outputs.hpp"
#include "rafter/roofline/report.hpp"

namespace rafter::cli {

std::string default_machine_for(const std::string& run_path);  // cmd_report.cpp

namespace {

struct CompareArgs {
  std::vector<std::string> files, machines;
  std::string out, device;
  bool csv = false, json = false;
};

void emit(const CompareArgs& a, const std::string& table, const std::string& csv, const nlohmann::json& json,
          const std::string& svg, const std::string& title) {
  fmt::print("{}", a.json ? json.dump(2) + "\n" : a.csv ? csv : table);
  if (a.out.empty()) return;
  roofline::write_chart_file(svg, a.out, title, table);
  fmt::print("rafter: wrote {}\n", a.out);
}

void compare_machines(const CompareArgs& a) {
  std::vector<std::string> names;
  std::vector<MachineProfile> profiles;
  for (const auto& f : a.files) {
    names.push_back(roofline::input_name(f));
    profiles.push_back(roofline::load_machine(f));
  }
  std::string device = a.device;
  if (device.empty()) device = profiles.front().devices.empty() ? "cpu" : profiles.front().devices.back().id;
  auto cmp = roofline::compare_machines(names, profiles, device);
  emit(a, roofline::format_machine_comparison_table(cmp), roofline::format_machine_comparison_csv(cmp),
       roofline::machine_comparison_json(cmp), roofline::machine_comparison_svg(cmp), "rafter: machines compared");
}

// Runs against machines: one machine for all, one per run, or one run against each machine.
void compare_runs(const CompareArgs& a) {
  std::vector<std::string> machines = a.machines;
  if (machines.empty())
    for (const auto& f : a.files) machines.push_back(default_machine_for(f));
  std::vector<roofline::RunPlacement> placements;
  if (a.files.size() == 1) {
    Run run = roofline::load_run(a.files.front());
    for (const auto& m : machines)
      placements.push_back(roofline::place_run(run, roofline::load_machine(m),
                                               roofline::input_name(a.files.front()) + " on " + roofline::input_name(m)));
  } else {
    if (machines.size() != 1 && machines.size() != a.files.size())
      throw InputError(fmt::format("--machine given {} times for {} runs (give it once, or once per run)", machines.size(),
                                   a.files.size()));
    for (std::size_t i = 0; i < a.files.size(); ++i)
      placements.push_back(roofline::place_run(roofline::load_run(a.files[i]),
                                               roofline::load_machine(machines[machines.size() == 1 ? 0 : i]),
                                               roofline::input_name(a.files[i])));
  }
  auto cmp = roofline::compare_runs(std::move(placements));
  emit(a, roofline::format_run_comparison_table(cmp), roofline::format_run_comparison_csv(cmp),
       roofline::run_comparison_json(cmp), roofline::run_comparison_svg(cmp), "rafter: runs compared");
}

void run_compare(const CompareArgs& a) {
  if (!a.out.empty()) roofline::check_chart_path(a.out);
  std::size_t runs = 0;
  for (const auto& f : a.files) runs += roofline::input_kind(f) == roofline::InputKind::Run;
  if (runs != 0 && runs != a.files.size())
    throw InputError("compare takes runs or machine profiles, not both (give machines with --machine)");
  if (runs == 0) {
    if (a.files.size() < 2) throw InputError("compare needs two machine profiles (or runs)");
    return compare_machines(a);
  }
  if (a.files.size() < 2 && a.machines.size() < 2)
    throw InputError("compare needs two runs, or one run and --machine given twice (the what-if)");
  compare_runs(a);
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  auto* sub = app.add_subcommand("compare", "Compare runs (e.g. BF16 vs FP8 vs NVFP4), a run on several machines, or machines");
  sub->add_option("files", args->files, "run.json files, or machine.json files")->required();
  sub->add_option("--machine,-m", args->machines,
                  "machine.json to judge runs against: once for all, once per run, or several times for one run (what-if)");
  sub->add_option("--device", args->device, "Device to compare in machine profiles (default: the last, e.g. cuda:0)");
  auto* csv = sub->add_flag("--csv", args->csv, "CSV instead of the table");
  sub->add_flag("--json", args->json, "JSON instead of the table")->excludes(csv);
  sub->add_option("-o,--output", args->out, "Also write the comparison chart: .svg, .png or .html");
  sub->callback([args] { run_compare(*args); });
}

}  // namespace rafter::cli
