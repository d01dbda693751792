// rafter report — placeholder until its issue lands.
#include "commands.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::cli {

void add_report_command(CLI::App& app) {
  auto* sub = app.add_subcommand("report", "(not built yet)");
  sub->callback([] { throw InputError("'report' is not implemented yet"); });
}

}  // namespace rafter::cli
