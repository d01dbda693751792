// AVX-512 NVFP4 quantizer (see avx512_kernels.hpp): the tensor amax on the bf16 bits, then per
// 1×16 block a scalar scale and 16 codes from compare masks, packed two per byte.
#include "avx512_kernels.hpp"
#include "simd_avx512.hpp"

namespace rafter::workloads::cpu::avx512 {
namespace {

// E2M1 code of |x| / scale (round to nearest even, saturating at 6) with the sign in bit 3;
// the thresholds are those of block_quant_avx2.cpp's e2m1_code_rne.
static inline __m512i e2m1_codes(__m512 x, __m512 scale) {
  const __m512 a = _mm512_div_ps(_mm512_abs_ps(x), scale);
  const __m512i one = _mm512_set1_epi32(1);
  __m512i k = _mm512_setzero_si512();
  k = _mm512_mask_add_epi32(k, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.25f), _CMP_GT_OQ), k, one);
  k = _mm512_mask_add_epi32(k, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.75f), _CMP_GE_OQ), k, one);
  k = _mm512_mask_add_epi32(k, _mm512_cmp_ps_mask(a, _mm512_set1_ps(1.25f), _CMP_GT_OQ), k, one);
  k = _mm512_mask_add_epi32(k, _mm512_cmp_ps_mask(a, _mm512_set1_ps(1.75f), _CMP_GE_OQ), k, one);
  k = _mm512_mask_add_epi32(k, _mm512_cmp_ps_mask(a, _mm512_set1_ps(2.5f), _CMP_GT_OQ), k, one);
  k = _mm512_mask_add_epi32(k, _mm512_cmp_ps_mask(a, _mm512_set1_ps(3.5f), _CMP_GE_OQ), k, one);
  k = _mm512_mask_add_epi32(k, _mm512_cmp_ps_mask(a, _mm512_set1_ps(5.0f), _CMP_GT_OQ), k, one);
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ) & _mm512_test_epi32_mask(k, k);
  return _mm512_mask_or_epi32(k, neg, k, _mm512_set1_epi32(8));
}

// 16 codes (one per 32-bit lane) → 8 bytes, low nibble first.
static inline __m128i pack_nibbles(__m512i k) {
  const __m128i b = _mm512_cvtepi32_epi8(k);  // code i in byte i
  const __m128i w = _mm_or_si128(b, _mm_srli_epi16(b, 4));  // per 16-bit pair: c0 | c1 << 4 in the low byte
  return _mm_packus_epi16(_mm_and_si128(w, _mm_set1_epi16(0xff)), _mm_setzero_si128());
}

}  // namespace

float abs_max(const bf16* x, std::int64_t n) {
  const __m512i mag = _mm512_set1_epi16(0x7fff);
  __m512i m0 = _mm512_setzero_si512(), m1 = m0;
  std::int64_t i = 0;
  for (; i + 64 <= n; i += 64) {  // non-negative bf16 order like their bits
    m0 = _mm512_max_epu16(m0, _mm512_and_si512(_mm512_loadu_si512(x + i), mag));
    m1 = _mm512_max_epu16(m1, _mm512_and_si512(_mm512_loadu_si512(x + i + 32), mag));
  }
  m0 = _mm512_max_epu16(m0, m1);
  alignas(64) std::uint16_t lanes[32];
  _mm512_store_si512(lanes, m0);
  std::uint16_t m = 0;
  for (std::uint16_t l : lanes) m = l > m ? l : m;
  for (; i < n; ++i) m = (x[i] & 0x7fff) > m ? std::uint16_t(x[i] & 0x7fff) : m;
  return ld(&m, 0);
}

void quantize_nvfp4(const bf16* x, std::uint8_t* codes, std::uint8_t* scales, std::int64_t r0, std::int64_t r1,
                    std::int64_t cols, float tensor_scale, const float* e4m3_lut, std::uint8_t (*encode_e4m3)(float)) {
  const std::int64_t nb = cols / 16;
  for (std::int64_t r = r0; r < r1; ++r) {
    const bf16* xr = x + r * cols;
    std::uint8_t* cr = codes + r * cols / 2;
    std::uint8_t* sr = scales + r * nb;
    for (std::int64_t blk = 0; blk < nb; ++blk) {
      const __m512 v = load16(xr + blk * 16);
      const float amax = _mm512_reduce_max_ps(_mm512_abs_ps(v));
      const std::uint8_t sb = encode_e4m3(amax / 6.0f / tensor_scale);
      sr[blk] = sb;
      const float scale = e4m3_lut[sb] * tensor_scale;
      __m128i packed = _mm_setzero_si128();
      if (scale > 0) packed = pack_nibbles(e2m1_codes(v, _mm512_set1_ps(scale)));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(cr + blk * 8), packed);
    }
  }
}

}  // namespace rafter::workloads::cpu::avx512
