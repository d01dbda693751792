// AVX-512 kernels of decode attention (vdpbf16ps scores over the bf16 KV cache) and FP4 block
// dequantization (E2M1 decoded by one vpermps from a 16-entry table). See avx512_kernels.hpp.
#include "avx512_kernels.hpp"
#include "simd_avx512.hpp"

namespace rafter::workloads::cpu::avx512 {
namespace {

static inline __m512bh as_bh(__m512i v) { return reinterpret_cast<__m512bh>(v); }
static inline __m512i load32(const bf16* p) { return _mm512_loadu_si512(p); }

// Scores of heads [h0, h1) against every key: sc[(h − h0)·kv_len + j] = scale · q_h·k_j.
void decode_scores(const DecodeArgs& a, std::int64_t b, std::int64_t h0, std::int64_t h1, float* sc) {
  const std::int64_t group = a.heads / a.kv_heads, d = a.d;
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
      sc[(h - h0) * a.kv_len + j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) * a.scale;
    }
  }
}

// acc[(h − h0)·d + …] = Σ_j p_j·v_j with each group of 32 outputs kept as 16 even then 16 odd
// elements: a bf16 pair in a 32-bit lane becomes two floats by one shift and one and.
void decode_pv(const DecodeArgs& a, std::int64_t b, std::int64_t h0, std::int64_t h1, const float* sc, float* acc) {
  const std::int64_t group = a.heads / a.kv_heads, d = a.d;
  const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  for (std::int64_t i = 0; i < (h1 - h0) * d; ++i) acc[i] = 0.0f;
  for (std::int64_t j = 0; j < a.kv_len; ++j) {
    const bf16* vrow = a.V + (b * a.kv_len + j) * a.kv_heads * d;
    for (std::int64_t h = h0; h < h1; ++h) {
      const bf16* v = vrow + (h / group) * d;
      float* o = acc + (h - h0) * d;
      const __m512 p = _mm512_set1_ps(sc[(h - h0) * a.kv_len + j]);
      for (std::int64_t x = 0; x < d; x += 32) {
        const __m512i w = load32(v + x);
        const __m512 ev = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), od = _mm512_castsi512_ps(_mm512_and_si512(w, hi_mask));
        _mm512_storeu_ps(o + x, _mm512_fmadd_ps(p, ev, _mm512_loadu_ps(o + x)));
        _mm512_storeu_ps(o + x + 16, _mm512_fmadd_ps(p, od, _mm512_loadu_ps(o + x + 16)));
      }
    }
  }
}

}  // namespace

void attention_decode(const DecodeArgs& a, std::int64_t b, std::int64_t h0, std::int64_t h1, float* sc, float* acc) {
  decode_scores(a, b, h0, h1, sc);
  for (std::int64_t h = h0; h < h1; ++h) {  // softmax of each head's scores, in place
    float* row = sc + (h - h0) * a.kv_len;
    const float mx = row_max(row, a.kv_len);
    const float invs = 1.0f / sum_exp(row, a.kv_len, mx, row);
    const __m512 inv = _mm512_set1_ps(invs);
    std::int64_t j = 0;
    for (; j + 16 <= a.kv_len; j += 16) _mm512_storeu_ps(row + j, _mm512_mul_ps(_mm512_loadu_ps(row + j), inv));
    for (; j < a.kv_len; ++j) row[j] *= invs;
  }
  decode_pv(a, b, h0, h1, sc, acc);
  for (std::int64_t h = h0; h < h1; ++h) {
    const float* o = acc + (h - h0) * a.d;
    bf16* out = a.O + (b * a.heads + h) * a.d;
    for (std::int64_t x = 0; x < a.d; x += 32)
      for (int l = 0; l < 16; ++l) {
        st(out + x, 2 * l, o[x + l]);
        st(out + x, 2 * l + 1, o[x + 16 + l]);
      }
  }
}

void dequantize_fp4(const std::uint8_t* codes, const std::uint8_t* scales, const float* scale_lut, bf16* out,
                    std::int64_t r0, std::int64_t r1, std::int64_t cols, std::int64_t bc, std::int64_t br) {
  const __m512 table = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f,
                                      -2.0f, -3.0f, -4.0f, -6.0f);
  const __m128i low4 = _mm_set1_epi8(0x0f);
  const std::int64_t nb = cols / bc;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::uint8_t* cr = codes + r * cols / 2;
    const std::uint8_t* sr = scales + (r / br) * nb;
    bf16* o = out + r * cols;
    for (std::int64_t c = 0; c < cols; c += 32) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cr + c / 2));
      const __m128i lo = _mm_and_si128(bytes, low4), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), low4);
      const __m512 v0 = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)), table);
      const __m512 v1 = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(lo, hi)), table);
      store16(o + c, _mm512_mul_ps(v0, _mm512_set1_ps(scale_lut[sr[c / bc]])), true);
      store16(o + c + 16, _mm512_mul_ps(v1, _mm512_set1_ps(scale_lut[sr[(c + 16) / bc]])), true);
    }
  }
  _mm_sfence();
}

}  // namespace rafter::workloads::cpu::avx512
