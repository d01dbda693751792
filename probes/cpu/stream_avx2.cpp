// AVX2 stream kernels: 8 ymm per loop iteration (32 doubles, 256 B), aligned loads and stores.
// Keep GCC from turning the copy and store loops into memcpy/memset calls: we time these loops.
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#include <immintrin.h>

#include "kernel_entry_points.hpp"
#include "stream_kernels.inl"

namespace rafter::probes::cpu {
namespace {
struct Avx2 {
  using I = __m256i;
  using D = __m256d;
  static constexpr std::size_t lanes = 4;
  static I zero() { return _mm256_setzero_si256(); }
  static I xor_load(I acc, const double* p) {
    return _mm256_xor_si256(acc, _mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static I load_i(const double* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
  static void discard7(const double* p) {
    asm volatile(
        "vmovdqa (%0), %%ymm0\n\tvmovdqa 32(%0), %%ymm0\n\tvmovdqa 64(%0), %%ymm0\n\t"
        "vmovdqa 96(%0), %%ymm0\n\tvmovdqa 128(%0), %%ymm0\n\tvmovdqa 160(%0), %%ymm0\n\t"
        "vmovdqa 192(%0), %%ymm0" ::"r"(p)
        : "xmm0", "memory");
  }
  static I xor_i(I a, I b) { return _mm256_xor_si256(a, b); }
  static std::uint64_t fold(I x) {
    alignas(32) std::uint64_t w[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(w), x);
    return w[0] ^ w[1] ^ w[2] ^ w[3];
  }
  static D set1(double v) { return _mm256_set1_pd(v); }
  static D load(const double* p) { return _mm256_load_pd(p); }
  static void store(double* p, D v) { _mm256_store_pd(p, v); }
  static void stream(double* p, D v) { _mm256_stream_pd(p, v); }
  static void fence() { _mm_sfence(); }
  static D fma(D s, D c, D b) { return _mm256_fmadd_pd(s, c, b); }
};
}  // namespace
}  // namespace rafter::probes::cpu

RAFTER_EXPORT_STREAM_KERNELS(avx2, Avx2)
