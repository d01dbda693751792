// CUDA helpers: checked calls, device buffers, conversions, random fill, version facts.
#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "cuda_util.hpp"

namespace rafter::workloads::cuda {

namespace {
// Errors after which the process's CUDA context is unusable: every later call fails the same way.
bool is_sticky(cudaError_t status) {
  switch (status) {
    case cudaErrorIllegalAddress: case cudaErrorLaunchFailure: case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction: case cudaErrorMisalignedAddress: case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc: case cudaErrorAssert: case cudaErrorECCUncorrectable: case cudaErrorLaunchTimeout:
    case cudaErrorDevicesUnavailable: case cudaErrorNoDevice:
      return true;
    default:
      return false;
  }
}
}  // namespace

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::string message = std::string("CUDA error in ") + what + ": " + cudaGetErrorString(status);
  if (is_sticky(status))
    message += " (the GPU context is lost: the operators after this one fail too; restart rafter)";
  throw InputError(message);
}

int sm_count() {
  int device = 0, sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
             "cudaDeviceGetAttribute(SMs)");
  return sms;
}

double datasheet_dram_bytes_per_sm() {
  static PerDevice<double> per_device;
  return per_device.get([] {
    int device = 0, mem_khz = 0, bus_bits = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    check_cuda(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device),
               "cudaDeviceGetAttribute(memory clock)");
    check_cuda(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device),
               "cudaDeviceGetAttribute(memory bus width)");
    return double(mem_khz) * 1e3 * 2.0 * bus_bits / 8.0 / std::max(1, sm_count());
  });
}

std::size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: return 8;
    case DType::F32: case DType::I32: return 4;
    case DType::BF16: case DType::F16: return 2;
    default: return 1;
  }
}

const char* dtype_name(DType t) {
  constexpr const char* names[] = {"f64", "f32", "bf16", "f16", "e4m3", "e5m2", "i8", "i32", "i64"};
  return names[static_cast<int>(t)];
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) RAFTER_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceTensor alloc_tensor(DType t, std::size_t count) {
  DeviceTensor d;
  d.dtype = t;
  d.count = count;
  d.buffer = DeviceBuffer(count * dtype_bytes(t) + 16);  // +16: vector tails never overrun
  return d;
}

namespace {

// Host conversion of one value to the storage type's bytes.
void encode(double v, DType t, unsigned char* out) {
  switch (t) {
    case DType::F64: std::memcpy(out, &v, 8); break;
    case DType::F32: { float f = static_cast<float>(v); std::memcpy(out, &f, 4); break; }
    case DType::BF16: { __nv_bfloat16 h = __float2bfloat16_rn(static_cast<float>(v)); std::memcpy(out, &h, 2); break; }
    case DType::F16: { __half h = __float2half_rn(static_cast<float>(v)); std::memcpy(out, &h, 2); break; }
    case DType::E4M3: { __nv_fp8_e4m3 h(static_cast<float>(v)); std::memcpy(out, &h, 1); break; }
    case DType::E5M2: { __nv_fp8_e5m2 h(static_cast<float>(v)); std::memcpy(out, &h, 1); break; }
    case DType::I8: { auto i = static_cast<std::int8_t>(std::lround(v)); std::memcpy(out, &i, 1); break; }
    case DType::I32: { auto i = static_cast<std::int32_t>(std::llround(v)); std::memcpy(out, &i, 4); break; }
    case DType::I64: { auto i = static_cast<std::int64_t>(std::llround(v)); std::memcpy(out, &i, 8); break; }
  }
}

double decode(const unsigned char* in, DType t) {
  switch (t) {
    case DType::F64: { double v; std::memcpy(&v, in, 8); return v; }
    case DType::F32: { float v; std::memcpy(&v, in, 4); return v; }
    case DType::BF16: { __nv_bfloat16 h; std::memcpy(&h, in, 2); return __bfloat162float(h); }
    case DType::F16: { __half h; std::memcpy(&h, in, 2); return __half2float(h); }
    case DType::E4M3: { __nv_fp8_e4m3 h; std::memcpy(&h, in, 1); return static_cast<float>(h); }
    case DType::E5M2: { __nv_fp8_e5m2 h; std::memcpy(&h, in, 1); return static_cast<float>(h); }
    case DType::I8: { std::int8_t v; std::memcpy(&v, in, 1); return v; }
    case DType::I32: { std::int32_t v; std::memcpy(&v, in, 4); return v; }
    case DType::I64: { std::int64_t v; std::memcpy(&v, in, 8); return static_cast<double>(v); }
  }
  return 0;
}

__device__ std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <class T>
__global__ void fill_uniform_kernel(T* out, std::size_t n, double lo, double hi, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    double u = double(splitmix64(seed ^ (i * 0x632BE59BD9B4E019ull)) >> 11) * 0x1.0p-53;
    double v = lo + (hi - lo) * u;
    if constexpr (std::is_integral_v<T>) out[i] = static_cast<T>(floor(v));
    else out[i] = static_cast<T>(static_cast<float>(v));
  }
}

