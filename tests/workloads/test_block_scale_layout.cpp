// cuBLASLt's tiled layout of 1D block scales (workloads/src/block_scale_layout.hpp), which the native
// FP4 GEMM hands to cuBLASLt on Blackwell: padding, positions from the documented formula worked by
// hand, a bijection onto the tiled tensor, and the round trip. No GPU needed (CPU-only build too).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "../../workloads/src/block_scale_layout.hpp"
#include "rafter/collector/error.hpp"

using rafter::workloads::detail::BlockScaleLayout;
using rafter::workloads::detail::from_block_scale_layout;
using rafter::workloads::detail::to_block_scale_layout;

TEST(BlockScaleLayout, PadsRowsTo128AndColumnsTo4) {
  const BlockScaleLayout one{1, 1};
  EXPECT_EQ(one.padded_rows(), 128);
  EXPECT_EQ(one.padded_cols(), 4);
  EXPECT_EQ(one.bytes(), 512u);  // one tile
  const BlockScaleLayout exact{256, 8};
  EXPECT_EQ(exact.padded_rows(), 256);
  EXPECT_EQ(exact.padded_cols(), 8);
  EXPECT_EQ(exact.bytes(), 2048u);
  // Llama-2 7B fwd at decode: 16 tokens × k = 4096 in NVFP4 (256 scales a row).
  const BlockScaleLayout decode{16, 4096 / 16};
  EXPECT_EQ(decode.padded_rows(), 128);
  EXPECT_EQ(decode.bytes(), 128u * 256u);
  const BlockScaleLayout odd{200, 10};
  EXPECT_EQ(odd.padded_rows(), 256);
  EXPECT_EQ(odd.padded_cols(), 12);
  EXPECT_EQ(odd.bytes(), 3072u);
}

TEST(BlockScaleLayout, PositionsInsideATile) {
  // offset = (r % 32)·16 + (r / 32)·4 + c inside a 128×4 tile.
  const BlockScaleLayout l{128, 4};
  EXPECT_EQ(l.offset(0, 0), 0u);
  EXPECT_EQ(l.offset(0, 1), 1u);
  EXPECT_EQ(l.offset(0, 3), 3u);
  EXPECT_EQ(l.offset(32, 0), 4u);  // rows 0, 32, 64, 96 share a 16-byte line
  EXPECT_EQ(l.offset(64, 0), 8u);
  EXPECT_EQ(l.offset(96, 3), 15u);
  EXPECT_EQ(l.offset(1, 0), 16u);     // the next line: row 1
  EXPECT_EQ(l.offset(33, 2), 22u);    // 1·16 + 1·4 + 2
  EXPECT_EQ(l.offset(127, 3), 511u);  // 31·16 + 3·4 + 3: the tile's last byte
}

TEST(BlockScaleLayout, TilesFollowEachOtherAlongKFirst) {
  const BlockScaleLayout l{200, 10};  // 2 tile rows × 3 tile columns
  EXPECT_EQ(l.offset(0, 4), 512u);    // second tile of the first tile row
  EXPECT_EQ(l.offset(0, 8), 1024u);
  EXPECT_EQ(l.offset(128, 0), 1536u);  // tile row 1 starts after the 3 tiles of row 0
  EXPECT_EQ(l.offset(130, 5), 2081u);  // tile 4: 2048 + 2·16 + 0·4 + 1
  EXPECT_EQ(l.offset(199, 9), 2681u);  // tile 5: 2560 + 7·16 + 2·4 + 1
}

TEST(BlockScaleLayout, EveryPaddedPositionHasItsOwnByte) {
  for (const BlockScaleLayout l :
       {BlockScaleLayout{1, 1}, BlockScaleLayout{130, 6}, BlockScaleLayout{384, 16}}) {
    std::vector<int> hits(l.bytes(), 0);
    for (std::int64_t r = 0; r < l.padded_rows(); ++r)
      for (std::int64_t c = 0; c < l.padded_cols(); ++c) {
        const std::size_t o = l.offset(r, c);
        ASSERT_LT(o, l.bytes());
        ++hits[o];
      }
    for (std::size_t o = 0; o < hits.size(); ++o) ASSERT_EQ(hits[o], 1) << "byte " << o;
  }
}

TEST(BlockScaleLayout, RoundTripAndPadding) {
  std::mt19937 rng(7);
  for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {16, 8}, {200, 10}, {257, 256}}) {
    std::vector<std::uint8_t> scales(std::size_t(rows * cols));
    for (auto& s : scales) s = static_cast<std::uint8_t>(1 + rng() % 255);  // never the pad value
    const auto tiled = to_block_scale_layout(scales, rows, cols, 0);
    const BlockScaleLayout l{rows, cols};
    ASSERT_EQ(tiled.size(), l.bytes());
    EXPECT_EQ(from_block_scale_layout(tiled, rows, cols), scales);
    std::size_t zeros = 0;
    for (std::uint8_t b : tiled) zeros += b == 0;
    EXPECT_EQ(zeros, l.bytes() - scales.size());  // the padding, and only it
    EXPECT_EQ(tiled[l.offset(rows - 1, cols - 1)], scales.back());
  }
}

TEST(BlockScaleLayout, WrongSizesAreRefused) {
  EXPECT_THROW(to_block_scale_layout(std::vector<std::uint8_t>(10), 4, 4), rafter::InputError);
  EXPECT_THROW(from_block_scale_layout(std::vector<std::uint8_t>(16), 4, 4), rafter::InputError);
}
