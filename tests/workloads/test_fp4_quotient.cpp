// The FP4 encoders' quotient (numfmt::fp4_quotient: |x|·RN(1/S), a division where RN(1/S)
// overflows) and the CPU encoders that compute it: the bf16 input path (AVX-512 where the CPU has it)
// and the fp32 one (the scalar loops) write the same bytes, also for tensors so small that some block
// scales are under 2^-128, where the AVX-512 path hands over to the scalar one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../../workloads/cpu/block_quant.hpp"
#include "rafter/workloads/formats.hpp"

namespace numfmt = rafter::workloads::numfmt;
namespace cpu = rafter::workloads::cpu;

namespace {

TEST(Fp4Quotient, MultipliesByTheReciprocalOrDividesWhereItOverflows) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  const float tiny = 0x1p-130f;  // a subnormal scale: 1/S overflows
  ASSERT_TRUE(std::isinf(1.0f / tiny));
  int differs = 0;
  for (int i = 0; i < 100000; ++i) {
    const float x = u(rng), s = std::ldexp(1.0f + float(i % 8) / 8.0f, i % 40 - 20);  // E4M3-like scales
    const float q = numfmt::fp4_quotient(x, s);
    EXPECT_EQ(q, x * (1.0f / s));
    differs += q != x / s;  // one rounding more: now and then an ulp off the division
    const float p = std::ldexp(1.0f, i % 60 - 30);  // MXFP4: powers of two, the division's bits
    EXPECT_EQ(numfmt::fp4_quotient(x, p), x / p);
    EXPECT_EQ(numfmt::fp4_quotient(x * 0x1p-120f, tiny), x * 0x1p-120f / tiny);
  }
  EXPECT_GT(differs, 0);  // the test tells the two definitions apart
}

// [rows, cols] bf16 values, row r at magnitude 2^(top - r % span), with exact zeros and values
// halfway between E2M1 neighbours at some scales.
std::vector<cpu::bf16> values(std::int64_t rows, std::int64_t cols, int top, int span, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<cpu::bf16> x(std::size_t(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      float v = u(rng) * std::ldexp(1.0f, top - int(r % span));
      if (c % 37 == 0) v = 0;
      if (c % 41 == 0) v = std::ldexp(1.25f, top - int(r % span) - 2);
      x[std::size_t(r * cols + c)] = numfmt::float_to_bf16(v);
    }
  return x;
}

cpu::QuantizedTensor encode(const char* precision, std::int64_t rows, std::int64_t cols, const cpu::bf16* x16,
                            const float* x32) {
  cpu::QuantizedTensor q;
  q.precision = precision, q.rows = rows, q.cols = cols;
  q.allocate();
  std::memset(q.values.data(), 0xff, q.values.bytes());  // poisoned
  std::memset(q.scales.data(), 0xff, q.scales.bytes());
  if (x16) cpu::quantize(x16, q, {});
  else cpu::quantize(x32, q, {});
  return q;
}

std::vector<std::uint8_t> bytes(const rafter::workloads::cpu::Buffer& b) {
  const auto* p = static_cast<const std::uint8_t*>(b.data());
  return {p, p + b.bytes()};
}

TEST(Fp4Encoders, Bf16AndFp32InputsWriteTheSameBytes) {
  // 512 columns: the AVX-512 path with its kept block maxima; 544: its 2-block tail.
  // top 2: ordinary scales; top -110 over 20 rows: a tensor scale under 2^-118 (the AVX-512 path
  // hands over) and block scales under 2^-128 (subnormal E4M3 bytes; 1/S overflows).
  struct Case {
    std::int64_t cols;
    int top, span;
  };
  for (const Case& k : {Case{512, 2, 19}, Case{544, 2, 19}, Case{512, -110, 20}, Case{544, -110, 20}})
    for (const char* p : {"nvfp4", "mxfp4"}) {
      SCOPED_TRACE(std::string(p) + " cols " + std::to_string(k.cols) + " top " + std::to_string(k.top));
      const std::int64_t rows = 40;
      const auto x = values(rows, k.cols, k.top, k.span, 11);
      std::vector<float> xf(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) xf[i] = numfmt::bf16_to_float(x[i]);
      const auto a = encode(p, rows, k.cols, x.data(), nullptr);
      const auto b = encode(p, rows, k.cols, nullptr, xf.data());
      EXPECT_EQ(bytes(a.values), bytes(b.values));
      EXPECT_EQ(bytes(a.scales), bytes(b.scales));
      EXPECT_EQ(a.tensor_scale, b.tensor_scale);
      if (k.top < 0 && std::string(p) == "nvfp4") {
        // the case the test is for: some nonzero block scale whose reciprocal overflows
        bool overflowing = false;
        for (std::int64_t s = 0; s < a.scale_count(); ++s) {
          const std::uint8_t e4m3 = static_cast<const std::uint8_t*>(a.scales.data())[s];
          const float scale = float(numfmt::decode_small(e4m3, numfmt::kE4M3)) * a.tensor_scale;
          overflowing |= scale > 0 && std::isinf(1.0f / scale);
        }
        EXPECT_TRUE(overflowing);
        EXPECT_LT(a.tensor_scale, 0x1p-118f);
      }
    }
}

}  // namespace
