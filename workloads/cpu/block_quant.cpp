// QuantizedTensor's layout, the block quantizers' entry points (each calls the build of
// block_quant_avx2.cpp that fits this CPU: AVX2 + FMA, or baseline x86-64) and transpose_codes.
#include "block_quant.hpp"

#include <emmintrin.h>

#include <algorithm>
#include <cstdint>

namespace rafter::workloads::cpu {
namespace {

// A 16×16 byte matrix, a row a register, transposed in place: four rounds of interleaving row i with
// row i + 8 (SSE2 byte unpacks).
void transpose16x16(__m128i (&a)[16]) {
  __m128i b[16];
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 8; ++i) {
      b[2 * i] = _mm_unpacklo_epi8(a[i], a[i + 8]);
      b[2 * i + 1] = _mm_unpackhi_epi8(a[i], a[i + 8]);
    }
    std::copy(b, b + 16, a);
  }
}

// 16×16 bytes from x (row stride ldx) to t (row stride ldt).
void transpose16x16_bytes(const std::uint8_t* x, std::int64_t ldx, std::uint8_t* t, std::int64_t ldt) {
  __m128i a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i * ldx));
  transpose16x16(a);
  for (int i = 0; i < 16; ++i) _mm_storeu_si128(reinterpret_cast<__m128i*>(t + i * ldt), a[i]);
}

// The same for 16×16 E2M1 codes, two to a byte (low nibble first): each row of 8 bytes widened to a
// code a byte, transposed, and packed back.
void transpose16x16_nibbles(const std::uint8_t* x, std::int64_t ldx, std::uint8_t* t, std::int64_t ldt) {
  const __m128i low = _mm_set1_epi8(0x0f);
  __m128i a[16];
  for (int i = 0; i < 16; ++i) {
    const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i * ldx));
    a[i] = _mm_unpacklo_epi8(_mm_and_si128(v, low), _mm_and_si128(_mm_srli_epi16(v, 4), low));
  }
  transpose16x16(a);
  for (int i = 0; i < 16; ++i) {  // 16-bit lanes: even code | odd code << 8
    const __m128i packed = _mm_or_si128(_mm_and_si128(a[i], _mm_set1_epi16(0x000f)),
                                        _mm_and_si128(_mm_srli_epi16(a[i], 4), _mm_set1_epi16(0x00f0)));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(t + i * ldt), _mm_packus_epi16(packed, packed));
  }
}

}  // namespace

std::int64_t QuantizedTensor::block_cols() const {
  return precision == "nvfp4" ? 16 : precision == "mxfp4" ? 32 : cols;
}
std::int64_t QuantizedTensor::scale_count() const {
  if (precision != "nvfp4" && precision != "mxfp4") return 0;
  return (rows / block_rows()) * (cols / block_cols());
}
void QuantizedTensor::allocate() {
  const bool fp8 = precision == "fp8_e4m3" || precision == "fp8_e5m2";
  values = Buffer(std::size_t(fp8 ? rows * cols : (rows * cols + 1) / 2));
  scales = Buffer(std::size_t(std::max<std::int64_t>(scale_count(), 1)));
  if (precision == "nvfp4" && !block2d && cols % 256 == 0)
    block_amax = Buffer(std::size_t(rows * cols / 16 * 2));
}

void quantize(const float* x, QuantizedTensor& q, const QuantOptions& o) {
  cpu_has_avx2() ? avx2_build::quantize(x, q, o) : baseline_build::quantize(x, q, o);
}
void quantize(const bf16* x, QuantizedTensor& q, const QuantOptions& o) {
  cpu_has_avx2() ? avx2_build::quantize(x, q, o) : baseline_build::quantize(x, q, o);
}
void dequantize(const QuantizedTensor& q, bf16* out) {
  cpu_has_avx2() ? avx2_build::dequantize(q, out) : baseline_build::dequantize(q, out);
}
void dequantize(const QuantizedTensor& q, float* out) {
  cpu_has_avx2() ? avx2_build::dequantize(q, out) : baseline_build::dequantize(q, out);
}

bool codes_transpose(const QuantizedTensor& q, const QuantOptions& o) {
  return !o.rht && !o.stochastic && (q.block2d || q.precision.starts_with("fp8"));
}

// Codes in 16×16 blocks over the pool (64 rows of q at a time), then the tile scales and the tensor
// scale.
void transpose_codes(const QuantizedTensor& q, QuantizedTensor& qt) {
  const bool fp8 = q.precision.starts_with("fp8");
  const auto* x = static_cast<const std::uint8_t*>(q.values.data());
  auto* t = static_cast<std::uint8_t*>(qt.values.data());
  const std::int64_t rows = q.rows, cols = q.cols, ldx = fp8 ? cols : cols / 2, ldt = fp8 ? rows : rows / 2;
  constexpr std::int64_t kStrip = 64;
  parallel_for((rows + kStrip - 1) / kStrip, [&](std::int64_t b, std::int64_t e, int) {
    for (std::int64_t r = b * kStrip; r < std::min(e * kStrip, rows); r += 16)
      for (std::int64_t c = 0; c < cols; c += 16) {
        if (fp8)
          transpose16x16_bytes(x + r * ldx + c, ldx, t + c * ldt + r, ldt);
        else
          transpose16x16_nibbles(x + r * ldx + c / 2, ldx, t + c * ldt + r / 2, ldt);
      }
  });
  if (q.block2d) {
    const auto* s = static_cast<const std::uint8_t*>(q.scales.data());
    auto* st = static_cast<std::uint8_t*>(qt.scales.data());
    for (std::int64_t i = 0; i < rows / 16; ++i)
      for (std::int64_t j = 0; j < cols / 16; ++j) st[j * (rows / 16) + i] = s[i * (cols / 16) + j];
  }
  qt.tensor_scale = q.tensor_scale;
}

}  // namespace rafter::workloads::cpu
