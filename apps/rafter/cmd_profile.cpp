// rafter profile — placeholder until its issue lands.
#include "commands.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::cli {

void add_profile_command(CLI::App& app) {
  auto* sub = app.add_subcommand("profile", "(not built yet)");
  sub->callback([] { throw InputError("'profile' is not implemented yet"); });
}

}  // namespace rafter::cli
