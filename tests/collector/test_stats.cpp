// Statistics: median, min, max, spread, noisy flag, transforms.
#include <gtest/gtest.h>

#include <vector>

#include "rafter/collector/error.hpp"
#include "rafter/collector/stats.hpp"
#include "rafter/collector/timing.hpp"

using namespace rafter;

TEST(Stats, OddCountMedianMinMax) {
  std::vector<double> v{5, 1, 3, 2, 4};
  Summary s = summarize(v);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_EQ(s.samples, 5u);
  EXPECT_NEAR(s.stddev, 1.5811388, 1e-6);
  EXPECT_DOUBLE_EQ(s.spread, 4.0 / 3.0);
  EXPECT_TRUE(s.noisy);
}

TEST(Stats, EvenCountMedianIsMeanOfMiddlePair) {
  std::vector<double> v{10, 10.2, 10.1, 10.3};
  Summary s = summarize(v);
  EXPECT_DOUBLE_EQ(s.median, 10.15);
  EXPECT_FALSE(s.noisy);  // 3% spread
  EXPECT_TRUE(summarize(v, 0.01).noisy);
}

TEST(Stats, EmptyThrows) { EXPECT_THROW(summarize(std::vector<double>{}), InputError); }

TEST(Stats, TransformToRateSwapsMinAndMax) {
  std::vector<double> seconds{1.0, 2.0, 4.0};
  Summary s = transform(summarize(seconds), [](double t) { return 8.0 / t; });
  EXPECT_DOUBLE_EQ(s.median, 4.0);
  EXPECT_DOUBLE_EQ(s.min, 2.0);
  EXPECT_DOUBLE_EQ(s.max, 8.0);
  EXPECT_DOUBLE_EQ(s.spread, 1.5);
}

TEST(Timing, PolicyBoundsTheSampleCount) {
  RepeatPolicy p{1, 3, 7, 10.0, 10.0};  // wants 10 s but may take at most 7 samples
  int calls = 0, flushes = 0;
  Summary s = measure_seconds(p, [&] { ++calls; }, [&] { ++flushes; });
  EXPECT_EQ(s.samples, 7u);
  EXPECT_EQ(calls, 8);  // one warm-up
  EXPECT_EQ(flushes, 8);
  RepeatPolicy q{0, 4, 100, 0.0, 0.0};  // satisfied immediately after min_repeats
  EXPECT_EQ(measure_seconds(q, [] {}).samples, 4u);
}

TEST(Timing, MeasuresElapsedTime) {
  RepeatPolicy p{0, 3, 3, 0, 1};
  Summary s = measure_seconds(p, [] {
    const double t0 = now_seconds();
    while (now_seconds() - t0 < 0.002) {
    }
  });
  EXPECT_GE(s.min, 0.002);
  EXPECT_LT(s.median, 0.1);
}
