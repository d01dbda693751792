// The hypervisor's steal from /proc/stat: parsing, the share over an interval, and unknowns.
#include <gtest/gtest.h>

#include <chrono>

#include "rafter/collector/environment.hpp"

namespace rafter {
namespace {

// user nice system idle iowait irq softirq steal guest guest_nice
constexpr const char* kBefore =
    "cpu  1000 10 200 5000 30 5 15 20 400 0\ncpu0 500 5 100 2500 15 2 7 10 200 0\n";
constexpr const char* kAfter =
    "cpu  1700 10 300 9000 30 5 45 90 400 0\ncpu0 850 5 150 4500 15 2 22 45 200 0\n";

TEST(CpuSteal, ParsesTheAllCpuLine) {
  const CpuTicks t = parse_cpu_ticks(kBefore);
  ASSERT_TRUE(t.known);
  EXPECT_DOUBLE_EQ(t.busy, 1000 + 10 + 200 + 5 + 15);  // idle, iowait, steal and guest are not busy
  EXPECT_DOUBLE_EQ(t.steal, 20);
}

TEST(CpuSteal, ShareOfTheTimeTheCpusWantedToRun) {
  // busy grew by 830, steal by 70: 69 / 900 of the wanted time (one tick off for the rounding); the
  // 4000 idle ticks do not dilute it.
  EXPECT_NEAR(steal_fraction(parse_cpu_ticks(kBefore), parse_cpu_ticks(kAfter)), 69.0 / 900.0, 1e-12);
  const CpuTicks one_stolen{10, 21, true};  // 10 busy ticks, 1 stolen: may be a microsecond
  EXPECT_DOUBLE_EQ(steal_fraction(parse_cpu_ticks("cpu  0 0 0 0 0 0 0 20\n"), one_stolen), 0);
  EXPECT_DOUBLE_EQ(steal_fraction(parse_cpu_ticks(kBefore), parse_cpu_ticks(kBefore)), -1);  // no tick passed
}

TEST(CpuSteal, UnreadableOrOldFormatsAreUnknown) {
  EXPECT_FALSE(parse_cpu_ticks("").known);
  EXPECT_FALSE(parse_cpu_ticks("cpu0 1 2 3 4 5 6 7 8\n").known);  // no all-CPU line first
  EXPECT_FALSE(parse_cpu_ticks("cpu  1 2 3 4 5 6 7\n").known);    // before Linux 2.6.11: no steal field
  EXPECT_FALSE(parse_cpu_ticks("cpu  1 2 x 4 5 6 7 8\n").known);  // not a number
  EXPECT_DOUBLE_EQ(steal_fraction(CpuTicks{}, parse_cpu_ticks(kAfter)), -1);
  EXPECT_DOUBLE_EQ(steal_fraction(parse_cpu_ticks(kAfter), parse_cpu_ticks(kBefore)),
                   -1);  // counters went back
}

TEST(CpuSteal, ThisHostsTicksReadAndAdvance) {
  const CpuTicks a = read_cpu_ticks();
#ifdef __linux__
  ASSERT_TRUE(a.known);
  EXPECT_GE(a.busy, 0);
  EXPECT_GE(a.steal, 0);
#endif
  // Busy until a tick passes (ticks are 1/100 s; give up after 5 s, which fails below).
  double f = -1;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  volatile double x = 0;
  while (f < 0 && std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 1'000'000; ++i) x = x + 1;
    f = steal_fraction(a, read_cpu_ticks());
  }
#ifdef __linux__
  EXPECT_GE(f, 0);
  EXPECT_LE(f, 1);
#endif
}

}  // namespace
}  // namespace rafter
