// The machine's topology as hwloc sees it, summarized for machine.json ("topology") and for
// `rafter topology`: packages, cores, hardware threads, caches per level (size, line, which cores
// share each instance), NUMA nodes, and PCI GPUs and NICs with their NUMA locality.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace rafter::probes {

// Loads hwloc with I/O discovery and summarizes it (see docs/probes-cpu.md for the fields).
nlohmann::json topology_summary();

// The same summary as a console table (what `rafter topology` prints).
std::string format_topology(const nlohmann::json& summary);

}  // namespace rafter::probes
