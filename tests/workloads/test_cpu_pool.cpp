// The CPU backend's thread pool: jobs of different widths back to back, more workers than cores
// (as on a 16-core machine), every item done exactly once and no job left waiting. A worker with
// no share in one job that woke only after the next was published once ran that job's share twice
// and hung the caller.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "../../workloads/cpu/cpu_kernel.hpp"

using namespace rafter::workloads::cpu;

TEST(CpuPool, JobsOfEveryWidthRunEachItemOnce) {
  set_pool_threads(12);
  ASSERT_EQ(pool_threads(), 12);
  std::vector<std::atomic<int>> done(64);
  for (int job = 0; job < 3000; ++job) {
    const std::int64_t n = 1 + (job * 37) % 64;  // 1..64 items: 1 to 12 workers per job
    for (std::int64_t i = 0; i < n; ++i) done[std::size_t(i)] = 0;
    parallel_for(n, [&](std::int64_t b, std::int64_t e, int) {
      for (std::int64_t i = b; i < e; ++i) done[std::size_t(i)].fetch_add(1);
    });
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(done[std::size_t(i)].load(), 1) << "job " << job << " item " << i;
  }
  set_pool_threads(0);
}
