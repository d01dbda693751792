// rafter plot RUN.json --machine machine.json [--kind hierarchical|time|time-stacked] -o FILE
// (.svg, .png or .html; the HTML page holds every chart, the table and toggles).
#include <fmt/core.h>

#include "commands.hpp"
#include "rafter/roofline/inputs.hpp"
#include "rafter/roofline/outputs.hpp"

namespace rafter::cli {

std::string default_machine_for(const std::string& run_path);  // cmd_report.cpp

namespace {

struct PlotArgs {
  std::string run, machine, kind = "hierarchical", out, title;
  bool all_precisions = false;
};

void run_plot(const PlotArgs& a) {
  roofline::ChartKind kind = roofline::chart_kind_from_string(a.kind);
  roofline::check_chart_path(a.out);
  roofline::RunPlacement rp = roofline::place_run(roofline::load_run(a.run), roofline::load_machine(a.machine),
                                                  roofline::input_name(a.run));
  roofline::ChartOptions options;
  options.title = a.title;
  options.all_precisions = a.all_precisions;
  roofline::write_run_chart(rp, kind, a.out, options);
  fmt::print("rafter: wrote {}\n", a.out);
}

}  // namespace

void add_plot_command(CLI::App& app) {
  auto args = std::make_shared<PlotArgs>();
  auto* sub = app.add_subcommand("plot", "Draw a run's roofline: SVG, PNG or a self-contained HTML page");
  sub->add_option("run", args->run, "run.json written by `rafter profile`")->required();
  sub->add_option("--machine,-m", args->machine, "machine.json (default: machine.json beside the run)");
  sub->add_option("--kind", args->kind,
                  "hierarchical (FLOP/s vs AI per level), time (time vs AI), time-stacked (time per operator "
                  "beside each resource's floor)")
      ->check(CLI::IsMember({"hierarchical", "time", "time-stacked"}))
      ->capture_default_str();
  sub->add_option("-o,--output", args->out, "Output file: .svg, .png or .html")->required();
  sub->add_option("--title", args->title, "Chart title (default names the device and the run)");
  sub->add_flag("--all-precisions", args->all_precisions,
                "Draw every compute ceiling of the device, not only the precisions the run uses");
  sub->callback([args] {
    if (args->machine.empty()) args->machine = default_machine_for(args->run);
    run_plot(*args);
  });
}

}  // namespace rafter::cli
