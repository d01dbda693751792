// CPU hardware counters: PAPI for counting, libpfm4 for turning the event names rafter uses (FLOPs
// per width, cache-line traffic per level) into this CPU's encodings. Where the machine exposes no
// hardware counters (a KVM guest without a virtual PMU, perf_event_paranoid too strict), rafter
// says so once and records "unavailable (reason)" — it never reports zeros as counts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rafter {

struct CounterStatus {
  bool available = false;
  int hardware_counters = 0;  // PAPI's count for the CPU component
  std::string reason;         // why unavailable, or what is available
  std::string pmu;            // libpfm4's active PMU model, e.g. "amd64_fam19h_zen4"
  // "available (papi: 6 hardware counters, pmu amd64_fam19h_zen4)" or "unavailable (reason)":
  // the string recorded as Device::counters.
  std::string summary() const;
};

// Initialises PAPI (once per process) and reports whether it can count hardware events here.
const CounterStatus& cpu_counter_status();

// Prints "rafter: note: hardware counters unavailable (...)" on stderr the first time it is called
// in a process while counters are unavailable; later calls are silent.
void note_counters_unavailable_once();

// One event translated by libpfm4 for perf_event_open.
struct EventEncoding {
  std::string name;       // as asked, e.g. "RETIRED_SSE_AVX_FLOPS:ANY"
  std::string canonical;  // libpfm4's full string, e.g. "amd64_fam19h_zen4::RETIRED_SSE_AVX_FLOPS:ANY:..."
  std::uint32_t perf_type = 0;
  std::uint64_t config = 0;
};

// Translates an event name through libpfm4 (table-based: works without a PMU). Throws
// DeviceUnavailable when no active PMU knows the event.
EventEncoding translate_event(const std::string& name);

// libpfm4's active (CPUID-detected) core PMU name, "" when none; honours LIBPFM_FORCE_PMU.
std::string active_pmu_name();

// Re-initialises libpfm4 (e.g. after setting LIBPFM_FORCE_PMU to translate another CPU's events).
void reinitialize_pfm();

// What rafter counts, by meaning; the native name depends on the CPU family.
struct RafterEvent {
  std::string meaning;  // "fp64_scalar", "fp64_512b", "flops_any", "l1d_fills", "l2_fills", "llc_misses"
  std::string native;   // the libpfm4 event name for this PMU
  double scale = 1;     // FLOPs (or bytes) per count, e.g. 8 for FP_ARITH_INST_RETIRED.512B_PACKED_DOUBLE
  std::string unit;     // "FLOP", "lines"
};

// The events for a libpfm4 PMU name: Intel cores (FP_ARITH_INST_RETIRED / L1D / L2 / LLC events of
// Skylake-SP and later, Zen 3 and Zen 4 tables for AMD); empty for an unknown PMU.
std::vector<RafterEvent> rafter_cpu_events(const std::string& pmu_name);

// Counts native events around a region with PAPI. Construction throws DeviceUnavailable (with the
// reason) when counters are unavailable, so callers never receive made-up zeros.
class CounterSet {
 public:
  // `thread`: a thread id of this process to attach to (Linux tid); 0 counts the calling thread.
  explicit CounterSet(const std::vector<std::string>& native_events, int thread = 0);
  ~CounterSet();
  CounterSet(const CounterSet&) = delete;
  CounterSet& operator=(const CounterSet&) = delete;
  void start();
  std::vector<long long> stop();

 private:
  int event_set_ = -1;
  std::size_t count_ = 0;
};

}  // namespace rafter
