// AVX-512 building blocks (loads/stores of fp32, bf16 and fp16 rows, exp, reciprocal) for the
// *_avx512.cpp kernel files only: they need -mavx512f/bw/vl/dq/bf16, which those files get.
// Everything is static inline: no out-of-line copy compiled for AVX-512 can leak into other files.
#pragma once
// GCC 12 reports its own _mm512_undefined_ps() placeholders (inside max, reduce, ...) as "may be
// used uninitialized" once they are inlined at -O3: a false positive in the intrinsic headers.
#ifndef __clang__  // clang (the fuzz build) has no such warning, and warns about the unknown name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "cpu_kernel.hpp"

namespace rafter::workloads::cpu::avx512 {

static inline __mmask16 tail_mask(std::int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1u); }

static inline __m512 bf16x16_to_ps(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
static inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
static inline __m512 load16(const bf16* p) { return bf16x16_to_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
static inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
static inline __m512 load16(const bf16* p, __mmask16 m) { return bf16x16_to_ps(_mm256_maskz_loadu_epi16(m, p)); }

// fp32 → bf16 with round to nearest even (vcvtneps2bf16, as the scalar st()).
static inline __m256i ps_to_bf16x16(__m512 v) { return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)); }
// Stores 16 values; `nt` streams them past the caches (large outputs are not read back soon and
// skip the read-for-ownership); a streaming store needs an aligned address, else it is a plain one.
static inline void store16(float* p, __m512 v, bool nt) {
  if (nt && (reinterpret_cast<std::uintptr_t>(p) & 63) == 0) _mm512_stream_ps(p, v);
  else _mm512_storeu_ps(p, v);
}
static inline void store16(bf16* p, __m512 v, bool nt) {
  const __m256i h = ps_to_bf16x16(v);
  if (nt && (reinterpret_cast<std::uintptr_t>(p) & 31) == 0) _mm256_stream_si256(reinterpret_cast<__m256i*>(p), h);
  else _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
}
static inline void store16(float* p, __m512 v, __mmask16 m) { _mm512_mask_storeu_ps(p, m, v); }
static inline void store16(bf16* p, __m512 v, __mmask16 m) { _mm256_mask_storeu_epi16(p, m, ps_to_bf16x16(v)); }
// fp16 by vcvtph2ps / vcvtps2ph (AVX-512F), rounding to nearest even: bit-exact with ld/st. Declared
// here, before the templates below: f16* finds no overload in this namespace by ADL later on.
static inline __m512 load16(const f16* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
static inline __m512 load16(const f16* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
static inline __m256i ps_to_f16x16(__m512 v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline void store16(f16* p, __m512 v, bool nt) {
  const __m256i h = ps_to_f16x16(v);
  if (nt && (reinterpret_cast<std::uintptr_t>(p) & 31) == 0) _mm256_stream_si256(reinterpret_cast<__m256i*>(p), h);
  else _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
}
static inline void store16(f16* p, __m512 v, __mmask16 m) { _mm256_mask_storeu_epi16(p, m, ps_to_f16x16(v)); }

// exp(x) = 2^k · 2^(j/16) · e^r with k·16 + j = n = round(x·16/ln 2) and r = x − n·ln2/16
// (two-part ln2/16, |r| ≤ 0.0217): e^r by a degree-3 polynomial; 2^(j/16)·2^k by one vpermps
// from a 16-entry table and one integer add of n << 19 to its bits (each entry is stored as
// bits(2^(j/16)) − j << 19, so the add leaves exactly k << 23 in the exponent). Relative error
// < 2e-7 (checked against exp in double over [-87, 88]), 12 vector operations: the two FP pipes
// bound softmax-like kernels on two cores, so every operation counts. Inputs are clamped to
// [-87, 88] (results stay normal); exp16_nonpos skips the upper clamp for x ≤ 0.
template <bool kUpperClamp = true>
static inline __m512 exp16(__m512 x) {
  const __m512 table = _mm512_castsi512_ps(_mm512_setr_epi32(
      0x3f800000, 0x3f7daac3, 0x3f7b95c2, 0x3f79c3d3, 0x3f7837f0, 0x3f76f532, 0x3f75fed7, 0x3f75583f, 0x3f7504f3,
      0x3f7508a4, 0x3f75672a, 0x3f76248c, 0x3f7744fd, 0x3f78ccdf, 0x3f7ac0c7, 0x3f7d257d));
  const __m512 magic = _mm512_set1_ps(12582912.0f);  // 1.5·2^23: t's low mantissa bits hold n
  if constexpr (kUpperClamp) x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(2.308312035e+01f), magic);
  const __m512 n = _mm512_sub_ps(t, magic);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(4.331970215e-02f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.996636456e-06f), r);
  __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(1.0f / 6.0f), r, _mm512_set1_ps(0.5f));
  q = _mm512_mul_ps(_mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f)), r);  // e^r − 1
  const __m512i ti = _mm512_castps_si512(t);  // bits(magic) + n; bits(magic) << 19 ≡ 0 (mod 2^32)
  const __m512 s = _mm512_castsi512_ps(
      _mm512_add_epi32(_mm512_castps_si512(_mm512_permutexvar_ps(ti, table)), _mm512_slli_epi32(ti, 19)));
  return _mm512_fmadd_ps(s, q, s);
}
static inline __m512 exp16_nonpos(__m512 x) { return exp16<false>(x); }

