// Quantizers and dequantizers (quantize.hpp). One thread owns 8 consecutive values of a row (one
// 16-byte load); the threads of a scale block combine their maxima with shuffles (4 lanes per
// MXFP4 1×32 block, a lane pair in FP8's RHT, whose last butterfly stage crosses the pair the same
// way), so a block never leaves registers. The NVFP4 encodings give a thread 16 values of
// a row (two loads): a whole 1×16 block, whose scale it finds once, or a row of a 16×16 tile, whose
// 16 rows meet their maximum in a half-warp.
// Formats with a tensor scale take two kernels: the amax pass (a grid-stride reduction whose last
// CTA turns the maximum into the tensor scale), then the encoding pass, which walks the tensor in
// the reverse order so that it starts with what the amax pass read last and L2 still holds, and is
// launched as the amax pass's programmatic dependent (launch_encoding): its loads start while the
// amax pass ends. (Both passes in one cooperative kernel, a grid barrier between them and the second
// read from L2, were level or slower on the H200: the resident grid encodes at fewer CTAs an SM;
// bench/quant_results.md, 2026-11-29.)
// Every fp32 operation that decides a code is the CPU encoder's, in its order (IEEE division for the
// scales, the FP4 quotient as numfmt::fp4_quotient, no contraction), so round-to-nearest codes and
// scales match it byte for byte. On the H100 the encoding pass streams below the HBM roof, and
// taking instructions out per value made it faster (bench/quant_results.md): the work per value,
// not the memory, is what to cut next.
#include <cuda_fp8.h>
#include <curand_kernel.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "cuda_util.hpp"
#include "e2m1_sr.hpp"
#include "kernel_common.cuh"
#include "quantize.hpp"

namespace rafter::workloads::cuda {
namespace {

using namespace dev;
using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;
constexpr int kAmaxVectorsPerThread = 4;  // 16-byte loads in flight per thread in the amax pass
constexpr int kMaxAmaxBlocks = 4096;

struct AmaxWorkspace {
  float partial[kMaxAmaxBlocks];
  float partial_t[kMaxAmaxBlocks];  // the column-wise copy's maxima (transpose with its RHT)
  unsigned int counter;
};

constexpr bool is_fp8(QuantFormat f) { return f == QuantFormat::Fp8E4m3 || f == QuantFormat::Fp8E5m2; }
constexpr int block_cols(QuantFormat f) { return f == QuantFormat::Mxfp4 ? 32 : is_fp8(f) ? 0 : 16; }
// The largest finite value that the tensor scale maps the tensor's amax onto.
float scale_range(QuantFormat f) {
  return f == QuantFormat::Fp8E4m3 ? 448.0f : f == QuantFormat::Fp8E5m2 ? 57344.0f : 448.0f * 6.0f;
}

// quant_math.cpp's rht_sign as a bit mask (bit i set: sign −1).
constexpr unsigned kRhtNegative = 0xB4D2u;

// x[16j .. 16j+15] ← H16·diag(sign)·x / 4 for the 16 values held by a lane pair (8 each, the
// upper half in the odd lane): the CPU's butterfly order, its last stage through a shuffle.
__device__ __forceinline__ void hadamard16_pair(float (&f)[8], bool upper) {
  const int base = upper ? 8 : 0;
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if ((kRhtNegative >> (base + i)) & 1u) f[i] = -f[i];
#pragma unroll
  for (int h = 1; h < 8; h <<= 1)
#pragma unroll
    for (int i = 0; i < 8; i += 2 * h)
#pragma unroll
      for (int j = i; j < i + h; ++j) {
        const float a = f[j], b = f[j + h];
        f[j] = a + b;
        f[j + h] = a - b;
      }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float other = __shfl_xor_sync(0xffffffffu, f[i], 1);
    f[i] = upper ? other - f[i] : f[i] + other;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] *= 0.25f;
}

// The 8 BF16 values of vector v as loaded (zeros where not valid): a kernel that has work to do
// while the load is in flight converts them later (to_float8).
__device__ __forceinline__ Bf16x8 load_raw8(const bf16* x, std::int64_t v, bool valid, bool streaming) {
  if (!valid) return Bf16x8{};
  return streaming ? load8_stream(x + v * 8) : load8(x + v * 8);
}
// (Converting load_raw8's zeros instead of writing zeros changes the amax and FP8 kernels' SASS:
// untimed, so not done.)
__device__ __forceinline__ void load_vector(const bf16* x, std::int64_t v, bool valid, bool streaming,
                                            float (&f)[8]) {
  if (valid) {
    to_float8(streaming ? load8_stream(x + v * 8) : load8(x + v * 8), f);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = 0.0f;
  }
}

__device__ __forceinline__ float abs_max8(const float (&f)[8]) {
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(f[i]));
  return m;
}

