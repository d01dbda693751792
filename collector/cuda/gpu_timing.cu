// GPU timing: CUDA events around graph-captured repeats, with warm-up, an L2 flush between samples
// and clock readings around the timed part (see gpu_timing.hpp).
#include "rafter/collector/gpu_timing.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "nvml_runtime.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/collector/gpu_counters.hpp"
#include "rafter/collector/interrupt.hpp"

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

// Per-device buffers kept for the process's life and freed at exit. The constructor initialises
// the CUDA runtime first, so this cache is destroyed before the runtime's own teardown (memcheck's
// leak check then finds nothing left).
template <class State>
struct PerDeviceCache {
  std::mutex mutex;
  std::map<int, State> states;
  PerDeviceCache() { check(cudaFree(nullptr), "CUDA runtime initialisation"); }
  ~PerDeviceCache() {
    for (auto& [device, state] : states) {
      cudaSetDevice(device);
      state.release();
    }
  }
};

template <class State>
PerDeviceCache<State>& per_device_cache() {
  static PerDeviceCache<State> cache;
  return cache;
}

// One buffer per device, twice the L2: overwriting it evicts whatever the timed kernel left in L2
// (write-back lines included) without a fresh allocation.
struct FlushBuffer {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  void release() const { cudaFree(ptr); }
};

FlushBuffer flush_buffer(int device) {
  auto& cache = per_device_cache<FlushBuffer>();
  std::lock_guard lock(cache.mutex);
  auto it = cache.states.find(device);
  if (it != cache.states.end()) return it->second;
  int l2_bytes = 0;
  check(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device), "cudaDeviceGetAttribute(L2)");
  FlushBuffer b;
  b.bytes = std::size_t(l2_bytes > 0 ? l2_bytes : 64 << 20) * 2;
  check(cudaMalloc(&b.ptr, b.bytes), "cudaMalloc(L2 flush buffer)");
  cache.states[device] = b;
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
  throw_if_interrupted();  // an interrupt abandons this measurement at its next sample
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

PowerReading read_power(int device) {
  PowerReading r;
  r.ok = nvml::current_power(pci_bus_id(device), r.watts, r.celsius);
  return r;
}

nlohmann::json nvml_properties(int device) { return nvml::device_properties(pci_bus_id(device)); }
nlohmann::json nvml_peer_link(int device, int peer) {
  return nvml::peer_link(pci_bus_id(device), pci_bus_id(peer));
}

namespace {

// The counted pass of a timed launch (GpuTimingOptions::count); never throws: counters that cannot
// be read leave the timing as it is and say why.
nlohmann::json count_once(const LaunchFn& launch, const GpuTimingOptions& options) {
  const GpuCounterStatus status = gpu_counter_status(options.device);
  if (!status.available) return {{"status", status.summary()}};
  LaunchFn before;
  if (options.flush_l2) before = [&](void* s) { read_flush(options.device, s); };
  try {
    const CountedPass pass = count_launch(launch, before, options.device, counter_metrics_for(options.device));
    const GpuCountedWork work = counted_work(pass);
    nlohmann::json j = counted_pass_details(pass);
    j["status"] = status.summary();
    j["bytes_per_launch"] = work.bytes_by_level;
    j["flops_per_launch"] = work.flops;
    return j;
  } catch (const std::exception& e) {
    return {{"status", std::string("unavailable (") + e.what() + ")"}};
  }
}

}  // namespace

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
  if (options.count) out.counted = count_once(launch, options);
  return out;
}

namespace {

__global__ void read_flush_kernel(const uint4* __restrict__ buf, std::size_t vecs, unsigned* sink) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < vecs;
       i += std::size_t(gridDim.x) * blockDim.x) {
    uint4 v = __ldcg(buf + i);  // through L2 (not L1): the point is to fill L2 with clean lines
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // keeps the loads; practically never taken
}

struct ReadFlush {
  void* buffer = nullptr;
  std::size_t bytes = 0;
  unsigned* sink = nullptr;
  int blocks = 0;
  void release() const {
    cudaFree(buffer);
    cudaFree(sink);
  }
};

