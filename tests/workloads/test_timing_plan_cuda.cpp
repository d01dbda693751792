// The GPU timing policy (no GPU needed): cold cache by default with events around each launch, warm on
// request, and enough launches per graph sample for the events to resolve the time.
#include <gtest/gtest.h>

#if RAFTER_HAVE_CUDA
#include "../../workloads/cuda/timing_plan.hpp"

using rafter::workloads::cuda::plan_gpu_timing;

TEST(TimingPlanCuda, ColdByDefaultWithEventsAroundEachLaunch) {
  auto p = plan_gpu_timing(100e-6, false);
  EXPECT_TRUE(p.flush_l2);
  EXPECT_FALSE(p.subtract_flush);  // events exclude the flush; subtraction is the fallback only
  EXPECT_TRUE(p.use_graph);
  // 2 ms per sample over (100 µs + 35 µs flush) per launch: 15 launches.
  EXPECT_EQ(p.launches_per_sample, 15);
  EXPECT_NE(p.method.find("event"), std::string::npos);
}

TEST(TimingPlanCuda, WarmCacheKeepsL2AndCountsNoFlush) {
  auto p = plan_gpu_timing(100e-6, true);
  EXPECT_FALSE(p.flush_l2);
  EXPECT_FALSE(p.subtract_flush);
  EXPECT_EQ(p.launches_per_sample, 20);
  EXPECT_NE(p.method.find("warm"), std::string::npos);
}

TEST(TimingPlanCuda, LaunchesPerSampleStayBetweenOneAndThirtyTwo) {
  EXPECT_EQ(plan_gpu_timing(50e-3, false).launches_per_sample, 1);  // long operator: one per sample
  EXPECT_EQ(plan_gpu_timing(1e-6, true).launches_per_sample, 32);   // microsecond operator: capped
  EXPECT_EQ(plan_gpu_timing(0, true).launches_per_sample, 8);       // unknown estimate
  EXPECT_EQ(plan_gpu_timing(-1, true).launches_per_sample, 8);
}

#else
TEST(TimingPlanCuda, NeedsTheCudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