// Programmatic dependent launch (PDL) between the amax pass and the encoding pass (launch_encoding):
// the amax pass lets the encoding kernel launch at once, whose CTAs then take the SMs as the amax
// CTAs leave, issue their loads and wait for the whole amax pass (its tensor scale written and
// visible) only before they read the tensor scale. Without the attribute (or with no amax pass
// before it) the wait returns at once.
__device__ __forceinline__ void let_encoding_launch() { asm volatile("griddepcontrol.launch_dependents;"); }
// The CTA barrier first: without it ptxas schedules the wait above the loads before it (moving a
// wait earlier is always allowed), and the loads would no longer overlap the amax pass's end. With
// it the SASS of quantize_rows16_kernel and quantize_both_kernel issues the loads before the
// wait (what was timed); in quantize_tiles_kernel ptxas puts barrier and wait above the loads, so
// there PDL only hides the launch. (A barrier on a value of the loads keeps every kernel's loads
// above the wait, but then waits for them to arrive: not timed, not used.) Every thread of the CTA
// calls it, or has returned. What the amax pass writes is read after it with a coherent load
// (__ldcg): ptxas moves a non-coherent __ldg, read-only for the kernel's lifetime by its
// definition, above the wait (seen in the SASS).
__device__ __forceinline__ void wait_for_amax() {
  __syncthreads();
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

// One butterfly stage over 16 values: pairs (i, i + H) for every i with bit H clear. Each pair is
// independent of the others, so any order gives the same bits.
template <int H>
__device__ __forceinline__ void butterfly16(float (&f)[16]) {
#pragma unroll
  for (int i = 0; i < 16; ++i)
    if (!(i & H)) {
      const float a = f[i], b = f[i + H];
      f[i] = a + b;
      f[i + H] = a - b;
    }
}

// x[16 values] ← H16·diag(sign)·x / 4 in one thread: hadamard16_pair's operations (and so the
// CPU's), for 16 values of a row or, in the column-wise copy, down a column. Stages written out one
// by one: nested loops with a variable stride left the array in local memory. Without Scale the
// last step (× 1/4) is left to the caller.
template <bool Scale = true>
__device__ __forceinline__ void hadamard16(float (&f)[16]) {
#pragma unroll
  for (int i = 0; i < 16; ++i)
    if ((kRhtNegative >> i) & 1u) f[i] = -f[i];
  butterfly16<1>(f);
  butterfly16<2>(f);
  butterfly16<4>(f);
  butterfly16<8>(f);
  if constexpr (Scale)
#pragma unroll
    for (int i = 0; i < 16; ++i) f[i] *= 0.25f;
}

// ---- amax pass -------------------------------------------------------------------------------

// The last CTA of an amax pass: every CTA's maximum (and the column-wise copy's, where one is
// kept apart) to the tensor scale(s); the counter is zeroed for the next call.
__device__ __forceinline__ void finish_amax(float m, float mt, AmaxWorkspace* ws, float* tensor_scale,
                                            float* tensor_scale_t, bool apart, float range, float* scratch) {
  __shared__ bool last_block;
  if (threadIdx.x == 0) {
    ws->partial[blockIdx.x] = m;
    if (apart) ws->partial_t[blockIdx.x] = mt;
    __threadfence();
    last_block = atomicAdd(&ws->counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last_block) return;
  float a = 0.0f, at = 0.0f;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += kThreads) {
    a = fmaxf(a, __ldcg(&ws->partial[b]));
    if (apart) at = fmaxf(at, __ldcg(&ws->partial_t[b]));
  }
  a = block_reduce<true>(a, scratch);
  if (apart) at = block_reduce<true>(at, scratch);
  if (threadIdx.x == 0) {
    *tensor_scale = a > 0.0f ? a / range : 1.0f;
    if (tensor_scale_t) *tensor_scale_t = apart ? (at > 0.0f ? at / range : 1.0f) : *tensor_scale;
    ws->counter = 0;  // ready for the next call
  }
}

// tensor_scale_t (may be null): the column-wise copy's tensor scale, the same as the row-wise one.
template <bool Rht>
__global__ void __launch_bounds__(kThreads)
    amax_kernel(const bf16* x, std::int64_t n, AmaxWorkspace* ws, float* tensor_scale, float* tensor_scale_t,
                float range) {
  __shared__ float scratch[32];
  let_encoding_launch();
  const std::int64_t nvec = n / 8, chunk = std::int64_t(kThreads) * kAmaxVectorsPerThread;
  float m = 0.0f;
  for (std::int64_t c = blockIdx.x; c * chunk < nvec; c += gridDim.x) {
    float f[kAmaxVectorsPerThread][8];
#pragma unroll
    for (int u = 0; u < kAmaxVectorsPerThread; ++u) {
      // With the RHT a thread takes 16 consecutive values (two vectors, kAmaxVectorsPerThread / 2
      // such blocks kThreads blocks apart), whose transform it finds alone; nvec is even (rht needs
      // cols a multiple of 16).
      const std::int64_t v = Rht ? 2 * (c * (chunk / 2) + (u / 2) * kThreads + threadIdx.x) + (u & 1)
                                 : c * chunk + u * kThreads + threadIdx.x;
      load_vector(x, v, v < nvec, false, f[u]);  // cached: the encoding pass reads it again from L2
    }
    if constexpr (Rht) {
#pragma unroll
      for (int u = 0; u < kAmaxVectorsPerThread; u += 2) {
        float g[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) g[i] = f[u + i / 8][i % 8];
        hadamard16<false>(g);
#pragma unroll
        for (int i = 0; i < 16; ++i) m = fmaxf(m, fabsf(g[i]));
      }
    } else {
#pragma unroll
      for (int u = 0; u < kAmaxVectorsPerThread; ++u) m = fmaxf(m, abs_max8(f[u]));
    }
  }
  // The transform's × 1/4 once, on the maximum: RN(y / 4) never decreases with |y|, so the largest
  // of the scaled magnitudes is the largest magnitude scaled. H200 against the lane pairs' transform
  // with its scale per value (bench/quant_results.md): NVFP4 RHT 4096² 29.6 → 28.7 µs, RHT + SR
  // 37.0 → 36.0, RHT 4096×11008 69.3 → 67.9.
  if (Rht) m *= 0.25f;
  if (blockIdx.x == 0)  // values past the last whole vector (FP8 with rows·cols not a multiple of 8)
    for (std::int64_t e = nvec * 8 + threadIdx.x; e < n; e += kThreads)
      m = fmaxf(m, fabsf(__bfloat162float(x[e])));
  m = block_reduce<true>(m, scratch);
  finish_amax(m, 0.0f, ws, tensor_scale, tensor_scale_t, false, range, scratch);
}

// Both maxima in one read, for transpose with the RHT: |x| (the row-wise copy) and |H16·x| over each
// 16 values down a column (the column-wise copy). A thread takes 16 rows × 2 columns per step, one
// 4-byte load a row (a warp reads 128 contiguous bytes of each row), over a grid of the CTAs that
// are resident at once (amax_columns_grid). H200, same call (bench/quant_results.md), against
// 16 rows × 8 columns (108 registers, 2 CTAs an SM; 4 columns: 64 registers): both copies with the
// RHT 4096² 46.3 → 44.4 µs, 11008×4096 108.3 → 105.0, with SR 4096×11008 143.2 → 140.2.
__global__ void __launch_bounds__(kThreads)
    amax_columns_kernel(const bf16* x, std::int64_t rows, std::int64_t cols, AmaxWorkspace* ws,
                        float* tensor_scale, float* tensor_scale_t, float range) {
  __shared__ float scratch[32];
  let_encoding_launch();
  const std::int64_t pairs_per_row = cols / 2, chunks = rows / 16 * pairs_per_row;
  float m = 0.0f, mt = 0.0f;
  for (std::int64_t c = std::int64_t(blockIdx.x) * kThreads + threadIdx.x; c < chunks;
       c += std::int64_t(gridDim.x) * kThreads) {
    const std::int64_t g = c / pairs_per_row, cp = c - g * pairs_per_row;
    std::uint32_t raw[16];  // a bf16 pair of each row
#pragma unroll
    for (int i = 0; i < 16; ++i)  // cached: the encoding pass reads it again
      raw[i] = __ldg(reinterpret_cast<const unsigned*>(x + (g * 16 + i) * cols + cp * 2));
#pragma unroll
    for (int j = 0; j < 2; ++j) {  // column by column: 16 floats live
      float v[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        v[i] = __uint_as_float(j ? (raw[i] & 0xffff0000u) : (raw[i] << 16));
        m = fmaxf(m, fabsf(v[i]));
      }
      hadamard16<false>(v);
#pragma unroll
      for (int i = 0; i < 16; ++i) mt = fmaxf(mt, fabsf(v[i]));
    }
  }
  mt *= 0.25f;  // the transform's 1/4 once, on the maximum, as amax_kernel (timed: no change)
  m = block_reduce<true>(m, scratch);
  mt = block_reduce<true>(mt, scratch);
  finish_amax(m, mt, ws, tensor_scale, tensor_scale_t, true, range, scratch);
}

// ---- encoding --------------------------------------------------------------------------------

// a >= 0 to its E2M1 code, ties to even, saturating at 6, plus kRneBias: the smallest of
//   2a rounded (exact below 2, where the grid steps by 0.5), a rounded + 2 (exact in [2, 4)),
//   a/2 rounded + 4 (exact from 4 on) and 7,
// each term above its binade being larger than the exact one. Each rounding is one add of
// 1.5·2^23 (+ the term's offset) to k·a (exact for k = 2, 1, 1/2): the sum's ulp is 1 and the
// constant's last bit is even, so the float's bits are kRneBias + the term, ties to even, and the
// minima are integer minima on those bits. Three FP32 operations and three integer minima, with no
// branch and no select (the two-path form it replaced took eight; kernels_quantize_avx512.cpp's
// AVX-512 encoder uses the same terms). A NaN or huge a gives 7, as the CPU encoder.
constexpr std::uint32_t kRneBias = 0x4b400000u;  // bits of 1.5·2^23
__device__ __forceinline__ std::uint32_t e2m1_code_rne_biased(float a) {
  const std::uint32_t c1 = __float_as_uint(__fmaf_rn(a, 2.0f, 12582912.0f));
  const std::uint32_t c2 = __float_as_uint(__fadd_rn(a, 12582914.0f));
  const std::uint32_t c3 = __float_as_uint(__fmaf_rn(a, 0.5f, 12582916.0f));
  return min(min(c1, c2), min(c3, kRneBias + 7u));
}
__device__ __forceinline__ float e4m3_value(std::uint8_t bits) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(bits, __NV_E4M3)));
}

// a / s rounded as IEEE division rounds it, from r = RN(1/s) computed once per block: q0 = a·r is
// within an ulp of a/s, and one FMA residual plus one FMA correction round it exactly (Markstein's
// theorem; where divides_by_reciprocal(s) says so, below). Three instructions instead of the
// division's sequence with its slow-path branch, eight times per thread.
__device__ __forceinline__ float divide_rn(float a, float s, float r) {
  const float q0 = __fmul_rn(a, r);
  return __fmaf_rn(__fmaf_rn(-q0, s, a), r, q0);
}
// Where divide_rn stands for the division in the quantizers (|a| at most 57344·s, E5M2's largest):
// 2^-80 <= s <= 2^100. Below, a quotient that a code can tell (|a/s| >= 2^-20) can come from an a
// under 2^-102, whose residual a − q0·s is subnormal and inexact: a CPU check found such quotients
// an ulp off at s near 2^-120. For s from 2^-80 (random s near both bounds and over the normal
// range with every bf16 a, |a| <= 60000·s; 9·10^8 random float a down into the subnormals, s = 6
// among them), each quotient was the IEEE one or, for a under 2^-102 only, under 2^-20, which every
// code takes to zero. From 2^126 on RN(1/s) is subnormal; an infinite s (an infinite amax) would
// turn every quotient into NaN.
__device__ __forceinline__ bool divides_by_reciprocal(float s) { return s >= 0x1p-80f && s <= 0x1p100f; }

