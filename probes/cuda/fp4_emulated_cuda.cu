// cuda.fp4_emulated: sm_90 has no FP4 tensor cores, so NVFP4 (E2M1 values, one E4M3 scale per 16
// values along K) runs emulated: each CTA unpacks its packed A (128 x 128) and B (256 x 128) tiles
// into E4M3 with the block scale applied (exact E2M1 -> E4M3 by byte permute, scale through
// f16x2, rounded back to E4M3), then runs FP8 wgmma on them; the unpack of the next tile overlaps
// the MMAs of this one (two shared-memory buffers). Labelled emulated, measured against the FP8
// roof. FLOPs per launch: 2 x 128 x 256 x 128 per CTA-iteration. The per-tensor FP32 scale is one
// multiply of the output and is left out.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <random>
#include <vector>

#include "cuda_util.hpp"
#include "gpu_model.hpp"
#include "wgmma_common.cuh"
#include "wgmma_ops.cuh"

namespace rafter::probes::cuda {
namespace {

constexpr int kThreads = 256;  // 2 warpgroups, one 64-row half of A each
constexpr int kM = 128, kN = 256, kK = 128;
constexpr int kBlocksK = kK / 16;
constexpr int kTileBytes = (kM + kN) * kK;          // unpacked E4M3 A then B, tile layout
constexpr int kPackedBytes = (kM + kN) * kK / 2;    // two E2M1 per byte, row-major
constexpr int kScaleBytes = (kM + kN) * kBlocksK;   // one E4M3 per 16 values
constexpr int kSmemBytes = 2 * kTileBytes + kPackedBytes + kScaleBytes;

// 4 E2M1 (16 bits) -> 4 E4M3 bytes, exact: magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6 by byte permute,
// sign bit moved from bit 3 of each nibble to bit 7 of each byte.
__device__ __forceinline__ unsigned e2m1x4_to_e4m3x4(unsigned q) {
  const unsigned mag = __byte_perm(0x3C383000u, 0x4C484440u, q & 0x7777u);
  const unsigned s = q & 0x8888u;
  return mag | (s & 0x8u) << 4 | (s & 0x80u) << 8 | (s & 0x800u) << 12 | (s & 0x8000u) << 16;
}

// Scales 4 E4M3 values by an E4M3 block scale: up to f16x2, multiply, round back to E4M3.
__device__ __forceinline__ unsigned scale_e4m3x4(unsigned v, __half2 scale) {
  __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(v & 0xFFFF), __NV_E4M3);
  __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(v >> 16), __NV_E4M3);
  __half2 l = __hmul2(__half2(lo), scale), h = __hmul2(__half2(hi), scale);
  unsigned a = __nv_cvt_halfraw2_to_fp8x2(__half2_raw(l), __NV_SATFINITE, __NV_E4M3);
  unsigned b = __nv_cvt_halfraw2_to_fp8x2(__half2_raw(h), __NV_SATFINITE, __NV_E4M3);
  return a | b << 16;
}

