// AVX-512 kernels of decode attention (vdpbf16ps scores over the bf16 KV cache, key-major score
// buffer, softmax across heads, P·V four keys at a time) and FP4 block
// dequantization (per block pair a 32-entry bf16 table of code × scale, one vpermw per 32
// outputs). See avx512_kernels.hpp.
#include <stdexcept>

#include "avx512_kernels.hpp"
#include "simd_avx512.hpp"

namespace rafter::workloads::cpu::avx512 {
namespace {

static inline __m512bh as_bh(__m512i v) { return reinterpret_cast<__m512bh>(v); }
static inline __m512i load32(const bf16* p) { return _mm512_loadu_si512(p); }

// Scores of heads [h0, h1) against every key, key-major: sc[j·nh + (h − h0)], nh = h1 − h0, so
// that a key's scores are one contiguous line (a head-major layout scatters each key's stores
// over nh lines kv_len·4 bytes apart, which with long caches evicts the K stream from L2).
void decode_scores(const DecodeArgs& a, std::int64_t b, std::int64_t h0, std::int64_t h1, float* sc) {
  const std::int64_t group = a.heads / a.kv_heads, d = a.d, nh = h1 - h0;
  for (std::int64_t j = 0; j < a.kv_len; ++j) {
    const bf16* krow = a.K + (b * a.kv_len + j) * a.kv_heads * d;
    for (std::int64_t h = h0; h < h1; ++h) {
      const bf16 *k = krow + (h / group) * d, *q = a.Q + (b * a.heads + h) * d;
      __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
      std::int64_t x = 0;
      for (; x + 64 <= d; x += 64) {
        acc0 = _mm512_dpbf16_ps(acc0, as_bh(load32(q + x)), as_bh(load32(k + x)));
        acc1 = _mm512_dpbf16_ps(acc1, as_bh(load32(q + x + 32)), as_bh(load32(k + x + 32)));
      }
      if (x < d) acc0 = _mm512_dpbf16_ps(acc0, as_bh(load32(q + x)), as_bh(load32(k + x)));
      sc[j * nh + (h - h0)] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) * a.scale;
    }
  }
}

// Softmax numerators of the key-major scores, vectorized over the heads (16 per vector): sc is
// replaced by exp(s − max_h) and inv_sum[h − h0] receives 1 / Σ_j of them (applied to the output
// at the end, not to every probability). The exps feed bf16 outputs: exp2_16_bf16.
void decode_softmax(std::int64_t nh, std::int64_t kv_len, float* sc, float* inv_sum) {
  for (std::int64_t c = 0; c < nh; c += 16) {
    const __mmask16 k = tail_mask(nh - c);
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (std::int64_t j = 0; j < kv_len; ++j) m = _mm512_max_ps(m, _mm512_maskz_loadu_ps(k, sc + j * nh + c));
    const __m512 l2e = _mm512_set1_ps(kLog2e), ml2e = _mm512_mul_ps(m, _mm512_set1_ps(-kLog2e));
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    std::int64_t j = 0;
    for (; j + 2 <= kv_len; j += 2) {
      float *r0 = sc + j * nh + c, *r1 = r0 + nh;
      const __m512 e0 = exp2_16_bf16(_mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, r0), l2e, ml2e));
      const __m512 e1 = exp2_16_bf16(_mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, r1), l2e, ml2e));
      _mm512_mask_storeu_ps(r0, k, e0);
      _mm512_mask_storeu_ps(r1, k, e1);
      s0 = _mm512_add_ps(s0, e0);
      s1 = _mm512_add_ps(s1, e1);
    }
    for (; j < kv_len; ++j) {
      float* r0 = sc + j * nh + c;
      const __m512 e0 = exp2_16_bf16(_mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, r0), l2e, ml2e));
      _mm512_mask_storeu_ps(r0, k, e0);
      s0 = _mm512_add_ps(s0, e0);
    }
    _mm512_mask_storeu_ps(inv_sum + c, k, _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(s0, s1)));
  }
}

