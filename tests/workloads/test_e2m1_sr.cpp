// The CUDA encoders' stochastic rounding onto E2M1 (workloads/cuda/e2m1_sr.hpp), on the host: over
// every one of the 65536 draws, against the exact rule (round up exactly when the draw's uniform
// u = 1 − (r + 1/2)/2^16 is under the value's fraction of its grid step), computed in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "../../workloads/cuda/e2m1_sr.hpp"

namespace {

using rafter::workloads::cuda::e2m1_code_sr;
using rafter::workloads::cuda::e2m1_sr_addend_high;
using rafter::workloads::cuda::e2m1_sr_addend_low;

constexpr double kGrid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

// The exact rule for a >= 0: the grid step holding a, the fraction p of it, up when u < p.
int exact_code(double a, std::uint32_t r) {
  if (!(a < 6)) return 7;  // 6 and above, infinity, NaN
  int lo = 0;
  while (kGrid[lo + 1] <= a) ++lo;
  const double p = (a - kGrid[lo]) / (kGrid[lo + 1] - kGrid[lo]);
  const double u = 1.0 - (r + 0.5) / 65536.0;
  return lo + (u < p ? 1 : 0);
}

std::uint32_t addend(std::uint32_t r) { return e2m1_sr_addend_low(r); }  // r in the low half

std::vector<float> values(float from, float to, int n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(from, to);
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(d(g));
  return v;
}

TEST(E2m1StochasticRounding, FromOneUpEveryDrawRoundsAsTheExactRule) {
  std::vector<float> as = values(1.0f, 8.0f, 200, 3);
  for (const double g : kGrid)
    if (g >= 1) {
      as.push_back(float(g));
      as.push_back(std::nextafter(float(g), 0.0f));
      as.push_back(std::nextafter(float(g), 100.0f));
    }
  as.insert(as.end(), {6.5f, 100.0f, std::numeric_limits<float>::max(),
                       std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()});
  for (const float a : as) {
    if (a < 1.0f) continue;  // nextafter(1, 0)
    int wrong = 0;
    for (std::uint32_t r = 0; r < 65536; ++r) wrong += e2m1_code_sr(a, addend(r)) != exact_code(a, r);
    EXPECT_EQ(wrong, 0) << "a = " << a;
  }
}

TEST(E2m1StochasticRounding, BelowOneDiffersOnlyWhereTheAddRoundsAndStaysUnbiased) {
  std::vector<float> as = values(0.0f, 1.0f, 200, 5);
  for (int e = 2; e < 40; e += 3) as.push_back(std::ldexp(0.7f, -e));  // down to tiny quotients
  as.insert(as.end(), {0.0f, 0.25f, 0.5f, std::nextafter(0.5f, 0.0f), std::nextafter(1.0f, 0.0f)});
  for (const float a : as) {
    const double step = 0.5, lo = a < 0.5f ? 0.0 : 0.5, p = (a - lo) / step;
    double mean = 0;
    int wrong = 0;
    for (std::uint32_t r = 0; r < 65536; ++r) {
      const int code = e2m1_code_sr(a, addend(r));
      mean += kGrid[code];
      if (code != exact_code(a, r)) {
        ++wrong;
        const double u = 1.0 - (r + 0.5) / 65536.0;
        EXPECT_LE(std::fabs(u - p), std::ldexp(1.0, -22))
            << "a = " << a << ", r = " << r;  // the add's rounding
      }
    }
    mean /= 65536;
    EXPECT_LE(wrong, 1) << "a = " << a;
    // The draws resolve 2^-16 of a step (2^-17 either way), the add's rounding 2^-22 more.
    EXPECT_LE(std::fabs(mean - a), (std::ldexp(1.0, -17) + std::ldexp(1.0, -22)) * step) << "a = " << a;
  }
}

TEST(E2m1StochasticRounding, AddendsAreTheWordsHalvesAsDraws) {
  std::mt19937 g(9);
  for (int i = 0; i < 1000; ++i) {
    const std::uint32_t w = g();
    EXPECT_EQ(e2m1_sr_addend_low(w), (w & 0xffffu) << 6);
    EXPECT_EQ(e2m1_sr_addend_high(w), (w >> 16) << 6);
    EXPECT_LT(e2m1_sr_addend_high(w) + 31u, 1u << 22);  // with its 31, never carries past bit 22 on its own
  }
}

}  // namespace