// 2^t for results that end up in bf16 (half-ulp 2^-9) or in a sum of bf16 inputs' exps: relative
// error < 4e-6, from 2^f (f = t − rne(t) in [−1/2, 1/2]) by a degree-4 polynomial fitted at
// Chebyshev nodes, times 2^rne(t) by vscalefps, which also gives 0 below 2^-149 and inf above
// 2^128 without a clamp. 7 operations (exp16: 12); callers fold e^(x − m) into one FMA,
// t = x·log2(e) − m·log2(e). On two cores the FP pipes bound softmax-like kernels: this is
// what lets them keep up with DRAM.
static inline __m512 exp2_16_bf16(__m512 t) {
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0.00966636836528778f), f, _mm512_set1_ps(0.055921975523233414f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.2402234971523285f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.6931210160255432f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}
constexpr float kLog2e = 1.44269504088896341f;

// 1/a by vrcp14ps and one Newton step (relative error ~1e-8); a > 0 finite.
static inline __m512 rcp16(__m512 a) {
  const __m512 y = _mm512_rcp14_ps(a);
  return _mm512_mul_ps(y, _mm512_fnmadd_ps(a, y, _mm512_set1_ps(2.0f)));
}

// Max of a row (finite values).
template <class T>
static inline float row_max(const T* x, std::int64_t n) {
  __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0;
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm512_max_ps(m0, load16(x + i));
    m1 = _mm512_max_ps(m1, load16(x + i + 16));
  }
  for (; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    m0 = _mm512_mask_max_ps(m0, k, m0, load16(x + i, k));
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

// Order keys of 16-bit sign-magnitude floats (bf16, fp16): their bits as int16 order like their
// values once a negative one has its magnitude bits flipped (key = x ^ ((x >> 15) & 0x7fff), an
// involution). acc = max(acc, keys of the 32 values in w).
static inline __m512i max_keys16(__m512i acc, __m512i w) {
  return _mm512_max_epi16(acc, _mm512_ternarylogic_epi32(w, _mm512_srai_epi16(w, 15), _mm512_set1_epi16(0x7fff), 0x78));
}
static inline __m512i lowest_key16() { return _mm512_set1_epi16(std::int16_t(-32768)); }
// The value of the largest key in `keys`.
template <class H>
static inline float max_of_keys16(__m512i keys) {
  alignas(64) std::int16_t lanes[32];
  _mm512_store_si512(lanes, keys);
  std::int16_t m = lanes[0];
  for (std::int16_t l : lanes) m = l > m ? l : m;
  const auto bits = static_cast<std::uint16_t>(m ^ (m < 0 ? 0x7fff : 0));
  H top;
  std::memcpy(&top, &bits, 2);
  return ld(&top, 0);
}

// The max of a bf16 or fp16 row, 32 values per operation on their keys.
template <class H>
static inline float row_max16(const H* x, std::int64_t n) {
  __m512i m0 = lowest_key16(), m1 = m0;
  std::int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    m0 = max_keys16(m0, _mm512_loadu_si512(x + i));
    m1 = max_keys16(m1, _mm512_loadu_si512(x + i + 32));
  }
  float r = i > 0 ? max_of_keys16<H>(_mm512_max_epi16(m0, m1)) : -INFINITY;
  for (; i < n; ++i) r = ld(x, i) > r ? ld(x, i) : r;
  return r;
}
static inline float row_max(const bf16* x, std::int64_t n) { return row_max16(x, n); }
// A non-template overload for fp16 also settles the call: ADL on f16 brings cpu::row_max
// (cpu_kernel.hpp) in beside the template above.
static inline float row_max(const f16* x, std::int64_t n) { return row_max16(x, n); }

// Prefetches the cache lines of [p, p + 32 elements) into L2.
template <class T>
static inline void prefetch32(const T* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
  if constexpr (sizeof(T) == 4) _mm_prefetch(reinterpret_cast<const char*>(p) + 64, _MM_HINT_T1);
}