// All threads unpack the packed rows [A rows | B rows] into `tile` (A: 128 rows, B: 256 rows).
__device__ void unpack(const std::uint8_t* packed, const std::uint8_t* scales, std::uint8_t* tile) {
  constexpr int kGroups = (kM + kN) * kK / 4;  // 4 values per group
  for (int g = threadIdx.x; g < kGroups; g += kThreads) {
    const int row = g / (kK / 4), k = (g % (kK / 4)) * 4;
    const unsigned q = *reinterpret_cast<const unsigned short*>(packed + row * (kK / 2) + k / 2);
    __half2_raw sraw = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(scales[row * kBlocksK + k / 16] * 0x101u),
                                                  __NV_E4M3);
    const unsigned v = scale_e4m3x4(e2m1x4_to_e4m3x4(q), __half2(sraw));
    const bool is_a = row < kM;
    std::uint8_t* base = is_a ? tile + (row / 64) * 64 * kK : tile + kM * kK;
    const int r = is_a ? row % 64 : row - kM;
    *reinterpret_cast<unsigned*>(base + tile_offset(r, k, is_a ? 64 : kN)) = v;
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    fp4_emulated_kernel(const std::uint8_t* packed_g, const std::uint8_t* scales_g, float* out, long long iterations,
                        long long* cycles) {
  const CycleCounter counter;
  extern __shared__ __align__(128) std::uint8_t smem[];
  std::uint8_t* packed = smem + 2 * kTileBytes;
  std::uint8_t* scales = packed + kPackedBytes;
  for (int i = threadIdx.x; i < kPackedBytes; i += kThreads) packed[i] = packed_g[i];
  for (int i = threadIdx.x; i < kScaleBytes; i += kThreads) scales[i] = scales_g[i];
  __syncthreads();
  unpack(packed, scales, smem);
  fence_async_shared();
  __syncthreads();
  const int wg = threadIdx.x / 128;
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0;
  for (long long it = 0; it < iterations; ++it) {
    std::uint8_t* t = smem + (it & 1) * kTileBytes;  // arithmetic, not an array: stays in registers
    const std::uint64_t da = make_smem_desc(t + wg * 64 * kK, 128, 256);
    const std::uint64_t db = make_smem_desc(t + kM * kK, 128, 256);
    wgmma::fence();
#pragma unroll
    for (int s = 0; s < kK / kStepBytes; ++s)
      wgmma::mma_e4m3(d, da + ((s * 64 * kStepBytes) >> 4), db + ((s * kN * kStepBytes) >> 4));
    wgmma::commit();
    unpack(packed, scales, smem + ((it + 1) & 1) * kTileBytes);  // overlaps the MMAs just issued
    fence_async_shared();
    wgmma::wait<0>();
    __syncthreads();
  }
  const int t = threadIdx.x % 128;
  if (blockIdx.x == 0) {
#pragma unroll
    for (int i = 0; i < 128; ++i) {
      int row, col;
      acc_coords(t, i, row, col);
      out[(wg * 64 + row) * kN + col] = d[i];
    }
  } else {
    float sum = 0;
#pragma unroll
    for (int i = 0; i < 128; ++i) sum += d[i];
    if (sum == 12345.0f) out[0] = sum;
  }
  counter.stop(cycles);
}

struct Nvfp4 {
  std::vector<std::uint8_t> packed, scales;
};

// Random E2M1 values (every code, both signs) and E4M3 block scales in [1/8, 32]: products stay
// below the E4M3 maximum (6 x 32 < 448).
Nvfp4 random_nvfp4(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255), exponent(4, 12), mantissa(0, 7);
  Nvfp4 t{std::vector<std::uint8_t>(kPackedBytes), std::vector<std::uint8_t>(kScaleBytes)};
  for (auto& b : t.packed) b = std::uint8_t(byte(rng));
  for (auto& s : t.scales) s = std::uint8_t(exponent(rng) << 3 | mantissa(rng));
  return t;
}

double e2m1(unsigned nib) {
  static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (nib & 8 ? -1 : 1) * mag[nib & 7];
}

double dequant(const Nvfp4& t, int row, int k) {
  unsigned byte = t.packed[row * (kK / 2) + k / 2];
  return e2m1(k % 2 ? byte >> 4 : byte & 15) * decode_e4m3(t.scales[row * kBlocksK + k / 16]);
}

