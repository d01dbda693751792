// Number formats on the host: rounding a value onto a format's grid (bf16, fp16, tf32, fp8 E4M3/E5M2,
// fp4 E2M1), their bit encodings, and the NVFP4 / MXFP4 block quantizers. Shared by the FP64
// references and the CPU backend so that both agree on what "rounded to NVFP4" means.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace rafter::workloads::numfmt {

// A binary floating-point format: mantissa bits, smallest normal exponent, largest finite value.
struct FloatFormat {
  int mantissa_bits;
  int min_normal_exponent;
  double max_finite;
  int exponent_bias;
};
inline constexpr FloatFormat kBf16{7, -126, 3.3895313892515355e38, 127};
inline constexpr FloatFormat kFp16{10, -14, 65504.0, 15};
inline constexpr FloatFormat kTf32{10, -126, 3.4e38, 127};
inline constexpr FloatFormat kE4M3{3, -6, 448.0, 7};      // OCP FP8 E4M3 (fn: no inf)
inline constexpr FloatFormat kE5M2{2, -14, 57344.0, 15};  // OCP FP8 E5M2
inline constexpr FloatFormat kE2M1{1, 0, 6.0, 1};         // OCP FP4 E2M1

// Rounds x to the nearest value of `f` (ties to even), saturating at the largest finite value
// (the convention of the FP8/FP4 quantizers, which never produce inf).
inline double round_to(double x, const FloatFormat& f) {
  if (x == 0 || std::isnan(x)) return x;
  const double a = std::fabs(x);
  int e2 = 0;
  std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1)
  int e = e2 - 1;
  if (e < f.min_normal_exponent) e = f.min_normal_exponent;
  const double quantum = std::ldexp(1.0, e - f.mantissa_bits);
  double r = std::nearbyint(a / quantum) * quantum;
  if (r > f.max_finite) r = f.max_finite;
  return x < 0 ? -r : r;
}

// Stochastic rounding onto `f`: rounds up with probability equal to the distance from the value
// below; `u` is uniform in [0, 1).
inline double round_stochastic(double x, const FloatFormat& f, double u) {
  if (x == 0) return x;
  const double a = std::fabs(x);
  int e2 = 0;
  std::frexp(a, &e2);
  int e = e2 - 1;
  if (e < f.min_normal_exponent) e = f.min_normal_exponent;
  const double quantum = std::ldexp(1.0, e - f.mantissa_bits);
  const double lo = std::floor(a / quantum) * quantum;
  double r = (a - lo) / quantum > u ? lo + quantum : lo;
  if (r > f.max_finite) r = f.max_finite;
  return x < 0 ? -r : r;
}

// Bit encoding of a value already on the grid of a small format (fp8, fp4): sign | exponent | mantissa.
inline std::uint8_t encode_small(double r, const FloatFormat& f) {
  const int exp_bits = (f.exponent_bias == 7) ? 4 : (f.exponent_bias == 15 ? 5 : 2);
  const std::uint8_t sign = r < 0 ? 1 : 0;
  const double a = std::fabs(r);
  std::uint32_t exp_field = 0, mant = 0;
  if (a < std::ldexp(1.0, f.min_normal_exponent)) {
    mant = static_cast<std::uint32_t>(std::lround(a / std::ldexp(1.0, f.min_normal_exponent - f.mantissa_bits)));
  } else {
    int e2 = 0;
    std::frexp(a, &e2);
    const int e = e2 - 1;
    exp_field = static_cast<std::uint32_t>(e + f.exponent_bias);
    mant = static_cast<std::uint32_t>(std::lround((std::ldexp(a, -e) - 1.0) * (1 << f.mantissa_bits)));
  }
  return static_cast<std::uint8_t>((sign << (exp_bits + f.mantissa_bits)) |
                                   (exp_field << f.mantissa_bits) | mant);
}

inline double decode_small(std::uint8_t bits, const FloatFormat& f) {
  const int exp_bits = (f.exponent_bias == 7) ? 4 : (f.exponent_bias == 15 ? 5 : 2);
  const int mant = bits & ((1 << f.mantissa_bits) - 1);
  const int exp_field = (bits >> f.mantissa_bits) & ((1 << exp_bits) - 1);
  const bool neg = (bits >> (exp_bits + f.mantissa_bits)) & 1;
  double v = exp_field == 0 ? std::ldexp(mant, f.min_normal_exponent - f.mantissa_bits)
                            : std::ldexp(1.0 + std::ldexp(mant, -f.mantissa_bits), exp_field - f.exponent_bias);
  return neg ? -v : v;
}

