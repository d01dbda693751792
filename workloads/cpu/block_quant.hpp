// Fast fp32 block quantizers of the CPU backend (NVFP4 1×16 / 16×16, MXFP4 1×32, FP8 per tensor,
// optional 16-point random Hadamard transform and stochastic rounding) and their dequantizers.
// They implement exactly the FP64 definitions in workloads/src/quant_math.cpp, in fp32.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cpu_kernel.hpp"

namespace rafter::workloads::cpu {

struct QuantizedTensor {
  std::string precision;  // nvfp4 | mxfp4 | fp8_e4m3 | fp8_e5m2
  std::int64_t rows = 0, cols = 0;
  bool block2d = false;
  Buffer values;               // fp4: two E2M1 codes per byte (low nibble first); fp8: one byte each
  Buffer scales;               // nvfp4: E4M3 bytes; mxfp4: E8M0 bytes (biased exponent)
  float tensor_scale = 1.0f;   // nvfp4 and fp8
  Buffer block_amax;           // nvfp4 1×16, cols % 256 == 0: the blocks' |x| maxima (bf16 bits),
                               // scratch of the AVX-512 quantizer's two passes
  std::int64_t block_cols() const;
  std::int64_t block_rows() const { return block2d ? 16 : 1; }
  std::int64_t scale_count() const;
  void allocate();
};

struct QuantOptions {
  bool rht = false;
  bool stochastic = false;
  std::uint64_t seed = 1;
};

// x is [rows, cols] row-major, fp32 or bf16; q must have precision/rows/cols/block2d set.
void quantize(const float* x, QuantizedTensor& q, const QuantOptions& o);
void quantize(const bf16* x, QuantizedTensor& q, const QuantOptions& o);
// Where the column-wise copy's codes are the row-wise copy's transposed: 16×16 tiles (the same values,
// maximum and scale in Xᵀ) and FP8 (one tensor scale), with neither the RHT nor stochastic rounding.
// The GPU's both-copies kernel relies on the same (codes_transpose in workloads/cuda/kernels_quant.cu).
bool codes_transpose(const QuantizedTensor& q, const QuantOptions& o);
// qt (allocated as q's transpose: rows and cols swapped) = the codes, tile scales and tensor scale of
// q transposed: what quantize writes for Xᵀ where codes_transpose(q, o) holds. rows and cols are
// multiples of 16.
void transpose_codes(const QuantizedTensor& q, QuantizedTensor& qt);
// Writes [rows, cols] bf16 values.
void dequantize(const QuantizedTensor& q, bf16* out);
void dequantize(const QuantizedTensor& q, float* out);  // exact decoded values (checks)

// The two builds of block_quant_avx2.cpp behind the four functions above (block_quant.cpp picks
// by cpu_has_avx2()); call those, not these.
#define RAFTER_BLOCK_QUANT_ENTRY_POINTS                                            \
  void quantize(const float* x, QuantizedTensor& q, const QuantOptions& o); \
  void quantize(const bf16* x, QuantizedTensor& q, const QuantOptions& o);  \
  void dequantize(const QuantizedTensor& q, bf16* out);                     \
  void dequantize(const QuantizedTensor& q, float* out);
namespace avx2_build {
RAFTER_BLOCK_QUANT_ENTRY_POINTS
}
namespace baseline_build {
RAFTER_BLOCK_QUANT_ENTRY_POINTS
}
#undef RAFTER_BLOCK_QUANT_ENTRY_POINTS

}  // namespace rafter::workloads::cpu
