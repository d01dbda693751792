// The CPU block quantizers (workloads/cpu/block_quant.hpp) on a tensor and on its transpose: where a
// block of Xᵀ holds the same values as a block of X (16×16 tiles) or every value shares one scale
// (FP8 per tensor), each code of Xᵀ is the code of the same value in X. The both-copies kernels rely
// on it (cpu::codes_transpose and transpose_codes, and codes_transpose in
// workloads/cuda/kernels_quant.cu: they transpose the row-wise codes instead of encoding again); 1×16
// blocks and stochastic rounding are where it does not hold.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../../workloads/cpu/block_quant.hpp"

namespace cpu = rafter::workloads::cpu;

namespace {

constexpr std::int64_t kRows = 48, kCols = 80;  // 3 × 5 tiles of 16×16

// X with magnitudes spread over 2^-10 .. 2^6 by row, and its transpose.
struct Pair {
  std::vector<float> x, xt;
};
Pair random_pair(std::int64_t rows = kRows, std::int64_t cols = kCols) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Pair p{std::vector<float>(rows * cols), std::vector<float>(rows * cols)};
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      p.xt[c * rows + r] = p.x[r * cols + c] = n(rng) * std::ldexp(1.0f, int(r % 17) - 10);
  return p;
}

cpu::QuantizedTensor allocated(const std::string& precision, bool block2d, std::int64_t rows,
                               std::int64_t cols) {
  cpu::QuantizedTensor q;
  q.precision = precision;
  q.block2d = block2d;
  q.rows = rows, q.cols = cols;
  q.allocate();
  return q;
}
cpu::QuantizedTensor quantized(const std::vector<float>& x, const std::string& precision, bool block2d,
                               std::int64_t rows, std::int64_t cols, const cpu::QuantOptions& o) {
  cpu::QuantizedTensor q = allocated(precision, block2d, rows, cols);
  cpu::quantize(x.data(), q, o);
  return q;
}

// The code of element (r, c) of a [rows, cols] tensor: a nibble (FP4, low first) or a byte (FP8).
unsigned code(const cpu::QuantizedTensor& q, std::int64_t r, std::int64_t c) {
  const auto* b = static_cast<const std::uint8_t*>(q.values.data());
  const std::int64_t e = r * q.cols + c;
  if (q.precision.starts_with("fp8")) return b[e];
  return (b[e / 2] >> (4 * (e % 2))) & 0xfu;
}

// How many elements' codes differ between X and Xᵀ.
int transposed_code_mismatches(const cpu::QuantizedTensor& q, const cpu::QuantizedTensor& qt) {
  int differ = 0;
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t c = 0; c < kCols; ++c) differ += code(q, r, c) != code(qt, c, r);
  return differ;
}

TEST(BlockQuant, TilesAndFp8CodesOfTheTransposeAreTheTransposedCodes) {
  const Pair p = random_pair();
  const cpu::QuantOptions rn{false, false, 1};
  // NVFP4 16×16: codes, the tile scales (tile (i, j) of X is tile (j, i) of Xᵀ) and the tensor scale.
  const auto q = quantized(p.x, "nvfp4", true, kRows, kCols, rn);
  const auto qt = quantized(p.xt, "nvfp4", true, kCols, kRows, rn);
  EXPECT_EQ(transposed_code_mismatches(q, qt), 0);
  const auto* s = static_cast<const std::uint8_t*>(q.scales.data());
  const auto* st = static_cast<const std::uint8_t*>(qt.scales.data());
  ASSERT_EQ(q.scale_count(), (kRows / 16) * (kCols / 16));
  for (std::int64_t i = 0; i < kRows / 16; ++i)
    for (std::int64_t j = 0; j < kCols / 16; ++j)
      EXPECT_EQ(s[i * (kCols / 16) + j], st[j * (kRows / 16) + i]) << "tile " << i << ", " << j;
  EXPECT_EQ(q.tensor_scale, qt.tensor_scale);
  // FP8 per tensor: every byte.
  for (const char* f : {"fp8_e4m3", "fp8_e5m2"}) {
    const auto a = quantized(p.x, f, false, kRows, kCols, rn),
               b = quantized(p.xt, f, false, kCols, kRows, rn);
    EXPECT_EQ(transposed_code_mismatches(a, b), 0) << f;
    EXPECT_EQ(a.tensor_scale, b.tensor_scale) << f;
  }
}

// Where the GPU kernel encodes the copy again: 1×16 blocks run along the other axis, and stochastic
// rounding draws by each copy's own element index (and the copy's seed). On this input both change
// codes; were they not to, the exclusions in codes_transpose would be untested, not wrong.
TEST(BlockQuant, OneByOneBlocksAndStochasticRoundingAreNotTransposes) {
  const Pair p = random_pair();
  const cpu::QuantOptions rn{false, false, 1};
  EXPECT_GT(transposed_code_mismatches(quantized(p.x, "nvfp4", false, kRows, kCols, rn),
                                       quantized(p.xt, "nvfp4", false, kCols, kRows, rn)),
            0);
  EXPECT_GT(transposed_code_mismatches(quantized(p.x, "nvfp4", true, kRows, kCols, {false, true, 1}),
                                       quantized(p.xt, "nvfp4", true, kCols, kRows, {false, true, 2})),
            0);
}

// transpose_codes writes, byte for byte, what quantize writes for Xᵀ, where codes_transpose says so:
// 144 × 80 and 48 × 208 (rows past one 64-row strip and not a multiple of it, and the other way).
TEST(BlockQuant, TransposeCodesWritesWhatQuantizeWritesForTheTranspose) {
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{144, 80}, {48, 208}})
    for (const char* f : {"nvfp4", "fp8_e4m3", "fp8_e5m2"}) {
      SCOPED_TRACE(std::string(f) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      const bool tiles = std::string(f) == "nvfp4";
      const Pair p = random_pair(rows, cols);
      const cpu::QuantOptions rn{false, false, 1};
      const auto q = quantized(p.x, f, tiles, rows, cols, rn);
      ASSERT_TRUE(cpu::codes_transpose(q, rn));
      const auto want = quantized(p.xt, f, tiles, cols, rows, rn);
      cpu::QuantizedTensor got = allocated(f, tiles, cols, rows);
      std::memset(got.values.data(), 0xff, got.values.bytes());
      std::memset(got.scales.data(), 0xff, got.scales.bytes());
      got.tensor_scale = -1.0f;
      cpu::transpose_codes(q, got);
      const auto bytes = [](const cpu::Buffer& b) {
        const auto* c = static_cast<const std::uint8_t*>(b.data());
        return std::vector<std::uint8_t>(c, c + b.bytes());
      };
      EXPECT_EQ(bytes(got.values), bytes(want.values));
      if (tiles) {
        EXPECT_EQ(bytes(got.scales), bytes(want.scales));
      }
      EXPECT_EQ(got.tensor_scale, want.tensor_scale);
    }
  // Not where the copy takes the RHT or SR, nor for 1×16 or MXFP4 blocks.
  cpu::QuantizedTensor q;
  q.precision = "nvfp4", q.block2d = true;
  EXPECT_FALSE(cpu::codes_transpose(q, {true, false, 1}));
  EXPECT_FALSE(cpu::codes_transpose(q, {false, true, 1}));
  q.block2d = false;
  EXPECT_FALSE(cpu::codes_transpose(q, {}));
  q.precision = "mxfp4";
  EXPECT_FALSE(cpu::codes_transpose(q, {}));
  q.precision = "fp8_e5m2";
  EXPECT_TRUE(cpu::codes_transpose(q, {}));
}

}  // namespace
