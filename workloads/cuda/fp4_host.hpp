// The bits of quant_math.cpp's quantize_dequantize (NVFP4 1×16 / 16×16, MXFP4 1×32), with its fp32
// scale arithmetic, as the FP4 GEMM kernels read them (fp4_gemm.hpp): the check data of
// cuda.fp4_emulated. The GPU result is compared with the FP64 product of quantize_dequantize's
// values, never with this encoder's, so an encoder that disagreed with the definition would fail.
#pragma once
#include <cstdint>
#include <vector>

#include "../src/quant_math.hpp"

namespace rafter::workloads::cuda {

struct Fp4Host {
  std::vector<std::uint8_t> codes;   // [rows, cols/2]: two E2M1 codes per byte, low nibble first
  std::vector<std::uint8_t> scales;  // [rows, cols/block]: E4M3 (NVFP4) or E8M0 (MXFP4) bits
  float tensor_scale = 1.0f;         // NVFP4's FP32 tensor scale; 1 for MXFP4
};

// x is [spec.rows, spec.cols] row-major; spec.precision nvfp4 or mxfp4 (spec.rht is not applied).
Fp4Host encode_fp4(const detail::QuantSpec& spec, const std::vector<double>& x);

}  // namespace rafter::workloads::cuda