// The block's scale from its amax: NVFP4 writes its E4M3 bits, MXFP4 its E8M0 exponent.
template <QuantFormat F>
__device__ __forceinline__ float block_scale(float bamax, float ts, std::uint8_t& bits) {
  if constexpr (F == QuantFormat::Mxfp4) {
    const int biased = int(__float_as_uint(bamax) >> 23);  // bamax >= 0: the exponent field
    if (biased >= 3) {  // normal, and so is 2^(e-2): the exponent field is the answer
      bits = static_cast<std::uint8_t>(biased - 2);
      return __uint_as_float(std::uint32_t(biased - 2) << 23);
    }
    const int e = bamax > 0.0f ? ilogbf(bamax) : 0;  // floor(log2 amax), as frexp's exponent − 1
    bits = static_cast<std::uint8_t>(e - 2 + 127);
    return ldexpf(1.0f, e - 2);
  } else {
    // bamax / 6 / ts as the CPU divides, through reciprocals where divide_rn stands for the division
    // (an amax under 2^-102 may give an ulp-off bamax / 6, but then the quotient by ts is under
    // 2^-20 and its E4M3 byte 0 either way).
    const float y = divides_by_reciprocal(ts)
                        ? divide_rn(divide_rn(bamax, 6.0f, 1.0f / 6.0f), ts, __frcp_rn(ts))
                        : bamax / 6.0f / ts;
    bits = __nv_cvt_float_to_fp8(y, __NV_SATFINITE, __NV_E4M3);
    return e4m3_value(bits) * ts;
  }
}

// Philox4x32-10's ten round keys for a seed, as curand_Philox4x32_10 derives them from its key (the
// seed's halves, bumped by its Weyl constants each round), computed once on the host and passed by
// value: in the kernel each round reads its key from the constant bank, where deriving them took
// 20 uniform adds per draw (of 434 instructions a thread in the SR rows kernel).
struct SrKeys {
  uint2 k[10];
};
SrKeys sr_keys(std::uint64_t seed) {
  SrKeys s{};
  for (unsigned i = 0; i < 10; ++i)
    s.k[i] = make_uint2(static_cast<unsigned>(seed) + i * PHILOX_W32_0,
                        static_cast<unsigned>(seed >> 32) + i * PHILOX_W32_1);
  return s;
}

// One Philox4x32-10 draw under the keys, counted by the vector index v (curand's round function;
// curand_Philox4x32_10's output): the generator word set of 8 values, two 16-bit draws a word
// (sr_addends).
__device__ __forceinline__ uint4 sr_word(std::uint64_t v, const SrKeys& keys) {
  uint4 c = make_uint4(static_cast<unsigned>(v), static_cast<unsigned>(v >> 32), 0u, 0u);
#pragma unroll
  for (int i = 0; i < 10; ++i) c = _philox4x32round(c, keys.k[i]);
  return c;
}
// A thread's 16 values (vectors v and v + 1) take their words from one of two sources (encode16):
// drawn ahead, where a kernel draws while its loads are in flight (only the index goes in), or
// drawn as each 8 values are encoded, which holds fewer registers.
struct SrDraws {
  uint4 w[2];
  __device__ __forceinline__ uint4 word(int h) const { return w[h]; }
};
struct SrDrawLate {
  const SrKeys& keys;
  std::uint64_t v;
  __device__ __forceinline__ uint4 word(int h) const { return sr_word(v + h, keys); }
};
template <bool Sr>
__device__ __forceinline__ SrDraws sr_draws(std::uint64_t v, const SrKeys& keys) {
  SrDraws d{};
  if constexpr (Sr) d.w[0] = sr_word(v, keys), d.w[1] = sr_word(v + 1, keys);
  return d;
}

// Eight 16-bit draws from one generator word set, each as e2m1_code_sr's addend (e2m1_sr.hpp).
// P(u < p) is then p rounded to the nearest 2^-16: the rounding is unbiased to within 2^-17 of a
// grid step, at a quarter of the generator's cost per value.
__device__ __forceinline__ void sr_addends(const uint4& w4, unsigned (&add)[8]) {
  const unsigned w[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    add[2 * i] = e2m1_sr_addend_low(w[i]);
    add[2 * i + 1] = e2m1_sr_addend_high(w[i]);
  }
}

// PTX prmt in its default mode: byte i of the result is byte (sel nibble i & 7) of b:a, or, where
// the nibble's bit 3 is set, that byte's top bit copied eight times (__byte_perm keeps 3 bits).
__device__ __forceinline__ std::uint32_t prmt(std::uint32_t a, std::uint32_t b, std::uint32_t sel) {
  std::uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}
// Bit 3 of nibble i set where f[i]'s sign bit is (the other bits of a nibble are any): byte b
// takes f[2b]'s sign copied into its low nibble and f[2b+1]'s into its high one, three byte
// permutes for each of the two sets, then one select. A compare and a select a value before.
__device__ __forceinline__ std::uint32_t sign_nibbles(const float (&f)[8]) {
  const auto u = [&](int i) { return __float_as_uint(f[i]); };
  // 0xFB: bytes 0, 1 ← the copied top bits of a's and b's byte 3; 0xFB00: the same into bytes 2, 3
  const std::uint32_t even = prmt(prmt(u(0), u(2), 0xFBu), prmt(u(4), u(6), 0xFB00u), 0x7610u);
  const std::uint32_t odd = prmt(prmt(u(1), u(3), 0xFBu), prmt(u(5), u(7), 0xFB00u), 0x7610u);
  return (even & 0x0F0F0F0Fu) | (odd & 0xF0F0F0F0u);
}

// RN(1/S) for encode_fp4x8, once per block (0 where S is not positive: every code 0).
__device__ __forceinline__ float fp4_reciprocal(float scale) {
  return scale > 0.0f ? __frcp_rn(scale) : 0.0f;
}

// Eight E2M1 codes (sign | magnitude code), packed low nibble first. Each quotient is |f|·RN(1/S),
// as the CPU encoders and the definition compute it (quant_math.cpp's fp4_quotient): the case is
// decided once for the eight values, so that the common one runs straight through, per value one
// multiply, the code's six operations and a shift-and-add, with no branch. The magnitudes gather
// in one word (disjoint nibbles, so the sum is the OR; the codes' bias summed out once at the
// end), the signs in another (sign_nibbles); a sign stays only where its magnitude is not 0 (bit 3
// of nibble + 7), for the eight at once: no negative zero, as the CPU encoder.
template <bool Sr>
__device__ __forceinline__ std::uint32_t encode_fp4x8(const float (&f)[8], float scale, float rcp,
                                                      const uint4& draws) {
  unsigned r[8];
  if (Sr) sr_addends(draws, r);
  constexpr std::uint32_t bias = Sr ? 0u : kRneBias;
  std::uint32_t mag = 0;  // nibble i: value i's magnitude code (+ bias, summed out below)
  const auto put = [&](int i, float a) {
    mag += (Sr ? std::uint32_t(e2m1_code_sr(a, r[i])) : e2m1_code_rne_biased(a)) << (4 * i);
  };
  if (scale > 0.0f && rcp <= 3.4028235e38f) {
#pragma unroll
    for (int i = 0; i < 8; ++i) put(i, __fmul_rn(fabsf(f[i]), rcp));
  } else if (scale > 0.0f) {  // under 2^-128, where RN(1/S) overflows: IEEE division
#pragma unroll
    for (int i = 0; i < 8; ++i) put(i, fabsf(f[i]) / scale);
  } else {  // zero or NaN: every code 0
    return 0;
  }
  if (bias) mag -= bias * 0x11111111u;  // Σ bias·16^i, mod 2^32
  return mag | (sign_nibbles(f) & (mag + 0x77777777u) & 0x88888888u);
}

// FP8 bytes of f / ts (saturating); a value that rounds to zero keeps code 0, as the CPU encoder.
template <QuantFormat F>
__device__ __forceinline__ std::uint8_t fp8_byte(float y) {
  const std::uint8_t b =
      __nv_cvt_float_to_fp8(y, __NV_SATFINITE, F == QuantFormat::Fp8E4m3 ? __NV_E4M3 : __NV_E5M2);
  return (b & 0x7f) ? b : 0;
}
// Four FP8 bytes, low byte first, two conversions of two values each; then, as fp8_byte, no
// negative zero: a byte's bit 7 stays only where its bits 0-6 are not all zero (their sum with 0x7f
// carries into bit 7, never into the next byte).
template <QuantFormat F>
__device__ __forceinline__ std::uint32_t fp8_word(float a, float b, float c, float d) {
  constexpr auto kind = F == QuantFormat::Fp8E4m3 ? __NV_E4M3 : __NV_E5M2;
  const std::uint32_t w = std::uint32_t(__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, kind)) |
                          std::uint32_t(__nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, kind))
                              << 16;
  return w & (((w & 0x7f7f7f7fu) + 0x7f7f7f7fu) | 0x7f7f7f7fu);
}

