// describe_cuda_devices(): every GPU the CUDA driver sees, with its levels named from the device
// properties, and driver, CUDA and ECC state from the runtime and NVML.
#include <cuda_runtime.h>

#include "cuda_util.hpp"
#include "gpu_model.hpp"
#include "rafter/collector/gpu_timing.hpp"
#include "rafter/probes/probe.hpp"

namespace rafter::probes {
namespace {

std::string version_string(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

nlohmann::json cuda_properties(int index, const cudaDeviceProp& p) {
  nlohmann::json j;
  int driver = 0, runtime = 0, sm_khz = 0, mem_khz = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, index);
  cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, index);
  char pci[32] = {};
  cudaDeviceGetPCIBusId(pci, sizeof pci, index);
  j["compute_capability"] = std::to_string(p.major) + "." + std::to_string(p.minor);
  j["cuda_driver_version"] = version_string(driver);
  j["cuda_runtime_version"] = version_string(runtime);
  j["ecc_enabled"] = p.ECCEnabled != 0;
  j["pci_bus_id"] = pci;
  j["multiprocessors"] = p.multiProcessorCount;
  j["global_memory_bytes"] = double(p.totalGlobalMem);
  j["l2_cache_bytes"] = p.l2CacheSize;
  j["shared_memory_per_sm_bytes"] = double(p.sharedMemPerMultiprocessor);
  j["shared_memory_per_block_optin_bytes"] = double(p.sharedMemPerBlockOptin);
  j["registers_per_sm"] = p.regsPerMultiprocessor;
  j["max_threads_per_sm"] = p.maxThreadsPerMultiProcessor;
  j["memory_bus_width_bits"] = p.memoryBusWidth;
  j["peak_sm_clock_hz_cuda"] = sm_khz * 1e3;
  j["memory_clock_hz_cuda"] = mem_khz * 1e3;
  j["counters"] = "unavailable (CUPTI counters are not read by rafter probe)";
  nlohmann::json nvml = gpu::nvml_properties(index);
  for (auto& [k, v] : nvml.items()) j[k] = v;
  return j;
}

}  // namespace

std::vector<Device> describe_cuda_devices() {
  std::vector<Device> out;
  int n = gpu::device_count();
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    cuda::check(cudaGetDeviceProperties(&p, i), "cudaGetDeviceProperties");
    Device d;
    d.id = "cuda:" + std::to_string(i);
    d.kind = "cuda";
    d.name = p.name;
    d.cores = p.multiProcessorCount;
    d.threads = p.multiProcessorCount * p.maxThreadsPerMultiProcessor;
    d.isa = {"sm_" + std::to_string(p.major) + std::to_string(p.minor)};
    cuda::GpuMemorySizes s;
    s.cc_major = p.major;
    s.cc_minor = p.minor;
    s.sms = p.multiProcessorCount;
    s.shared_per_sm_bytes = double(p.sharedMemPerMultiprocessor);
    s.l2_bytes = p.l2CacheSize;
    s.device_memory_bytes = double(p.totalGlobalMem);
    s.bus_width_bits = p.memoryBusWidth;
    d.memory_levels = cuda::gpu_memory_levels(s);
    d.properties = cuda_properties(i, p);
    d.counters = "unavailable (CUPTI counters are not read by rafter probe)";
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace rafter::probes
