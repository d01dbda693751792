// The default job (no verb) — placeholder until the roofline issue lands.
#include "commands.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::cli {

int run_default_job(const std::string&) { throw InputError("the default job is not implemented yet"); }

}  // namespace rafter::cli