// The FP8 bytes of f[0..N) / ts packed four to a word, low byte first. With ts where
// divides_by_reciprocal holds (the case decided once) each quotient is divide_rn's, which the byte
// cannot tell from the IEEE one, without the division's check and slow-path branch per value.
template <QuantFormat F, int N>
__device__ __forceinline__ void fp8_words(const float (&f)[N], float ts, std::uint32_t (&w)[N / 4]) {
  float y[N];
  if (divides_by_reciprocal(ts)) {
    const float rcp = __frcp_rn(ts);
#pragma unroll
    for (int i = 0; i < N; ++i) y[i] = divide_rn(f[i], ts, rcp);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) y[i] = f[i] / ts;
  }
#pragma unroll
  for (int j = 0; j < N / 4; ++j) w[j] = fp8_word<F>(y[4 * j], y[4 * j + 1], y[4 * j + 2], y[4 * j + 3]);
}

// FP8 per tensor, the tensor as a flat array (FP4 row-wise has quantize_rows16_kernel): a thread
// issues the loads of kFlatVectors vectors of 8 values (kThreads apart), then waits for the amax
// pass (a programmatic dependent, launch_encoding) and encodes them. On the H200, against one
// vector a thread in plain stream order (2026-11-28, bench/quant_results.md): 4096² 22.2 µs against
// 22.6, 8192² 79.5 against 79.9; one vector a thread as a dependent took 27.3 (the H100's 31.1
// against 26.8 before).
constexpr int kFlatVectors = 4;
template <QuantFormat F, bool Rht, bool Sr>
__global__ void __launch_bounds__(kThreads)
    quantize_flat_kernel(const bf16* x, QuantTensorRef q, std::int64_t n, std::uint64_t seed) {
  static_assert(is_fp8(F), "FP4 row-wise: quantize_rows16_kernel");
  const std::int64_t nvec = n / 8;
  const std::int64_t first =
      (gridDim.x - 1 - blockIdx.x) * std::int64_t(kThreads) * kFlatVectors + threadIdx.x;
  float f[kFlatVectors][8];
#pragma unroll
  for (int u = 0; u < kFlatVectors; ++u) {
    const std::int64_t v = first + u * kThreads;
    load_vector(x, v, v < nvec, true, f[u]);
  }
  wait_for_amax();
  const float ts = __ldcg(q.tensor_scale);
#pragma unroll
  for (int u = 0; u < kFlatVectors; ++u) {
    const std::int64_t v = first + u * kThreads;
    if (Rht) hadamard16_pair(f[u], threadIdx.x & 1);
    std::uint32_t w[2];
    fp8_words<F>(f[u], ts, w);
    if (v < nvec) reinterpret_cast<uint2*>(q.codes)[v] = make_uint2(w[0], w[1]);
  }
  if (blockIdx.x == gridDim.x - 1)  // the last (reversed: first) CTA takes the values past the last vector
    for (std::int64_t e = nvec * 8 + threadIdx.x; e < n; e += kThreads)
      q.codes[e] = fp8_byte<F>(__bfloat162float(x[e]) / ts);
}

// transpose=1: both copies from one read. A CTA takes a 64×64 tile. Phase A: a thread owns 16
// values of a row (one NVFP4 block, half an MXFP4 block) and writes the row-wise codes; the tile
// goes to shared memory. Phase B: a thread owns 16 values down a column (the column-wise copy's
// block, after the RHT where asked) and writes them as 16 consecutive values of a row of Xᵀ. 16×16
// tiles take their maximum through shared memory, MXFP4 pairs through a shuffle. The stochastic
// draws of the copy are keyed by seed + 1 and counted by its own vector index, as the CPU's.
// Where the column-wise copy's codes are the row-wise copy's transposed (codes_transpose: 16×16 tiles,
// whose tile, maximum and scale are the same in Xᵀ, and FP8, whose one tensor scale is; both only
// without the RHT on the copy and without SR, whose draws are keyed by each copy's own index), phase
// A keeps its codes in shared memory instead of the values and phase B reads them down a column:
// a byte and a shift or two a value where encoding them again took about 15 instructions a value.
// H200, same call (bench/quant_results.md): W+T 11008×4096 16×16 104.5 → 80.8 µs, FP8 4096² 31.0 →
// 27.7. Tried there and dropped: phase A's loads through L1 (83.5 µs), a tile's 16 lines in the
// lanes of one warp with its maximum by shuffles and no barrier (91.8; 89.4 at 5 CTAs an SM: a
// warp's row-wise stores then fill half sectors).
constexpr int kTile = 64;
constexpr int kTilePad = kTile + 1;  // shared-memory row stride: column reads 2-way conflicted at most
template <QuantFormat F, bool RhtCols, bool Sr>
constexpr bool codes_transpose = !RhtCols && !Sr && (F == QuantFormat::Nvfp4Tile16 || is_fp8(F));
// Words of codes per tile row (64 values: 8 FP4, 16 FP8) plus one, so that the four segments' rows
// (16 apart) of a column read fall in at most two banks.
template <QuantFormat F>
constexpr int kCodeStride = (is_fp8(F) ? 16 : 8) + 1;

// Phase B of codes_transpose: the codes of column `line` of the tile, rows 16·seg ... + 15, from the
// codes phase A kept (rows of kCodeStride words), as 16 consecutive codes of a row of Xᵀ at element e.
template <QuantFormat F>
__device__ __forceinline__ void transpose_codes16(const std::uint32_t* kept, int line, int seg,
                                                  std::uint8_t* codes, std::int64_t e) {
  const auto* b = reinterpret_cast<const std::uint8_t*>(kept);
  constexpr int row_bytes = 4 * kCodeStride<F>;
  if constexpr (is_fp8(F)) {
    std::uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = 16 * seg + 4 * j;
      w[j] = __byte_perm(__byte_perm(b[r * row_bytes + line], b[(r + 1) * row_bytes + line], 0x0040),
                         __byte_perm(b[(r + 2) * row_bytes + line], b[(r + 3) * row_bytes + line], 0x0040),
                         0x5410);
    }
    *reinterpret_cast<uint4*>(codes + e) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
    const int shift = 4 * (line & 1);
    std::uint32_t w[2] = {0u, 0u};
#pragma unroll
    for (int i = 0; i < 16; ++i)
      w[i / 8] |= ((std::uint32_t(b[(16 * seg + i) * row_bytes + line / 2]) >> shift) & 0xfu)
                  << (4 * (i % 8));
    *reinterpret_cast<uint2*>(codes + e / 2) = make_uint2(w[0], w[1]);
  }
}

template <QuantFormat F>
__device__ __forceinline__ float copy_block_max(float bamax, float* red, int owner, int stride_owner) {
  if constexpr (F == QuantFormat::Mxfp4) {
    return fmaxf(bamax, __shfl_xor_sync(0xffffffffu, bamax, 1));  // segments 2s, 2s+1: one 1×32 block
  } else if constexpr (F == QuantFormat::Nvfp4Tile16) {
    // red[owner] holds each thread's 16-value maximum; a 16×16 tile is 16 owners stride_owner apart.
    __syncthreads();
    red[threadIdx.x] = bamax;
    __syncthreads();
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) m = fmaxf(m, red[owner + i * stride_owner]);
    return m;
  } else {
    return bamax;
  }
}

