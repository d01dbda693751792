// Small helpers shared by the CUDA probes: error checks that throw, an owning device buffer, the
// device index behind "cuda:N", and the step that turns a timed launch into a Ceiling.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "rafter/collector/error.hpp"
#include "rafter/collector/gpu_timing.hpp"
#include "rafter/collector/machine_profile.hpp"
#include "rafter/probes/probe.hpp"

namespace rafter::probes::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw InputError(std::string("cuda: ") + what + ": " + cudaGetErrorString(e));
}

// Launch errors surface at the next call; check right after each launch so the message names it.
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

int device_index(const Device& device);  // "cuda:3" -> 3

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    check(cudaMalloc(&ptr_, bytes ? bytes : 1), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Fills a device buffer with pseudo-random 32-bit words (never zeros: zeros hide unwritten outputs
// and draw less power than real data).
void fill_random(void* device_ptr, std::size_t bytes, unsigned seed);

// What a probe measured, before it becomes a Ceiling: amount of work per launch and the timing.
struct Measurement {
  CeilingKind kind = CeilingKind::Bandwidth;
  std::string resource, operation, isa;
  double work_per_launch = 0;  // bytes or FLOPs per launch
  std::string unit;            // "B/s", "FLOP/s", "OP/s"
  gpu::GpuTiming timing;
  // SM cycles of one launch, the longest any block lived (clock64), 0 when not counted: over the
  // launch's time this is the SM clock the kernel really ran at, which NVML only samples. Valid
  // for kernels whose blocks all run in one wave.
  double sm_cycles_per_launch = 0;
};

#ifdef __CUDACC__
// Counts each block's SM cycles from its start to its end and keeps the largest in *out (reset
// it to 0 before the launch): construct first thing in the kernel, call stop() last.
struct CycleCounter {
  long long start = 0;
  __device__ CycleCounter() {
#ifdef __CUDA_ARCH__
    start = clock64();
#endif
  }
  __device__ void stop(long long* out) const {
#ifdef __CUDA_ARCH__
    if (threadIdx.x == 0)
      atomicMax(reinterpret_cast<unsigned long long*>(out), static_cast<unsigned long long>(clock64() - start));
#else
    (void)out;
#endif
  }
};
#endif

// Reads the cycle count a kernel left in `cycles` (device memory); reset_cycles zeroes it on a
// stream, before each counted launch (captured into the graph with the launch).
// The 8-byte cycle count a CycleCounter keeps its atomicMax in, zeroed: every launch reads it
// (atomicMax), also the unchecked first launch of a correctness check.
DeviceBuffer cycle_buffer();
double read_cycles(const DeviceBuffer& cycles);
void reset_cycles(const DeviceBuffer& cycles, cudaStream_t stream);

// Builds the device-scope ceiling (rate = work / seconds), fills clocks and flags.
Ceiling make_ceiling(const Device& device, const std::string& probe, const Measurement& m,
                     nlohmann::json params);

// The SM clock during a probe when no cycle count is at hand: NVML's reading while the last sample
// ran (the clock under load).
inline double loaded_sm_hz(const ClockState& c) {
  return c.core_hz_after > 0 ? c.core_hz_after : c.core_hz_before;
}

gpu::GpuTimingOptions timing_options(const ProbeOptions& options, const Device& device,
                                     bool flush_l2);

}  // namespace rafter::probes::cuda
