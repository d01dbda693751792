// The decode GEMM's E2M1 → FP16 byte decode (workloads/cuda/e2m1_f16_bits.hpp), on the host: the
// packed layout gives the plain layout's bytes for every byte value in every position, and each
// byte is the FP16 of its code's value × 2^-14.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "../../workloads/cuda/e2m1_f16_bits.hpp"
#include "rafter/workloads/formats.hpp"

namespace {

using rafter::workloads::cuda::e2m1_f16_bytes;
using rafter::workloads::cuda::packed_f16_bytes;
using rafter::workloads::cuda::packed_f16_word;

constexpr double kGrid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

TEST(E2m1F16Bits, PackedWordsDecodeToThePlainBytes) {
  for (int pos = 0; pos < 4; ++pos)
    for (std::uint32_t b = 0; b < 256; ++b) {
      const std::uint32_t w = (b << (8 * pos)) | (0x5Au << (8 * ((pos + 1) % 4)));
      std::uint32_t lo, hi, plo, phi;
      e2m1_f16_bytes(w, lo, hi);
      packed_f16_bytes(packed_f16_word(w), plo, phi);
      ASSERT_EQ(plo, lo) << "byte " << b << " at " << pos;
      ASSERT_EQ(phi, hi) << "byte " << b << " at " << pos;
    }
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const std::uint32_t w = rng();
    std::uint32_t lo, hi, plo, phi;
    e2m1_f16_bytes(w, lo, hi);
    packed_f16_bytes(packed_f16_word(w), plo, phi);
    ASSERT_EQ(plo, lo);
    ASSERT_EQ(phi, hi);
  }
}

TEST(E2m1F16Bits, EachByteIsItsCodesValueTimesTwoToTheMinus14) {
  for (std::uint32_t w = 0; w < 256; ++w) {  // codes w & 15 (low nibble) and w >> 4 (high nibble)
    std::uint32_t lo, hi;
    e2m1_f16_bytes(w, lo, hi);
    for (auto [bits, code] : {std::pair{lo, w & 15u}, std::pair{hi, w >> 4}}) {
      const double want = (code & 8 ? -1 : 1) * kGrid[code & 7] * std::ldexp(1.0, -14);
      EXPECT_EQ(double(rafter::workloads::numfmt::fp16_to_float(std::uint16_t((bits & 0xFFu) << 8))), want)
          << "code " << code;
      EXPECT_EQ(bits >> 8, 0u);  // the other bytes hold the other (zero) codes' bytes
    }
  }
}

}  // namespace
