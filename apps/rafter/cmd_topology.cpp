// rafter topology [--json]: the machine as hwloc sees it (packages, cores, threads, caches, NUMA
// nodes, PCI GPUs and NICs with their NUMA locality), as a console table or JSON.
#include <fmt/core.h>

#include "commands.hpp"
#include "rafter/probes/topology.hpp"

namespace rafter::cli {

void add_topology_command(CLI::App& app) {
  auto* sub =
      app.add_subcommand("topology", "Show this machine's topology (hwloc): cores, caches, NUMA, GPUs, NICs");
  auto json = std::make_shared<bool>(false);
  sub->add_flag("--json", *json, "Print JSON (the same object as machine.json's \"topology\")");
  sub->callback([json] {
    const nlohmann::json summary = probes::topology_summary();
    if (*json)
      fmt::print("{}\n", summary.dump(2));
    else
      fmt::print("{}", probes::format_topology(summary));
  });
}

}  // namespace rafter::cli
