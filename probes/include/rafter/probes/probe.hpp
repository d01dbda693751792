// Probes: micro-kernels that measure ceilings. A probe registers itself with one line next to
// its code (RAFTER_REGISTER_PROBE) and, when run, appends ceilings and sweeps to the profile.
#pragma once
#include <string>
#include <vector>

#include "rafter/collector/machine_profile.hpp"
#include "rafter/collector/progress.hpp"
#include "rafter/collector/timing.hpp"

namespace rafter::probes {

struct ProbeOptions {
  bool quick = false;          // --quick: coarse sweep grid, fewer repeats (< 30 s on 2 cores)
  std::string isa;             // --isa: force "avx512", "avx2", "sse", "scalar"; empty = widest present
  std::string filter;          // --filter: regex over probe names; empty = all
  int threads = 0;             // 0 = all cores (the all-core figures); 1-thread figures are always taken
  double max_working_set_bytes = 0;  // 0 = 4x the last-level cache (at least)
  // --sustained: also hold each GPU compute ceiling this long (at the power limit, as a training
  // step runs) and record the held figure beside the burst one (regime "sustained"); 0 = burst only.
  double sustained_seconds = 0;
  // --counters: each GPU ceiling's timed launch counted once more (CUPTI), its counted bytes and
  // FLOPs beside the work the probe declares (params.counters): checks the probes' own traffic.
  bool counters = false;
  RepeatPolicy policy;
};

using ProbeFn = void (*)(const ProbeOptions& options, const Device& device, MachineProfile& profile);

struct ProbeInfo {
  std::string name;         // "cpu.bandwidth", "cuda.compute", ...
  std::string device_kind;  // "cpu" or "cuda"
  std::string summary;
  ProbeFn run = nullptr;
};

std::vector<ProbeInfo>& probe_registry();
bool register_probe(ProbeInfo info);

// Probes for a device kind that match the filter, in registration order.
std::vector<ProbeInfo> select_probes(std::string_view device_kind, std::string_view filter);

// Characterizes the devices named by `spec`: "cpu", "cuda" (every GPU) or "cuda:N".
// Throws DeviceUnavailable (exit 2) when the device is absent, InputError for a bad spec.
MachineProfile characterize(std::string_view spec, const ProbeOptions& options);

// Device descriptions (topology, levels, ISA) without measuring.
Device describe_cpu();
std::vector<Device> describe_cuda_devices();  // empty when no GPU; throws when spec'd GPU missing

}  // namespace rafter::probes

#define RAFTER_PROBE_CONCAT_(a, b) a##b
#define RAFTER_PROBE_CONCAT(a, b) RAFTER_PROBE_CONCAT_(a, b)
// RAFTER_REGISTER_PROBE("cpu.bandwidth", "cpu", "load/store/copy/triad bandwidth per level", fn);
#define RAFTER_REGISTER_PROBE(name, kind, summary, fn)                                  \
  static const bool RAFTER_PROBE_CONCAT(rafter_probe_registered_, __LINE__) [[maybe_unused]] = \
      ::rafter::probes::register_probe({name, kind, summary, fn})
