// GPU timing: CUDA events around graph-captured repeats, with warm-up, an L2 flush between samples
// and clock readings around the timed part (see gpu_timing.hpp).
#include "rafter/collector/gpu_timing.hpp"

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "nvml_runtime.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::gpu {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw InputError(std::string(what) + ": " + cudaGetErrorString(e));
}

std::string pci_bus_id(int device) {
  char id[32] = {};
  if (cudaDeviceGetPCIBusId(id, sizeof id, device) != cudaSuccess) return {};
  return id;
}

// One buffer per device, twice the L2, kept for the life of the process: overwriting it evicts
// whatever the timed kernel left in L2 (write-back lines included) without a fresh allocation.
struct FlushBuffer {
  void* ptr = nullptr;
  std::size_t bytes = 0;
};

FlushBuffer flush_buffer(int device) {
  static std::mutex mutex;
  static std::map<int, FlushBuffer> buffers;
  std::lock_guard lock(mutex);
  auto it = buffers.find(device);
  if (it != buffers.end()) return it->second;
  int l2_bytes = 0;
  check(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device), "cudaDeviceGetAttribute(L2)");
  FlushBuffer b;
  b.bytes = std::size_t(l2_bytes > 0 ? l2_bytes : 64 << 20) * 2;
  check(cudaMalloc(&b.ptr, b.bytes), "cudaMalloc(L2 flush buffer)");
  buffers[device] = b;
  return b;
}

struct Resources {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Resources() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (stream) cudaStreamDestroy(stream);
  }
};

// Captures `n` launches into a graph; false (and the error cleared) when the launches cannot be
// captured, e.g. copies from pageable memory.
bool capture(Resources& r, const LaunchFn& launch, int n) {
  if (cudaStreamBeginCapture(r.stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  bool threw = false;
  try {
    for (int i = 0; i < n; ++i) launch(r.stream);
  } catch (const InputError&) {
    threw = true;
  }
  cudaGraph_t g = nullptr;
  cudaError_t e = cudaStreamEndCapture(r.stream, &g);
  if (threw || e != cudaSuccess || !g) {
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();
    return false;
  }
  r.graph = g;
  if (cudaGraphInstantiate(&r.exec, g, 0) != cudaSuccess) {
    cudaGetLastError();
    r.exec = nullptr;
    return false;
  }
  return true;
}

bool keep_sampling(const RepeatPolicy& p, std::size_t count, double total_seconds) {
  if (count < std::size_t(p.min_repeats)) return true;
  if (count >= std::size_t(p.max_repeats)) return false;
  if (total_seconds >= p.max_total_seconds) return false;
  return total_seconds < p.min_total_seconds;
}

}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

Clocks read_clocks(int device) {
  Clocks c;
  if (nvml::current_clocks_hz(pci_bus_id(device), c.sm_hz, c.memory_hz)) {
    c.source = "nvml";
    return c;
  }
  int sm_khz = 0, mem_khz = 0;
  cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, device);
  cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device);
  c.sm_hz = sm_khz * 1e3;
  c.memory_hz = mem_khz * 1e3;
  c.source = "cuda-attribute";  // the peak clock the driver reports, not a reading
  return c;
}

nlohmann::json nvml_properties(int device) { return nvml::device_properties(pci_bus_id(device)); }

GpuTiming time_launches(const LaunchFn& launch, const GpuTimingOptions& options) {
  check(cudaSetDevice(options.device), "cudaSetDevice");
  const int n = options.launches_per_sample < 1 ? 1 : options.launches_per_sample;
  Resources r;
  check(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreate(&r.start), "cudaEventCreate");
  check(cudaEventCreate(&r.stop), "cudaEventCreate");
  FlushBuffer flush;
  if (options.flush_l2) flush = flush_buffer(options.device);

  for (int w = 0; w < options.policy.warmup; ++w)
    for (int i = 0; i < n; ++i) launch(r.stream);
  check(cudaStreamSynchronize(r.stream), "warm-up launches");
  check(cudaGetLastError(), "warm-up launches");

  GpuTiming out;
  out.graph_used = options.use_graph && capture(r, launch, n);

  // Clocks are read while each sample runs (between its launch and its end): an idle GPU drops
  // its clock within microseconds, so readings between samples say little about the load.
  Clocks before, after;
  double clock_sum = 0;
  std::vector<double> samples;
  double total = 0;
  while (keep_sampling(options.policy, samples.size(), total)) {
    if (flush.ptr)
      check(cudaMemsetAsync(flush.ptr, int(samples.size() & 0xff), flush.bytes, r.stream), "L2 flush");
    check(cudaEventRecord(r.start, r.stream), "cudaEventRecord");
    if (out.graph_used)
      check(cudaGraphLaunch(r.exec, r.stream), "cudaGraphLaunch");
    else
      for (int i = 0; i < n; ++i) launch(r.stream);
    check(cudaEventRecord(r.stop, r.stream), "cudaEventRecord");
    after = read_clocks(options.device);
    if (samples.empty()) before = after;
    clock_sum += after.sm_hz;
    check(cudaEventSynchronize(r.stop), "timed launches");
    check(cudaGetLastError(), "timed launches");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, r.start, r.stop), "cudaEventElapsedTime");
    samples.push_back(ms * 1e-3 / n);
    total += ms * 1e-3;
  }
  out.seconds = summarize(samples);
  out.core_hz_mean = clock_sum / double(samples.size());
  out.clocks.core_hz_before = before.sm_hz;
  out.clocks.core_hz_after = after.sm_hz;
  out.clocks.memory_hz_before = before.memory_hz;
  out.clocks.memory_hz_after = after.memory_hz;
  // A drop of more than 5% while the samples ran means the clock fell under load (power or heat).
  out.clocks.throttled = after.source == "nvml" && after.sm_hz < 0.95 * before.sm_hz;
  return out;
}

}  // namespace rafter::gpu
