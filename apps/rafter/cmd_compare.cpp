// rafter compare — placeholder until its issue lands.
#include "commands.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::cli {

void add_compare_command(CLI::App& app) {
  auto* sub = app.add_subcommand("compare", "(not built yet)");
  sub->callback([] { throw InputError("'compare' is not implemented yet"); });
}

}  // namespace rafter::cli
