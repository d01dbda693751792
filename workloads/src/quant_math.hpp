// FP64 definitions of the quantizers (NVFP4 1×16 / 16×16, MXFP4 1×32, FP8 per tensor, optional
// random Hadamard transform): what the quantize/dequantize references compute and what every
// backend's output is compared with. Tensors are [rows, cols], blocks run along cols (= K).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rafter::workloads::detail {

struct QuantSpec {
  std::string precision;  // nvfp4, mxfp4, fp8_e4m3, fp8_e5m2
  std::int64_t rows = 0, cols = 0;
  bool block2d = false;   // NVFP4 16×16 tiles (weights) instead of 1×16
  bool rht = false;       // random Hadamard transform over each 16 values along cols first
};

// The random signs of the 16-point Hadamard transform (fixed: reference and kernels agree).
inline constexpr int kRhtSigns[16] = {1, -1, 1, 1, -1, 1, -1, -1, 1, 1, -1, 1, -1, -1, 1, -1};
inline int rht_sign(int i) { return kRhtSigns[i & 15]; }
// In place: x[r, 16j .. 16j+15] ← H16·diag(sign)·x / 4 (orthonormal).
void apply_rht(std::vector<double>& x, std::int64_t rows, std::int64_t cols);

// Quantize-dequantize in FP64 with round-to-nearest-even: the exact values a correct kernel
// reproduces. `x` must already hold the transformed values when spec.rht.
std::vector<double> quantize_dequantize(const QuantSpec& spec, const std::vector<double>& x);

// Elements per scale block along cols (16, 32; 0 for per-tensor FP8), and rows per block (16 for 2D).
int block_cols(const QuantSpec& spec);

}  // namespace rafter::workloads::detail
