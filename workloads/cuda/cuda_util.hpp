// Small CUDA helpers for the GPU backends (workloads/cuda only): checked calls that throw
// rafter errors, an owning device buffer, host<->device conversion of FP64 check tensors to the
// storage types the kernels use, on-device random fill, and the version facts every record states.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rafter/collector/error.hpp"

namespace rafter::workloads::cuda {

// Throws InputError naming the call and CUDA's message (a launch failure is bad input to the
// backend: the record is marked Failed by the caller, the run goes on).
void check_cuda(cudaError_t status, const char* what);
#define RAFTER_CUDA_CHECK(call) ::rafter::workloads::cuda::check_cuda((call), #call)
// After a kernel launch: the launch error (bad configuration) surfaces here.
#define RAFTER_CUDA_LAUNCH_CHECK(what) ::rafter::workloads::cuda::check_cuda(cudaGetLastError(), what)

// SMs of the current device.
int sm_count();

// The current device's DRAM bandwidth by its datasheet (memory clock × bus width × 2) shared out
// over its SMs, bytes/s an SM: how many bytes an SM must keep in flight grows with it (a launch
// shape, not a ceiling; H100 SXM about 25 GB/s, H200 about 37).
double datasheet_dram_bytes_per_sm();

// A value made once per device, for what belongs to the device that was current when it was made:
// function attributes (the dynamic shared-memory opt-in) and what depends on them (occupancy).
// `make` runs outside any graph capture in rafter (a shape's first launch is its check's).
template <class T>
class PerDevice {
 public:
  template <class Make>
  T get(Make&& make) {
    int device = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    const std::lock_guard<std::mutex> lock(mutex_);
    auto it = values_.find(device);
    if (it == values_.end()) it = values_.emplace(device, make()).first;
    return it->second;
  }

 private:
  std::mutex mutex_;
  std::map<int, T> values_;
};

// Element types the GPU backends store tensors in.
enum class DType { F64, F32, BF16, F16, E4M3, E5M2, I8, I32, I64 };
std::size_t dtype_bytes(DType t);
const char* dtype_name(DType t);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  void* get() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// A device tensor: buffer plus element type and count.
struct DeviceTensor {
  DeviceBuffer buffer;
  DType dtype = DType::BF16;
  std::size_t count = 0;
  void* data() const { return buffer.get(); }
  template <class T> T* as() const { return static_cast<T*>(buffer.get()); }
  __nv_bfloat16* as_bf16() const { return as<__nv_bfloat16>(); }
};

DeviceTensor alloc_tensor(DType t, std::size_t count);
// Rounds `values` to `t` (round-to-nearest-even; scaled by 1/scale first for FP8) and uploads.
DeviceTensor upload(const std::vector<double>& values, DType t, double scale = 1.0);
// Rounds host FP64 values in place to what `t` can hold (so the FP64 reference sees the same
// inputs as the device).
void round_to(std::vector<double>& values, DType t, double scale = 1.0);
std::vector<double> download(const DeviceTensor& t, double scale = 1.0);
// One element's value from its stored bytes.
double decode_element(const void* bytes, DType t);
// Fills every byte with a pattern that decodes to NaN (floats) or an absurd value (integers), so
// that an unwritten output fails the check.
void poison(DeviceTensor& t);
// Uniform random values in [lo, hi) (never all zeros); integers are drawn in [lo, hi) too.
void fill_random(DeviceTensor& t, double lo, double hi, std::uint64_t seed);
// Normal(0, stddev) values (floating-point types only): the GEMMs' timing data, drawn as
// torch.randn draws PyTorch's, since a tensor core's power (and so its clock under the power
// cap) depends on the operands' bits.
void fill_normal(DeviceTensor& t, double stddev, std::uint64_t seed);

// GPU name, compute capability, SMs, driver, CUDA runtime and cuBLASLt versions (once per process).
const nlohmann::json& device_facts(int device);
int current_device_index(const std::string& device);  // "cuda" -> 0, "cuda:1" -> 1
// Throws DeviceUnavailable ("no CUDA GPU: ...") when there is no usable GPU.
void require_gpu(const std::string& device);
// Free device memory now, bytes (cudaMemGetInfo); 0 when there is no usable GPU.
double free_device_bytes(const std::string& device);

}  // namespace rafter::workloads::cuda
