// AVX-512 row kernels (see avx512_kernels.hpp): softmax, log-sum-exp, SwiGLU, RMSNorm, add.
// Rows are read from DRAM once: later passes over a row hit L1/L2; outputs are streamed.
#include <cmath>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>

#include "avx512_kernels.hpp"
#include "simd_avx512.hpp"

namespace rafter::workloads::cpu::avx512 {
namespace {

template <class T>
void softmax_impl(const T* x, T* y, std::int64_t rows, std::int64_t cols, float* s) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const float mx = row_max(xr, cols);
    const __m512 inv = _mm512_set1_ps(1.0f / sum_exp(xr, cols, mx, s, r + 1 < rows ? xr + cols : nullptr));
    store_scaled(s, yr, cols, inv);
  }
  _mm_sfence();
}

template <class T>
float logsumexp_impl(const T* z, std::int64_t n, float* mx, const T* next) {
  *mx = row_max(z, n);
  return std::log(sum_exp(z, n, *mx, nullptr, next)) + *mx;
}

// bf16 rows are read once instead of twice (max pass, then exp pass): summed against m0 = the max
// of their first 64 values. Any reference gives the same softmax and log-sum-exp while no term and
// not the sum overflows (a term far below m0 underflows no sooner than against the true max, which
// is larger); a row whose max lies far enough above m0 for that (> ~88 above it) sums to inf, and is
// summed again against its max.
constexpr std::int64_t kOnePassMin = 64;

float logsumexp_bf16(const bf16* z, std::int64_t n, float* mx, const bf16* next) {
  if (n < kOnePassMin) return logsumexp_impl(z, n, mx, next);
  const float m0 = row_max(z, kOnePassMin);
  const float sum = sum_exp(z, n, m0, nullptr, next);
  if (!std::isfinite(sum)) return logsumexp_impl(z, n, mx, next);
  *mx = m0;
  return std::log(sum) + m0;
}

// Softmax of bf16 rows, each read once (see above).
void softmax_bf16(const bf16* x, bf16* y, std::int64_t rows, std::int64_t cols, float* s) {
  if (cols < kOnePassMin) return softmax_impl(x, y, rows, cols, s);
  for (std::int64_t r = 0; r < rows; ++r) {
    const bf16* xr = x + r * cols;
    const bf16* next = r + 1 < rows ? xr + cols : nullptr;
    float sum = sum_exp(xr, cols, row_max(xr, kOnePassMin), s, next);
    if (!std::isfinite(sum)) sum = sum_exp(xr, cols, row_max(xr, cols), s, next);
    store_scaled(s, y + r * cols, cols, _mm512_set1_ps(1.0f / sum));
  }
  _mm_sfence();
}

template <class T>
void scaled_exp_impl(const T* z, T* d, std::int64_t n, float mx, float scale) {
  const __m512 m = _mm512_set1_ps(mx), sc = _mm512_set1_ps(scale);
  std::int64_t i = 0;
  if constexpr (std::is_same_v<T, bf16>) {  // bf16 out: exp2_16_bf16, 32 at a time as even/odd elements
    const __m512 l2e = _mm512_set1_ps(kLog2e), ml2e = _mm512_set1_ps(-mx * kLog2e);
    for (; i + 32 <= n; i += 32) {
      const __m512i w = _mm512_loadu_si512(z + i);
      store32_even_odd(d + i, _mm512_mul_ps(exp2_16_bf16(_mm512_fmadd_ps(bf16_even(w), l2e, ml2e)), sc),
                       _mm512_mul_ps(exp2_16_bf16(_mm512_fmadd_ps(bf16_odd(w), l2e, ml2e)), sc));
    }
  }
  for (; i + 16 <= n; i += 16) store16(d + i, _mm512_mul_ps(exp16_nonpos(_mm512_sub_ps(load16(z + i), m)), sc), true);
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    store16(d + i, _mm512_mul_ps(exp16_nonpos(_mm512_sub_ps(load16(z + i, k), m)), sc), k);
  }
}

