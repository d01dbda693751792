// fp16 on the CPU backend: the binary16 conversions of formats.hpp (exhaustive decode, encode
// rounding to nearest even at every midpoint, overflow, subnormals, NaN; bit-exact with F16C where
// the CPU has it), that every operator declaring fp16 runs on the CPU in it, and the AVX-512 row
// functions on fp16 rows.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <random>
#include <vector>

#include "../../workloads/cpu/avx512_kernels.hpp"
#include "rafter/workloads/backend.hpp"
#include "rafter/workloads/formats.hpp"
#include "rafter/workloads/precision.hpp"

using namespace rafter::workloads;
using numfmt::float_to_fp16;
using numfmt::fp16_to_float;

namespace {

std::uint32_t bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// binary16 from its fields, the textbook way: (-1)^s · 2^(e-15) · (1 + m/1024), subnormals
// 2^-14 · m/1024, e = 31 inf or NaN. Shares nothing with the bit tricks under test.
double reference_decode(std::uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0x1f)
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exp == 0)
    v = std::ldexp(double(mant), -24);
  else
    v = std::ldexp(1.0 + double(mant) / 1024.0, exp - 15);
  return sign ? -v : v;
}

bool is_nan16(std::uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

__attribute__((target("f16c"))) float hw_decode(std::uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) std::uint16_t hw_encode(float x) {
  return static_cast<std::uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}

}  // namespace

TEST(Fp16Format, DecodeMatchesTheFieldDefinitionForAll65536Patterns) {
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const float got = fp16_to_float(h);
    const double want = reference_decode(h);
    SCOPED_TRACE(testing::Message() << std::hex << "0x" << i);
    if (is_nan16(h)) {
      ASSERT_TRUE(std::isnan(got));
      ASSERT_EQ(std::signbit(got), (h >> 15) != 0);                 // sign kept
      ASSERT_EQ((bits(got) >> 13) & 0x3ff, (h & 0x3ffu) | 0x200u);  // payload kept, quieted
    } else {
      ASSERT_EQ(double(got), want);
      ASSERT_EQ(std::signbit(got), (h >> 15) != 0);  // -0 stays -0
    }
  }
}

TEST(Fp16Format, EncodeInvertsDecodeForEveryNonNanPattern) {
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    if (is_nan16(h)) {
      const std::uint16_t back = float_to_fp16(fp16_to_float(h));
      ASSERT_TRUE(is_nan16(back)) << std::hex << i;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << i;
    } else {
      ASSERT_EQ(float_to_fp16(fp16_to_float(h)), h) << std::hex << i;
    }
  }
}

// Between every two neighbouring binary16 values (subnormal, normal, across the subnormal/normal
// boundary): the exact midpoint goes to the one with the even mantissa,
// anything a float ulp below or above it to the nearer one.
TEST(Fp16Format, EncodeRoundsToNearestEvenAtEveryMidpoint) {
  for (std::uint16_t sign : {std::uint16_t(0), std::uint16_t(0x8000)}) {
    for (std::uint32_t m = 0; m < 0x7bff; ++m) {  // 65504 → inf: in the overflow test
      const auto lo = static_cast<std::uint16_t>(m | sign), hi = static_cast<std::uint16_t>((m + 1) | sign);
      const float a = fp16_to_float(lo), b = fp16_to_float(hi);
      const float mid = (a + b) / 2;  // exact: 12 significant bits
      ASSERT_EQ(double(mid), (reference_decode(lo) + reference_decode(hi)) / 2);
      const std::uint16_t even = (m & 1) ? hi : lo;
      ASSERT_EQ(float_to_fp16(mid), even) << std::hex << m;
      ASSERT_EQ(float_to_fp16(std::nextafter(mid, a)), lo) << std::hex << m;
      ASSERT_EQ(float_to_fp16(std::nextafter(mid, b)), hi) << std::hex << m;
    }
  }
}

TEST(Fp16Format, OverflowGoesToInfUnderflowToSignedZero) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);                        // largest finite
  EXPECT_EQ(float_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7bff);  // below the midpoint
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);                        // midpoint: ties to even = inf
  EXPECT_EQ(float_to_fp16(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(float_to_fp16(inf), 0x7c00);
  EXPECT_EQ(float_to_fp16(-inf), 0xfc00);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -24)), 0x0001);                        // smallest subnormal
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);                        // tie: to even (0)
  EXPECT_EQ(float_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);  // above the tie
  EXPECT_EQ(float_to_fp16(std::ldexp(3.0f, -25)), 0x0002);                        // tie 1.5 ulp: to 2
  EXPECT_EQ(float_to_fp16(-std::ldexp(1.0f, -30)), 0x8000);                       // -0
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_fp16(std::nextafter(std::ldexp(1.0f, -14), 0.0f)), 0x0400);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(is_nan16(float_to_fp16(nan)));
  EXPECT_TRUE(is_nan16(float_to_fp16(-nan)));
  EXPECT_EQ(float_to_fp16(-nan) & 0x8000, 0x8000);
  EXPECT_TRUE(is_nan16(float_to_fp16(std::numeric_limits<float>::signaling_NaN())));
}

