// The kernel tables, built in baseline x86-64 code (see kernel_entry_points.hpp), with the bytes
// and FLOPs of every compute kernel declared beside it.
#include "kernels.hpp"

#include "kernel_entry_points.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::probes::cpu {
namespace {

constexpr int kAcc = 12;  // accumulators of every compute kernel (see compute_chains.hpp)

// acc = acc * 0.5 + 1 starting at 2 stays 2: the sum is 2 per lane and accumulator.
template <int Lanes>
double fixed_point(std::int64_t) {
  return 2.0 * Lanes * kAcc;
}

// AMX: six accumulator tiles of 16 x 16 elements start at 0 and grow by Step each a step.
constexpr int kTiles = 6;
template <int Step>
double tile_counting(std::int64_t iterations) {
  return static_cast<double>(kTiles) * 256 * Step * static_cast<double>(iterations);
}

// acc starts at 0 and grows by Step per lane and iteration.
template <int Lanes, int Step>
double counting(std::int64_t iterations) {
  return static_cast<double>(Lanes) * kAcc * Step * static_cast<double>(iterations);
}

bool has_avx512(const CpuFeatures& f) { return cpu_has_isa(f, "avx512"); }
bool has_bf16(const CpuFeatures& f) { return has_avx512(f) && f.avx512_bf16; }
bool has_vnni(const CpuFeatures& f) { return has_avx512(f) && f.avx512_vnni; }
bool has_fp16(const CpuFeatures& f) { return has_avx512(f) && f.avx512_fp16; }
bool has_amx_bf16(const CpuFeatures& f) { return f.amx_bf16; }
bool has_amx_int8(const CpuFeatures& f) { return f.amx_int8; }
bool has_avx2(const CpuFeatures& f) { return cpu_has_isa(f, "avx2"); }
bool has_avx_vnni(const CpuFeatures& f) { return has_avx2(f) && f.avx_vnni; }
bool has_sse(const CpuFeatures& f) { return cpu_has_isa(f, "sse"); }
bool always(const CpuFeatures&) { return true; }

}  // namespace

const StreamKernels& stream_kernels(const std::string& isa) {
  static const StreamKernels k512{"avx512",
                                  avx512::stream_load,
                                  avx512::stream_load_pairs,
                                  avx512::stream_load_discard,
                                  8,
                                  avx512::stream_store,
                                  avx512::stream_nt_store,
                                  avx512::stream_copy,
                                  avx512::stream_triad};
  static const StreamKernels k256{"avx2",
                                  avx2::stream_load,
                                  avx2::stream_load_pairs,
                                  avx2::stream_load_discard,
                                  4,
                                  avx2::stream_store,
                                  avx2::stream_nt_store,
                                  avx2::stream_copy,
                                  avx2::stream_triad};
  static const StreamKernels k128{"sse",
                                  sse::stream_load,
                                  sse::stream_load_pairs,
                                  sse::stream_load_discard,
                                  2,
                                  sse::stream_store,
                                  sse::stream_nt_store,
                                  sse::stream_copy,
                                  sse::stream_triad};
  static const StreamKernels k64{"scalar",
                                 scalar::stream_load,
                                 scalar::stream_load_pairs,
                                 scalar::stream_load_discard,
                                 1,
                                 scalar::stream_store,
                                 scalar::stream_nt_store,
                                 scalar::stream_copy,
                                 scalar::stream_triad};
  if (isa == "avx512") return k512;
  if (isa == "avx2") return k256;
  if (isa == "sse") return k128;
  if (isa == "scalar") return k64;
  throw InputError("unknown ISA '" + isa + "' (expected avx512, avx2, sse or scalar)");
}

// flops_per_iteration = accumulators x lanes x FLOPs per lane per instruction:
// FMA 2 (multiply + add); mul+add pair 2; vdpbf16ps 4 (2 bf16 products + 2 adds into fp32);
// vpdpbusd 8 (4 u8*s8 products + 4 adds into int32; counted as OPs). AMX, per tile instruction:
// tdpbf16ps 16 x 16 x 32 products and adds (16384 FLOPs), tdpbssd 16 x 16 x 64 (32768 OPs); its
// `vector_bits` is a tile's 16 rows x 64 bytes. They run under `--isa avx512` (the AVX-512 cores'
// matrix unit), and a CPU held below AVX-512 has none.
const std::vector<ComputeKernel>& compute_kernels() {
  static const std::vector<ComputeKernel> all = {
      {"bf16", "tile_dot", "avx512", "tdpbf16ps tmm (AMX-BF16)", 8192, kTiles, kTiles * 16 * 16 * 32 * 2.0,
       amx::dot_bf16, tile_counting<32>, has_amx_bf16},
      {"int8", "tile_dot", "avx512", "tdpbssd tmm (AMX-INT8)", 8192, kTiles, kTiles * 16 * 16 * 64 * 2.0,
       amx::dot_int8, tile_counting<64>, has_amx_int8},
      {"fp64", "fma", "avx512", "vfmadd231pd zmm", 512, kAcc, kAcc * 8 * 2.0, avx512::fma_fp64,
       fixed_point<8>, has_avx512},
      {"fp32", "fma", "avx512", "vfmadd231ps zmm", 512, kAcc, kAcc * 16 * 2.0, avx512::fma_fp32,
       fixed_point<16>, has_avx512},
      {"fp16", "fma", "avx512", "vfmadd231ph zmm", 512, kAcc, kAcc * 32 * 2.0, avx512::fma_fp16,
       fixed_point<32>, has_fp16},
      {"bf16", "dot", "avx512", "vdpbf16ps zmm", 512, kAcc, kAcc * 16 * 4.0, avx512::dot_bf16,
       counting<16, 2>, has_bf16},
      {"int8", "dot", "avx512", "vpdpbusd zmm", 512, kAcc, kAcc * 16 * 8.0, avx512::dot_int8, counting<16, 4>,
       has_vnni},
      {"fp64", "fma", "avx2", "vfmadd231pd ymm", 256, kAcc, kAcc * 4 * 2.0, avx2::fma_fp64, fixed_point<4>,
       has_avx2},
      {"fp32", "fma", "avx2", "vfmadd231ps ymm", 256, kAcc, kAcc * 8 * 2.0, avx2::fma_fp32, fixed_point<8>,
       has_avx2},
      {"int8", "dot", "avx2", "vpdpbusd ymm (AVX-VNNI)", 256, kAcc, kAcc * 8 * 8.0, avx2::dot_int8,
       counting<8, 4>, has_avx_vnni},
      {"fp64", "mul_add", "sse", "mulpd+addpd xmm", 128, kAcc, kAcc * 2 * 2.0, sse::mul_add_fp64,
       fixed_point<2>, has_sse},
      {"fp32", "mul_add", "sse", "mulps+addps xmm", 128, kAcc, kAcc * 4 * 2.0, sse::mul_add_fp32,
       fixed_point<4>, has_sse},
      {"fp64", "mul_add", "scalar", "mulsd+addsd", 64, kAcc, kAcc * 1 * 2.0, scalar::mul_add_fp64,
       fixed_point<1>, always},
      {"fp32", "mul_add", "scalar", "mulss+addss", 32, kAcc, kAcc * 1 * 2.0, scalar::mul_add_fp32,
       fixed_point<1>, always},
  };
  return all;
}

}  // namespace rafter::probes::cpu
