// cuBLASLt's layout of 1D block scales (VEC16_UE4M3 for NVFP4, VEC32_UE8M0 for MXFP4), the
// "1D Block Scaling Factors Layout" of the cuBLAS docs: a [rows, k/block] scale matrix (rows the
// operand's outer dimension, the blocks along K) is padded to rows a multiple of 128 and scale
// columns a multiple of 4, cut into 128×4 tiles of 512 bytes stored tile row by tile row (the
// column tiles of a row of tiles contiguous), and inside a tile row r, column c sits at
// (r % 32)·16 + (r / 32)·4 + c. rafter's quantizers write scales row-major [rows, k/block]; the
// native FP4 GEMM (workloads/cuda/fp4_native_backend.cpp) converts them with this. No CUDA:
// unit-tested in the CPU-only build (tests/workloads/test_block_scale_layout.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rafter::workloads::detail {

struct BlockScaleLayout {
  std::int64_t rows = 0, cols = 0;  // the scale matrix: operand rows × (k / block)

  std::int64_t padded_rows() const { return (rows + 127) / 128 * 128; }
  std::int64_t padded_cols() const { return (cols + 3) / 4 * 4; }
  // Bytes of the tiled tensor, padding included (what cuBLASLt reads).
  std::size_t bytes() const { return static_cast<std::size_t>(padded_rows() * padded_cols()); }
  // Byte offset of scale (row, col) in the tiled tensor; row < padded_rows(), col < padded_cols().
  std::size_t offset(std::int64_t row, std::int64_t col) const {
    const std::int64_t tile = (row / 128) * (padded_cols() / 4) + col / 4;
    const std::int64_t r = row % 128;
    return static_cast<std::size_t>(tile * 512 + (r % 32) * 16 + (r / 32) * 4 + col % 4);
  }
};

// Row-major [rows, cols] scales → the tiled layout; the padding is filled with `pad` (0: a zero
// scale, so padded rows or K blocks contribute nothing).
std::vector<std::uint8_t> to_block_scale_layout(const std::vector<std::uint8_t>& row_major, std::int64_t rows,
                                                std::int64_t cols, std::uint8_t pad = 0);
// The inverse, dropping the padding.
std::vector<std::uint8_t> from_block_scale_layout(const std::vector<std::uint8_t>& tiled, std::int64_t rows,
                                                  std::int64_t cols);

}  // namespace rafter::workloads::detail
