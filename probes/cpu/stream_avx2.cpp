// AVX2 stream kernels: 8 ymm per loop iteration (32 doubles, 256 B), aligned loads and stores.
// The load kernel XORs into 8 independent integer accumulators: integer logic runs on more ports
// than FP adds, so the loads, not the reduction, are what limits it.
// Keep GCC from turning the copy and store loops into memcpy/memset calls: we time these loops.
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#include <immintrin.h>

#include "kernel_entry_points.hpp"

namespace rafter::probes::cpu {
namespace {

std::uint64_t load(const double* a, std::size_t n, int passes) {
  __m256i x0 = _mm256_setzero_si256(), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0, x7 = x0;
  for (int p = 0; p < passes; ++p) {
    for (std::size_t i = 0; i < n; i += 32) {
      const __m256i* v = reinterpret_cast<const __m256i*>(a + i);
      x0 = _mm256_xor_si256(x0, _mm256_load_si256(v + 0));
      x1 = _mm256_xor_si256(x1, _mm256_load_si256(v + 1));
      x2 = _mm256_xor_si256(x2, _mm256_load_si256(v + 2));
      x3 = _mm256_xor_si256(x3, _mm256_load_si256(v + 3));
      x4 = _mm256_xor_si256(x4, _mm256_load_si256(v + 4));
      x5 = _mm256_xor_si256(x5, _mm256_load_si256(v + 5));
      x6 = _mm256_xor_si256(x6, _mm256_load_si256(v + 6));
      x7 = _mm256_xor_si256(x7, _mm256_load_si256(v + 7));
    }
  }
  x0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_xor_si256(x0, x1), _mm256_xor_si256(x2, x3)),
                        _mm256_xor_si256(_mm256_xor_si256(x4, x5), _mm256_xor_si256(x6, x7)));
  alignas(32) std::uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), x0);
  std::uint64_t r = 0;
  for (std::uint64_t w : lanes) r ^= w;
  return r;
}

void store(double* a, std::size_t n, double value, int passes) {
  const __m256d v = _mm256_set1_pd(value);
  for (int p = 0; p < passes; ++p)
    for (std::size_t i = 0; i < n; i += 32)
      for (int k = 0; k < 8; ++k) _mm256_store_pd(a + i + 4 * k, v);
}

void nt_store(double* a, std::size_t n, double value, int passes) {
  const __m256d v = _mm256_set1_pd(value);
  for (int p = 0; p < passes; ++p)
    for (std::size_t i = 0; i < n; i += 32)
      for (int k = 0; k < 8; ++k) _mm256_stream_pd(a + i + 4 * k, v);
  _mm_sfence();
}

void copy(double* dst, const double* src, std::size_t n, int passes) {
  for (int p = 0; p < passes; ++p)
    for (std::size_t i = 0; i < n; i += 32)
      for (int k = 0; k < 8; ++k) _mm256_store_pd(dst + i + 4 * k, _mm256_load_pd(src + i + 4 * k));
}

void triad(double* a, const double* b, const double* c, double s, std::size_t n, int passes) {
  const __m256d vs = _mm256_set1_pd(s);
  for (int p = 0; p < passes; ++p)
    for (std::size_t i = 0; i < n; i += 32)
      for (int k = 0; k < 8; ++k)
        _mm256_store_pd(a + i + 4 * k,
                        _mm256_fmadd_pd(vs, _mm256_load_pd(c + i + 4 * k), _mm256_load_pd(b + i + 4 * k)));
}

}  // namespace

// Exported one by one (see kernels.cpp: the table is built in baseline code).
namespace avx2 {
std::uint64_t stream_load(const double* a, std::size_t n, int passes) { return load(a, n, passes); }
void stream_store(double* a, std::size_t n, double v, int passes) { store(a, n, v, passes); }
void stream_nt_store(double* a, std::size_t n, double v, int passes) { nt_store(a, n, v, passes); }
void stream_copy(double* d, const double* s, std::size_t n, int passes) { copy(d, s, n, passes); }
void stream_triad(double* a, const double* b, const double* c, double s, std::size_t n, int passes) {
  triad(a, b, c, s, n, passes);
}
}  // namespace avx2

}  // namespace rafter::probes::cpu
