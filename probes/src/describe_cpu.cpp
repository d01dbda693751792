// describe_cpu(): the CPU device as hwloc (cores, threads, cache levels, memory) and CPUID (name,
// ISA extensions) describe it, before anything is measured.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "../cpu/cpu_features.hpp"
#include "hwloc_topology.hpp"
#include "rafter/probes/probe.hpp"

namespace rafter::probes {
namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

Device describe_cpu() {
  const HwlocTopology& t = process_topology();
  const cpu::CpuFeatures& f = cpu::cpu_features();
  Device d;
  d.id = "cpu";
  d.kind = "cpu";
  d.name = f.brand;
  if (d.name.empty()) {
    const char* model = hwloc_obj_get_info_by_name(hwloc_get_root_obj(t.get()), "CPUModel");
    d.name = model ? model : "unknown CPU";
  }
  d.cores = t.count(HWLOC_OBJ_CORE);
  d.threads = t.count(HWLOC_OBJ_PU);
  d.isa = cpu::isa_extension_names(f);
  for (const CacheLevelInfo& c : data_cache_levels(t)) {
    d.memory_levels.push_back(
        MemoryLevel{fmt::format("L{}", c.depth), c.size_bytes, c.line_bytes, c.shared_by_cores, c.instances});
  }
  const int numa = t.count(HWLOC_OBJ_NUMANODE);
  // Some virtual machines hot-plug memory that hwloc's NUMA view misses; the kernel's page count
  // is the memory a working set can actually use.
  const double os_bytes =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  MemoryLevel dram{"DRAM", std::max(t.total_memory_bytes(), os_bytes), 64, d.cores, numa > 0 ? numa : 1};
  if (numa > 0) dram.size_bytes /= numa;
  d.memory_levels.push_back(dram);
  d.properties = {{"vendor", f.vendor},
                  {"family", f.family},
                  {"model", f.model},
                  {"packages", t.count(HWLOC_OBJ_PACKAGE)},
                  {"numa_nodes", numa},
                  {"kernel_isas_available", nlohmann::json::array()},
                  {"transparent_hugepage", first_line("/sys/kernel/mm/transparent_hugepage/enabled")},
                  {"scaling_governor", first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")}};
  for (const auto& isa : cpu::kernel_isas())
    if (cpu::cpu_has_isa(f, isa)) d.properties["kernel_isas_available"].push_back(isa);
  // A held run says so: `isa` above lists what rafter used, this what the CPU has.
  if (const auto held = held_cpu_isa())
    d.properties["cpu_isa_held"] = {{"rafter_cpu_isa", to_string(*held)},
                                    {"detected_isa", cpu::isa_extension_names(cpu::detected_cpu_features())}};
  return d;
}

}  // namespace rafter::probes