// sigmoid(g) = 1 / (1 + exp(−g))
static inline __m512 sigmoid16(__m512 g) {
  return rcp16(_mm512_add_ps(_mm512_set1_ps(1.0f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
}

// SwiGLU reads two streams (gate and up halves of each row): prefetching both 1 KiB ahead beat
// the hardware prefetcher alone by ~10% here (measured 512–2048 elements; 512 best).
constexpr std::int64_t kAhead = 512;
// SiLU(g)·u for bf16 outputs: e^-g by exp2_16_bf16 and σ's reciprocal by vrcp14ps alone (relative
// errors < 4e-6 and < 2^-14, far below bf16's 2^-9 rounding); the FP pipes bound this loop.
static inline __m512 silu_times_bf16(__m512 g, __m512 u) {
  const __m512 e = exp2_16_bf16(_mm512_mul_ps(g, _mm512_set1_ps(-kLog2e)));  // e^-g; inf for g < -88: σ = 0
  const __m512 sig = _mm512_rcp14_ps(_mm512_add_ps(_mm512_set1_ps(1.0f), e));
  return _mm512_mul_ps(_mm512_mul_ps(g, sig), u);
}

template <class T>
void swiglu_fwd_impl(const T* g, const T* u, T* o, std::int64_t n) {
  std::int64_t i0 = 0;
  if constexpr (std::is_same_v<T, bf16>)  // 32 at a time, bf16 split into even and odd elements
    for (; i0 + 32 <= n; i0 += 32) {
      _mm_prefetch(reinterpret_cast<const char*>(g + i0 + kAhead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(u + i0 + kAhead), _MM_HINT_T0);
      const __m512i gw = _mm512_loadu_si512(g + i0), uw = _mm512_loadu_si512(u + i0);
      store32_even_odd(o + i0, silu_times_bf16(bf16_even(gw), bf16_even(uw)), silu_times_bf16(bf16_odd(gw), bf16_odd(uw)));
    }
  for (std::int64_t i = i0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 gv = load16(g + i, k), uv = load16(u + i, k);
    const __m512 y = _mm512_mul_ps(_mm512_mul_ps(gv, sigmoid16(gv)), uv);
    if (k == 0xffff) store16(o + i, y, true);
    else store16(o + i, y, k);
  }
}

template <class T>
void swiglu_bwd_impl(const T* g, const T* u, const T* dy, T* dg, T* du, std::int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (std::int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 gv = load16(g + i, k), uv = load16(u + i, k), dv = load16(dy + i, k);
    const __m512 sig = sigmoid16(gv);
    // dg = dy·u·σ·(1 + g·(1 − σ)),  du = dy·g·σ
    const __m512 a = _mm512_fmadd_ps(gv, _mm512_sub_ps(one, sig), one);
    const __m512 vg = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(dv, uv), sig), a);
    const __m512 vu = _mm512_mul_ps(_mm512_mul_ps(dv, gv), sig);
    if (k == 0xffff) {
      store16(dg + i, vg, true);
      store16(du + i, vu, true);
    } else {
      store16(dg + i, vg, k);
      store16(du + i, vu, k);
    }
  }
}

template <class T>
void rmsnorm_fwd_impl(const T* x, const T* w, T* y, std::int64_t n, bool more) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0;
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = load16(x + i), b = load16(x + i + 16);
    s0 = _mm512_fmadd_ps(a, a, s0);
    s1 = _mm512_fmadd_ps(b, b, s1);
  }
  for (; i < n; i += 16) {
    const __m512 a = load16(x + i, tail_mask(n - i));
    s0 = _mm512_fmadd_ps(a, a, s0);
  }
  const float ss = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
  const __m512 rs = _mm512_set1_ps(1.0f / std::sqrt(ss / float(n) + 1e-5f));
  for (i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    if (more && (i & 31) == 0) prefetch32(x + n + i);  // the next row, while this pass runs from L1
    const __m512 v = _mm512_mul_ps(_mm512_mul_ps(load16(x + i, k), rs), load16(w + i, k));
    if (k == 0xffff) store16(y + i, v, true);
    else store16(y + i, v, k);
  }
  if (!more) _mm_sfence();  // once per block of rows: a fence per row stalls on every row's streamed stores
}

