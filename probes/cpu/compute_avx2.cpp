// AVX2 compute kernels: FP64/FP32 FMA on ymm (FMA3), INT8 dot with AVX-VNNI (VEX vpdpbusd) where
// present. 12 accumulators, as for AVX-512 (16 ymm registers leave room for the constants).
#include <immintrin.h>

#include "compute_chains.hpp"
#include "kernel_entry_points.hpp"

namespace rafter::probes::cpu {
namespace {

constexpr int kAcc = 12;

double hsum_pd(__m256d a) {
  alignas(32) double l[4];
  _mm256_store_pd(l, a);
  return (l[0] + l[1]) + (l[2] + l[3]);
}

double hsum_ps(__m256 a) {
  alignas(32) float l[8];
  _mm256_store_ps(l, a);
  double s = 0;
  for (float x : l) s += x;
  return s;
}

double hsum_epi32(__m256i a) {
  alignas(32) int l[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), a);
  double s = 0;
  for (int x : l) s += x;
  return s;
}

double fma_fp64_impl(std::int64_t iterations) {
  return run_chains<__m256d, kAcc>(
      iterations, _mm256_set1_pd(chain_seed()),
      [](__m256d a) { return _mm256_fmadd_pd(a, _mm256_set1_pd(0.5), _mm256_set1_pd(1.0)); }, hsum_pd);
}

double fma_fp32_impl(std::int64_t iterations) {
  return run_chains<__m256, kAcc>(
      iterations, _mm256_set1_ps(static_cast<float>(chain_seed())),
      [](__m256 a) { return _mm256_fmadd_ps(a, _mm256_set1_ps(0.5f), _mm256_set1_ps(1.0f)); }, hsum_ps);
}

double dot_int8_impl(std::int64_t iterations) {
  const __m256i ones = _mm256_set1_epi8(1);
  return run_chains<__m256i, kAcc>(
      iterations, _mm256_set1_epi32(static_cast<int>(chain_seed() - 2)),
      [ones](__m256i a) { return _mm256_dpbusd_avx_epi32(a, ones, ones); }, hsum_epi32);
}

}  // namespace

// Exported one by one: the tables live in kernels.cpp, compiled for baseline x86-64, so that
// nothing built with this file's ISA flags runs before CPUID said the CPU has them.
namespace avx2 {
double fma_fp64(std::int64_t iterations) { return fma_fp64_impl(iterations); }
double fma_fp32(std::int64_t iterations) { return fma_fp32_impl(iterations); }
double dot_int8(std::int64_t iterations) { return dot_int8_impl(iterations); }
}  // namespace avx2

}  // namespace rafter::probes::cpu
