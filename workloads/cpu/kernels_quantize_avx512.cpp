// AVX-512 NVFP4 quantizer (see avx512_kernels.hpp): the tensor amax on the bf16 bits, then per
// row the scales of its 1×16 blocks (16 blocks per vector) and the codes, 32 values per vector,
// packed two per byte. Same codes as the scalar encoder of block_quant_avx2.cpp (the fp32 quotient
// |x|·RN(1/S), round to nearest even), ~2x faster than one division and one vpmovqb per block.
#include "avx512_kernels.hpp"
#include "simd_avx512.hpp"

namespace rafter::workloads::cpu::avx512 {
namespace {

// E2M1 code of a = |x|·inv (inv = RN(1/S), numfmt::fp4_quotient; round to nearest even,
// saturating at 6) with the sign in bit 3. The grid has spacing 2^(e−1) in binade
// e = min(max(floor(log2 a), 0), 2), so code = round(a·2^(1−e)) + 2e (scaling by a power of two is
// exact; the rounding is vrndscaleps' nearest-even), capped at 7. Same codes as the thresholds of
// block_quant_avx2.cpp's e2m1_code_rne (checked exhaustively).
static inline __m512i e2m1_codes(__m512 x, __m512 inv) {
  // capped at 8 (code 7 either way) so that the integer conversion cannot overflow
  const __m512 a = _mm512_min_ps(_mm512_mul_ps(_mm512_abs_ps(x), inv), _mm512_set1_ps(8.0f));
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
static inline __m256i block_amax_bits_16(const bf16* x) {
  const __m512i mag = _mm512_set1_epi16(0x7fff);
  __m512i v[8];
  for (int i = 0; i < 8; ++i) v[i] = _mm512_and_si512(_mm512_loadu_si512(x + 32 * i), mag);
  for (int i = 0; i < 4; ++i) v[i] = pair_max_u16(v[2 * i], v[2 * i + 1]);
  for (int i = 0; i < 2; ++i) v[i] = pair_max_u16(v[2 * i], v[2 * i + 1]);
  v[0] = pair_max_u16(v[0], v[1]);
  v[0] = pair_max_u16(v[0], v[0]);
  return _mm512_castsi512_si256(v[0]);
}

// Codes of 32 bf16 values (two blocks) from their magnitudes |x| as the even and odd elements,
// given per lane the block's RN(1/S). The quotient is q = |x|·RN(1/S), numfmt::fp4_quotient
// as the definition (quant_math.cpp) and the GPU compute it (the caller keeps 1/S finite).
// Round-to-nearest-even onto E2M1 is then
//   code = min(rne(2q), rne(q) + 2, rne(q/2) + 4, 7)
// (each term is exact in its binade: spacing 1/2 below 2, 1 in [2, 4), 2 above), and adding
// 1.5·2^23 + c rounds k·q + c to an integer held in the low mantissa bits in one step (k·q is
// exact), so each term is one FMA and the mins are integer mins on those bits.
static inline __m512i e2m1_rne_bits(__m512 mag, __m512 inv) {
  const __m512 q = _mm512_mul_ps(mag, inv);
  const __m512i c1 = _mm512_castps_si512(_mm512_fmadd_ps(q, _mm512_set1_ps(2.0f), _mm512_set1_ps(12582912.0f)));
  const __m512i c2 = _mm512_castps_si512(_mm512_add_ps(q, _mm512_set1_ps(12582914.0f)));
  const __m512i c3 = _mm512_castps_si512(_mm512_fmadd_ps(q, _mm512_set1_ps(0.5f), _mm512_set1_ps(12582916.0f)));
  return _mm512_min_epi32(_mm512_min_epi32(c1, c2), _mm512_min_epi32(c3, _mm512_set1_epi32(0x4b400007)));
}

// 32 bf16 values → 16 packed code bytes, one per 32-bit lane (even element in the low nibble,
// sign in bit 3/7 only for a nonzero magnitude code, as the scalar encoder).
static inline __m512i quantize_32(__m512i w, __m512 inv) {
  const __m512i wa = _mm512_and_si512(w, _mm512_set1_epi32(0x7fff7fff));
  const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(wa, 16));
  const __m512 odd = _mm512_castsi512_ps(_mm512_and_si512(wa, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  const __m512i ce = e2m1_rne_bits(even, inv), co = e2m1_rne_bits(odd, inv);
  // low byte = ce | co << 4 (their low nibbles; the rest of ce is the FMA's exponent bits)
  const __m512i nib = _mm512_ternarylogic_epi32(ce, _mm512_slli_epi32(co, 4), _mm512_set1_epi32(0x0f), 0xe4);
  // sign bits: x_even's bit 15 → bit 3, x_odd's bit 31 → bit 7 (other bits don't care) ...
  const __m512i sgn = _mm512_ternarylogic_epi32(_mm512_srli_epi32(w, 12), _mm512_srli_epi32(w, 24), _mm512_set1_epi32(0x08), 0xe4);
  // ... kept where the nibble's magnitude is nonzero: bit 3 of (n + 7) for n in 0..7.
  const __m512i nz = _mm512_and_si512(_mm512_add_epi32(nib, _mm512_set1_epi32(0x77)), _mm512_set1_epi32(0x88));
  const __m512i byte = _mm512_ternarylogic_epi32(sgn, nz, nib, 0xea);  // (sgn & nz) | nib
  return _mm512_and_si512(byte, _mm512_set1_epi32(0xff));
}

// Scales of 16 blocks of 16 values (256 columns) of one row, from their maxima (amax_bits, or
// computed here when null): E4M3 bytes to scale_bytes and 1/S (0 for an all-zero
// block, whose codes all come out 0) to inv. Vectorized over the blocks; the rows' groups are independent,
// so out-of-order execution overlaps this long dependency chain (amax tree, divisions)
// with the next group's.
static inline void scales_256(const bf16* x, const bf16* amax_bits, std::uint8_t* scale_bytes, float* inv,
                              float tensor_scale) {
  const __m256i bits = amax_bits ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(amax_bits)) : block_amax_bits_16(x);
  const __m512 s = _mm512_div_ps(_mm512_div_ps(bf16x16_to_ps(bits), _mm512_set1_ps(6.0f)), _mm512_set1_ps(tensor_scale));
  const __m512i sb = e4m3_codes(s);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(scale_bytes), _mm512_cvtepi32_epi8(sb));
  // E4M3 byte → value: normal codes by placing exponent (+120) and mantissa into fp32's fields,
  // subnormals (exponent field 0) as m·2^-9.
  const __m512i em = _mm512_slli_epi32(sb, 20);  // exponent field at bit 23, mantissa at bits 20-22
  const __m512 normal = _mm512_castsi512_ps(_mm512_add_epi32(em, _mm512_set1_epi32(120 << 23)));
  const __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(sb), _mm512_set1_ps(1.0f / 512.0f));
  const __mmask16 is_sub = _mm512_cmplt_epi32_mask(sb, _mm512_set1_epi32(8));
  const __m512 scale = _mm512_mul_ps(_mm512_mask_mov_ps(normal, is_sub, sub), _mm512_set1_ps(tensor_scale));
  const __mmask16 live = _mm512_cmp_ps_mask(scale, _mm512_setzero_ps(), _CMP_GT_OQ);
  _mm512_storeu_ps(inv, _mm512_maskz_div_ps(live, _mm512_set1_ps(1.0f), scale));
}

// Codes of 8 blocks (128 values) given their 1/S in inv[0..8): per 32 values
// (two blocks) lanes 0-7 take the first block's scale (its even and odd elements), lanes 8-15
// the second's.
// The four results (one byte per 32-bit lane) are narrowed by vpackusdw/vpackuswb, which
// interleave 32-bit chunks across the 128-bit lanes, and one vpermd puts them back in order
// (vpmovdb, one instruction per 16 bytes, is several times slower on Zen 4).
static inline void codes_128(const bf16* x, const float* inv, std::uint8_t* codes) {
  __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m512 inv8 = _mm512_castps256_ps512(_mm256_loadu_ps(inv));
  __m512i b[4];
  for (int p = 0; p < 4; ++p) {
    b[p] = quantize_32(_mm512_loadu_si512(x + 32 * p), _mm512_permutexvar_ps(idx, inv8));
    idx = _mm512_add_epi32(idx, _mm512_set1_epi32(2));
  }
  const __m512i packed = _mm512_packus_epi16(_mm512_packus_epi32(b[0], b[1]), _mm512_packus_epi32(b[2], b[3]));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  // streamed past the caches (no read for ownership of the output lines) when aligned
  const __m512i out = _mm512_permutexvar_epi32(order, packed);
  if ((reinterpret_cast<std::uintptr_t>(codes) & 63) == 0) _mm512_stream_si512(reinterpret_cast<__m512i*>(codes), out);
  else _mm512_storeu_si512(codes, out);
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

float abs_max_blocks(const bf16* x, std::int64_t r0, std::int64_t r1, std::int64_t cols, bf16* block_amax) {
  __m256i m = _mm256_setzero_si256();
  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t c = 0; c < cols; c += 256) {
      const __m256i bits = block_amax_bits_16(x + r * cols + c);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(block_amax + (r * cols + c) / 16), bits);
      m = _mm256_max_epu16(m, bits);
    }
  alignas(32) std::uint16_t lanes[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
  std::uint16_t top = 0;
  for (std::uint16_t l : lanes) top = l > top ? l : top;
  return ld(&top, 0);
}

void quantize_nvfp4(const bf16* x, std::uint8_t* codes, std::uint8_t* scales, std::int64_t r0, std::int64_t r1,
                    std::int64_t cols, float tensor_scale, const float* e4m3_lut, std::uint8_t (*encode_e4m3)(float),
                    const bf16* block_amax) {
  const std::int64_t nb = cols / 16;
  for (std::int64_t r = r0; r < r1; ++r) {
    const bf16* xr = x + r * cols;
    std::uint8_t* cr = codes + r * cols / 2;
    std::uint8_t* sr = scales + r * nb;
    alignas(64) float inv[256];  // 1/S of up to 256 blocks (4096 columns) at a time
    std::int64_t blk = 0;
    while (blk + 16 <= nb) {
      const std::int64_t n = std::min<std::int64_t>((nb - blk) / 16 * 16, 256);
      for (std::int64_t g = 0; g < n; g += 16)
        scales_256(xr + (blk + g) * 16, block_amax ? block_amax + r * nb + blk + g : nullptr, sr + blk + g,
                   inv + g, tensor_scale);
      for (std::int64_t g = 0; g < n; g += 8) {
        // the next row's 4 lines at this position, while this one is coded from L1
        if (r + 1 < r1)
          for (int l = 0; l < 128; l += 32) prefetch32(xr + cols + (blk + g) * 16 + l);
        codes_128(xr + (blk + g) * 16, inv + g, cr + (blk + g) * 8);
      }
      blk += n;
    }
    for (; blk < nb; ++blk) {  // fewer than 16 blocks left
      const __m512 v = load16(xr + blk * 16);
      const float amax = _mm512_reduce_max_ps(_mm512_abs_ps(v));
      const std::uint8_t sb = encode_e4m3(amax / 6.0f / tensor_scale);
      sr[blk] = sb;
      const float scale = e4m3_lut[sb] * tensor_scale;
      __m128i packed = _mm_setzero_si128();
      if (scale > 0) packed = pack_nibbles(e2m1_codes(v, _mm512_set1_ps(1.0f / scale)));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(cr + blk * 8), packed);
    }
  }
  _mm_sfence();
}

}  // namespace rafter::workloads::cpu::avx512
