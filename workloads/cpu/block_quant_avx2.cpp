// fp32 block quantizers (see block_quant.hpp). Rounding is to nearest even onto E2M1 by
// thresholds (branch-free), scales are rounded to E4M3 / E8M0 by bit manipulation. Built twice
// (AVX2 and baseline, cpu_kernel.hpp's "Twin builds"); block_quant.cpp calls the one that fits.
// Comparisons may not trap and sqrt sets no errno: lets the compiler if-convert and vectorize.
#ifndef __clang__  // a GCC pragma clang does not know; the clang build (RAFTER_FUZZ) needs no speed
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#endif
#include "block_quant.hpp"

#include "avx512_kernels.hpp"

#include <algorithm>
#include <cmath>

#include "../src/quant_math.hpp"

RAFTER_CPU_KERNELS_BEGIN
namespace rafter::workloads::cpu::RAFTER_CPU_BUILD {
namespace {

constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

inline int e2m1_code_rne(float a) {  // a >= 0; saturates at 6
  return (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
}
inline int e2m1_code_down(float a) {
  return (a >= 0.5f) + (a >= 1.0f) + (a >= 1.5f) + (a >= 2.0f) + (a >= 3.0f) + (a >= 4.0f) + (a >= 6.0f);
}
inline float uniform01(std::uint64_t x) {  // splitmix64 hash → [0, 1)
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return float(x >> 40) * (1.0f / 16777216.0f);
}

// Round-to-nearest-even encoding of a non-negative block scale into E4M3 (saturating, no inf).
std::uint8_t e4m3_bits(float s) {
  if (!(s > 0)) return 0;
  if (s < 0.015625f) return static_cast<std::uint8_t>(std::nearbyint(s * 512.0f));  // subnormals: k·2^-9
  std::uint32_t u;
  std::memcpy(&u, &s, 4);
  u += 0x7ffffu + ((u >> 20) & 1u);
  const int e = int((u >> 23) & 255) - 127 + 7;
  const int m = int((u >> 20) & 7);
  if (e > 15 || (e == 15 && m == 7)) return 0x7e;  // 448
  return static_cast<std::uint8_t>((e << 3) | m);
}

// Branch-free versions of the two encoders above for the per-element FP8 loop (they vectorize).
inline std::int32_t e4m3_code(float a) {  // a >= 0
  std::uint32_t u;
  std::memcpy(&u, &a, 4);
  u += 0x7ffffu + ((u >> 20) & 1u);
  std::int32_t code = ((static_cast<std::int32_t>(u >> 23) - 120) << 3) | static_cast<std::int32_t>((u >> 20) & 7);
  code = code < 0x7e ? code : 0x7e;
  const std::int32_t sub = static_cast<std::int32_t>((a * 512.0f + 12582912.0f) - 12582912.0f);
  return a < 0.015625f ? sub : code;
}
inline std::int32_t e5m2_code(float a) {
  std::uint32_t u;
  std::memcpy(&u, &a, 4);
  u += 0xfffffu + ((u >> 21) & 1u);
  std::int32_t code = ((static_cast<std::int32_t>(u >> 23) - 112) << 2) | static_cast<std::int32_t>((u >> 21) & 3);
  code = code < 0x7b ? code : 0x7b;
  const std::int32_t sub = static_cast<std::int32_t>((a * 65536.0f + 12582912.0f) - 12582912.0f);
  return a < 6.103515625e-05f ? sub : code;
}

struct Luts {
  float e4m3[256], e5m2[256];
  Luts() {
    for (int i = 0; i < 256; ++i) {
      e4m3[i] = float(numfmt::decode_small(std::uint8_t(i), numfmt::kE4M3));
      e5m2[i] = float(numfmt::decode_small(std::uint8_t(i), numfmt::kE5M2));
    }
  }
};
const Luts& luts() {
  static const Luts l;
  return l;
}

// One butterfly stage: pairs (i, i + H) for every i with bit H clear, each independent of the
// others (any order gives the same bits). A constant stride lets the compiler vectorize the stage.
template <int H>
void butterfly16(float* v) {
  for (int i = 0; i < 16; ++i)
    if (!(i & H)) {
      const float a = v[i], b = v[i + H];
      v[i] = a + b;
      v[i + H] = a - b;
    }
}

// v ← H16·diag(sign)·v / 4, quant_math's definition in fp32. Written as four constant-stride
// stages and an inlined sign table: the loop over variable strides with an out-of-line sign lookup
// had made the RHT path 35× slower than the plain quantizer.
void hadamard16(float* v) {
  for (int i = 0; i < 16; ++i) v[i] *= float(detail::kRhtSigns[i]);
  butterfly16<1>(v);
  butterfly16<2>(v);
  butterfly16<4>(v);
  butterfly16<8>(v);
  for (int i = 0; i < 16; ++i) v[i] *= 0.25f;
}

template <class T>
void load_rows(const T* x, std::int64_t r0, std::int64_t nrows, std::int64_t cols, bool rht, float* out) {
  for (std::int64_t r = 0; r < nrows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) out[r * cols + c] = ld(x, (r0 + r) * cols + c);
    if (rht)
      for (std::int64_t c = 0; c + 16 <= cols; c += 16) hadamard16(out + r * cols + c);
  }
}

template <class T>
float tensor_amax(const T* x, std::int64_t rows, std::int64_t cols, bool rht) {
  std::vector<float> partial(std::size_t(pool_threads()), 0.0f);
  parallel_for(rows, [&](std::int64_t b, std::int64_t e, int w) {
    std::vector<float> row(static_cast<std::size_t>(cols));
    std::uint32_t mb = 0;  // max of |x| as integer bits (see encode_group)
    for (std::int64_t r = b; r < e; ++r) {
      if (rht) {
        load_rows(x, r, 1, cols, rht, row.data());
        for (std::int64_t c = 0; c < cols; ++c) {
          std::uint32_t u;
          std::memcpy(&u, &row[std::size_t(c)], 4);
          u &= 0x7fffffffu;
          mb = mb > u ? mb : u;
        }
        continue;
      }
      for (std::int64_t c = 0; c < cols; ++c) {
        const float f = ld(x, r * cols + c);
        std::uint32_t u;
        std::memcpy(&u, &f, 4);
        u &= 0x7fffffffu;
        mb = mb > u ? mb : u;
      }
    }
    float m;
    std::memcpy(&m, &mb, 4);
    partial[std::size_t(w)] = std::max(partial[std::size_t(w)], m);
  });
  return *std::max_element(partial.begin(), partial.end());
}

// Encodes one group of rows (1 or 16) already loaded (and transformed) in `v`.
void encode_group(QuantizedTensor& q, const float* v, std::int64_t r0, std::int64_t nrows, const QuantOptions& o) {
  const std::int64_t bc = q.block_cols(), cols = q.cols;
  auto* vals = static_cast<std::uint8_t*>(q.values.data());
  auto* scales = static_cast<std::uint8_t*>(q.scales.data());
  const bool nv = q.precision == "nvfp4";
  for (std::int64_t c0 = 0; c0 < cols; c0 += bc) {
    // |x| compared as integers (non-negative floats order like their bits): an integer max
    // reduction vectorizes, a float one (without -ffast-math) does not.
    std::uint32_t amax_bits = 0;
    for (std::int64_t r = 0; r < nrows; ++r)
      for (std::int64_t c = c0; c < c0 + bc; ++c) {
        std::uint32_t u;
        std::memcpy(&u, &v[r * cols + c], 4);
        u &= 0x7fffffffu;
        amax_bits = amax_bits > u ? amax_bits : u;
      }
    float amax;
    std::memcpy(&amax, &amax_bits, 4);
    float scale;
    const std::int64_t sidx = (r0 / q.block_rows()) * (cols / bc) + c0 / bc;
    if (nv) {
      scales[sidx] = e4m3_bits(amax / 6.0f / q.tensor_scale);
      scale = luts().e4m3[scales[sidx]] * q.tensor_scale;
    } else {
      int e2 = 0;
      std::frexp(amax > 0 ? amax : 1.0f, &e2);
      scales[sidx] = static_cast<std::uint8_t>((e2 - 1) - 2 + 127);
      scale = std::ldexp(1.0f, (e2 - 1) - 2);
    }
    for (std::int64_t r = 0; r < nrows; ++r) {
      const float* row = v + r * cols;
      std::uint8_t* out = vals + ((r0 + r) * cols + c0) / 2;
      if (!o.stochastic) {  // the common path: codes for the block first (vectorizes), then pairs
        std::int32_t codes[32];
        const float* xs = row + c0;
        // numfmt::fp4_quotient with its case decided once a block, so that the loops vectorize
        const float inv = 1.0f / scale;
        if (scale > 0 && !std::isinf(inv)) {
          for (std::int64_t c = 0; c < bc; ++c) {
            const std::int32_t k = e2m1_code_rne(std::fabs(xs[c]) * inv);
            codes[c] = k | ((xs[c] < 0 && k != 0) ? 8 : 0);
          }
        } else if (scale > 0) {
          for (std::int64_t c = 0; c < bc; ++c) {
            const std::int32_t k = e2m1_code_rne(std::fabs(xs[c]) / scale);
            codes[c] = k | ((xs[c] < 0 && k != 0) ? 8 : 0);
          }
        } else {
          for (std::int64_t c = 0; c < bc; ++c) codes[c] = 0;
        }
        for (std::int64_t c = 0; c < bc / 2; ++c) out[c] = static_cast<std::uint8_t>(codes[2 * c] | (codes[2 * c + 1] << 4));
        continue;
      }
      for (std::int64_t c = 0; c < bc; c += 2) {
        int nib[2];
        for (int h = 0; h < 2; ++h) {
          const float x = row[c0 + c + h];
          const float a = scale > 0 ? numfmt::fp4_quotient(std::fabs(x), scale) : 0.0f;
          int code = e2m1_code_down(a);
          const float lo = kE2M1[code], hi = kE2M1[std::min(code + 1, 7)];
          const std::uint64_t idx = std::uint64_t((r0 + r) * cols + c0 + c + h);
          if (hi > lo && uniform01(idx ^ (o.seed << 40)) < (a - lo) / (hi - lo)) ++code;
          nib[h] = code | (((x < 0) & (code != 0)) << 3);
        }
        out[c / 2] = static_cast<std::uint8_t>(nib[0] | (nib[1] << 4));
      }
    }
  }
}

// NVFP4 1×16 of bf16 on AVX-512: the same two passes with vector loops (avx512_kernels.hpp).
bool quantize_nvfp4_avx512(const bf16* x, QuantizedTensor& q, const QuantOptions& o) {
  if (!avx512::available() || q.precision != "nvfp4" || q.block2d || o.rht || o.stochastic || q.cols % 32 != 0) return false;
  std::vector<float> partial(std::size_t(pool_threads()), 0.0f);
  // With room for them, the amax pass also keeps each block's max (1/8 of the input's bytes,
  // written once and read once more: traffic beyond the operator's analytic model, ~5%).
  auto* block_amax = q.block_amax.bytes() ? static_cast<bf16*>(q.block_amax.data()) : nullptr;
  parallel_for(q.rows, [&](std::int64_t b, std::int64_t e, int w) {
    const float m = block_amax ? avx512::abs_max_blocks(x, b, e, q.cols, block_amax)
                               : avx512::abs_max(x + b * q.cols, (e - b) * q.cols);
    partial[std::size_t(w)] = std::max(partial[std::size_t(w)], m);
  });
  const float amax = *std::max_element(partial.begin(), partial.end());
  q.tensor_scale = amax > 0 ? amax / (448.0f * 6.0f) : 1.0f;
  // Below 2^-118 a block scale (at least 2^-9 of it) may have a reciprocal that overflows, where
  // fp4_quotient divides: the scalar path's case (such a tensor's amax is under 2^-106).
  if (q.tensor_scale < 0x1p-118f) return false;
  auto* codes = static_cast<std::uint8_t*>(q.values.data());
  auto* scales = static_cast<std::uint8_t*>(q.scales.data());
  parallel_for(q.rows, [&](std::int64_t b, std::int64_t e, int) {
    avx512::quantize_nvfp4(x, codes, scales, b, e, q.cols, q.tensor_scale, luts().e4m3, &e4m3_bits, block_amax);
  });
  return true;
}

template <class T>
void quantize_impl(const T* x, QuantizedTensor& q, const QuantOptions& o) {
  if constexpr (std::is_same_v<T, bf16>)
    if (quantize_nvfp4_avx512(x, q, o)) return;
  // MXFP4 has no tensor scale: no amax pass.
  const float amax = q.precision == "mxfp4" ? 0.0f : tensor_amax(x, q.rows, q.cols, o.rht);
  if (q.precision == "fp8_e4m3" || q.precision == "fp8_e5m2") {
    const bool e4 = q.precision == "fp8_e4m3";
    q.tensor_scale = amax > 0 ? amax / (e4 ? 448.0f : 57344.0f) : 1.0f;
    auto* vals = static_cast<std::uint8_t*>(q.values.data());
    auto encode = [&](float x_i, std::int64_t i) {
      const float v = x_i / q.tensor_scale;
      const std::int32_t bits = e4 ? e4m3_code(std::fabs(v)) : e5m2_code(std::fabs(v));
      vals[i] = static_cast<std::uint8_t>(bits | ((v < 0 && bits != 0) ? 0x80 : 0));
    };
    parallel_for(q.rows, [&](std::int64_t b, std::int64_t e, int) {
      if (!o.rht) {
        for (std::int64_t i = b * q.cols; i < e * q.cols; ++i) encode(ld(x, i), i);
        return;
      }
      // The values encoded are the transformed ones, whose maximum set the tensor scale.
      std::vector<float> row(static_cast<std::size_t>(q.cols));
      for (std::int64_t r = b; r < e; ++r) {
        load_rows(x, r, 1, q.cols, true, row.data());
        for (std::int64_t c = 0; c < q.cols; ++c) encode(row[std::size_t(c)], r * q.cols + c);
      }
    });
    return;
  }
  q.tensor_scale = q.precision == "nvfp4" ? (amax > 0 ? amax / (448.0f * 6.0f) : 1.0f) : 1.0f;
  const std::int64_t br = q.block_rows();
  parallel_for(q.rows / br, [&](std::int64_t b, std::int64_t e, int) {
    std::vector<float> v(static_cast<std::size_t>(br * q.cols));
    for (std::int64_t g = b; g < e; ++g) {
      load_rows(x, g * br, br, q.cols, o.rht, v.data());
      encode_group(q, v.data(), g * br, br, o);
    }
  });
}

}  // namespace

void quantize(const float* x, QuantizedTensor& q, const QuantOptions& o) { quantize_impl(x, q, o); }
void quantize(const bf16* x, QuantizedTensor& q, const QuantOptions& o) { quantize_impl(x, q, o); }

namespace {
template <class T>
void dequantize_impl(const QuantizedTensor& q, T* out) {
  const auto* vals = static_cast<const std::uint8_t*>(q.values.data());
  const auto* scales = static_cast<const std::uint8_t*>(q.scales.data());
  if (q.precision == "fp8_e4m3" || q.precision == "fp8_e5m2") {
    const float* lut = q.precision == "fp8_e4m3" ? luts().e4m3 : luts().e5m2;
    parallel_for(q.rows, [&](std::int64_t b, std::int64_t e, int) {
      for (std::int64_t i = b * q.cols; i < e * q.cols; ++i) st(out, i, lut[vals[i]] * q.tensor_scale);
    });
    return;
  }
  const bool nv = q.precision == "nvfp4";
  const std::int64_t bc = q.block_cols(), br = q.block_rows(), nb = q.cols / bc;
  // E2M1 decoded arithmetically with integer selects (vectorizes, unlike a 16-entry table):
  // exponent field e and mantissa bit m give 2^(e-1)·(1 + m/2), or m/2 when e = 0.
  parallel_for(q.rows, [&](std::int64_t b, std::int64_t e, int) {
    std::int32_t nib[32];
    for (std::int64_t r = b; r < e; ++r)
      for (std::int64_t blk = 0; blk < nb; ++blk) {
        const std::uint8_t sb = scales[(r / br) * nb + blk];
        const float s = nv ? luts().e4m3[sb] * q.tensor_scale : std::ldexp(1.0f, int(sb) - 127);
        const std::int64_t base = r * q.cols + blk * bc;
        const std::uint8_t* bytes = vals + base / 2;
        for (std::int64_t c = 0; c < bc / 2; ++c) {
          nib[2 * c] = bytes[c] & 15;
          nib[2 * c + 1] = bytes[c] >> 4;
        }
        for (std::int64_t c = 0; c < bc; ++c) {
          const std::int32_t k = nib[c], ex = (k >> 1) & 3, m = k & 1;
          const std::int32_t mag = ex ? (((ex + 126) << 23) | (m << 22)) : (m ? 0x3f000000 : 0);
          const std::uint32_t bits = static_cast<std::uint32_t>(mag) | (static_cast<std::uint32_t>(k & 8) << 28);
          float v;
          std::memcpy(&v, &bits, 4);
          st(out, base + c, v * s);
        }
      }
  });
}

}  // namespace

void dequantize(const QuantizedTensor& q, bf16* out) {
  const bool fp4 = q.precision == "nvfp4" || q.precision == "mxfp4";
  if (avx512::available() && fp4 && q.cols % 32 == 0) {
    float lut[256];
    for (int i = 0; i < 256; ++i)
      lut[i] = q.precision == "nvfp4" ? luts().e4m3[i] * q.tensor_scale : std::ldexp(1.0f, i - 127);
    const auto* codes = static_cast<const std::uint8_t*>(q.values.data());
    const auto* scales = static_cast<const std::uint8_t*>(q.scales.data());
    parallel_for(q.rows, [&](std::int64_t b, std::int64_t e, int) {
      avx512::dequantize_fp4(codes, scales, lut, out, b, e, q.cols, q.block_cols(), q.block_rows());
    });
    return;
  }
  dequantize_impl(q, out);
}
void dequantize(const QuantizedTensor& q, float* out) { dequantize_impl(q, out); }

}  // namespace rafter::workloads::cpu::RAFTER_CPU_BUILD
RAFTER_CPU_KERNELS_END
