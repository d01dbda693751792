// AVX-512 stream kernels: 8 zmm per loop iteration (64 doubles, 512 B), aligned loads and stores.
// Keep GCC from turning the copy and store loops into memcpy/memset calls: we time these loops.
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#include <immintrin.h>

#include "kernel_entry_points.hpp"
#include "stream_kernels.inl"

namespace rafter::probes::cpu {
namespace {
struct Avx512 {
  using I = __m512i;
  using D = __m512d;
  static constexpr std::size_t lanes = 8;
  static I zero() { return _mm512_setzero_si512(); }
  static I xor_load(I acc, const double* p) { return _mm512_xor_si512(acc, _mm512_load_si512(p)); }
  static I load_i(const double* p) { return _mm512_load_si512(p); }
  static void discard7(const double* p) {
    asm volatile(
        "vmovdqa64 (%0), %%zmm0\n\tvmovdqa64 64(%0), %%zmm0\n\tvmovdqa64 128(%0), %%zmm0\n\t"
        "vmovdqa64 192(%0), %%zmm0\n\tvmovdqa64 256(%0), %%zmm0\n\tvmovdqa64 320(%0), %%zmm0\n\t"
        "vmovdqa64 384(%0), %%zmm0" ::"r"(p)
        : "xmm0", "memory");
  }
  static I xor_i(I a, I b) { return _mm512_xor_si512(a, b); }
  static std::uint64_t fold(I x) {
    alignas(64) std::uint64_t w[8];
    _mm512_store_si512(reinterpret_cast<__m512i*>(w), x);
    return w[0] ^ w[1] ^ w[2] ^ w[3] ^ w[4] ^ w[5] ^ w[6] ^ w[7];
  }
  static D set1(double v) { return _mm512_set1_pd(v); }
  static D load(const double* p) { return _mm512_load_pd(p); }
  static void store(double* p, D v) { _mm512_store_pd(p, v); }
  static void stream(double* p, D v) { _mm512_stream_pd(p, v); }
  static void fence() { _mm_sfence(); }
  static D fma(D s, D c, D b) { return _mm512_fmadd_pd(s, c, b); }
};
}  // namespace
}  // namespace rafter::probes::cpu

RAFTER_EXPORT_STREAM_KERNELS(avx512, Avx512)
