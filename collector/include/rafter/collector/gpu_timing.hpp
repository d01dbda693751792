// GPU timing without CUDA headers: CUDA events around CUDA-graph-captured repeats, warm-up,
// L2 flush between repeats, and SM/memory clocks before and after (NVML where present).
// Implemented in collector/cuda/ (built only with CUDA); the CPU-only build has no definition,
// so callers live in CUDA-enabled code only.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "rafter/collector/machine_profile.hpp"
#include "rafter/collector/stats.hpp"
#include "rafter/collector/timing.hpp"

namespace rafter::gpu {

// `stream` is a cudaStream_t passed as an opaque pointer.
using LaunchFn = std::function<void(void* stream)>;

struct GpuTimingOptions {
  int device = 0;
  RepeatPolicy policy;
  bool use_graph = true;        // capture `launches_per_sample` launches in a graph, time its replays
  int launches_per_sample = 1;  // launches in one timed sample (graph or plain); time is per launch
  bool flush_l2 = true;         // overwrite L2 between samples (cold cache); false keeps it warm
  // After timing, one counted pass of `launch` (gpu_counters.hpp; L2 read-flushed before each of
  // its passes where the timing flushed): rafter probe --counters.
  bool count = false;
};

struct GpuTiming {
  Summary seconds;   // per launch
  ClockState clocks;  // read while the first and the last timed sample ran (under load)
  bool graph_used = false;
  double core_hz_mean = 0;  // mean of the SM clock readings taken while the samples ran
  // With options.count: {"status", "bytes_per_launch": {level: bytes}, "flops_per_launch":
  // {precision: FLOPs}, "passes", "kernels"}, or {"status": "unavailable (why)"}; null otherwise.
  nlohmann::json counted;
};

// Times `launch` on its own stream. Throws InputError on CUDA errors (message names the call).
GpuTiming time_launches(const LaunchFn& launch, const GpuTimingOptions& options);

// Enqueues one read of a buffer twice the L2 of `device` through L2 (not L1): it evicts what a
// timed kernel left there without leaving dirty lines that the next kernel would pay to write
// back. The buffer is allocated once per device; call read_flush_prepare() before a capture.
void read_flush(int device, void* stream);
void read_flush_prepare(int device);

// Every launch timed on its own, the way rafter times operators: a CUDA graph of
// `launches_per_sample` x (before(), event, launch, event) with external events, replayed per the
// policy; each event pair is one sample (per launch), so neither `before` (an L2 read-flush) nor the
// write-back of the launch's dirty lines lands in its time. Returns false, with nothing timed, when
// the launches cannot be captured.
bool time_each_launch(const LaunchFn& launch, const LaunchFn& before, int launches_per_sample,
                      const RepeatPolicy& policy, int device, GpuTiming& out);

// SM and memory clocks in Hz now (NVML when available, else CUDA's attribute clock).
struct Clocks {
  double sm_hz = 0;
  double memory_hz = 0;
  std::string source;  // "nvml" or "cuda-attribute"
};
Clocks read_clocks(int device);

// Board power (W) and GPU temperature (°C) now, through NVML; ok false without NVML.
struct PowerReading {
  double watts = 0;
  double celsius = 0;
  bool ok = false;
};
PowerReading read_power(int device);

int device_count();  // 0 when there is no GPU or no driver (never throws)

// What NVML says of a device, for Device.properties: driver version, ECC mode, PCIe link, maximum
// clocks, power limit. An object with "nvml": "unavailable (why)" when NVML cannot be opened.
nlohmann::json nvml_properties(int device);
// How GPU `device` reaches GPU `peer` as NVML reports it (NVLink P2P status, PCIe common ancestor,
// each active NVLink's version and far end): see nvml_runtime.hpp's peer_link.
nlohmann::json nvml_peer_link(int device, int peer);

}  // namespace rafter::gpu
