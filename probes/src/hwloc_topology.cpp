// hwloc wrapper: loading, counting, pinning and the data-cache levels.
#include "hwloc_topology.hpp"

#include <stdexcept>

namespace rafter::probes {

HwlocTopology::HwlocTopology(bool with_io) {
  if (hwloc_topology_init(&topo_) != 0) throw std::runtime_error("hwloc_topology_init failed");
  if (with_io) hwloc_topology_set_io_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topo_) != 0) {
    hwloc_topology_destroy(topo_);
    throw std::runtime_error("hwloc_topology_load failed");
  }
}

HwlocTopology::~HwlocTopology() { hwloc_topology_destroy(topo_); }

int HwlocTopology::count(hwloc_obj_type_t type) const {
  const int n = hwloc_get_nbobjs_by_type(topo_, type);
  return n < 0 ? 0 : n;
}

hwloc_obj_t HwlocTopology::object(hwloc_obj_type_t type, int index) const {
  return hwloc_get_obj_by_type(topo_, type, static_cast<unsigned>(index));
}

int HwlocTopology::cores_inside(hwloc_obj_t obj) const {
  if (obj == nullptr || obj->cpuset == nullptr) return 0;
  return hwloc_get_nbobjs_inside_cpuset_by_type(topo_, obj->cpuset, HWLOC_OBJ_CORE);
}

double HwlocTopology::total_memory_bytes() const {
  return static_cast<double>(hwloc_get_root_obj(topo_)->total_memory);
}

const HwlocTopology& process_topology() {
  static const HwlocTopology topology(false);
  return topology;
}

bool pin_current_thread_to_core(int core_index) {
  const HwlocTopology& t = process_topology();
  const int cores = t.count(HWLOC_OBJ_CORE);
  if (cores <= 0 || core_index < 0) return false;
  hwloc_obj_t core = t.object(HWLOC_OBJ_CORE, core_index % cores);
  if (core == nullptr || core->cpuset == nullptr) return false;
  // One thread per core first (the SMT siblings stay idle); only threads beyond the core count
  // go to the cores' second, third, ... hardware thread.
  const int pus = hwloc_get_nbobjs_inside_cpuset_by_type(t.get(), core->cpuset, HWLOC_OBJ_PU);
  const int which = pus > 0 ? (core_index / cores) % pus : 0;
  hwloc_obj_t pu =
      hwloc_get_obj_inside_cpuset_by_type(t.get(), core->cpuset, HWLOC_OBJ_PU, static_cast<unsigned>(which));
  if (pu == nullptr || pu->cpuset == nullptr) return false;
  return hwloc_set_cpubind(t.get(), pu->cpuset, HWLOC_CPUBIND_THREAD) == 0;
}

CallerBinding::CallerBinding() : saved_(hwloc_bitmap_alloc()) {
  if (saved_ && hwloc_get_cpubind(process_topology().get(), saved_, HWLOC_CPUBIND_THREAD) != 0) {
    hwloc_bitmap_free(saved_);
    saved_ = nullptr;
  }
}

CallerBinding::~CallerBinding() {
  if (saved_ == nullptr) return;
  hwloc_set_cpubind(process_topology().get(), saved_, HWLOC_CPUBIND_THREAD);
  hwloc_bitmap_free(saved_);
}

std::vector<CacheLevelInfo> data_cache_levels(const HwlocTopology& t) {
  std::vector<CacheLevelInfo> levels;
  const hwloc_obj_type_t types[] = {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE,
                                    HWLOC_OBJ_L4CACHE};
  for (int d = 0; d < 4; ++d) {
    const int n = t.count(types[d]);
    CacheLevelInfo level;
    level.depth = d + 1;
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t obj = t.object(types[d], i);
      if (obj->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION) continue;
      level.size_bytes = static_cast<double>(obj->attr->cache.size);
      level.line_bytes = obj->attr->cache.linesize;
      level.instances += 1;
      std::vector<int> cores;
      for (int c = 0; c < t.count(HWLOC_OBJ_CORE); ++c) {
        hwloc_obj_t core = t.object(HWLOC_OBJ_CORE, c);
        if (hwloc_bitmap_isincluded(core->cpuset, obj->cpuset)) cores.push_back(c);
      }
      level.shared_by_cores = static_cast<int>(cores.size());
      level.cores_per_instance.push_back(std::move(cores));
    }
    if (level.instances > 0) levels.push_back(std::move(level));
  }
  return levels;
}

}  // namespace rafter::probes