// 16 values at f (one thread's segment) to codes at byte offset e / 2 (FP4) or e (FP8), e a multiple
// of 16; the block's scale bits returned through `bits`. With `keep` (shared memory), the code words
// (2 for FP4, 4 for FP8) are kept there too.
// Unscaled (FP4): f is the RHT without its × 1/4 (hadamard16<false>) and bamax the block's largest
// magnitude of those. The block's maximum takes the 1/4 (RN(y/4) never decreases with |y|), and the
// reciprocal takes it for the values: with y/4 and r/4 exact, RN(RN(|y|/4)·r) = RN(|y|·(r/4)). A
// block maximum (unscaled) in [2^-100, 2^100] keeps r/4 normal, and there a y whose y/4 is
// subnormal gives a quotient under 2^-20 either way, code 0; other blocks scale each value first
// (GpuQuant.RhtBlocksOfExtremeMagnitudeEqualTheCpuEncoder). H200, same call (bench/quant_results.md):
// RHT + SR 4096×11008 86.3 → 83.9 µs, both copies with the RHT 11008×4096 104.9 → 103.2.
// (NVFP4 RHT + SR row-wise: 56 → 48 registers, a fifth CTA an SM.)
template <QuantFormat F, bool Sr, bool Unscaled = false, class Draws>
__device__ __forceinline__ void encode16(const float (&f)[16], float bamax, float ts, std::uint8_t* codes,
                                         std::int64_t e, const Draws& d, std::uint8_t& bits,
                                         std::uint32_t* keep = nullptr) {
  static_assert(!(Unscaled && is_fp8(F)), "FP8 takes the scaled values");
  if constexpr (is_fp8(F)) {
    std::uint32_t w[4];
    fp8_words<F>(f, ts, w);
    *reinterpret_cast<uint4*>(codes + e) = make_uint4(w[0], w[1], w[2], w[3]);
    if (keep)
#pragma unroll
      for (int i = 0; i < 4; ++i) keep[i] = w[i];
  } else {
    constexpr QuantFormat S = F == QuantFormat::Mxfp4 ? F : QuantFormat::Nvfp4;
    const float scale = block_scale<S>(Unscaled ? bamax * 0.25f : bamax, ts, bits);
    float lo[8], hi[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) lo[i] = f[i], hi[i] = f[8 + i];
    float rcp = fp4_reciprocal(scale);
    if constexpr (Unscaled) {
      if (bamax >= 0x1p-100f && bamax <= 0x1p100f) {
        rcp *= 0.25f;
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) lo[i] *= 0.25f, hi[i] *= 0.25f;
      }
    }
    const uint2 w = make_uint2(encode_fp4x8<Sr>(lo, scale, rcp, Sr ? d.word(0) : uint4{}),
                               encode_fp4x8<Sr>(hi, scale, rcp, Sr ? d.word(1) : uint4{}));
    *reinterpret_cast<uint2*>(codes + e / 2) = w;
    if (keep) keep[0] = w.x, keep[1] = w.y;
  }
}

// A thread's 16 consecutive values from vector v on (zeros where not valid), after the RHT where
// asked; returns their largest magnitude. The two 16-byte halves are read through L1, not streamed
// past it: each of a warp's two loads covers half of every sector it touches, and streaming loads
// would fetch each sector from L2 twice. With Sr, the generator's words for those values (sr_draws)
// come out through d, drawn while the loads are in flight.
template <bool Rht, bool Sr, bool Unscaled = false>  // Unscaled: the RHT without its × 1/4 (encode16)
__device__ __forceinline__ float load16_drawing(const bf16* x, std::int64_t v, bool valid, const SrKeys& keys,
                                                float (&f)[16], SrDraws& d) {
  const Bf16x8 raw[2] = {load_raw8(x, v, valid, false), load_raw8(x, v + 1, valid, false)};
  d = sr_draws<Sr>(std::uint64_t(v), keys);  // the generator, under the loads' latency
  float half[2][8];
  to_float8(raw[0], half[0]);
  to_float8(raw[1], half[1]);
#pragma unroll
  for (int i = 0; i < 16; ++i) f[i] = half[i / 8][i % 8];
  if (Rht) hadamard16<!Unscaled>(f);
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) m = fmaxf(m, fabsf(f[i]));
  return m;
}
template <bool Rht>
__device__ __forceinline__ float load16(const bf16* x, std::int64_t v, bool valid, float (&f)[16]) {
  SrDraws unused;
  return load16_drawing<Rht, false>(x, v, valid, SrKeys{}, f, unused);
}

// Row-wise FP4, 16 values a thread (load16). NVFP4 1×16: a thread per scale block, so that the
// block's maximum and scale are found once, by the thread that encodes the block, with no shuffle
// (8 values a thread, lane pairs each computing both, was slower). MXFP4 1×32: a lane pair per block, its
// maximum by one shuffle, the scale byte from the even lane; no amax pass to wait for. n is a
// multiple of 32 for MXFP4 (check_shape), so a pair is valid or invalid together.
// With SR the thread draws its generator words while its loads are in flight (load16_drawing), the
// two Philox chains side by side: 81.4 µs against 86.3 drawing as it encodes at 4096×11008 on the H100
// (bench/quant_results.md). NVFP4 SR without the RHT: 5 CTAs an SM (47 registers, no spill; 6 would
// spill, and unbounded it takes 52, 4 CTAs); with the RHT, or MXFP4, a bound would spill.
template <QuantFormat F, bool Rht, bool Sr>
__global__ void __launch_bounds__(kThreads, F == QuantFormat::Nvfp4 && Sr && !Rht ? 5 : 1)
    quantize_rows16_kernel(const bf16* x, QuantTensorRef q, std::int64_t n, const SrKeys keys) {
  const std::int64_t b = (std::int64_t(gridDim.x) - 1 - blockIdx.x) * kThreads + threadIdx.x;
  float f[16];
  std::uint8_t bits = 0;
  if constexpr (F == QuantFormat::Mxfp4) {
    const bool valid = b < n / 16;  // no return before the shuffle: the warp's other lanes
    SrDraws d;
    float bamax = load16_drawing<Rht, Sr, Rht>(x, 2 * b, valid, keys, f, d);
    bamax = fmaxf(bamax, __shfl_xor_sync(0xffffffffu, bamax, 1));
    if (!valid) return;
    encode16<F, Sr, Rht>(f, bamax, 1.0f, q.codes, 16 * b, d, bits);
    if (!(b & 1)) q.scales[b / 2] = bits;
  } else {
    if (b >= n / 16) return;  // nothing below waits for another lane
    SrDraws d;
    const float bamax = load16_drawing<Rht, Sr, Rht>(x, 2 * b, true, keys, f, d);
    wait_for_amax();
    encode16<F, Sr, Rht>(f, bamax, __ldcg(q.tensor_scale), q.codes, 16 * b, d, bits);
    q.scales[b] = bits;
  }
}

// The tensor scale, read where the call stands (after the amax wait): ptxas sank an __ldcg, and a
// volatile asm ld.global.cg too, below the code after it (a `return`, the tile's shuffles), so its
// L2 round trip came last, just before the encoding needs it. A PTX volatile load stays in place;
// like __ldcg it is served by L2, coherent with the amax pass's write (seen in the SASS).
__device__ __forceinline__ float load_scale_now(const float* p) {
  float v;
  asm volatile("ld.volatile.global.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
  return v;
}

// NVFP4 16×16 tiles: a thread per two rows of a tile (r and r + 8, 16 values each by load16, the RHT
// in one thread), a warp over 16 rows × 64 columns (4 tiles side by side, lane = 4r + tile), a CTA
// eight warps along the same 16 rows. A tile's maximum meets in three shuffles among its 8 lanes,
// with no shared memory and no barrier but the amax wait's; each of those lanes finds the same scale
// once for its 32 values. Stochastic draws keyed as before: by each 8 values' vector index.
// Two layouts before it, H100 11008×4096 (bench/quant_results.md): a thread per tile row, a tile's
// 16 rows in a half-warp (64 bytes a row per load, four shuffles), 85.2 µs; a half-warp per row of
// 16 tiles, the maximum through shared memory at the barrier, 75.5 µs; this one 72.7–73.1 µs.
template <bool Rht, bool Sr>
__global__ void __launch_bounds__(kThreads, Rht || Sr ? 4 : 5)  // 48 registers without either, else 64
    quantize_tiles_kernel(const bf16* x, QuantTensorRef q, std::int64_t cols, const SrKeys keys) {
  const std::int64_t tiles_per_row = cols / 16;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, j = lane & 3, r = lane >> 2;
  const std::int64_t tc = std::int64_t(blockIdx.x) * (kThreads / 8) + warp * 4 + j;
  const bool valid = tc < tiles_per_row;
  const std::int64_t tr = gridDim.y - 1 - blockIdx.y;
  const std::int64_t e = (tr * 16 + r) * cols + tc * 16, e8 = e + 8 * cols;
  // A tile's 16 rows are the 8 lanes of one j, valid or not together: the invalid ones leave first.
  // (Loads predicated on valid and shuffles over the whole warp took 75.6 µs against 73.1.)
  const unsigned tile_lanes = __ballot_sync(0xffffffffu, valid);
  if (!valid) return;
  float f[16], g[16];
  float bamax = fmaxf(load16<Rht>(x, e / 8, true, f), load16<Rht>(x, e8 / 8, true, g));
  wait_for_amax();
  const float ts = load_scale_now(q.tensor_scale);
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) bamax = fmaxf(bamax, __shfl_xor_sync(tile_lanes, bamax, o));
  std::uint8_t bits = 0;
  encode16<QuantFormat::Nvfp4, Sr>(f, bamax, ts, q.codes, e, SrDrawLate{keys, std::uint64_t(e / 8)}, bits);
  encode16<QuantFormat::Nvfp4, Sr>(g, bamax, ts, q.codes, e8, SrDrawLate{keys, std::uint64_t(e8 / 8)}, bits);
  if (r == 0) q.scales[tr * tiles_per_row + tc] = bits;
}