// bfloat16 as raw 16 bits: round to nearest even from fp32, and back.
inline std::uint16_t float_to_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
inline float bf16_to_float(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// IEEE binary16 as raw 16 bits, bit-exact with x86 F16C (vcvtph2ps / vcvtps2ph with round to
// nearest even): subnormals kept, overflow to inf, NaN stays NaN with its sign, quieted, top
// payload bits kept. Branch-free integer code plus one exact float operation, so that loops over
// it vectorize on any ISA; `static` because the CPU kernel files include this with different ISA
// flags and must not share one out-of-line copy.
namespace fp16_detail {
static inline std::uint32_t all_if(bool c) { return 0u - static_cast<std::uint32_t>(c); }
static inline std::uint32_t pick(std::uint32_t mask, std::uint32_t a, std::uint32_t b) { return (a & mask) | (b & ~mask); }
static inline std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
static inline float float_of(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
}  // namespace fp16_detail

static inline float fp16_to_float(std::uint16_t h) {
  using namespace fp16_detail;
  // After M. Dukhan's FP16 library: exponent and mantissa moved to fp32's place with the exponent
  // offset by 224, times 2^-112: normal values come out exact, inf/NaN go to exponent 255 (the
  // product quiets a signalling NaN, as vcvtph2ps does). Subnormals: the 10 mantissa bits under
  // 0.5's exponent, minus 0.5, is m·2^-24 exactly. No float operand is ever subnormal.
  const std::uint32_t w = static_cast<std::uint32_t>(h) << 16, two_w = w + w;
  const float normal = float_of((two_w >> 4) + (0xe0u << 23)) * 0x1.0p-112f;
  const float subnormal = float_of((two_w >> 17) | (126u << 23)) - 0.5f;
  // Masks, not a branch or `?:`: gcc would sink the float operations into a branch that then
  // does not vectorize.
  const std::uint32_t r = pick(all_if(two_w < (1u << 27)), bits_of(subnormal), bits_of(normal));
  return float_of((w & 0x80000000u) | r);
}

static inline std::uint16_t float_to_fp16(float x) {
  using namespace fp16_detail;
  const std::uint32_t u = bits_of(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  // Normal: rebias (−112 in the exponent field) and round to nearest even by adding 0xfff plus
  // the kept lsb; a carry out of the mantissa bumps the exponent (65520 and up become inf).
  const std::uint32_t normal = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // Subnormal (|x| < 2^-14): adding 0.5 puts the 2^-24 quantum at float's last place, and the
  // float addition rounds to nearest even for us.
  const std::uint32_t sub = bits_of(float_of(a) + 0.5f) - 0x3f000000u;
  const std::uint32_t special = pick(all_if(a > 0x7f800000u), 0x7e00u | ((a >> 13) & 0x3ffu), 0x7c00u);
  std::uint32_t r = pick(all_if(a < (113u << 23)), sub, normal);
  r = pick(all_if(a >= (143u << 23)), special, r);  // |x| >= 65536 (or inf, NaN)
  return static_cast<std::uint16_t>(r | sign);
}

// Block quantization parameters. NVFP4: E2M1 values, one E4M3 scale per 16 values, one FP32 scale
// per tensor. MXFP4: E2M1 values, one E8M0 (power of two) scale per 32 values, no tensor scale.
inline constexpr int kNvfp4Block = 16;
inline constexpr int kMxfp4Block = 32;

// NVFP4 tensor scale so that the largest block scale uses E4M3's range: amax / (448 * 6).
inline double nvfp4_tensor_scale(double amax) { return amax > 0 ? amax / (448.0 * 6.0) : 1.0; }
// The decoded E4M3 block scale for a block with largest magnitude `block_amax`.
inline double nvfp4_block_scale(double block_amax, double tensor_scale) {
  return round_to(block_amax / 6.0 / tensor_scale, kE4M3);
}
// The quotient x / S that every FP4 encoder (NVFP4 and MXFP4, CPU and GPU) rounds onto E2M1, for a
// block scale S > 0: x·RN(1/S) in fp32, one rounding more than the division, as Transformer
// Engine's encoders scale a block by its reciprocal (for MXFP4's powers of two the same bits as
// the division); x / S where RN(1/S) overflows (S under 2^-128). One multiply a value on the GPU
// instead of the three that an exactly rounded division takes there.
inline float fp4_quotient(float x, float s) {
  const float inv = 1.0f / s;
  return std::isinf(inv) ? x / s : x * inv;
}

// MXFP4 E8M0 scale: 2^(floor(log2 amax) - 2), 2 being E2M1's largest exponent (OCP MX spec).
inline double mxfp4_block_scale(double block_amax) {
  if (block_amax <= 0) return 1.0;
  int e2 = 0;
  std::frexp(block_amax, &e2);
  return std::ldexp(1.0, (e2 - 1) - 2);
}

}  // namespace rafter::workloads::numfmt
