// Shared helpers of the CUDA probes (see cuda_util.hpp).
#include "cuda_util.hpp"

#include <charconv>

#include "gpu_model.hpp"

namespace rafter::probes::cuda {
namespace {

__global__ void fill_random_kernel(unsigned* out, std::size_t words, unsigned seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < words;
       i += std::size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 0x9E3779B9u ^ seed ^ unsigned(i >> 32) * 0x85EBCA6Bu;
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    out[i] = x | 1u;  // never a zero word
  }
}

}  // namespace

int device_index(const Device& device) {
  const std::string& id = device.id;
  auto colon = id.find(':');
  int n = 0;
  if (colon == std::string::npos ||
      std::from_chars(id.data() + colon + 1, id.data() + id.size(), n).ec != std::errc())
    throw InputError("cuda probe: device id '" + id + "' is not of the form cuda:N");
  return n;
}

void fill_random(void* device_ptr, std::size_t bytes, unsigned seed) {
  std::size_t words = bytes / 4;
  if (words == 0) return;
  fill_random_kernel<<<1024, 256>>>(static_cast<unsigned*>(device_ptr), words, seed);
  check_launch("fill_random_kernel");
  check(cudaDeviceSynchronize(), "fill_random");
}

namespace {

// The counted pass beside what the probe declares: for a byte ceiling the counted bytes at its own
// level (L1 is counted as "shared", l1tex traffic), for a FLOP ceiling the counted FLOPs of every
// precision, over work_per_launch. A ratio far from 1 is a probe that does not move or compute
// what it claims (or a level the counters do not see: shared memory for L1).
nlohmann::json counted_check(const Measurement& m, const std::string& resource) {
  nlohmann::json j = m.timing.counted;
  if (!j.contains("bytes_per_launch") || m.work_per_launch <= 0) return j;
  double counted = 0;
  if (m.unit == "B/s") {
    const std::string level = resource == "L1" ? "shared" : resource;
    if (!j["bytes_per_launch"].contains(level)) return j;
    counted = j["bytes_per_launch"][level].get<double>();
    j["level"] = level;
  } else {
    for (const auto& [precision, flops] : j["flops_per_launch"].items()) counted += flops.get<double>();
  }
  j["counted_over_declared"] = counted / m.work_per_launch;
  return j;
}

}  // namespace

Ceiling make_ceiling(const Device& device, const std::string& probe, const Measurement& m,
                     nlohmann::json params) {
  Ceiling c;
  c.kind = m.kind;
  c.device = device.id;
  c.resource = m.resource;
  c.operation = m.operation;
  c.isa = m.isa;
  c.scope = "device";
  c.threads = device.cores;
  double work = m.work_per_launch;
  Summary rate = transform(m.timing.seconds, [work](double s) { return s > 0 ? work / s : 0.0; });
  c.figure = Figure::measured(rate, m.unit);
  c.clocks = m.timing.clocks;
  c.frequency_hz = m.timing.core_hz_mean > 0 ? m.timing.core_hz_mean : loaded_sm_hz(c.clocks);
  params["sm_clock_hz_nvml_mean"] = m.timing.core_hz_mean;
  if (m.sm_cycles_per_launch > 0 && m.timing.seconds.median > 0) {
    c.frequency_hz = m.sm_cycles_per_launch / m.timing.seconds.median;
    params["sm_clock_hz_clock64"] = c.frequency_hz;
  }
  c.probe = probe;
  params["seconds_per_launch_median"] = m.timing.seconds.median;
  params["work_per_launch"] = work;
  params["cuda_graph"] = m.timing.graph_used;
  if (!m.timing.counted.is_null()) params["counters"] = counted_check(m, c.resource);
  c.params = std::move(params);
  return c;
}

DeviceBuffer cycle_buffer() {
  DeviceBuffer b(8);
  check(cudaMemset(b.get(), 0, 8), "clear cycle count");
  return b;
}

double read_cycles(const DeviceBuffer& cycles) {
  long long h = 0;
  check(cudaMemcpy(&h, cycles.get(), sizeof h, cudaMemcpyDeviceToHost), "copy cycle count");
  return double(h);
}

void reset_cycles(const DeviceBuffer& cycles, cudaStream_t stream) {
  check(cudaMemsetAsync(cycles.get(), 0, 8, stream), "reset cycle count");
}

gpu::GpuTimingOptions timing_options(const ProbeOptions& options, const Device& device,
                                     bool flush_l2) {
  gpu::GpuTimingOptions t;
  t.device = device_index(device);
  t.policy = options.quick ? RepeatPolicy::quick() : options.policy;
  // Each sample is a kernel of a millisecond or more, so a few samples give a stable median.
  if (t.policy.max_repeats > 15) t.policy.max_repeats = 15;
  if (t.policy.max_total_seconds > 0.5) t.policy.max_total_seconds = 0.5;
  t.flush_l2 = flush_l2;
  t.count = options.counters;
  return t;
}

}  // namespace rafter::probes::cuda
