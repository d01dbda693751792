// rafter plot — placeholder until its issue lands.
#include "commands.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::cli {

void add_plot_command(CLI::App& app) {
  auto* sub = app.add_subcommand("plot", "(not built yet)");
  sub->callback([] { throw InputError("'plot' is not implemented yet"); });
}

}  // namespace rafter::cli
