// PAPI initialisation and counting, libpfm4 event translation (see counters.hpp).
#include "rafter/collector/counters.hpp"

#include <fmt/core.h>
#include <papi.h>
#include <perfmon/pfmlib_perf_event.h>

#include <cstring>
#include <filesystem>
#include <mutex>

#include "rafter/collector/error.hpp"
#include "rafter/collector/ranks.hpp"

namespace rafter {
namespace {

std::mutex g_pfm_mutex;
bool g_pfm_ready = false;

void ensure_pfm_locked() {
  if (g_pfm_ready) return;
  const int rc = pfm_initialize();
  if (rc != PFM_SUCCESS)
    throw DeviceUnavailable(fmt::format("libpfm4: pfm_initialize failed ({})", pfm_strerror(rc)));
  g_pfm_ready = true;
}

// The first present PMU that is a core PMU (not perf's generic software/hardware tables).
std::string active_pmu_locked() {
  ensure_pfm_locked();
  int i = 0;
  pfm_for_all_pmus(i) {
    pfm_pmu_info_t info;
    std::memset(&info, 0, sizeof info);
    info.size = sizeof info;
    if (pfm_get_pmu_info(static_cast<pfm_pmu_t>(i), &info) != PFM_SUCCESS || !info.is_present) continue;
    if (info.type != PFM_PMU_TYPE_CORE) continue;
    const std::string name = info.name;
    if (name == "perf" || name == "perf_raw") continue;
    return name;
  }
  return "";
}

// The CPU component (perf_event) of PAPI: how many hardware counters it has and why not.
CounterStatus detect_status() {
  CounterStatus s;
  try {
    std::lock_guard lock(g_pfm_mutex);
    s.pmu = active_pmu_locked();
  } catch (const InputError&) {
    s.pmu = "";
  }
  // perf_event exposes a hardware PMU as /sys/bus/event_source/devices/cpu (cpu_core/cpu_atom on
  // hybrid Intel); without it only software events exist, whatever PAPI's tables advertise.
  const bool kernel_pmu = std::filesystem::exists("/sys/bus/event_source/devices/cpu") ||
                          std::filesystem::exists("/sys/bus/event_source/devices/cpu_core");
  const int version = PAPI_library_init(PAPI_VER_CURRENT);
  if (version != PAPI_VER_CURRENT) {
    s.reason = fmt::format("PAPI_library_init failed ({})",
                           version < 0 ? PAPI_strerror(version) : "version mismatch");
    return s;
  }
  const int components = PAPI_num_components();
  for (int c = 0; c < components; ++c) {
    const PAPI_component_info_t* info = PAPI_get_component_info(c);
    if (info == nullptr || std::strcmp(info->name, "perf_event") != 0) continue;
    if (info->disabled) {
      s.reason = fmt::format("PAPI perf_event component disabled: {}", info->disabled_reason);
      return s;
    }
    s.hardware_counters = PAPI_num_cmp_hwctrs(c);
    break;
  }
  if (!kernel_pmu) {
    s.reason =
        "no hardware PMU exposed by the kernel (/sys/bus/event_source/devices/cpu missing: a virtual "
        "machine without a virtual PMU?); PAPI sees only software events";
    s.hardware_counters = 0;
    return s;
  }
  if (s.hardware_counters <= 0) {
    s.reason =
        "no hardware counters: PAPI sees only software events (no PMU exposed to this machine, "
        "e.g. a virtual machine without a virtual PMU)";
    return s;
  }
  // A PMU may be advertised and still refuse events (perf_event_paranoid, a VM that hides it):
  // count one real event to be sure.
  int set = PAPI_NULL;
  long long value = 0;
  int rc = PAPI_create_eventset(&set);
  if (rc == PAPI_OK) rc = PAPI_add_named_event(set, "PAPI_TOT_CYC");
  if (rc == PAPI_OK) rc = PAPI_start(set);
  if (rc == PAPI_OK) rc = PAPI_stop(set, &value);
  if (set != PAPI_NULL) {
    PAPI_cleanup_eventset(set);
    PAPI_destroy_eventset(&set);
  }
  if (rc != PAPI_OK || value <= 0) {
    s.reason = fmt::format("hardware counters advertised but counting cycles failed ({})",
                           rc != PAPI_OK ? PAPI_strerror(rc) : "read 0 cycles");
    s.hardware_counters = 0;
    return s;
  }
  s.available = true;
  s.reason = fmt::format("papi {}.{}: {} hardware counters", PAPI_VERSION_MAJOR(version),
                         PAPI_VERSION_MINOR(version), s.hardware_counters);
  return s;
}

}  // namespace

std::string CounterStatus::summary() const {
  if (!available) return fmt::format("unavailable ({})", reason);
  return fmt::format("available ({}{})", reason, pmu.empty() ? "" : ", pmu " + pmu);
}

const CounterStatus& cpu_counter_status() {
  static const CounterStatus status = detect_status();
  return status;
}

void note_counters_unavailable_once() {
  static std::once_flag once;
  const CounterStatus& s = cpu_counter_status();
  if (s.available || ranks_from_environment().rank != 0) return;  // under mpirun, one line for all ranks
  std::call_once(once, [&] { fmt::print(stderr, "rafter: note: hardware counters {}\n", s.summary()); });
}

EventEncoding translate_event(const std::string& name) {
  std::lock_guard lock(g_pfm_mutex);
  ensure_pfm_locked();
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  pfm_perf_encode_arg_t arg;
  std::memset(&arg, 0, sizeof arg);
  arg.size = sizeof arg;
  arg.attr = &attr;
  char* fstr = nullptr;
  arg.fstr = &fstr;
  const int rc = pfm_get_os_event_encoding(name.c_str(), PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
  if (rc != PFM_SUCCESS)
    throw DeviceUnavailable(fmt::format("libpfm4: event '{}': {} (PMU: {})", name, pfm_strerror(rc),
                                        active_pmu_locked().empty() ? "none" : active_pmu_locked()));
  EventEncoding e{name, fstr ? fstr : "", attr.type, attr.config};
  std::free(fstr);
  return e;
}

std::string active_pmu_name() {
  std::lock_guard lock(g_pfm_mutex);
  return active_pmu_locked();
}

void reinitialize_pfm() {
  std::lock_guard lock(g_pfm_mutex);
  if (g_pfm_ready) pfm_terminate();
  g_pfm_ready = false;
  ensure_pfm_locked();
}

std::vector<RafterEvent> rafter_cpu_events(const std::string& pmu) {
  // Zen counts FLOPs directly (a 512-bit FMA on 8 doubles counts 16); fills are cache lines. The
  // fill sources are named differently on Zen 3 and Zen 4 (libpfm4 4.13 has no Zen 5 table yet).
  const bool zen4 = pmu == "amd64_fam19h_zen4";
  if (zen4 || pmu == "amd64_fam19h_zen3") {
    const std::string fills = "ANY_DATA_CACHE_FILLS_FROM_SYSTEM:";
    const std::string l3 = zen4 ? "LOCAL_CCX" : "INT_CACHE";
    const std::string dram = zen4 ? "DRAM_IO_NEAR:DRAM_IO_FAR" : "MEM_IO_LCL:MEM_IO_RMT";
    const std::string remote =
        zen4 ? "NEAR_CACHE_NEAR_FAR:FAR_CACHE_NEAR_FAR" : "EXT_CACHE_LCL:EXT_CACHE_RMT";
    return {{"flops_any", "RETIRED_SSE_AVX_FLOPS:ANY", 1, "FLOP"},
            {"flops_fma", "RETIRED_SSE_AVX_FLOPS:MAC_FLOPS", 1, "FLOP"},
            {"l1d_fills_any", fills + "LCL_L2:" + l3 + ":" + remote + ":" + dram, 1, "lines"},
            {"l1d_fills_from_l2", fills + "LCL_L2", 1, "lines"},
            {"l1d_fills_from_l3", fills + l3, 1, "lines"},
            {"l1d_fills_from_dram", fills + dram, 1, "lines"},
            {"l2_requests", "REQUESTS_TO_L2_GROUP1:RD_BLK_L:RD_BLK_X:LS_RD_BLK_C_S:CHANGE_TO_X", 1, "lines"}};
  }
  if (pmu.empty() || pmu.rfind("amd64", 0) == 0) return {};
  // Intel (Skylake-SP and later): FP_ARITH_INST_RETIRED counts instructions, an FMA twice, so
  // FLOPs = count x lanes of the instruction's width.
  return {{"fp64_scalar", "FP_ARITH_INST_RETIRED:SCALAR_DOUBLE", 1, "FLOP"},
          {"fp64_128b", "FP_ARITH_INST_RETIRED:128B_PACKED_DOUBLE", 2, "FLOP"},
          {"fp64_256b", "FP_ARITH_INST_RETIRED:256B_PACKED_DOUBLE", 4, "FLOP"},
          {"fp64_512b", "FP_ARITH_INST_RETIRED:512B_PACKED_DOUBLE", 8, "FLOP"},
          {"fp32_scalar", "FP_ARITH_INST_RETIRED:SCALAR_SINGLE", 1, "FLOP"},
          {"fp32_128b", "FP_ARITH_INST_RETIRED:128B_PACKED_SINGLE", 4, "FLOP"},
          {"fp32_256b", "FP_ARITH_INST_RETIRED:256B_PACKED_SINGLE", 8, "FLOP"},
          {"fp32_512b", "FP_ARITH_INST_RETIRED:512B_PACKED_SINGLE", 16, "FLOP"},
          {"l1d_fills", "L1D:REPLACEMENT", 1, "lines"},
          {"l2_fills", "L2_LINES_IN:ALL", 1, "lines"},
          {"llc_misses", "LONGEST_LAT_CACHE:MISS", 1, "lines"}};
}

CounterSet::CounterSet(const std::vector<std::string>& native_events, int thread) {
  const CounterStatus& s = cpu_counter_status();
  if (!s.available) throw DeviceUnavailable("hardware counters " + s.summary());
  if (PAPI_create_eventset(&event_set_) != PAPI_OK) throw DeviceUnavailable("PAPI_create_eventset failed");
  auto fail = [&](std::string what, int rc) {
    PAPI_cleanup_eventset(event_set_);
    PAPI_destroy_eventset(&event_set_);
    throw DeviceUnavailable(fmt::format("{}: {}", what, PAPI_strerror(rc)));
  };
  if (thread != 0) {  // attaching needs the set bound to the CPU component first (component 0)
    int rc = PAPI_assign_eventset_component(event_set_, 0);
    if (rc == PAPI_OK) rc = PAPI_attach(event_set_, static_cast<unsigned long>(thread));
    if (rc != PAPI_OK) fail(fmt::format("PAPI cannot attach to thread {}", thread), rc);
  }
  for (const std::string& e : native_events) {
    const int rc = PAPI_add_named_event(event_set_, e.c_str());
    if (rc != PAPI_OK) fail(fmt::format("PAPI cannot count '{}'", e), rc);
  }
  count_ = native_events.size();
}

CounterSet::~CounterSet() {
  if (event_set_ == PAPI_NULL) return;
  std::vector<long long> scratch(count_ + 1);
  PAPI_stop(event_set_, scratch.data());  // harmless when not running
  PAPI_cleanup_eventset(event_set_);
  PAPI_destroy_eventset(&event_set_);
}

void CounterSet::start() {
  const int rc = PAPI_start(event_set_);
  if (rc != PAPI_OK) throw DeviceUnavailable(fmt::format("PAPI_start: {}", PAPI_strerror(rc)));
}

std::vector<long long> CounterSet::stop() {
  std::vector<long long> values(count_);
  const int rc = PAPI_stop(event_set_, values.data());
  if (rc != PAPI_OK) throw DeviceUnavailable(fmt::format("PAPI_stop: {}", PAPI_strerror(rc)));
  return values;
}

}  // namespace rafter
