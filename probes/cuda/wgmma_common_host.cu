// Host parts of the wgmma probes: operand decoders and the output check (see wgmma_common.cuh).
#include <algorithm>
#include <cmath>
#include <cstring>

#include <cuda_runtime.h>

#include "wgmma_common.cuh"

namespace rafter::probes::cuda {
namespace {

double from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// A float with `e_bits` exponent bits (bias 2^(e_bits-1)-1) and `m_bits` mantissa bits; `finite_max`
// tells e4m3 apart (no infinities, only S.1111.111 is NaN).
double decode_minifloat(unsigned v, int e_bits, int m_bits) {
  unsigned sign = v >> (e_bits + m_bits) & 1, exp = v >> m_bits & ((1u << e_bits) - 1);
  unsigned man = v & ((1u << m_bits) - 1);
  int bias = (1 << (e_bits - 1)) - 1;
  double mag = exp == 0 ? std::ldexp(double(man), 1 - bias - m_bits)
                        : std::ldexp(1.0 + double(man) / (1u << m_bits), int(exp) - bias);
  return sign ? -mag : mag;
}

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  std::vector<double> diff(want.size());
  for (std::size_t i = 0; i < want.size(); ++i) diff[i] = got[i] - want[i];
  double w = norm(want);
  double e = w > 0 ? norm(diff) / w : norm(diff);
  return std::isfinite(e) ? e : 1e30;  // NaN never passes
}

}  // namespace

double decode_bf16(std::uint16_t v) { return from_bits(std::uint32_t(v) << 16); }
double decode_fp16(std::uint16_t v) { return decode_minifloat(v, 5, 10); }
double decode_tf32(std::uint32_t v) { return from_bits(v & 0xFFFFE000u); }
double decode_e4m3(std::uint8_t v) { return decode_minifloat(v, 4, 3); }
double decode_e5m2(std::uint8_t v) { return decode_minifloat(v, 5, 2); }

nlohmann::json CheckResult::to_json() const {
  return {{"relative_error", error}, {"relative_error_sorted", sorted_error},
          {"tolerance", tolerance}, {"pass", pass}, {"reference", "float64 on the host"}};
}

CheckResult compare(const std::vector<double>& got, const std::vector<double>& want, double tolerance) {
  CheckResult r;
  r.tolerance = tolerance;
  r.error = got.size() == want.size() ? relative_error(got, want) : 1e30;
  std::vector<double> g = got, w = want;
  std::sort(g.begin(), g.end());
  std::sort(w.begin(), w.end());
  r.sorted_error = g.size() == w.size() ? relative_error(g, w) : 1e30;
  r.pass = r.error <= tolerance;
  return r;
}

}  // namespace rafter::probes::cuda