// One read-flush buffer per device for the process's life, freed at exit.
const ReadFlush& read_flush_state(int device) {
  auto& cache = per_device_cache<ReadFlush>();
  std::lock_guard lock(cache.mutex);
  auto& states = cache.states;
  auto it = states.find(device);
  if (it != states.end()) return it->second;
  int l2 = 0, sms = 0;
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "cudaDeviceGetAttribute(L2)");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute(SMs)");
  ReadFlush s;
  s.bytes = std::max<std::size_t>(std::size_t(l2) * 2, std::size_t{16} << 20);
  check(cudaMalloc(&s.buffer, s.bytes), "cudaMalloc(L2 read-flush buffer)");
  check(cudaMemset(s.buffer, 0x5a, s.bytes), "cudaMemset(L2 read-flush buffer)");  // defined, then clean
  check(cudaMalloc(&s.sink, sizeof(unsigned)), "cudaMalloc(read-flush sink)");
  s.blocks = sms * 8;
  return states.emplace(device, s).first->second;
}

struct EachLaunchGraph {
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<cudaEvent_t> start, stop;
  ~EachLaunchGraph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    for (auto e : start) cudaEventDestroy(e);
    for (auto e : stop) cudaEventDestroy(e);
    if (stream) cudaStreamDestroy(stream);
  }
};

bool capture_each(EachLaunchGraph& g, const LaunchFn& launch, const LaunchFn& before, int n) {
  if (cudaStreamBeginCapture(g.stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  bool ok = true;
  try {
    for (int i = 0; i < n; ++i) {
      if (before) before(g.stream);
      // External: a plain record inside a capture only orders streams; this one becomes a graph
      // node that writes its timestamp at every replay.
      check(cudaEventRecordWithFlags(g.start[i], g.stream, cudaEventRecordExternal), "cudaEventRecordWithFlags");
      launch(g.stream);
      check(cudaEventRecordWithFlags(g.stop[i], g.stream, cudaEventRecordExternal), "cudaEventRecordWithFlags");
    }
  } catch (const InputError&) {
    ok = false;
  }
  const cudaError_t e = cudaStreamEndCapture(g.stream, &g.graph);
  if (!ok || e != cudaSuccess || !g.graph || cudaGraphInstantiate(&g.exec, g.graph, 0) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}

}  // namespace

void read_flush_prepare(int device) { read_flush_state(device); }

void read_flush(int device, void* stream) {
  const ReadFlush& s = read_flush_state(device);
  read_flush_kernel<<<s.blocks, 512, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const uint4*>(s.buffer),
                                                                           s.bytes / 16, s.sink);
  check(cudaGetLastError(), "read_flush_kernel");
}

bool time_each_launch(const LaunchFn& launch, const LaunchFn& before, int launches_per_sample,
                      const RepeatPolicy& policy, int device, GpuTiming& out) {
  check(cudaSetDevice(device), "cudaSetDevice");
  const int n = std::max(1, launches_per_sample);
  EachLaunchGraph g;
  check(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  g.start.resize(std::size_t(n)), g.stop.resize(std::size_t(n));
  for (int i = 0; i < n; ++i) {
    check(cudaEventCreate(&g.start[std::size_t(i)]), "cudaEventCreate");
    check(cudaEventCreate(&g.stop[std::size_t(i)]), "cudaEventCreate");
  }
  if (!capture_each(g, launch, before, n)) return false;
  for (int w = 0; w < std::max(1, policy.warmup); ++w) check(cudaGraphLaunch(g.exec, g.stream), "cudaGraphLaunch");
  check(cudaStreamSynchronize(g.stream), "warm-up replays");
  const Clocks before_clocks = read_clocks(device);
  std::vector<double> samples;
  double total = 0;
  for (std::size_t replays = 0; replays == 0 || keep_sampling(policy, replays, total); ++replays) {
    check(cudaGraphLaunch(g.exec, g.stream), "cudaGraphLaunch");
    check(cudaStreamSynchronize(g.stream), "timed replays");
    for (int i = 0; i < n; ++i) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, g.start[std::size_t(i)], g.stop[std::size_t(i)]), "cudaEventElapsedTime");
      samples.push_back(ms * 1e-3);
      total += ms * 1e-3;
    }
  }
  const Clocks after = read_clocks(device);
  out.seconds = summarize(samples);
  out.clocks.core_hz_before = before_clocks.sm_hz, out.clocks.core_hz_after = after.sm_hz;
  out.clocks.memory_hz_before = before_clocks.memory_hz, out.clocks.memory_hz_after = after.memory_hz;
  out.clocks.throttled = after.source == "nvml" && after.sm_hz < 0.95 * before_clocks.sm_hz;
  out.core_hz_mean = 0.5 * (before_clocks.sm_hz + after.sm_hz);
  out.graph_used = true;
  return true;
}

}  // namespace rafter::gpu