// acc[(h − h0)·d + …] = Σ_j p_j·v_j with each group of 32 outputs kept as 16 even then 16 odd
// elements (a bf16 pair in a 32-bit lane becomes two floats by one shift and one and). Keys go
// four at a time: each accumulator vector is loaded and stored once per four keys.
void decode_pv(const DecodeArgs& a, std::int64_t b, std::int64_t h0, std::int64_t h1, const float* sc, float* acc) {
  const std::int64_t group = a.heads / a.kv_heads, d = a.d, nh = h1 - h0;
  const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  const std::int64_t row = a.kv_heads * d;  // elements per key
  for (std::int64_t i = 0; i < nh * d; ++i) acc[i] = 0.0f;
  std::int64_t j = 0;
  for (; j + 4 <= a.kv_len; j += 4) {
    const bf16* v0 = a.V + (b * a.kv_len + j) * row;
    for (std::int64_t h = h0; h < h1; ++h) {
      const std::int64_t off = (h / group) * d;
      float* o = acc + (h - h0) * d;
      const float* p = sc + j * nh + (h - h0);
      const __m512 p0 = _mm512_set1_ps(p[0]), p1 = _mm512_set1_ps(p[nh]), p2 = _mm512_set1_ps(p[2 * nh]),
                   p3 = _mm512_set1_ps(p[3 * nh]);
      for (std::int64_t x = 0; x < d; x += 32) {
        const __m512i w0 = load32(v0 + off + x), w1 = load32(v0 + row + off + x), w2 = load32(v0 + 2 * row + off + x),
                      w3 = load32(v0 + 3 * row + off + x);
        __m512 ev = _mm512_loadu_ps(o + x), od = _mm512_loadu_ps(o + x + 16);
        ev = _mm512_fmadd_ps(p0, _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)), ev);
        od = _mm512_fmadd_ps(p0, _mm512_castsi512_ps(_mm512_and_si512(w0, hi_mask)), od);
        ev = _mm512_fmadd_ps(p1, _mm512_castsi512_ps(_mm512_slli_epi32(w1, 16)), ev);
        od = _mm512_fmadd_ps(p1, _mm512_castsi512_ps(_mm512_and_si512(w1, hi_mask)), od);
        ev = _mm512_fmadd_ps(p2, _mm512_castsi512_ps(_mm512_slli_epi32(w2, 16)), ev);
        od = _mm512_fmadd_ps(p2, _mm512_castsi512_ps(_mm512_and_si512(w2, hi_mask)), od);
        ev = _mm512_fmadd_ps(p3, _mm512_castsi512_ps(_mm512_slli_epi32(w3, 16)), ev);
        od = _mm512_fmadd_ps(p3, _mm512_castsi512_ps(_mm512_and_si512(w3, hi_mask)), od);
        _mm512_storeu_ps(o + x, ev);
        _mm512_storeu_ps(o + x + 16, od);
      }
    }
  }
  for (; j < a.kv_len; ++j) {
    const bf16* vrow = a.V + (b * a.kv_len + j) * row;
    for (std::int64_t h = h0; h < h1; ++h) {
      const bf16* v = vrow + (h / group) * d;
      float* o = acc + (h - h0) * d;
      const __m512 p = _mm512_set1_ps(sc[j * nh + (h - h0)]);
      for (std::int64_t x = 0; x < d; x += 32) {
        const __m512i w = load32(v + x);
        _mm512_storeu_ps(o + x, _mm512_fmadd_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), _mm512_loadu_ps(o + x)));
        _mm512_storeu_ps(o + x + 16, _mm512_fmadd_ps(p, _mm512_castsi512_ps(_mm512_and_si512(w, hi_mask)), _mm512_loadu_ps(o + x + 16)));
      }
    }
  }
}

}  // namespace

void attention_decode(const DecodeArgs& a, std::int64_t b, std::int64_t h0, std::int64_t h1, float* sc, float* acc) {
  const std::int64_t nh = h1 - h0;
  alignas(64) float inv_sum[1024];
  if (nh > 1024) throw std::invalid_argument("attention_decode: more than 1024 heads per call");
  decode_scores(a, b, h0, h1, sc);
  decode_softmax(nh, a.kv_len, sc, inv_sum);
  decode_pv(a, b, h0, h1, sc, acc);
  for (std::int64_t h = h0; h < h1; ++h) {
    const float* o = acc + (h - h0) * a.d;
    const __m512 inv = _mm512_set1_ps(inv_sum[h - h0]);
    bf16* out = a.O + (b * a.heads + h) * a.d;
    for (std::int64_t x = 0; x < a.d; x += 32)
      store32_even_odd(out + x, _mm512_mul_ps(_mm512_loadu_ps(o + x), inv), _mm512_mul_ps(_mm512_loadu_ps(o + x + 16), inv));
  }
  _mm_sfence();
}

void dequantize_fp4(const std::uint8_t* codes, const std::uint8_t* scales, const float* scale_lut, bf16* out,
                    std::int64_t r0, std::int64_t r1, std::int64_t cols, std::int64_t bc, std::int64_t br) {
  const __m512 table = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f,
                                      -2.0f, -3.0f, -4.0f, -6.0f);
  // Word indices of 32 values from 16 code bytes: byte i (zero-extended to dword i) holds the
  // codes of values 2i (low nibble → word 2i) and 2i+1 (high nibble → word 2i+1, by a shift of
  // 12); vpermw reads 5 index bits, so the bits above a nibble are don't-care, except bit 4,
  // which picks the second 16-entry table (the second block) for values 16-31.
  const __m512i second = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0x100010, 0x100010, 0x100010, 0x100010, 0x100010,
                                           0x100010, 0x100010, 0x100010);
  const std::int64_t nb = cols / bc;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::uint8_t* cr = codes + r * cols / 2;
    const std::uint8_t* sr = scales + (r / br) * nb;
    bf16* o = out + r * cols;
    for (std::int64_t c = 0; c < cols; c += 32) {
      // the 16 E2M1 values times each block's scale, rounded to bf16 once per block: a 32-entry
      // table, then one vpermw per 32 outputs (the same products and rounding as per element)
      const __m512i tab = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_mul_ps(table, _mm512_set1_ps(scale_lut[sr[(c + 16) / bc]])),
                                                                         _mm512_mul_ps(table, _mm512_set1_ps(scale_lut[sr[c / bc]]))));
      const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cr + c / 2)));
      const __m512i idx = _mm512_or_si512(_mm512_ternarylogic_epi32(d, _mm512_slli_epi32(d, 12), _mm512_set1_epi32(0x0f), 0xe4), second);
      const __m512i v = _mm512_permutexvar_epi16(idx, tab);
      if ((reinterpret_cast<std::uintptr_t>(o + c) & 63) == 0) _mm512_stream_si512(reinterpret_cast<__m512i*>(o + c), v);
      else _mm512_storeu_si512(o + c, v);
    }
  }
  _mm_sfence();
}

}  // namespace rafter::workloads::cpu::avx512
