// Host-side FP4 encoding of check data (see fp4_host.hpp).
#include "fp4_host.hpp"

#include <algorithm>
#include <cmath>

#include "rafter/workloads/formats.hpp"

namespace rafter::workloads::cuda {
namespace {
std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }
}  // namespace

Fp4Host encode_fp4(const detail::QuantSpec& s, const std::vector<double>& x) {
  const bool nv = s.precision == "nvfp4";
  const std::int64_t bc = detail::block_cols(s), br = s.block2d ? 16 : 1;
  float amax = 0;
  for (double v : x) amax = std::max(amax, static_cast<float>(std::fabs(v)));
  Fp4Host h;
  h.tensor_scale = nv && amax > 0 ? amax / (448.0f * 6.0f) : 1.0f;
  h.codes.assign(sz(s.rows * s.cols / 2), 0);
  h.scales.assign(sz(s.rows * s.cols / bc), 0);
  for (std::int64_t r0 = 0; r0 < s.rows; r0 += br)
    for (std::int64_t c0 = 0; c0 < s.cols; c0 += bc) {
      float bamax = 0;
      for (std::int64_t r = r0; r < r0 + br; ++r)
        for (std::int64_t c = c0; c < c0 + bc; ++c) bamax = std::max(bamax, static_cast<float>(std::fabs(x[sz(r * s.cols + c)])));
      float scale = 0;
      std::uint8_t scale_bits = 0;
      if (nv) {
        const double e4m3 = numfmt::round_to(bamax / 6.0f / h.tensor_scale, numfmt::kE4M3);
        scale = static_cast<float>(e4m3) * h.tensor_scale;
        scale_bits = numfmt::encode_small(e4m3, numfmt::kE4M3);
      } else {
        const double pow2 = numfmt::mxfp4_block_scale(bamax);
        scale = static_cast<float>(pow2);
        scale_bits = static_cast<std::uint8_t>(std::ilogb(pow2) + 127);
      }
      for (std::int64_t r = r0; r < r0 + br; ++r) {
        h.scales[sz(r * (s.cols / bc) + c0 / bc)] = scale_bits;
        for (std::int64_t c = c0; c < c0 + bc; ++c) {
          const auto i = sz(r * s.cols + c);
          const double q = scale > 0 ? numfmt::round_to(numfmt::fp4_quotient(static_cast<float>(x[i]), scale),
                                                        numfmt::kE2M1)
                                     : 0.0;
          h.codes[i / 2] |= static_cast<std::uint8_t>(numfmt::encode_small(q, numfmt::kE2M1) << (4 * (i % 2)));
        }
      }
    }
  return h;
}

}  // namespace rafter::workloads::cuda
