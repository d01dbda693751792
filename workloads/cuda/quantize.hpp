// Launchers of the quantizers (kernels_quant.cu) behind "cuda.quant": BF16 → NVFP4 (1×16 or 16×16
// E4M3 scales, FP32 tensor scale), MXFP4 (E8M0 per 1×32), FP8 E4M3/E5M2 (FP32 tensor scale), with
// an optional 16-point random Hadamard transform along cols and stochastic rounding; and the
// dequantizers back to BF16 (or FP32, for checks). Round-to-nearest results are bit-identical with
// the CPU encoder (workloads/cpu/block_quant_avx2.cpp): the same fp32 operations in the same order.
// Layouts, as the CPU's QuantizedTensor: codes row-major (FP4: two per byte, low nibble first;
// FP8: one byte each); scales [rows, cols/block], or [rows/16, cols/16] for 16×16 tiles.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace rafter::workloads::cuda {

enum class QuantFormat { Nvfp4, Nvfp4Tile16, Mxfp4, Fp8E4m3, Fp8E5m2 };

// What the quantized tensor lives in; tensor_scale is a device float (NVFP4: amax / (448·6),
// FP8: amax / largest finite), unused by MXFP4.
struct QuantTensorRef {
  std::uint8_t* codes = nullptr;
  std::uint8_t* scales = nullptr;
  float* tensor_scale = nullptr;
};

struct QuantLaunchOptions {
  bool rht = false;
  bool stochastic = false;
  std::uint64_t seed = 1;  // stochastic rounding: Philox key; the counter is the element's index
};

std::size_t quant_code_bytes(QuantFormat f, std::int64_t rows, std::int64_t cols);
std::size_t quant_scale_bytes(QuantFormat f, std::int64_t rows, std::int64_t cols);
// Per-tensor amax partials and the counter that elects the last CTA; zero it once before the
// first call (the last CTA zeroes the counter again).
std::size_t quant_workspace_bytes();

// Two kernels where the format has a tensor scale (amax over the transformed values, then the
// encoding); one for MXFP4. cols must be a multiple of the block (16, 32; 16 with rht; any for FP8).
// `transposed` (optional): the column-wise copy Xᵀ [cols, rows], blocks along rows, written by the
// same encoding pass (64×64 tiles through shared memory); o.rht then transforms that copy only,
// with its own tensor scale, and the row-wise copy is not transformed. rows and cols must then be
// multiples of 16 (32 for MXFP4); without the RHT both copies share one tensor scale value.
void quantize_bf16(const __nv_bfloat16* x, QuantTensorRef q, std::int64_t rows, std::int64_t cols,
                   QuantFormat f, const QuantLaunchOptions& o, void* workspace, cudaStream_t stream,
                   const QuantTensorRef* transposed = nullptr);
void dequantize_to_bf16(QuantTensorRef q, __nv_bfloat16* out, std::int64_t rows, std::int64_t cols,
                        QuantFormat f, cudaStream_t stream);
void dequantize_to_f32(QuantTensorRef q, float* out, std::int64_t rows, std::int64_t cols, QuantFormat f,
                       cudaStream_t stream);

}  // namespace rafter::workloads::cuda