template <class T>
void rmsnorm_bwd_impl(const T* x, const T* w, const T* dy, T* dx, float* dw, std::int64_t n, bool more) {
  __m512 ss = _mm512_setzero_ps(), dot = ss;
  for (std::int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 xv = load16(x + i, k);
    ss = _mm512_fmadd_ps(xv, xv, ss);
    dot = _mm512_fmadd_ps(_mm512_mul_ps(load16(w + i, k), load16(dy + i, k)), xv, dot);
  }
  const float rsf = 1.0f / std::sqrt(_mm512_reduce_add_ps(ss) / float(n) + 1e-5f);
  const __m512 rs = _mm512_set1_ps(rsf), c = _mm512_set1_ps(rsf * rsf * rsf / float(n) * _mm512_reduce_add_ps(dot));
  for (std::int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    if (more && (i & 31) == 0) {  // the next row (x and dy), while this pass runs from L1
      prefetch32(x + n + i);
      prefetch32(dy + n + i);
    }
    const __m512 xv = load16(x + i, k), dv = load16(dy + i, k);
    // dx = rs·w·dy − x·c,  dw += dy·x·rs
    const __m512 v = _mm512_fmsub_ps(_mm512_mul_ps(rs, load16(w + i, k)), dv, _mm512_mul_ps(xv, c));
    _mm512_mask_storeu_ps(dw + i, k, _mm512_fmadd_ps(_mm512_mul_ps(dv, xv), rs, _mm512_maskz_loadu_ps(k, dw + i)));
    if (k == 0xffff) store16(dx + i, v, true);
    else store16(dx + i, v, k);
  }
  if (!more) _mm_sfence();  // once per block of rows: a fence per row stalls on every row's streamed stores
}

// RMSNorm backward of bf16 rows [0, rows) (n % 32 == 0), adding Σ_rows dy·x·rs into dw (natural
// order). Everything runs on the even/odd split of 32 bf16 per 512-bit load (one shift or one and
// per 16 values instead of a widening load and a shift): w is converted once into fp32 split
// order, dw accumulates in split order and is put back in order once at the end; rows go two at
// a time so that each w and dw vector is loaded (and dw stored) once per pair. ~20 vector
// operations per 16 values of a row instead of ~30.
struct RmsBwdRow {
  const bf16 *x, *dy;
  bf16* dx;
  __m512 rs, c;  // 1/rms and rs³·(w·dy·x)/n
};
static inline RmsBwdRow rmsnorm_bwd_sums(const bf16* x, const bf16* dy, bf16* dx, const float* w2, std::int64_t n) {
  __m512 ss0 = _mm512_setzero_ps(), ss1 = ss0, dt0 = ss0, dt1 = ss0;
  for (std::int64_t i = 0; i < n; i += 32) {
    const __m512i xw = _mm512_loadu_si512(x + i), dw = _mm512_loadu_si512(dy + i);
    const __m512 xe = bf16_even(xw), xo = bf16_odd(xw);
    ss0 = _mm512_fmadd_ps(xe, xe, ss0);
    ss1 = _mm512_fmadd_ps(xo, xo, ss1);
    dt0 = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_load_ps(w2 + i), bf16_even(dw)), xe, dt0);
    dt1 = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_load_ps(w2 + i + 16), bf16_odd(dw)), xo, dt1);
  }
  const float rs = 1.0f / std::sqrt(_mm512_reduce_add_ps(_mm512_add_ps(ss0, ss1)) / float(n) + 1e-5f);
  return {x, dy, dx, _mm512_set1_ps(rs), _mm512_set1_ps(rs * rs * rs / float(n) * _mm512_reduce_add_ps(_mm512_add_ps(dt0, dt1)))};
}
// dx = rs·w·dy − x·c of 16 split values; returns dy·x·rs for dw.
static inline __m512 rmsnorm_bwd_16(__m512 x, __m512 dy, __m512 w, const RmsBwdRow& r, __m512* dx) {
  *dx = _mm512_fmsub_ps(_mm512_mul_ps(w, dy), r.rs, _mm512_mul_ps(x, r.c));
  return _mm512_mul_ps(_mm512_mul_ps(dy, x), r.rs);
}
// n floats, 64-byte aligned (this runs on a pool worker: no Buffer, whose first touch uses the pool).
using AlignedFloats = std::unique_ptr<float, decltype(&std::free)>;
AlignedFloats aligned_floats(std::int64_t n) {
  AlignedFloats p(static_cast<float*>(std::aligned_alloc(64, (static_cast<std::size_t>(n) * 4 + 63) / 64 * 64)), &std::free);
  if (!p) throw std::bad_alloc();
  return p;
}
// The n bf16 values of w (n % 32 == 0) as fp32 in the even/odd split order of the row kernels.
AlignedFloats split_weights(const bf16* w, std::int64_t n) {
  AlignedFloats w2 = aligned_floats(n);
  for (std::int64_t i = 0; i < n; i += 32) {
    const __m512i ww = _mm512_loadu_si512(w + i);
    _mm512_store_ps(w2.get() + i, bf16_even(ww));
    _mm512_store_ps(w2.get() + i + 16, bf16_odd(ww));
  }
  return w2;
}

