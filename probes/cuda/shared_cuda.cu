// cuda.shared: shared-memory load bandwidth. Each warp reads 32 consecutive 16-byte vectors
// (512 contiguous bytes: each quarter-warp covers the 32 banks once, no conflicts), 8 independent
// loads per trip at immediate offsets, XOR-accumulated so that the loads stay live.
// Bytes per launch: blocks x threads x trips x 8 x 16.
#include "cuda_util.hpp"
#include "gpu_model.hpp"

namespace rafter::probes::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kLoads = 8;
constexpr int kRotations = 64;  // the window slides by one warp's worth per trip, 64 positions
constexpr int kVectors = kThreads * kLoads + kRotations * 32;
constexpr int kSmemBytes = kVectors * 16;  // 96 KiB: two blocks per SM

__global__ void __launch_bounds__(kThreads) shared_read(long long trips, int* sink, long long* cycles) {
  const CycleCounter counter;
  extern __shared__ int4 s[];
  for (int i = threadIdx.x; i < kVectors; i += blockDim.x) s[i] = make_int4(i | 1, i * 3 + 1, ~i, i ^ 0x55);
  __syncthreads();
  int4 acc = make_int4(0, 0, 0, 0);
  for (long long t = 0; t < trips; ++t) {
    const int4* p = s + threadIdx.x + (int(t) & (kRotations - 1)) * 32;
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      int4 v = p[u * kThreads];
      acc.x ^= v.x;
      acc.y ^= v.y;
      acc.z ^= v.z;
      acc.w ^= v.w;
    }
  }
  if ((acc.x & acc.y & acc.z & acc.w) == 0x7fffffff) *sink = acc.x;
  counter.stop(cycles);
}

void run_shared_probe(const ProbeOptions& options, const Device& device, MachineProfile& profile) {
  const int dev = device_index(device);
  check(cudaSetDevice(dev), "cudaSetDevice");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  check(cudaFuncSetAttribute(shared_read, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes),
        "shared memory size");
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, shared_read, kThreads, kSmemBytes), "occupancy");
  if (per_sm < 1) per_sm = 1;
  const int blocks = per_sm * p.multiProcessorCount;
  DeviceBuffer sink(64);
  DeviceBuffer cycles = cycle_buffer();
  // About 2 ms per launch at 128 B/clk/SM and 2 GHz.
  const double bytes_per_trip = double(blocks) * kThreads * kLoads * 16;
  long long trips = (long long)(0.002 * 128.0 * p.multiProcessorCount * 2e9 / bytes_per_trip) + 1;
  // A short first launch (each rotation once), outside the timing: the module loads here, and it is
  // the launch compute-sanitizer's racecheck examines (bench/gpu_sanitize.sh checks the first only).
  shared_read<<<blocks, kThreads, kSmemBytes>>>(kRotations, sink.get<int>(), cycles.get<long long>());
  check_launch("shared_read");
  check(cudaDeviceSynchronize(), "shared_read");
  Measurement m{CeilingKind::Bandwidth, "shared", "read", "ld.shared.v4", bytes_per_trip * double(trips), "B/s", {}};
  m.timing = gpu::time_launches(
      [&](void* s) {
        reset_cycles(cycles, cudaStream_t(s));
        shared_read<<<blocks, kThreads, kSmemBytes, cudaStream_t(s)>>>(trips, sink.get<int>(), cycles.get<long long>());
        check_launch("shared_read");
      },
      timing_options(options, device, false));
  m.sm_cycles_per_launch = read_cycles(cycles);
  nlohmann::json params = {{"blocks", blocks}, {"blocks_per_sm", per_sm}, {"threads_per_block", kThreads},
                           {"shared_bytes_per_block", kSmemBytes}, {"trips", trips},
                           {"access", "16-byte vectors, conflict-free"}};
  Ceiling c = make_ceiling(device, "cuda.shared", m, params);
  attach_datasheet(c, shared_memory_datasheet(p.multiProcessorCount, c.frequency_hz));
  profile.ceilings.push_back(std::move(c));
}

}  // namespace

RAFTER_REGISTER_PROBE("cuda.shared", "cuda", "shared-memory load bandwidth (16-byte, conflict-free)",
                      run_shared_probe);

}  // namespace rafter::probes::cuda
