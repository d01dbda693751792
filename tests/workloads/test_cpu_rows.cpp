// The AVX-512 row kernels' own paths that the operator checks' random data does not reach: the
// one-pass log-sum-exp and softmax of bf16 rows must stay exact when the row's max lies far above
// the first values they start from (past ~88 above them the second pass against the true max
// takes over).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "../../workloads/cpu/avx512_kernels.hpp"
#include "rafter/workloads/backend.hpp"
#include "rafter/workloads/suite.hpp"

using namespace rafter::workloads::cpu;

namespace {

bf16 to_bf16(float x) {
  bf16 b;
  st(&b, 0, x);
  return b;
}

}  // namespace

TEST(CpuRows, OnePassLogSumExpIsExactWhereverTheMaxIs) {
  if (!avx512::available()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-5.0f, 5.0f);
  for (const std::int64_t n : {64, 1000, 32003})
    for (const float jump : {0.0f, 30.0f, 59.0f, 61.0f, 90.0f, 200.0f}) {
      std::vector<bf16> z(static_cast<std::size_t>(n));
      for (auto& v : z) v = to_bf16(u(rng));
      z[static_cast<std::size_t>(n - 7)] = to_bf16(5.0f + jump);  // the max, near the end
      double mx = -INFINITY, s = 0;
      for (std::int64_t i = 0; i < n; ++i) mx = std::max(mx, double(ld(z.data(), i)));
      for (std::int64_t i = 0; i < n; ++i) s += std::exp(double(ld(z.data(), i)) - mx);
      const double want = std::log(s) + mx;
      float got_mx = 0;
      const float got = avx512::logsumexp(z.data(), n, &got_mx, nullptr);
      SCOPED_TRACE("n=" + std::to_string(n) + " jump=" + std::to_string(jump));
      EXPECT_NEAR(got, want, 1e-5 * std::fabs(want) + 1e-5);
      // the reference it summed against: the row's max, or a value below it (the first values' max)
      EXPECT_LE(double(got_mx), mx);
      EXPECT_LT(double(ld(z.data(), n - 7)) - double(got_mx), 88.0);  // e^(z − ref) stays finite
    }
}

TEST(CpuRows, OnePassSoftmaxIsExactWhereverTheMaxIs) {
  if (!avx512::available()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-5.0f, 5.0f);
  const std::int64_t rows = 3;
  for (const std::int64_t n : {64, 1000, 4104})
    for (const float jump : {0.0f, 59.0f, 61.0f, 150.0f}) {
      std::vector<bf16> x(static_cast<std::size_t>(rows * n)), y(x.size());
      std::vector<float> scratch(static_cast<std::size_t>(n + 16));
      for (auto& v : x) v = to_bf16(u(rng));
      x[static_cast<std::size_t>(n + n - 3)] = to_bf16(5.0f + jump);  // row 1's max, in its tail
      avx512::softmax_rows(x.data(), y.data(), rows, n, scratch.data());
      double worst = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        double mx = -INFINITY, s = 0;
        for (std::int64_t i = 0; i < n; ++i) mx = std::max(mx, double(ld(x.data(), r * n + i)));
        for (std::int64_t i = 0; i < n; ++i) s += std::exp(double(ld(x.data(), r * n + i)) - mx);
        for (std::int64_t i = 0; i < n; ++i) {
          const double want = std::exp(double(ld(x.data(), r * n + i)) - mx) / s;
          worst = std::max(worst, std::fabs(double(ld(y.data(), r * n + i)) - want) / std::max(want, 1e-30));
        }
      }
      EXPECT_LT(worst, 8e-3) << "n=" << n << " jump=" << jump;  // bf16 output: half-ulp 2^-9 plus the exp's 4e-6
    }
}

// RMSNorm backward in bf16 takes rows two at a time per thread (an odd count leaves one alone)
// on rows of 32k values; its check against the FP64 reference must hold for odd and even blocks.
TEST(CpuRows, RmsNormBackwardPairsOfRowsMatchTheReference) {
  using namespace rafter::workloads;
  ExecContext ctx;
  ctx.device = "cpu";
  ctx.policy = rafter::RepeatPolicy{0, 1, 1, 0.0, 0.0};
  ctx.warm_cache = true;
  const auto& op = OperatorRegistry::instance().get("rmsnorm");
  for (const std::int64_t tokens : {1, 3, 5, 8})
    for (const std::int64_t hidden : {96, 256}) {
      const auto inst = normalize_instance(op, {"rmsnorm", "", "bwd", {{"tokens", tokens}, {"hidden", hidden}}, "bf16", 1});
      const auto r = profile_instance(inst, ctx, {});
      EXPECT_TRUE(r.check.passed) << tokens << "x" << hidden << ": error " << r.check.error;
    }
}