// RMSNorm forward of bf16 rows [0, rows) (n % 32 == 0) on the even/odd split, w converted once:
// ~17 vector operations per 32 values instead of ~22. Each row is read from L2 (prefetched during
// the previous row's second pass) for its sum of squares, then from L1.
void rmsnorm_fwd_bf16_rows(const bf16* x, const bf16* w, bf16* y, std::int64_t rows, std::int64_t n) {
  const AlignedFloats w2 = split_weights(w, n);
  for (std::int64_t r = 0; r < rows; ++r) {
    const bf16* xr = x + r * n;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    for (std::int64_t i = 0; i < n; i += 32) {
      const __m512i xw = _mm512_loadu_si512(xr + i);
      const __m512 e = bf16_even(xw), o = bf16_odd(xw);
      s0 = _mm512_fmadd_ps(e, e, s0);
      s1 = _mm512_fmadd_ps(o, o, s1);
    }
    const __m512 rs = _mm512_set1_ps(1.0f / std::sqrt(_mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) / float(n) + 1e-5f));
    const bool more = r + 1 < rows;
    for (std::int64_t i = 0; i < n; i += 32) {
      if (more) prefetch32(xr + n + i);  // the next row, while this pass runs from L1
      const __m512i xw = _mm512_loadu_si512(xr + i);
      store32_even_odd(y + r * n + i, _mm512_mul_ps(_mm512_mul_ps(bf16_even(xw), rs), _mm512_load_ps(w2.get() + i)),
                       _mm512_mul_ps(_mm512_mul_ps(bf16_odd(xw), rs), _mm512_load_ps(w2.get() + i + 16)));
    }
  }
  _mm_sfence();
}

