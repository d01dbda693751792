// rafter topology — placeholder until its issue lands.
#include "commands.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::cli {

void add_topology_command(CLI::App& app) {
  auto* sub = app.add_subcommand("topology", "(not built yet)");
  sub->callback([] { throw InputError("'topology' is not implemented yet"); });
}

}  // namespace rafter::cli