CheckResult check_emulation(const Nvfp4& t, const DeviceBuffer& packed, const DeviceBuffer& scales) {
  DeviceBuffer out(kM * kN * 4);
  DeviceBuffer cycles = cycle_buffer();
  check(cudaMemset(out.get(), 0xFF, out.bytes()), "poison fp4 output");
  const long long iterations = 3;
  fp4_emulated_kernel<<<2, kThreads, kSmemBytes>>>(packed.get<std::uint8_t>(), scales.get<std::uint8_t>(),
                                                   out.get<float>(), iterations, cycles.get<long long>());
  check_launch("fp4_emulated_kernel");
  std::vector<float> h(kM * kN);
  check(cudaMemcpy(h.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost), "copy fp4 output");
  std::vector<double> got(h.begin(), h.end()), want(kM * kN);
  for (int m = 0; m < kM; ++m)
    for (int n = 0; n < kN; ++n) {
      double s = 0;
      for (int k = 0; k < kK; ++k) s += dequant(t, m, k) * dequant(t, kM + n, k);
      want[m * kN + n] = s * iterations;
    }
  // Rounding the scaled values to E4M3 (4 significant bits) costs up to 2^-4 each.
  return compare(got, want, 0.05);
}

void run_fp4_probe(const ProbeOptions& options, const Device& device, MachineProfile& profile) {
  const int dev = device_index(device);
  check(cudaSetDevice(dev), "cudaSetDevice");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  profile.conditions["cuda." + device.id + ".fp4"] =
      p.major >= 10 ? "native on this GPU (not measured by rafter yet)" : "fp4 not native: emulated (NVFP4 -> E4M3 + FP8 wgmma)";
  if (p.major != 9) return;
  check(cudaFuncSetAttribute(fp4_emulated_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes),
        "shared memory size");
  Nvfp4 t = random_nvfp4(31u);
  DeviceBuffer packed(kPackedBytes), scales(kScaleBytes), out(kM * kN * 4);
  DeviceBuffer cycles = cycle_buffer();
  check(cudaMemcpy(packed.get(), t.packed.data(), kPackedBytes, cudaMemcpyHostToDevice), "copy fp4 data");
  check(cudaMemcpy(scales.get(), t.scales.data(), kScaleBytes, cudaMemcpyHostToDevice), "copy fp4 scales");
  CheckResult chk = check_emulation(t, packed, scales);
  const int blocks = p.multiProcessorCount;
  const double flop_per_iteration = 2.0 * kM * kN * kK * blocks;
  long long iterations = (long long)(0.005 * 1e15 / flop_per_iteration) + 1;
  Measurement m{CeilingKind::Compute, "fp4", "mma", "wgmma.e4m3+unpack", flop_per_iteration * double(iterations),
                "FLOP/s", {}};
  m.timing = gpu::time_launches(
      [&](void* s) {
        reset_cycles(cycles, cudaStream_t(s));
        fp4_emulated_kernel<<<blocks, kThreads, kSmemBytes, cudaStream_t(s)>>>(
            packed.get<std::uint8_t>(), scales.get<std::uint8_t>(), out.get<float>(), iterations,
            cycles.get<long long>());
        check_launch("fp4_emulated_kernel");
      },
      timing_options(options, device, false));
  m.sm_cycles_per_launch = read_cycles(cycles);
  nlohmann::json params = {{"format", "NVFP4 (E2M1, E4M3 scale per 16 along K)"},
                           {"emulation", "unpack to E4M3 with block scale applied, FP8 wgmma m64n256k32"},
                           {"cta_tile", {kM, kN, kK}}, {"iterations", iterations}, {"sass", "QGMMA"},
                           {"roof", "fp8_e4m3"}, {"check", chk.to_json()}};
  Ceiling c = make_ceiling(device, "cuda.fp4", m, params);
  c.emulated = true;
  // The roof it runs under is FP8's: the datasheet figure is the FP8 rate.
  auto d = compute_datasheet(p.major, p.minor, "fp8", blocks, c.frequency_hz);
  if (d) d->basis = "FP8 tensor roof (FP4 emulated on FP8): " + d->basis;
  attach_datasheet(c, d);
  if (!chk.pass) c.flag = "check_failed";
  profile.ceilings.push_back(std::move(c));
}

}  // namespace

RAFTER_REGISTER_PROBE("cuda.fp4", "cuda",
                      "NVFP4 GEMM emulated on sm_90 (unpack to E4M3 + FP8 wgmma), labelled emulated",
                      run_fp4_probe);

}  // namespace rafter::probes::cuda