// Normal(0, stddev) by Box-Muller on two splitmix64 draws (as torch.randn gives PyTorch's side).
template <class T>
__global__ void fill_normal_kernel(T* out, std::size_t n, double stddev, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    std::uint64_t h = splitmix64(seed ^ (i * 0x632BE59BD9B4E019ull));
    float u1 = (float(h >> 40) + 0.5f) * 0x1.0p-24f;  // (0, 1): log() stays finite
    float u2 = float((h >> 16) & 0xFFFFFFu) * 0x1.0p-24f;
    float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    out[i] = static_cast<T>(float(stddev) * z);
  }
}

template <class T>
void launch_normal(void* p, std::size_t n, double stddev, std::uint64_t seed) {
  int blocks = static_cast<int>(std::min<std::size_t>((n + 255) / 256, 65536));
  fill_normal_kernel<T><<<blocks, 256>>>(static_cast<T*>(p), n, stddev, seed);
  RAFTER_CUDA_LAUNCH_CHECK("fill_normal_kernel");
}

template <class T>
void launch_fill(void* p, std::size_t n, double lo, double hi, std::uint64_t seed) {
  int blocks = static_cast<int>(std::min<std::size_t>((n + 255) / 256, 65536));
  fill_uniform_kernel<T><<<blocks, 256>>>(static_cast<T*>(p), n, lo, hi, seed);
  RAFTER_CUDA_LAUNCH_CHECK("fill_uniform_kernel");
}

}  // namespace

double decode_element(const void* bytes, DType t) { return decode(static_cast<const unsigned char*>(bytes), t); }

void round_to(std::vector<double>& values, DType t, double scale) {
  unsigned char buf[8];
  for (double& v : values) {
    encode(v / scale, t, buf);
    v = decode(buf, t) * scale;
  }
}

DeviceTensor upload(const std::vector<double>& values, DType t, double scale) {
  DeviceTensor d = alloc_tensor(t, values.size());
  std::size_t b = dtype_bytes(t);
  std::vector<unsigned char> host(values.size() * b);
  for (std::size_t i = 0; i < values.size(); ++i) encode(values[i] / scale, t, host.data() + i * b);
  RAFTER_CUDA_CHECK(cudaMemcpy(d.data(), host.data(), host.size(), cudaMemcpyHostToDevice));
  return d;
}

std::vector<double> download(const DeviceTensor& t, double scale) {
  std::size_t b = dtype_bytes(t.dtype);
  std::vector<unsigned char> host(t.count * b);
  RAFTER_CUDA_CHECK(cudaDeviceSynchronize());
  RAFTER_CUDA_CHECK(cudaMemcpy(host.data(), t.data(), host.size(), cudaMemcpyDeviceToHost));
  std::vector<double> out(t.count);
  for (std::size_t i = 0; i < t.count; ++i) out[i] = decode(host.data() + i * b, t.dtype) * scale;
  return out;
}

void poison(DeviceTensor& t) {
  // 0xFF bytes: NaN in f64/f32/bf16/f16/e4m3/e5m2, -1 in integers (targets use a separate check).
  RAFTER_CUDA_CHECK(cudaMemset(t.data(), 0xFF, t.count * dtype_bytes(t.dtype)));
}

