// SSE stream kernels: 8 xmm per loop iteration (16 doubles, 128 B), aligned loads and stores.
// The load kernel XORs into 8 independent integer accumulators: integer logic runs on more ports
// than FP adds, so the loads, not the reduction, are what limits it.
// Keep GCC from turning the copy and store loops into memcpy/memset calls: we time these loops.
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#include <immintrin.h>

#include "kernel_entry_points.hpp"

namespace rafter::probes::cpu {
namespace {

std::uint64_t load(const double* a, std::size_t n, int passes) {
  __m128i x0 = _mm_setzero_si128(), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0, x7 = x0;
  for (int p = 0; p < passes; ++p) {
    for (std::size_t i = 0; i < n; i += 16) {
      const __m128i* v = reinterpret_cast<const __m128i*>(a + i);
      x0 = _mm_xor_si128(x0, _mm_load_si128(v + 0));
      x1 = _mm_xor_si128(x1, _mm_load_si128(v + 1));
      x2 = _mm_xor_si128(x2, _mm_load_si128(v + 2));
      x3 = _mm_xor_si128(x3, _mm_load_si128(v + 3));
      x4 = _mm_xor_si128(x4, _mm_load_si128(v + 4));
      x5 = _mm_xor_si128(x5, _mm_load_si128(v + 5));
      x6 = _mm_xor_si128(x6, _mm_load_si128(v + 6));
      x7 = _mm_xor_si128(x7, _mm_load_si128(v + 7));
    }
  }
  x0 = _mm_xor_si128(_mm_xor_si128(_mm_xor_si128(x0, x1), _mm_xor_si128(x2, x3)),
                     _mm_xor_si128(_mm_xor_si128(x4, x5), _mm_xor_si128(x6, x7)));
  alignas(16) std::uint64_t lanes[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), x0);
  std::uint64_t r = 0;
  for (std::uint64_t w : lanes) r ^= w;
  return r;
}

void store(double* a, std::size_t n, double value, int passes) {
  const __m128d v = _mm_set1_pd(value);
  for (int p = 0; p < passes; ++p)
    for (std::size_t i = 0; i < n; i += 16)
      for (int k = 0; k < 8; ++k) _mm_store_pd(a + i + 2 * k, v);
}

void nt_store(double* a, std::size_t n, double value, int passes) {
  const __m128d v = _mm_set1_pd(value);
  for (int p = 0; p < passes; ++p)
    for (std::size_t i = 0; i < n; i += 16)
      for (int k = 0; k < 8; ++k) _mm_stream_pd(a + i + 2 * k, v);
  _mm_sfence();
}

void copy(double* dst, const double* src, std::size_t n, int passes) {
  for (int p = 0; p < passes; ++p)
    for (std::size_t i = 0; i < n; i += 16)
      for (int k = 0; k < 8; ++k) _mm_store_pd(dst + i + 2 * k, _mm_load_pd(src + i + 2 * k));
}

void triad(double* a, const double* b, const double* c, double s, std::size_t n, int passes) {
  const __m128d vs = _mm_set1_pd(s);
  for (int p = 0; p < passes; ++p)
    for (std::size_t i = 0; i < n; i += 16)
      for (int k = 0; k < 8; ++k)
        _mm_store_pd(a + i + 2 * k,
                     _mm_add_pd(_mm_mul_pd(vs, _mm_load_pd(c + i + 2 * k)), _mm_load_pd(b + i + 2 * k)));
}

}  // namespace

// Exported one by one (see kernels.cpp: the table is built in baseline code).
namespace sse {
std::uint64_t stream_load(const double* a, std::size_t n, int passes) { return load(a, n, passes); }
void stream_store(double* a, std::size_t n, double v, int passes) { store(a, n, v, passes); }
void stream_nt_store(double* a, std::size_t n, double v, int passes) { nt_store(a, n, v, passes); }
void stream_copy(double* d, const double* s, std::size_t n, int passes) { copy(d, s, n, passes); }
void stream_triad(double* a, const double* b, const double* c, double s, std::size_t n, int passes) {
  triad(a, b, c, s, n, passes);
}
}  // namespace sse

}  // namespace rafter::probes::cpu