// One thread's 16 values of a copy, at (row, col) of that copy ([.., out_cols], col a multiple of 16):
// the block's maximum (shared with the other threads of a 16×16 tile or a 1×32 block: every thread
// calls this, valid or not), the codes, and the block scale from the thread that holds the block's
// first 16 values. `line` and `seg` place the thread in the tile (see quantize_both_kernel). Returns
// the block's scale bits; `keep` as encode16's.
template <QuantFormat F, bool Sr, bool Unscaled = false, class Draws>  // Unscaled: as encode16's
__device__ __forceinline__ std::uint8_t encode_segment(const float (&f)[16], float ts, QuantTensorRef out,
                                                       std::int64_t row, std::int64_t col,
                                                       std::int64_t out_cols, bool valid, const Draws& draws,
                                                       float* red, int line, int seg,
                                                       std::uint32_t* keep = nullptr) {
  float bamax = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) bamax = fmaxf(bamax, fabsf(f[i]));
  // A 16×16 tile: 16 lines of this segment, owners 4 threads apart.
  bamax = copy_block_max<F>(bamax, red, (line & ~15) * 4 + seg, 4);
  std::uint8_t bits = 0;
  if (!valid) return bits;
  const std::int64_t e = row * out_cols + col;
  encode16<F, Sr, Unscaled>(f, bamax, ts, out.codes, e, draws, bits, keep);
  if constexpr (F == QuantFormat::Nvfp4) out.scales[e / 16] = bits;
  if constexpr (F == QuantFormat::Mxfp4)
    if (!(seg & 1)) out.scales[e / 32] = bits;
  if constexpr (F == QuantFormat::Nvfp4Tile16)
    if (!(line & 15)) out.scales[(row / 16) * (out_cols / 16) + col / 16] = bits;
  return bits;
}

template <QuantFormat F, bool RhtCols, bool Sr>
__global__ void __launch_bounds__(kThreads)
    quantize_both_kernel(const bf16* x, QuantTensorRef q, QuantTensorRef qt, std::int64_t rows,
                         std::int64_t cols, const SrKeys keys, const SrKeys keys_t) {
  constexpr bool kCodes = codes_transpose<F, RhtCols, Sr>;  // phase B transposes phase A's codes
  __shared__ float tile[kCodes ? 1 : kTile][kCodes ? 1 : kTilePad];
  __shared__ std::uint32_t kept[kCodes ? kTile : 1][kCodes ? kCodeStride<F> : 1];
  __shared__ float red[kThreads];
  const int t = threadIdx.x, seg = t & 3, line = t >> 2;  // 4 segments of 16 along a 64-wide line
  const std::int64_t r0 = std::int64_t(gridDim.y - 1 - blockIdx.y) * kTile;  // reversed: L2 keeps the end
  const std::int64_t c0 = std::int64_t(gridDim.x - 1 - blockIdx.x) * kTile;
  float ts = 1.0f, tst = 1.0f;  // read once the amax pass is done, after the tile's loads
  SrDraws db;                   // phase B's generator words, drawn in phase A

  // Phase A: row r0 + line, columns c0 + 16·seg ... + 15.
  {
    const std::int64_t r = r0 + line, c = c0 + 16 * seg;
    const bool valid = r < rows && c < cols;  // rows and cols are multiples of 16
    const std::int64_t v = (r * cols + c) / 8;
    const Bf16x8 raw[2] = {load_raw8(x, v, valid, true), load_raw8(x, v + 1, valid, true)};
    // With SR, both phases' generator words (only their indices go in) while the loads are in flight:
    // dY+T 4096² RHT+SR 62.0 µs against 63.2 drawing as it encodes (H100, bench/quant_results.md).
    const SrDraws da = sr_draws<Sr>(std::uint64_t(v), keys);
    db = sr_draws<Sr>(std::uint64_t(((c0 + line) * rows + r0 + 16 * seg) / 8), keys_t);
    float f[16], a[8], b[8];
    to_float8(raw[0], a);
    to_float8(raw[1], b);
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = a[i], f[8 + i] = b[i];
    if constexpr (!kCodes)
#pragma unroll
      for (int i = 0; i < 16; ++i) tile[line][16 * seg + i] = f[i];
    wait_for_amax();
    if (F != QuantFormat::Mxfp4) ts = __ldcg(q.tensor_scale), tst = __ldcg(qt.tensor_scale);
    const std::uint8_t bits =
        encode_segment<F, Sr>(f, ts, q, r, c, cols, valid, da, red, line, seg,
                              kCodes ? &kept[line][seg * (kCodeStride<F> - 1) / 4] : nullptr);
    // The copy's tile (c / 16, r / 16) of Xᵀ takes the same scale.
    if constexpr (kCodes && F == QuantFormat::Nvfp4Tile16)
      if (valid && !(line & 15)) qt.scales[(c / 16) * (rows / 16) + r / 16] = bits;
  }
  __syncthreads();
  // Phase B: column c0 + line, rows r0 + 16·seg ... + 15, written as row c0 + line of Xᵀ.
  const std::int64_t c = c0 + line, r = r0 + 16 * seg;
  const bool valid = r < rows && c < cols;
  if constexpr (kCodes) {
    // The 16 phase-A threads these codes come from were valid exactly when this one is.
    if (valid) transpose_codes16<F>(&kept[0][0], line, seg, qt.codes, c * rows + r);
  } else {
    float f[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) f[i] = valid ? tile[16 * seg + i][line] : 0.0f;
    constexpr bool kUnscaled = RhtCols && !is_fp8(F);  // FP4: the × 1/4 in the reciprocal (encode16)
    if (RhtCols) hadamard16<!kUnscaled>(f);
    encode_segment<F, Sr, kUnscaled>(f, tst, qt, c, r, rows, valid, db, red, line, seg);
  }
}

// ---- decoding --------------------------------------------------------------------------------

// Eight E2M1 codes (the nibbles of k, value i in bits 4i..4i+3, sign bit 3 as the CPU decoder's) to
// floats. A magnitude's float bits are its bf16 bits (0, 0x3f00, 0x3f80, 0x3fc0, 0x4000, 0x4040,
// 0x4080, 0x40c0) over 16 zero bits: byte permutes look up four codes' high and low bytes at once,
// two more pair them as bf16x2, and a shift or a mask widens each half. About 5 instructions a value
// where the field-by-field form took about 10.
__device__ __forceinline__ void e2m1_values8(std::uint32_t k, float (&f)[8]) {
  const std::uint32_t idx = k & 0x77777777u;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const std::uint32_t c = idx >> (16 * h);                            // prmt reads the low four nibbles
    const std::uint32_t hi = __byte_perm(0x3f3f3f00u, 0x40404040u, c);  // codes 0-3, 4-7
    const std::uint32_t lo = __byte_perm(0xc0800000u, 0xc0804000u, c);
    const std::uint32_t pair[2] = {__byte_perm(lo, hi, 0x5140), __byte_perm(lo, hi, 0x7362)};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int i = 4 * h + j;
      const std::uint32_t mag = j % 2 ? pair[j / 2] & 0xffff0000u : pair[j / 2] << 16;
      f[i] = __uint_as_float(mag | ((k << (28 - 4 * i)) & 0x80000000u));
    }
  }
}

__device__ __forceinline__ void store_values(bf16* out, std::int64_t v, const float (&f)[8]) {
  store8(out + v * 8, from_float8(f));
}
__device__ __forceinline__ void store_values(float* out, std::int64_t v, const float (&f)[8]) {
  auto* o = reinterpret_cast<float4*>(out + v * 8);
  o[0] = make_float4(f[0], f[1], f[2], f[3]);
  o[1] = make_float4(f[4], f[5], f[6], f[7]);
}
__device__ __forceinline__ void store_value(bf16* out, std::int64_t e, float f) {
  out[e] = __float2bfloat16_rn(f);
}
__device__ __forceinline__ void store_value(float* out, std::int64_t e, float f) { out[e] = f; }

