// FP64 quantizer definitions (see quant_math.hpp).
#include "quant_math.hpp"

#include <algorithm>
#include <cmath>

#include "rafter/workloads/formats.hpp"

namespace rafter::workloads::detail {

void apply_rht(std::vector<double>& x, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c0 = 0; c0 + 16 <= cols; c0 += 16) {
      double in[16], out[16];
      for (int i = 0; i < 16; ++i) in[i] = x[r * cols + c0 + i] * rht_sign(i);
      for (int i = 0; i < 16; ++i) {
        double acc = 0;
        for (int j = 0; j < 16; ++j) acc += (__builtin_popcount(unsigned(i & j)) & 1 ? -in[j] : in[j]);
        out[i] = acc / 4.0;
      }
      for (int i = 0; i < 16; ++i) x[r * cols + c0 + i] = out[i];
    }
}

int block_cols(const QuantSpec& spec) {
  if (spec.precision == "nvfp4") return 16;
  if (spec.precision == "mxfp4") return 32;
  return 0;
}

namespace {

double amax_of(const std::vector<double>& x, std::int64_t begin_row, std::int64_t end_row, std::int64_t begin_col,
               std::int64_t end_col, std::int64_t cols) {
  double a = 0;
  for (std::int64_t r = begin_row; r < end_row; ++r)
    for (std::int64_t c = begin_col; c < end_col; ++c) a = std::max(a, std::fabs(x[r * cols + c]));
  return a;
}

}  // namespace

// Scales and quotients are computed in fp32, as the kernels (CPU and GPU) compute them: with
// inputs on the BF16 grid, exact ties onto the FP8/FP4 grid are common, and a quotient computed in
// fp64 instead would round some of them the other way.
std::vector<double> quantize_dequantize(const QuantSpec& s, const std::vector<double>& x) {
  std::vector<double> y(x.size());
  const float tensor_amax = static_cast<float>(amax_of(x, 0, s.rows, 0, s.cols, s.cols));
  if (s.precision == "fp8_e4m3" || s.precision == "fp8_e5m2") {
    const auto& f = s.precision == "fp8_e4m3" ? numfmt::kE4M3 : numfmt::kE5M2;
    const float scale = tensor_amax > 0 ? tensor_amax / static_cast<float>(f.max_finite) : 1.0f;
    for (std::size_t i = 0; i < x.size(); ++i)
      y[i] = numfmt::round_to(static_cast<float>(x[i]) / scale, f) * scale;
    return y;
  }
  const std::int64_t bc = block_cols(s), br = s.block2d ? 16 : 1;
  const float ts = tensor_amax > 0 ? tensor_amax / (448.0f * 6.0f) : 1.0f;
  for (std::int64_t r0 = 0; r0 < s.rows; r0 += br)
    for (std::int64_t c0 = 0; c0 < s.cols; c0 += bc) {
      const float bamax = static_cast<float>(amax_of(x, r0, r0 + br, c0, c0 + bc, s.cols));
      const float scale = s.precision == "nvfp4"
                              ? static_cast<float>(numfmt::round_to(bamax / 6.0f / ts, numfmt::kE4M3)) * ts
                              : static_cast<float>(numfmt::mxfp4_block_scale(bamax));
      for (std::int64_t r = r0; r < r0 + br; ++r)
        for (std::int64_t c = c0; c < c0 + bc; ++c) {
          const auto i = r * s.cols + c;
          y[i] = scale > 0 ? numfmt::round_to(numfmt::fp4_quotient(static_cast<float>(x[i]), scale),
                                              numfmt::kE2M1) *
                                 double(scale)
                           : 0.0;
        }
    }
  return y;
}

}  // namespace rafter::workloads::detail
