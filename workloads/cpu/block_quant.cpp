// QuantizedTensor's layout, and the block quantizers' entry points: each calls the build of
// block_quant_avx2.cpp that fits this CPU (AVX2 + FMA, or baseline x86-64).
#include "block_quant.hpp"

#include <algorithm>

namespace rafter::workloads::cpu {

std::int64_t QuantizedTensor::block_cols() const {
  return precision == "nvfp4" ? 16 : precision == "mxfp4" ? 32 : cols;
}
std::int64_t QuantizedTensor::scale_count() const {
  if (precision != "nvfp4" && precision != "mxfp4") return 0;
  return (rows / block_rows()) * (cols / block_cols());
}
void QuantizedTensor::allocate() {
  const bool fp8 = precision == "fp8_e4m3" || precision == "fp8_e5m2";
  values = Buffer(std::size_t(fp8 ? rows * cols : (rows * cols + 1) / 2));
  scales = Buffer(std::size_t(std::max<std::int64_t>(scale_count(), 1)));
  if (precision == "nvfp4" && !block2d && cols % 256 == 0) block_amax = Buffer(std::size_t(rows * cols / 16 * 2));
}

void quantize(const float* x, QuantizedTensor& q, const QuantOptions& o) {
  cpu_has_avx2() ? avx2_build::quantize(x, q, o) : baseline_build::quantize(x, q, o);
}
void quantize(const bf16* x, QuantizedTensor& q, const QuantOptions& o) {
  cpu_has_avx2() ? avx2_build::quantize(x, q, o) : baseline_build::quantize(x, q, o);
}
void dequantize(const QuantizedTensor& q, bf16* out) {
  cpu_has_avx2() ? avx2_build::dequantize(q, out) : baseline_build::dequantize(q, out);
}
void dequantize(const QuantizedTensor& q, float* out) {
  cpu_has_avx2() ? avx2_build::dequantize(q, out) : baseline_build::dequantize(q, out);
}

}  // namespace rafter::workloads::cpu