void rmsnorm_bwd_bf16_rows(const bf16* x, const bf16* w, const bf16* dy, bf16* dx, float* dw, std::int64_t rows,
                           std::int64_t n) {
  const AlignedFloats w2 = split_weights(w, n), dw2 = aligned_floats(n);
  std::fill(dw2.get(), dw2.get() + n, 0.0f);
  for (std::int64_t r = 0; r < rows; r += 2) {
    const bool two = r + 1 < rows;
    const RmsBwdRow a = rmsnorm_bwd_sums(x + r * n, dy + r * n, dx + r * n, w2.get(), n);
    const RmsBwdRow b = two ? rmsnorm_bwd_sums(x + (r + 1) * n, dy + (r + 1) * n, dx + (r + 1) * n, w2.get(), n) : a;
    // the next pair's x and dy (contiguous: 2n each) while this pass runs from L1/L2
    const std::int64_t next = std::min<std::int64_t>(rows - r - 2, 2) * n;
    for (std::int64_t i = 0; i < n; i += 32) {
      if (2 * i < next) {
        prefetch32(x + (r + 2) * n + 2 * i), prefetch32(x + (r + 2) * n + 2 * i + 32);
        prefetch32(dy + (r + 2) * n + 2 * i), prefetch32(dy + (r + 2) * n + 2 * i + 32);
      }
      const __m512 we = _mm512_load_ps(w2.get() + i), wo = _mm512_load_ps(w2.get() + i + 16);
      const __m512i ax = _mm512_loadu_si512(a.x + i), ad = _mm512_loadu_si512(a.dy + i);
      __m512 e, o;
      __m512 ge = rmsnorm_bwd_16(bf16_even(ax), bf16_even(ad), we, a, &e), go = rmsnorm_bwd_16(bf16_odd(ax), bf16_odd(ad), wo, a, &o);
      store32_even_odd(a.dx + i, e, o);
      if (two) {
        const __m512i bx = _mm512_loadu_si512(b.x + i), bd = _mm512_loadu_si512(b.dy + i);
        ge = _mm512_add_ps(ge, rmsnorm_bwd_16(bf16_even(bx), bf16_even(bd), we, b, &e));
        go = _mm512_add_ps(go, rmsnorm_bwd_16(bf16_odd(bx), bf16_odd(bd), wo, b, &o));
        store32_even_odd(b.dx + i, e, o);
      }
      _mm512_store_ps(dw2.get() + i, _mm512_add_ps(_mm512_load_ps(dw2.get() + i), ge));
      _mm512_store_ps(dw2.get() + i + 16, _mm512_add_ps(_mm512_load_ps(dw2.get() + i + 16), go));
    }
  }
  _mm_sfence();
  for (std::int64_t i = 0; i < n; i += 32)
    for (int l = 0; l < 16; ++l) {
      dw[i + 2 * l] += dw2.get()[i + l];
      dw[i + 2 * l + 1] += dw2.get()[i + 16 + l];
    }
}

template <class T>
void add_impl(const T* a, const T* b, T* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) store16(y + i, _mm512_add_ps(load16(a + i), load16(b + i)), true);
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    store16(y + i, _mm512_add_ps(load16(a + i, k), load16(b + i, k)), k);
  }
  _mm_sfence();
}

template <class T>
void rope_impl(const T* x, T* y, const float* c, const float* s, std::int64_t heads, std::int64_t d) {
  const std::int64_t half = d / 2;
  for (std::int64_t h = 0; h < heads; ++h) {
    const T* xh = x + h * d;
    T* yh = y + h * d;
    for (std::int64_t i = 0; i < half; i += 16) {
      const __m512 a = load16(xh + i), b = load16(xh + half + i), cv = _mm512_loadu_ps(c + i), sv = _mm512_loadu_ps(s + i);
      store16(yh + i, _mm512_fmsub_ps(a, cv, _mm512_mul_ps(b, sv)), true);
      store16(yh + half + i, _mm512_fmadd_ps(b, cv, _mm512_mul_ps(a, sv)), true);
    }
  }
}

}  // namespace

void rope_token(const float* x, float* y, const float* c, const float* s, std::int64_t h, std::int64_t d) { rope_impl(x, y, c, s, h, d); }
void rope_token(const bf16* x, bf16* y, const float* c, const float* s, std::int64_t h, std::int64_t d) { rope_impl(x, y, c, s, h, d); }

void copy_stream(void* dst, const void* src, std::size_t bytes, const void* next) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const auto* nx = static_cast<const char*>(next);
  std::size_t i = 0;
  for (; i < bytes && (reinterpret_cast<std::uintptr_t>(d + i) & 63) != 0; ++i) d[i] = s[i];
  for (; i + 64 <= bytes; i += 64) {
    if (nx) _mm_prefetch(nx + i, _MM_HINT_T1);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), _mm512_loadu_si512(s + i));
  }
  for (; i < bytes; ++i) d[i] = s[i];
}

