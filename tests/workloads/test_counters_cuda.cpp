// The counted pass on a GPU (runs only where a GPU is present and its counters can be read): under a
// cold timing, CUPTI (13.4 on) resets L2 before each counted pass: the count is what left L2 inside
// the launch, and the lines it left dirty are counted behind it, as written back after it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "rafter/workloads/backend.hpp"

#if RAFTER_HAVE_CUDA
#include "rafter/collector/gpu_counters.hpp"
#include "rafter/collector/gpu_timing.hpp"

using namespace rafter::workloads;

namespace {
// A residual add of 1024 x 4096 BF16: 16 MB read, 8 MB written, all of it fitting in the L2 of a
// Hopper GPU (50 MB on the H100), so its own output stays dirty in L2 past its end.
rafter::OperatorRecord counted_residual_add() {
  OpInstance i;
  i.op = "residual_add", i.phase = "fwd", i.precision = "bf16";
  i.shape = {{"tokens", 1024}, {"hidden", 4096}};
  ExecContext ctx;
  ctx.device = "cuda:0";
  ctx.policy = rafter::RepeatPolicy::quick();
  ctx.counters = true;
  return profile_instance(i, ctx, {});
}
}  // namespace

TEST(CountersCuda, ColdPassesStartFromAResetL2) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  if (const auto s = rafter::gpu::gpu_counter_status(0); !s.available) GTEST_SKIP() << s.summary();
  const rafter::OperatorRecord r = counted_residual_add();
  ASSERT_EQ(r.status, rafter::RecordStatus::Ok) << r.note;
  ASSERT_TRUE(r.details.contains("counters")) << r.details.dump();
  const auto& c = r.details["counters"];
  if (c.value("cupti_version", 0) < 130400) GTEST_SKIP() << "CUPTI " << c.value("cupti_version", 0) << ": no cache control";
  EXPECT_EQ(c.value("cache_control", ""), "all") << c.dump();
  const double out_bytes = 1024.0 * 4096 * 2;
  const double reads = c["metrics"].value("dram__bytes_read.sum", -1.0);
  const double writes = c["metrics"].value("dram__bytes_write.sum", -1.0);
  std::printf("residual add 1024 x 4096, cache control all: HBM read %.3g, written %.3g bytes\n", reads, writes);
  EXPECT_NEAR(reads, 2 * out_bytes, 0.02 * out_bytes);  // both inputs, once
  EXPECT_LT(writes, 0.1 * out_bytes);                   // its output is still in L2 at its end
  // ... and is written back after it, counted behind it, and charged to the record's HBM bytes.
  const double after = c.value("hbm_written_after_bytes", -1.0);
  std::printf("written back after it: %.3g bytes\n", after);
  EXPECT_GE(after, 0.98 * out_bytes);
  EXPECT_LE(after, out_bytes + (1 << 20));  // plus what the range behind carries that is not its (<= 0.5 MB seen)
  const auto hbm =
      std::find_if(r.bytes.begin(), r.bytes.end(), [](const auto& b) { return b.level == "HBM"; });
  ASSERT_NE(hbm, r.bytes.end());
  EXPECT_NEAR(hbm->bytes, reads + writes + after, 1.0);
  EXPECT_EQ(hbm->source, rafter::Source::Counter);

  // The same without the reset (RAFTER_CUPTI_CACHE=none, a diagnostic): the earlier pass's output
  // is written back inside the count.
  setenv("RAFTER_CUPTI_CACHE", "none", 1);
  const rafter::OperatorRecord n = counted_residual_add();
  unsetenv("RAFTER_CUPTI_CACHE");
  ASSERT_EQ(n.status, rafter::RecordStatus::Ok) << n.note;
  const auto& cn = n.details["counters"];
  EXPECT_EQ(cn.value("cache_control", ""), "none") << cn.dump();
  const double writes_none = cn["metrics"].value("dram__bytes_write.sum", -1.0);
  std::printf("the same, cache control none: HBM written %.3g bytes\n", writes_none);
  EXPECT_GT(writes_none, 0.5 * out_bytes);
  EXPECT_EQ(cn.value("hbm_written_after_bytes", 0.0), -1.0);  // no reset: nothing counted behind it
}
#endif
