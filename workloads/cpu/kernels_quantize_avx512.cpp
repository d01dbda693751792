// AVX-512 NVFP4 quantizer (see avx512_kernels.hpp): the tensor amax on the bf16 bits, then per
// 1×16 block a scalar scale and 16 codes from compare masks, packed two per byte.
#include "avx512_kernels.hpp"
#include "simd_avx512.hpp"

namespace rafter::workloads::cpu::avx512 {
namespace {

// E2M1 code of |x| / scale (round to nearest even, saturating at 6) with the sign in bit 3. The
// grid has spacing 2^(e−1) in binade e = min(max(floor(log2 a), 0), 2), so code = round(a·2^(1−e))
// + 2e (scaling by a power of two is exact; the rounding is vrndscaleps' nearest-even), capped at
// 7. Same codes as the thresholds of block_quant_avx2.cpp's e2m1_code_rne (checked exhaustively).
static inline __m512i e2m1_codes(__m512 x, __m512 scale) {
  // capped at 8 (code 7 either way) so that the integer conversion cannot overflow
  const __m512 a = _mm512_min_ps(_mm512_div_ps(_mm512_abs_ps(x), scale), _mm512_set1_ps(8.0f));
  const __m512 e = _mm512_min_ps(_mm512_max_ps(_mm512_getexp_ps(a), _mm512_setzero_ps()), _mm512_set1_ps(2.0f));
  const __m512 m = _mm512_roundscale_ps(_mm512_scalef_ps(a, _mm512_sub_ps(_mm512_set1_ps(1.0f), e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512i k = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_fmadd_ps(e, _mm512_set1_ps(2.0f), m)), _mm512_set1_epi32(7));
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ) & _mm512_test_epi32_mask(k, k);
  return _mm512_mask_or_epi32(k, neg, k, _mm512_set1_epi32(8));
}

// 16 codes (one per 32-bit lane) → 8 bytes, low nibble first: in each 64-bit lane the odd code
// (bits 32..35) is shifted down next to the even one, then vpmovqb keeps each lane's low byte.
static inline __m128i pack_nibbles(__m512i k) {
  return _mm512_cvtepi64_epi8(_mm512_or_si512(k, _mm512_srli_epi64(k, 28)));
}

// E4M3 bytes of 16 non-negative block scales (round to nearest even, saturating at 448, no
// NaN): the vector form of block_quant_avx2.cpp's e4m3_bits, exponent and 3 mantissa bits from
// the rounded fp32 bits, subnormals (< 2^-6) as round(s·512).
static inline __m512i e4m3_codes(__m512 s) {
  __m512i u = _mm512_castps_si512(s);
  u = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7ffff), _mm512_and_si512(_mm512_srli_epi32(u, 20), _mm512_set1_epi32(1))));
  __m512i code = _mm512_or_si512(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_srli_epi32(u, 23), _mm512_set1_epi32(120)), 3),
                                 _mm512_and_si512(_mm512_srli_epi32(u, 20), _mm512_set1_epi32(7)));
  code = _mm512_min_epi32(code, _mm512_set1_epi32(0x7e));
  const __m512i sub = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(s, _mm512_set1_ps(512.0f)),
                                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return _mm512_mask_mov_epi32(code, _mm512_cmp_ps_mask(s, _mm512_set1_ps(0.015625f), _CMP_LT_OQ), sub);
}

// Lane j of the result = max(c[2j], c[2j+1]) of the 64 u16 lanes c = a ‖ b: adjacent pairs
// reduced, their order kept.
static inline __m512i pair_max_u16(__m512i a, __m512i b) {
  alignas(64) static constexpr std::uint16_t even[32] = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20,
                                                         22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42,
                                                         44, 46, 48, 50, 52, 54, 56, 58, 60, 62};
  const __m512i ie = _mm512_load_si512(even), io = _mm512_add_epi16(ie, _mm512_set1_epi16(1));
  return _mm512_max_epu16(_mm512_permutex2var_epi16(a, ie, b), _mm512_permutex2var_epi16(a, io, b));
}

// |x| max of each of 16 blocks of 16 bf16 values, all at once: on the bf16 bits with the sign
// cleared (non-negative bf16 order like their bits), 32 values per vector, halved by pair_max
// four times (8 → 4 → 2 → 1 vectors, then the last vector's 32 pairs → 16 maxima). Exact.
static inline __m512 block_amax_16(const bf16* x) {
  const __m512i mag = _mm512_set1_epi16(0x7fff);
  __m512i v[8];
  for (int i = 0; i < 8; ++i) v[i] = _mm512_and_si512(_mm512_loadu_si512(x + 32 * i), mag);
  for (int i = 0; i < 4; ++i) v[i] = pair_max_u16(v[2 * i], v[2 * i + 1]);
  for (int i = 0; i < 2; ++i) v[i] = pair_max_u16(v[2 * i], v[2 * i + 1]);
  v[0] = pair_max_u16(v[0], v[1]);
  v[0] = pair_max_u16(v[0], v[0]);
  return bf16x16_to_ps(_mm512_castsi512_si256(v[0]));
}

// 16 blocks of 16 values (256 columns) of one row: scales first (vectorized over the blocks, off
// the per-block dependency chain), then the codes.
static inline void quantize_256(const bf16* x, std::uint8_t* codes, std::uint8_t* scale_bytes, float tensor_scale,
                                const float* e4m3_lut) {
  alignas(64) float scale[16];
  const __m512 s = _mm512_div_ps(_mm512_div_ps(block_amax_16(x), _mm512_set1_ps(6.0f)), _mm512_set1_ps(tensor_scale));
  const __m512i sb = e4m3_codes(s);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(scale_bytes), _mm512_cvtepi32_epi8(sb));
  _mm512_store_ps(scale, _mm512_mul_ps(_mm512_i32gather_ps(sb, e4m3_lut, 4), _mm512_set1_ps(tensor_scale)));
  for (int b = 0; b < 16; ++b) {
    __m128i packed = _mm_setzero_si128();
    if (scale[b] > 0) packed = pack_nibbles(e2m1_codes(load16(x + 16 * b), _mm512_set1_ps(scale[b])));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + 8 * b), packed);
  }
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
    std::int64_t blk = 0;
    for (; blk + 16 <= nb; blk += 16) quantize_256(xr + blk * 16, cr + blk * 8, sr + blk, tensor_scale, e4m3_lut);
    for (; blk < nb; ++blk) {  // fewer than 16 blocks left
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
