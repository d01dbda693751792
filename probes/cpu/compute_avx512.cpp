// AVX-512 compute kernels: FP64/FP32 FMA, BF16 dot (vdpbf16ps, AVX512_BF16) and INT8 dot
// (vpdpbusd, AVX512_VNNI) on zmm registers. 12 independent accumulators per kernel: FMA latency
// (4-5 cycles) x 2 pipes needs at least 10 chains in flight on current x86 cores.
#include <immintrin.h>

#include <cstring>

#include "compute_chains.hpp"
#include "kernel_entry_points.hpp"

namespace rafter::probes::cpu {
namespace {

constexpr int kAcc = 12;

// Sums a register's lanes in memory order (GCC 12's _mm512_reduce_add_* warn under -Wall).
template <class T, class V>
double hsum(V v) {
  alignas(64) T lanes[64 / sizeof(T)];
  std::memcpy(lanes, &v, sizeof v);
  double s = 0;
  for (T x : lanes) s += static_cast<double>(x);
  return s;
}

double fma_fp64_impl(std::int64_t iterations) {
  return run_chains<__m512d, kAcc>(
      iterations, _mm512_set1_pd(chain_seed()),
      [](__m512d a) { return _mm512_fmadd_pd(a, _mm512_set1_pd(0.5), _mm512_set1_pd(1.0)); },
      hsum<double, __m512d>);
}

double fma_fp32_impl(std::int64_t iterations) {
  return run_chains<__m512, kAcc>(
      iterations, _mm512_set1_ps(static_cast<float>(chain_seed())),
      [](__m512 a) { return _mm512_fmadd_ps(a, _mm512_set1_ps(0.5f), _mm512_set1_ps(1.0f)); },
      hsum<float, __m512>);
}

double dot_bf16_impl(std::int64_t iterations) {
  // 1.0 in bf16 is 0x3f80; every lane pair multiplies 1 x 1 twice and adds both to the fp32 lane.
  const __m512bh ones = reinterpret_cast<__m512bh>(_mm512_set1_epi16(static_cast<short>(0x3f80)));
  return run_chains<__m512, kAcc>(
      iterations, _mm512_set1_ps(static_cast<float>(chain_seed() - 2)),
      [ones](__m512 a) { return _mm512_dpbf16_ps(a, ones, ones); }, hsum<float, __m512>);
}

double dot_int8_impl(std::int64_t iterations) {
  const __m512i ones = _mm512_set1_epi8(1);
  return run_chains<__m512i, kAcc>(
      iterations, _mm512_set1_epi32(static_cast<int>(chain_seed() - 2)),
      [ones](__m512i a) { return _mm512_dpbusd_epi32(a, ones, ones); }, hsum<int, __m512i>);
}

}  // namespace

// Exported one by one: the tables live in kernels.cpp, compiled for baseline x86-64, so that
// nothing built with this file's ISA flags runs before CPUID said the CPU has them.
namespace avx512 {
double fma_fp64(std::int64_t iterations) { return fma_fp64_impl(iterations); }
double fma_fp32(std::int64_t iterations) { return fma_fp32_impl(iterations); }
double dot_bf16(std::int64_t iterations) { return dot_bf16_impl(iterations); }
double dot_int8(std::int64_t iterations) { return dot_int8_impl(iterations); }
}  // namespace avx512

}  // namespace rafter::probes::cpu
