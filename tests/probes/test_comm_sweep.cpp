// The communicator sizes and message sizes the comm.* probes sweep.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "../../probes/comm/comm_sweep.hpp"

using rafter::probes::comm::rank_counts;

TEST(CommSweep, RankCountsArePowersOfTwoThenEveryGpu) {
  EXPECT_EQ(rank_counts(1), std::vector<int>({1}));
  EXPECT_EQ(rank_counts(2), std::vector<int>({2}));
  EXPECT_EQ(rank_counts(4), std::vector<int>({2, 4}));
  EXPECT_EQ(rank_counts(6), std::vector<int>({2, 4, 6}));
  EXPECT_EQ(rank_counts(8), std::vector<int>({2, 4, 8}));
  EXPECT_EQ(rank_counts(0), std::vector<int>({1}));
}

TEST(CommSweep, QuickSizesAreCappedByTheLargestMessage) {
  rafter::probes::ProbeOptions o;
  o.quick = true;
  EXPECT_EQ(rafter::probes::comm::sweep_sizes(o, 1 << 20),
            std::vector<double>({8.0, 4096.0, double(1 << 20)}));
  EXPECT_EQ(rafter::probes::comm::sweep_sizes(o, 4096), std::vector<double>({8.0, 4096.0}));
  o.quick = false;
  const auto full = rafter::probes::comm::sweep_sizes(o, double(1 << 30));
  ASSERT_EQ(full.size(), 10u);  // 8 B · 8^k up to 1 GiB
  EXPECT_EQ(full.front(), 8.0);
  EXPECT_EQ(full.back(), double(1 << 30));
  // comm.nccl's top where every GPU has room (largest_message): one more step, 8 GiB exactly
  const auto big = rafter::probes::comm::sweep_sizes(o, double(std::size_t(8) << 30));
  ASSERT_EQ(big.size(), 11u);
  EXPECT_EQ(big.back(), double(std::size_t(8) << 30));
}