void softmax_rows(const float* x, float* y, std::int64_t r, std::int64_t c, float* s) { softmax_impl(x, y, r, c, s); }
void softmax_rows(const bf16* x, bf16* y, std::int64_t r, std::int64_t c, float* s) { softmax_bf16(x, y, r, c, s); }
float logsumexp(const float* z, std::int64_t n, float* mx, const float* next) { return logsumexp_impl(z, n, mx, next); }
float logsumexp(const bf16* z, std::int64_t n, float* mx, const bf16* next) { return logsumexp_bf16(z, n, mx, next); }
void scaled_exp(const float* z, float* d, std::int64_t n, float mx, float s) { scaled_exp_impl(z, d, n, mx, s); }
void scaled_exp(const bf16* z, bf16* d, std::int64_t n, float mx, float s) { scaled_exp_impl(z, d, n, mx, s); }
void swiglu_fwd(const float* g, const float* u, float* o, std::int64_t n) { swiglu_fwd_impl(g, u, o, n); }
void swiglu_fwd(const bf16* g, const bf16* u, bf16* o, std::int64_t n) { swiglu_fwd_impl(g, u, o, n); }
void swiglu_bwd(const float* g, const float* u, const float* dy, float* dg, float* du, std::int64_t n) {
  swiglu_bwd_impl(g, u, dy, dg, du, n);
}
void swiglu_bwd(const bf16* g, const bf16* u, const bf16* dy, bf16* dg, bf16* du, std::int64_t n) {
  swiglu_bwd_impl(g, u, dy, dg, du, n);
}
void rmsnorm_fwd(const float* x, const float* w, float* y, std::int64_t n, bool more) { rmsnorm_fwd_impl(x, w, y, n, more); }
void rmsnorm_fwd(const bf16* x, const bf16* w, bf16* y, std::int64_t n, bool more) { rmsnorm_fwd_impl(x, w, y, n, more); }
void rmsnorm_bwd(const float* x, const float* w, const float* dy, float* dx, float* dw, std::int64_t n, bool more) {
  rmsnorm_bwd_impl(x, w, dy, dx, dw, n, more);
}
void rmsnorm_bwd(const bf16* x, const bf16* w, const bf16* dy, bf16* dx, float* dw, std::int64_t n, bool more) {
  rmsnorm_bwd_impl(x, w, dy, dx, dw, n, more);
}
void rmsnorm_fwd_rows(const bf16* x, const bf16* w, bf16* y, std::int64_t rows, std::int64_t n) {
  rmsnorm_fwd_bf16_rows(x, w, y, rows, n);
}
void rmsnorm_bwd_rows(const bf16* x, const bf16* w, const bf16* dy, bf16* dx, float* dw, std::int64_t rows, std::int64_t n) {
  rmsnorm_bwd_bf16_rows(x, w, dy, dx, dw, rows, n);
}
void add(const float* a, const float* b, float* y, std::int64_t n) { add_impl(a, b, y, n); }
void add(const bf16* a, const bf16* b, bf16* y, std::int64_t n) { add_impl(a, b, y, n); }

// fp16: the generic vector paths (the bf16 even/odd splits and exp2_16_bf16 stay bf16's).
void softmax_rows(const f16* x, f16* y, std::int64_t r, std::int64_t c, float* s) { softmax_impl(x, y, r, c, s); }
float logsumexp(const f16* z, std::int64_t n, float* mx, const f16* next) { return logsumexp_impl(z, n, mx, next); }
void scaled_exp(const f16* z, f16* d, std::int64_t n, float mx, float s) { scaled_exp_impl(z, d, n, mx, s); }
void swiglu_fwd(const f16* g, const f16* u, f16* o, std::int64_t n) { swiglu_fwd_impl(g, u, o, n); }
void swiglu_bwd(const f16* g, const f16* u, const f16* dy, f16* dg, f16* du, std::int64_t n) {
  swiglu_bwd_impl(g, u, dy, dg, du, n);
}
void rmsnorm_fwd(const f16* x, const f16* w, f16* y, std::int64_t n, bool more) { rmsnorm_fwd_impl(x, w, y, n, more); }
void rmsnorm_bwd(const f16* x, const f16* w, const f16* dy, f16* dx, float* dw, std::int64_t n, bool more) {
  rmsnorm_bwd_impl(x, w, dy, dx, dw, n, more);
}
void rope_token(const f16* x, f16* y, const float* c, const float* s, std::int64_t h, std::int64_t d) { rope_impl(x, y, c, s, h, d); }
void add(const f16* a, const f16* b, f16* y, std::int64_t n) { add_impl(a, b, y, n); }

}  // namespace rafter::workloads::cpu::avx512
