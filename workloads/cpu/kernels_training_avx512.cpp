// AVX-512 AdamW step (see avx512_kernels.hpp): one pass over 16 parameters at a time. p, m and v
// are updated in place (their lines were just read, so the stores need no read-for-ownership);
// the low-precision copy is a fresh output and is streamed past the caches.
#include "avx512_kernels.hpp"
#include "simd_avx512.hpp"

namespace rafter::workloads::cpu::avx512 {
namespace {

template <class T>
void adamw_impl(const AdamwConsts& k, float* p, float* m, float* v, const T* g, T* copy, std::int64_t lo,
                std::int64_t hi) {
  const __m512 b1 = _mm512_set1_ps(k.b1), nb1 = _mm512_set1_ps(1 - k.b1), b2 = _mm512_set1_ps(k.b2),
               nb2 = _mm512_set1_ps(1 - k.b2), c1 = _mm512_set1_ps(k.c1), c2 = _mm512_set1_ps(k.c2),
               lr = _mm512_set1_ps(k.lr), eps = _mm512_set1_ps(k.eps), wd = _mm512_set1_ps(k.wd);
  for (std::int64_t i = lo; i < hi; i += 16) {
    const __mmask16 msk = tail_mask(hi - i);
    const __m512 gi = load16(g + i, msk);
    const __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, load16(m + i, msk)), _mm512_mul_ps(nb1, gi));
    const __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, load16(v + i, msk)), _mm512_mul_ps(_mm512_mul_ps(nb2, gi), gi));
    const __m512 pi = load16(p + i, msk);
    const __m512 den = _mm512_add_ps(_mm512_sqrt_ps(_mm512_mul_ps(vi, c2)), eps);
    const __m512 upd = _mm512_add_ps(_mm512_div_ps(_mm512_mul_ps(mi, c1), den), _mm512_mul_ps(wd, pi));
    const __m512 w = _mm512_sub_ps(pi, _mm512_mul_ps(lr, upd));
    if (msk == 0xffff) {
      _mm512_storeu_ps(m + i, mi);
      _mm512_storeu_ps(v + i, vi);
      _mm512_storeu_ps(p + i, w);
      store16(copy + i, w, true);
    } else {
      store16(m + i, mi, msk);
      store16(v + i, vi, msk);
      store16(p + i, w, msk);
      store16(copy + i, w, msk);
    }
  }
  _mm_sfence();
}

}  // namespace

void adamw_step(const AdamwConsts& k, float* p, float* m, float* v, const float* g, float* copy, std::int64_t lo,
                std::int64_t hi) {
  adamw_impl(k, p, m, v, g, copy, lo, hi);
}
void adamw_step(const AdamwConsts& k, float* p, float* m, float* v, const bf16* g, bf16* copy, std::int64_t lo,
                std::int64_t hi) {
  adamw_impl(k, p, m, v, g, copy, lo, hi);
}
void adamw_step(const AdamwConsts& k, float* p, float* m, float* v, const f16* g, f16* copy, std::int64_t lo,
                std::int64_t hi) {
  adamw_impl(k, p, m, v, g, copy, lo, hi);
}

}  // namespace rafter::workloads::cpu::avx512