void fill_random(DeviceTensor& t, double lo, double hi, std::uint64_t seed) {
  switch (t.dtype) {
    case DType::F64: launch_fill<double>(t.data(), t.count, lo, hi, seed); break;
    case DType::F32: launch_fill<float>(t.data(), t.count, lo, hi, seed); break;
    case DType::BF16: launch_fill<__nv_bfloat16>(t.data(), t.count, lo, hi, seed); break;
    case DType::F16: launch_fill<__half>(t.data(), t.count, lo, hi, seed); break;
    case DType::E4M3: launch_fill<__nv_fp8_e4m3>(t.data(), t.count, lo, hi, seed); break;
    case DType::E5M2: launch_fill<__nv_fp8_e5m2>(t.data(), t.count, lo, hi, seed); break;
    case DType::I8: launch_fill<std::int8_t>(t.data(), t.count, lo, hi, seed); break;
    case DType::I32: launch_fill<std::int32_t>(t.data(), t.count, lo, hi, seed); break;
    case DType::I64: launch_fill<long long>(t.data(), t.count, lo, hi, seed); break;
  }
}

void fill_normal(DeviceTensor& t, double stddev, std::uint64_t seed) {
  switch (t.dtype) {
    case DType::F64: launch_normal<double>(t.data(), t.count, stddev, seed); break;
    case DType::F32: launch_normal<float>(t.data(), t.count, stddev, seed); break;
    case DType::BF16: launch_normal<__nv_bfloat16>(t.data(), t.count, stddev, seed); break;
    case DType::F16: launch_normal<__half>(t.data(), t.count, stddev, seed); break;
    case DType::E4M3: launch_normal<__nv_fp8_e4m3>(t.data(), t.count, stddev, seed); break;
    case DType::E5M2: launch_normal<__nv_fp8_e5m2>(t.data(), t.count, stddev, seed); break;
    default: throw InputError("normal random data is for floating-point tensors");
  }
}

int current_device_index(const std::string& device) {
  auto colon = device.find(':');
  if (colon == std::string::npos) return 0;
  try {
    return std::stoi(device.substr(colon + 1));
  } catch (const std::exception&) {
    throw InputError("bad CUDA device '" + device + "' (expected cuda or cuda:N)");
  }
}

void require_gpu(const std::string& device) {
  int count = 0;
  cudaError_t st = cudaGetDeviceCount(&count);
  if (st != cudaSuccess || count == 0)
    throw DeviceUnavailable(std::string("no CUDA GPU on this machine (") +
                            (st != cudaSuccess ? cudaGetErrorString(st) : "0 devices") + ")");
  int idx = current_device_index(device);
  if (idx < 0 || idx >= count)
    throw DeviceUnavailable("no CUDA device " + std::to_string(idx) + " (this machine has " +
                            std::to_string(count) + ")");
  RAFTER_CUDA_CHECK(cudaSetDevice(idx));
}

const nlohmann::json& device_facts(int device) {
  static std::mutex mu;
  static std::map<int, nlohmann::json> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(device);
  if (it != cache.end()) return it->second;
  cudaDeviceProp prop{};
  RAFTER_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  auto ver = [](int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); };
  std::size_t lt = cublasLtGetVersion();
  nlohmann::json j = {{"gpu", prop.name},
                      {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
                      {"sms", prop.multiProcessorCount},
                      {"l2_bytes", prop.l2CacheSize},
                      {"driver_cuda_version", ver(driver)},
                      {"cuda_runtime_version", ver(runtime)},
                      {"cublaslt_version", std::to_string(lt / 10000) + "." + std::to_string((lt / 100) % 100) +
                                               "." + std::to_string(lt % 100)}};
  return cache.emplace(device, std::move(j)).first->second;
}

double free_device_bytes(const std::string& device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return 0;
  const int idx = current_device_index(device);
  if (idx < 0 || idx >= count || cudaSetDevice(idx) != cudaSuccess) return 0;
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return 0;
  return double(free_bytes);
}

}  // namespace rafter::workloads::cuda
