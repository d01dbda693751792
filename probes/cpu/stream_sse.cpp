// SSE stream kernels: 8 xmm per loop iteration (16 doubles, 128 B), aligned loads and stores.
// SSE has no FMA: triad is a multiply and an add. Keep GCC from turning the copy and store loops
// into memcpy/memset calls: we time these loops.
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#include <immintrin.h>

#include "kernel_entry_points.hpp"
#include "stream_kernels.inl"

namespace rafter::probes::cpu {
namespace {
struct Sse {
  using I = __m128i;
  using D = __m128d;
  static constexpr std::size_t lanes = 2;
  static I zero() { return _mm_setzero_si128(); }
  static I xor_load(I acc, const double* p) {
    return _mm_xor_si128(acc, _mm_load_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I load_i(const double* p) { return _mm_load_si128(reinterpret_cast<const __m128i*>(p)); }
  static void discard7(const double* p) {
    asm volatile(
        "movdqa (%0), %%xmm0\n\tmovdqa 16(%0), %%xmm0\n\tmovdqa 32(%0), %%xmm0\n\tmovdqa 48(%0), %%xmm0\n\t"
        "movdqa 64(%0), %%xmm0\n\tmovdqa 80(%0), %%xmm0\n\tmovdqa 96(%0), %%xmm0" ::"r"(p)
        : "xmm0", "memory");
  }
  static I xor_i(I a, I b) { return _mm_xor_si128(a, b); }
  static std::uint64_t fold(I x) {
    alignas(16) std::uint64_t w[2];
    _mm_store_si128(reinterpret_cast<__m128i*>(w), x);
    return w[0] ^ w[1];
  }
  static D set1(double v) { return _mm_set1_pd(v); }
  static D load(const double* p) { return _mm_load_pd(p); }
  static void store(double* p, D v) { _mm_store_pd(p, v); }
  static void stream(double* p, D v) { _mm_stream_pd(p, v); }
  static void fence() { _mm_sfence(); }
  static D fma(D s, D c, D b) { return _mm_add_pd(_mm_mul_pd(s, c), b); }
};
}  // namespace
}  // namespace rafter::probes::cpu

RAFTER_EXPORT_STREAM_KERNELS(sse, Sse)
