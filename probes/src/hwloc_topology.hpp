// A loaded hwloc topology (RAII), shared inside the probes library: describe_cpu(), the topology
// summary and thread pinning all read the same tree rather than parsing /proc or /sys themselves.
#pragma once
#include <hwloc.h>

#include <string>
#include <vector>

namespace rafter::probes {

class HwlocTopology {
 public:
  explicit HwlocTopology(bool with_io = false);  // with_io: PCI devices and OS devices too
  ~HwlocTopology();
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;

  hwloc_topology_t get() const { return topo_; }
  int count(hwloc_obj_type_t type) const;
  hwloc_obj_t object(hwloc_obj_type_t type, int index) const;
  int cores_inside(hwloc_obj_t obj) const;  // cores under an object (a cache, a package)
  double total_memory_bytes() const;

 private:
  hwloc_topology_t topo_ = nullptr;
};

// The process-wide topology without I/O devices, loaded once (pinning, describe_cpu).
const HwlocTopology& process_topology();

// Pins the calling thread to one hardware thread of core `core_index % cores` (thread index i goes
// to core i, then to the cores' SMT siblings past the core count); false when hwloc cannot bind
// here (the figure is then taken unpinned, and the probe records that).
bool pin_current_thread_to_core(int core_index);

// The calling thread's binding (its set of hardware threads) when constructed, put back when
// destroyed: a probe that pins the caller must not leave it pinned. Threads the caller starts later
// inherit its mask, such as an OpenMP runtime's team (oneDNN's): left on core 0, that team shared
// one core, and the default job's GEMMs after the probes ran 1.6-2.7x slower than alone.
class CallerBinding {
 public:
  CallerBinding();
  ~CallerBinding();
  CallerBinding(const CallerBinding&) = delete;
  CallerBinding& operator=(const CallerBinding&) = delete;

 private:
  hwloc_bitmap_t saved_ = nullptr;  // null: the binding could not be read; nothing to restore
};

// Data caches per level, innermost first: hwloc's L1d/L2/L3(/L4) objects.
struct CacheLevelInfo {
  int depth = 1;          // 1 for L1, ...
  double size_bytes = 0;  // per instance
  double line_bytes = 0;
  int instances = 0;
  int shared_by_cores = 1;
  std::vector<std::vector<int>> cores_per_instance;  // logical core indices sharing each instance
};
std::vector<CacheLevelInfo> data_cache_levels(const HwlocTopology& t);

}  // namespace rafter::probes