template <QuantFormat F>
__device__ __forceinline__ float fp8_value(std::uint8_t b) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(b, F == QuantFormat::Fp8E4m3 ? __NV_E4M3 : __NV_E5M2)));
}

// The row of vector v in rows of cv vectors, by a 32-bit division where both fit (a 64-bit one is
// a subroutine of some 70 instructions).
__device__ __forceinline__ std::int64_t vector_row(std::int64_t v, std::int64_t cv) {
  return v < (std::int64_t(1) << 32) && cv < (std::int64_t(1) << 32)
             ? std::int64_t(std::uint32_t(v) / std::uint32_t(cv))
             : v / cv;
}

// The scale of a 16×16 tile for the vector at (row, c): c counts vectors of 8 values in the row.
__device__ __forceinline__ float tile16_scale(const QuantTensorRef& q, std::int64_t row, std::int64_t c,
                                              std::int64_t cols, float ts) {
  return e4m3_value(__ldg(q.scales + (row / 16) * (cols / 16) + c / 2)) * ts;
}

template <QuantFormat F>
__device__ __forceinline__ float decode_scale(const QuantTensorRef& q, std::int64_t v, std::int64_t cols,
                                              float ts) {
  if constexpr (is_fp8(F)) {
    return ts;
  } else {
    if constexpr (F == QuantFormat::Nvfp4Tile16) {
      const std::int64_t cv = cols / 8, row = vector_row(v, cv);
      return tile16_scale(q, row, v - row * cv, cols, ts);
    }
    const std::uint32_t sb = __ldg(q.scales + v * 8 / block_cols(F));
    // E8M0: 2^(sb - 127) as float bits, sb << 23 (255: +inf, as ldexp gives); sb = 0 is 2^-127, subnormal.
    return F == QuantFormat::Mxfp4 ? __uint_as_float(sb ? sb << 23 : 0x00400000u) : e4m3_value(sb) * ts;
  }
}

// Each thread decodes four vectors of 8 values, all their loads issued first: a vector's codes are
// only 4 (FP4) or 8 (FP8) bytes, too few in flight per thread to stream HBM one at a time.
constexpr int kDecodeVectorsPerThread = 4;

// 16×16 tiles (`Walk`, rows of at least kThreads vectors): a thread's vectors lie kThreads apart,
// so one division places the first and each next one moves along its row, into the next row at
// most once; a division per vector put its scale load behind a chain of some 20 instructions.
template <QuantFormat F, class Out, bool Walk = false>
__global__ void __launch_bounds__(kThreads)
    dequantize_kernel(QuantTensorRef q, Out* out, std::int64_t n, std::int64_t cols) {
  const std::int64_t nvec = n / 8;
  const std::int64_t base = std::int64_t(blockIdx.x) * kThreads * kDecodeVectorsPerThread + threadIdx.x;
  const float ts = F == QuantFormat::Mxfp4 ? 1.0f : __ldg(q.tensor_scale);
  uint2 raw[kDecodeVectorsPerThread];
  float scale[kDecodeVectorsPerThread];
  [[maybe_unused]] const std::int64_t cv = cols / 8;
  [[maybe_unused]] std::int64_t row = 0, c = 0;
  if constexpr (Walk) {
    row = vector_row(base, cv);
    c = base - row * cv;
  }
#pragma unroll
  for (int u = 0; u < kDecodeVectorsPerThread; ++u) {
    const std::int64_t v = base + u * kThreads;
    if constexpr (Walk) {
      if (u > 0 && (c += kThreads) >= cv) c -= cv, ++row;
    }
    if (v >= nvec) continue;
    if constexpr (is_fp8(F))
      raw[u] = __ldcs(reinterpret_cast<const uint2*>(q.codes) + v);
    else
      raw[u].x = __ldcs(reinterpret_cast<const std::uint32_t*>(q.codes) + v);
    if constexpr (Walk)
      scale[u] = tile16_scale(q, row, c, cols, ts);
    else
      scale[u] = decode_scale<F>(q, v, cols, ts);
  }
#pragma unroll
  for (int u = 0; u < kDecodeVectorsPerThread; ++u) {
    const std::int64_t v = base + u * kThreads;
    if (v >= nvec) continue;
    float f[8];
    if constexpr (is_fp8(F)) {
#pragma unroll
      for (int i = 0; i < 8; ++i)
        f[i] = fp8_value<F>(std::uint8_t(((i < 4 ? raw[u].x : raw[u].y) >> (8 * (i % 4))) & 255)) * scale[u];
    } else {
      e2m1_values8(raw[u].x, f);
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] *= scale[u];
    }
    store_values(out, v, f);
  }
  if constexpr (is_fp8(F))
    if (blockIdx.x == gridDim.x - 1)
      for (std::int64_t e = nvec * 8 + threadIdx.x; e < n; e += kThreads)
        store_value(out, e, fp8_value<F>(q.codes[e]) * ts);
}

// ---- launchers -------------------------------------------------------------------------------

// CTAs of kThreads for n values as vectors of 8, `per_thread` vectors a thread (at least one CTA).
unsigned vector_blocks(std::int64_t n, int per_thread) {
  const std::int64_t per_cta = std::int64_t(kThreads) * per_thread;
  return unsigned(std::max<std::int64_t>(1, (n / 8 + per_cta - 1) / per_cta));
}

// amax_columns_kernel's grid: as many CTAs as are resident at once on this device (at most
// kMaxAmaxBlocks), each looping over its share.
int amax_columns_grid() {
  static PerDevice<int> per_device;
  return per_device.get([] {
    int resident = 0;
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, amax_columns_kernel, kThreads, 0),
               "cudaOccupancyMaxActiveBlocksPerMultiprocessor(amax_columns_kernel)");
    return std::clamp(std::max(resident, 1) * sm_count(), 1, kMaxAmaxBlocks);
  });
}

void check_shape(QuantFormat f, std::int64_t rows, std::int64_t cols, bool rht) {
  const int bc = block_cols(f);
  if (rows <= 0 || cols <= 0) throw InputError("quantize: rows and cols must be positive");
  if ((bc && cols % bc) || (rht && cols % 16))
    throw InputError("quantize: cols=" + std::to_string(cols) + " is not a multiple of the block");
  if (f == QuantFormat::Nvfp4Tile16 && (rows % 16 || rows / 16 > 65535))
    throw InputError("quantize: 16x16 tiles need rows a multiple of 16 (and at most 1048560)");
}

void launch_amax(const bf16* x, std::int64_t n, bool rht, void* workspace, float* tensor_scale, float range,
                 cudaStream_t stream, float* tensor_scale_t = nullptr) {
  const int sms = sm_count();
  const std::int64_t chunks =
      (n / 8 + kThreads * kAmaxVectorsPerThread - 1) / (kThreads * kAmaxVectorsPerThread);
  // 8 CTAs of 256 threads fill an SM; more CTAs would only lengthen the partials' reduction.
  const unsigned grid = unsigned(std::clamp<std::int64_t>(chunks, 1, std::min(kMaxAmaxBlocks, 8 * sms)));
  auto* ws = static_cast<AmaxWorkspace*>(workspace);
  if (rht)
    amax_kernel<true><<<grid, kThreads, 0, stream>>>(x, n, ws, tensor_scale, tensor_scale_t, range);
  else
    amax_kernel<false><<<grid, kThreads, 0, stream>>>(x, n, ws, tensor_scale, tensor_scale_t, range);
  RAFTER_CUDA_LAUNCH_CHECK("amax_kernel");
}

// Calls fn(format, rht, sr) with each as a compile-time constant (std::integral_constant) for the
// encoding kernels' template arguments. FP8 rounds to nearest even, stochastic rounding asked or
// not, as the CPU encoder does.
template <class Fn>
void with_encoding(QuantFormat f, const QuantLaunchOptions& o, Fn&& fn) {
  const bool sr = o.stochastic && !is_fp8(f);
  const auto flags = [&](auto format) {
    if (o.rht && sr) return fn(format, std::true_type{}, std::true_type{});
    if (o.rht) return fn(format, std::true_type{}, std::false_type{});
    if (sr) return fn(format, std::false_type{}, std::true_type{});
    fn(format, std::false_type{}, std::false_type{});
  };
  using QF = QuantFormat;
  switch (f) {
    case QF::Nvfp4:
      return flags(std::integral_constant<QF, QF::Nvfp4>{});
    case QF::Nvfp4Tile16:
      return flags(std::integral_constant<QF, QF::Nvfp4Tile16>{});
    case QF::Mxfp4:
      return flags(std::integral_constant<QF, QF::Mxfp4>{});
    case QF::Fp8E4m3:
      return flags(std::integral_constant<QF, QF::Fp8E4m3>{});
    case QF::Fp8E5m2:
      return flags(std::integral_constant<QF, QF::Fp8E5m2>{});
  }
}