// Σ exp(x_j − mx); with `out`, also stores each exp (fp32). With `next` (the next row, n long),
// prefetches it meanwhile: this pass runs from L1/L2, and DRAM would otherwise idle during it.
template <class T>
static inline float sum_exp(const T* x, std::int64_t n, float mx, float* out, const T* next = nullptr) {
  const __m512 m = _mm512_set1_ps(mx);
  __m512 s0 = _mm512_setzero_ps(), s1 = s0;
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if (next) prefetch32(next + i);
    const __m512 e0 = exp16_nonpos(_mm512_sub_ps(load16(x + i), m)), e1 = exp16_nonpos(_mm512_sub_ps(load16(x + i + 16), m));
    if (out) {
      _mm512_storeu_ps(out + i, e0);
      _mm512_storeu_ps(out + i + 16, e1);
    }
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 e = exp16_nonpos(_mm512_sub_ps(load16(x + i, k), m));
    if (out) _mm512_mask_storeu_ps(out + i, k, e);
    s0 = _mm512_mask_add_ps(s0, k, s0, e);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

// The same for bf16 rows: 32 values per 512-bit load split into their even and odd elements by
// one shift and one and (instead of a zero-extension and a shift per 16); with `out`, each group
// of 32 exps is stored as its 16 even then 16 odd elements (store_scaled below undoes that).
// The exps are exp2_16_bf16's: bf16 logits carry 2^-9 relative error already. mx need not be
// the row's max (callers sum against the max of its first values and check the sum is finite).
static inline float sum_exp(const bf16* x, std::int64_t n, float mx, float* out, const bf16* next = nullptr) {
  const __m512 l2e = _mm512_set1_ps(kLog2e), ml2e = _mm512_set1_ps(-mx * kLog2e);
  const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __m512 s0 = _mm512_setzero_ps(), s1 = s0;
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if (next) prefetch32(next + i);
    const __m512i w = _mm512_loadu_si512(x + i);
    const __m512 e0 = exp2_16_bf16(_mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), l2e, ml2e));
    const __m512 e1 = exp2_16_bf16(_mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w, hi)), l2e, ml2e));
    if (out) {
      _mm512_storeu_ps(out + i, e0);
      _mm512_storeu_ps(out + i + 16, e1);
    }
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 e = _mm512_maskz_mov_ps(k, exp2_16_bf16(_mm512_fmadd_ps(load16(x + i, k), l2e, ml2e)));
    if (out) _mm512_mask_storeu_ps(out + i, k, e);
    s0 = _mm512_add_ps(s0, e);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

// y = s · scale, streamed; s as sum_exp wrote it (fp32 rows: in order).
static inline void store_scaled(const float* s, float* y, std::int64_t n, __m512 scale) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) store16(y + i, _mm512_mul_ps(_mm512_loadu_ps(s + i), scale), true);
  if (i < n) {  // masked load too: the scratch row ends at n (an unmasked load read past it: ASan)
    const __mmask16 k = tail_mask(n - i);
    store16(y + i, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + i), scale), k);
  }
}
// fp16 rows: sum_exp's generic template wrote them in order too.
static inline void store_scaled(const float* s, f16* y, std::int64_t n, __m512 scale) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) store16(y + i, _mm512_mul_ps(_mm512_loadu_ps(s + i), scale), true);
  if (i < n) {  // masked load too: the scratch row ends at n (an unmasked load read past it: ASan)
    const __mmask16 k = tail_mask(n - i);
    store16(y + i, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + i), scale), k);
  }
}
// bf16 rows: each group of 32 is 16 even then 16 odd values; vcvtne2ps2bf16 packs both halves
// and one vpermw puts the 32 bf16 back in order.
// 32 values given as their 16 even and 16 odd elements → 32 bf16 in order at y (streamed when
// aligned): vcvtne2ps2bf16 packs both halves and one vpermw interleaves them.
static inline void store32_even_odd(bf16* y, __m512 even, __m512 odd) {
  alignas(64) static constexpr std::int16_t kOrder[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                                          8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i v = _mm512_permutexvar_epi16(_mm512_load_si512(kOrder), reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd, even)));
  if ((reinterpret_cast<std::uintptr_t>(y) & 63) == 0) _mm512_stream_si512(reinterpret_cast<__m512i*>(y), v);
  else _mm512_storeu_si512(y, v);
}
// The even and odd elements of 32 bf16 as floats.
static inline __m512 bf16_even(__m512i w) { return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)); }
static inline __m512 bf16_odd(__m512i w) { return _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(static_cast<int>(0xffff0000u)))); }

static inline void store_scaled(const float* s, bf16* y, std::int64_t n, __m512 scale) {
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    store32_even_odd(y + i, _mm512_mul_ps(_mm512_loadu_ps(s + i), scale), _mm512_mul_ps(_mm512_loadu_ps(s + i + 16), scale));
  for (; i < n; i += 16) {  // the tail in order, loads masked like the stores (the scratch row ends at n)
    const __mmask16 k = tail_mask(n - i);
    store16(y + i, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + i), scale), k);
  }
}

}  // namespace rafter::workloads::cpu::avx512