// Bit for bit what vcvtph2ps / vcvtps2ph (round to nearest even) give, where the CPU has F16C:
// all 2^16 decodes and 2^32 / 257 (≈ 17M) floats spread over every exponent, sign and NaN.
TEST(Fp16Format, BitExactWithF16cHardware) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C on this CPU";
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    ASSERT_EQ(bits(fp16_to_float(h)), bits(hw_decode(h))) << std::hex << i;
  }
  for (std::uint64_t u = 0; u < (std::uint64_t(1) << 32); u += 257) {
    float x;
    const auto u32 = static_cast<std::uint32_t>(u);
    std::memcpy(&x, &u32, 4);
    ASSERT_EQ(float_to_fp16(x), hw_encode(x)) << std::hex << u32;
  }
}

TEST(CpuFp16, EveryOperatorDeclaringFp16RunsOnTheCpuInFp16) {
  int found = 0;
  for (const auto* op : OperatorRegistry::instance().all()) {
    const auto precs = op->precisions();
    if (op->is_collective() || std::find(precs.begin(), precs.end(), "fp16") == precs.end()) continue;
    for (const auto& phase : op->phases()) {
      const OpInstance inst = normalize_instance(*op, {op->name(), "", phase, {}, "fp16", 1});
      EXPECT_NE(BackendRegistry::instance().find("cpu", inst), nullptr) << op->name() << " " << phase;
      ++found;
    }
  }
  EXPECT_GE(found, 20);  // rmsnorm, swiglu, …, attention, GLA, AdamW: each phase
}

TEST(CpuFp16, ToleranceSitsAboveFp16RoundingAndBelowBf16) {
  const double u = std::ldexp(1.0, -11);  // fp16 unit roundoff
  const double tol = check_tolerance("rmsnorm", "fp16", false);
  EXPECT_GT(tol, 2 * u);
  EXPECT_LT(tol, check_tolerance("rmsnorm", "bf16", false));
}

// The AVX-512 row functions on fp16 (vcvtph2ps/vcvtps2ph), at lengths with and without a masked
// tail: add rounds exactly as the scalar st(ld + ld); RMSNorm, softmax and the log-sum-exp's max
// agree with FP64; nothing is written past the row (the word after it keeps its sentinel).
TEST(CpuFp16, Avx512RowFunctionsMatchTheScalarPathAtEveryTail) {
  using namespace rafter::workloads::cpu;
  if (!avx512::available()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  const std::uint16_t sentinel = 0x7e55;  // a NaN no kernel produces
  for (const std::int64_t n : {1, 15, 16, 17, 63, 64, 65, 200, 1000}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const auto sz = static_cast<std::size_t>(n);
    std::vector<f16> a(sz), b(sz), w(sz), y(sz + 1, f16{sentinel});
    for (std::size_t i = 0; i < sz; ++i) {
      st(a.data(), std::int64_t(i), dist(rng));
      st(b.data(), std::int64_t(i), dist(rng));
      st(w.data(), std::int64_t(i), 0.5f + 0.25f * dist(rng));
    }
    avx512::add(a.data(), b.data(), y.data(), n);
    for (std::int64_t i = 0; i < n; ++i) {
      f16 want;
      st(&want, 0, ld(a.data(), i) + ld(b.data(), i));
      ASSERT_EQ(y[std::size_t(i)].bits, want.bits) << i;
    }
    EXPECT_EQ(y[sz].bits, sentinel);
    double ss = 0, mx = -INFINITY, se = 0;
    for (std::int64_t i = 0; i < n; ++i) ss += double(ld(a.data(), i)) * ld(a.data(), i);
    for (std::int64_t i = 0; i < n; ++i) mx = std::max(mx, double(ld(a.data(), i)));
    for (std::int64_t i = 0; i < n; ++i) se += std::exp(double(ld(a.data(), i)) - mx);
    const double rs = 1.0 / std::sqrt(ss / double(n) + 1e-5);
    avx512::rmsnorm_fwd(a.data(), w.data(), y.data(), n, false);
    for (std::int64_t i = 0; i < n; ++i) {
      const double want = double(ld(a.data(), i)) * rs * ld(w.data(), i);
      ASSERT_NEAR(ld(y.data(), i), want, 2e-3 * std::fabs(want) + 1e-6) << i;
    }
    EXPECT_EQ(y[sz].bits, sentinel);
    std::vector<float> scratch(sz);
    avx512::softmax_rows(a.data(), y.data(), 1, n, scratch.data());
    for (std::int64_t i = 0; i < n; ++i) {
      const double want = std::exp(double(ld(a.data(), i)) - mx) / se;
      ASSERT_NEAR(ld(y.data(), i), want, 2e-3 * want + 1e-7) << i;
    }
    EXPECT_EQ(y[sz].bits, sentinel);
    float got_mx = 0;
    const float lse = avx512::logsumexp(a.data(), n, &got_mx, nullptr);
    EXPECT_EQ(double(got_mx), mx);
    EXPECT_NEAR(lse, std::log(se) + mx, 1e-5 * std::fabs(std::log(se) + mx) + 1e-5);
  }
}
