// rafter probe — placeholder until its issue lands.
#include "commands.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::cli {

void add_probe_command(CLI::App& app) {
  auto* sub = app.add_subcommand("probe", "(not built yet)");
  sub->callback([] { throw InputError("'probe' is not implemented yet"); });
}

}  // namespace rafter::cli