// Launches an encoding kernel of format F; where F has an amax pass (every format but MXFP4; the
// kernel calls wait_for_amax before it reads the tensor scale), as a programmatic dependent of it
// (the amax CTAs call let_encoding_launch). MXFP4 has none: the kernel before it may be the one
// writing x, which the encoding kernel reads before any wait. RAFTER_QUANT_PDL=0 launches them in
// plain stream order: the A/B of bench/quant_vs_pytorch.sh.
template <QuantFormat F, class... Params, class... Args>
void launch_encoding(void (*kernel)(Params...), dim3 grid, cudaStream_t stream, const char* what,
                     Args... args) {
  static const bool pdl = [] {
    const char* env = std::getenv("RAFTER_QUANT_PDL");
    return !(env && std::string(env) == "0");
  }();
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = F != QuantFormat::Mxfp4 && pdl;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  check_cuda(cudaLaunchKernelEx(&cfg, kernel, args...), what);
}

template <QuantFormat F, bool RhtCols, bool Sr>
void launch_both(const bf16* x, QuantTensorRef q, QuantTensorRef qt, std::int64_t rows, std::int64_t cols,
                 std::uint64_t seed, cudaStream_t stream) {
  const dim3 grid(unsigned((cols + kTile - 1) / kTile), unsigned((rows + kTile - 1) / kTile));
  launch_encoding<F>(quantize_both_kernel<F, RhtCols, Sr>, grid, stream, "quantize_both_kernel", x, q, qt,
                     rows, cols, sr_keys(seed), sr_keys(seed + 1));
}

// transpose=1: the amax pass (both maxima in one read where the RHT makes them differ), then one
// encoding pass writing both copies.
void quantize_both(const bf16* x, QuantTensorRef q, QuantTensorRef qt, std::int64_t rows, std::int64_t cols,
                   QuantFormat f, const QuantLaunchOptions& o, void* workspace, cudaStream_t stream) {
  const int bc = block_cols(f);
  if (rows <= 0 || cols <= 0 || rows % std::max(16, bc) || cols % std::max(16, bc) || rows / kTile > 65535)
    throw InputError("quantize with its column-wise copy: rows=" + std::to_string(rows) + " and cols=" +
                     std::to_string(cols) + " must be multiples of " + std::to_string(std::max(16, bc)));
  if (f != QuantFormat::Mxfp4) {
    if (o.rht) {
      const std::int64_t chunks = rows / 16 * (cols / 2);
      const unsigned grid =
          unsigned(std::clamp<std::int64_t>((chunks + kThreads - 1) / kThreads, 1, amax_columns_grid()));
      amax_columns_kernel<<<grid, kThreads, 0, stream>>>(x, rows, cols,
                                                         static_cast<AmaxWorkspace*>(workspace),
                                                         q.tensor_scale, qt.tensor_scale, scale_range(f));
      RAFTER_CUDA_LAUNCH_CHECK("amax_columns_kernel");
    } else {
      launch_amax(x, rows * cols, false, workspace, q.tensor_scale, scale_range(f), stream, qt.tensor_scale);
    }
  }
  with_encoding(f, o, [&](auto format, auto rht, auto sr) {
    launch_both<decltype(format)::value, decltype(rht)::value, decltype(sr)::value>(x, q, qt, rows, cols,
                                                                                    o.seed, stream);
  });
}

template <QuantFormat F, bool Rht, bool Sr>
void launch_encode(const bf16* x, QuantTensorRef q, std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                   cudaStream_t stream) {
  if constexpr (F == QuantFormat::Nvfp4Tile16) {
    const dim3 grid(unsigned((cols / 16 + kThreads / 8 - 1) / (kThreads / 8)),
                    unsigned(rows / 16));  // 32 tiles a CTA
    launch_encoding<F>(quantize_tiles_kernel<Rht, Sr>, grid, stream, "quantize_tiles_kernel", x, q, cols,
                       sr_keys(seed));
  } else if constexpr (F == QuantFormat::Nvfp4 || F == QuantFormat::Mxfp4) {
    // A thread per 16 values: two vectors (rows·cols is a multiple of 16, check_shape).
    launch_encoding<F>(quantize_rows16_kernel<F, Rht, Sr>, dim3(vector_blocks(rows * cols, 2)), stream,
                       "quantize_rows16_kernel", x, q, rows * cols, sr_keys(seed));
  } else {
    launch_encoding<F>(quantize_flat_kernel<F, Rht, Sr>, dim3(vector_blocks(rows * cols, kFlatVectors)),
                       stream, "quantize_flat_kernel", x, q, rows * cols, seed);
  }
}

template <class Out>
void launch_decode(QuantTensorRef q, Out* out, std::int64_t rows, std::int64_t cols, QuantFormat f,
                   cudaStream_t stream) {
  check_shape(f, rows, cols, false);
  const std::int64_t n = rows * cols;
  const unsigned grid = vector_blocks(n, kDecodeVectorsPerThread);
  switch (f) {
    case QuantFormat::Nvfp4:
      dequantize_kernel<QuantFormat::Nvfp4><<<grid, kThreads, 0, stream>>>(q, out, n, cols);
      break;
    case QuantFormat::Nvfp4Tile16:
      if (cols / 8 >= kThreads)
        dequantize_kernel<QuantFormat::Nvfp4Tile16, Out, true><<<grid, kThreads, 0, stream>>>(q, out, n, cols);
      else
        dequantize_kernel<QuantFormat::Nvfp4Tile16><<<grid, kThreads, 0, stream>>>(q, out, n, cols);
      break;
    case QuantFormat::Mxfp4:
      dequantize_kernel<QuantFormat::Mxfp4><<<grid, kThreads, 0, stream>>>(q, out, n, cols);
      break;
    case QuantFormat::Fp8E4m3:
      dequantize_kernel<QuantFormat::Fp8E4m3><<<grid, kThreads, 0, stream>>>(q, out, n, cols);
      break;
    case QuantFormat::Fp8E5m2:
      dequantize_kernel<QuantFormat::Fp8E5m2><<<grid, kThreads, 0, stream>>>(q, out, n, cols);
      break;
  }
  RAFTER_CUDA_LAUNCH_CHECK("dequantize_kernel");
}

}  // namespace

std::size_t quant_code_bytes(QuantFormat f, std::int64_t rows, std::int64_t cols) {
  return std::size_t(rows * cols) / (is_fp8(f) ? 1 : 2);
}
std::size_t quant_scale_bytes(QuantFormat f, std::int64_t rows, std::int64_t cols) {
  if (is_fp8(f)) return 0;
  return std::size_t(rows * cols) / (f == QuantFormat::Nvfp4Tile16 ? 256 : block_cols(f));
}
std::size_t quant_workspace_bytes() { return sizeof(AmaxWorkspace); }

void quantize_bf16(const bf16* x, QuantTensorRef q, std::int64_t rows, std::int64_t cols, QuantFormat f,
                   const QuantLaunchOptions& o, void* workspace, cudaStream_t stream,
                   const QuantTensorRef* transposed) {
  if (transposed) return quantize_both(x, q, *transposed, rows, cols, f, o, workspace, stream);
  check_shape(f, rows, cols, o.rht);
  if (f != QuantFormat::Mxfp4)
    launch_amax(x, rows * cols, o.rht, workspace, q.tensor_scale, scale_range(f), stream);
  with_encoding(f, o, [&](auto format, auto rht, auto sr) {
    launch_encode<decltype(format)::value, decltype(rht)::value, decltype(sr)::value>(x, q, rows, cols,
                                                                                      o.seed, stream);
  });
}

void dequantize_to_bf16(QuantTensorRef q, bf16* out, std::int64_t rows, std::int64_t cols, QuantFormat f,
                        cudaStream_t stream) {
  launch_decode(q, out, rows, cols, f, stream);
}
void dequantize_to_f32(QuantTensorRef q, float* out, std::int64_t rows, std::int64_t cols, QuantFormat f,
                       cudaStream_t stream) {
  launch_decode(q, out, rows, cols, f, stream);
}

}  // namespace rafter::workloads::cuda
