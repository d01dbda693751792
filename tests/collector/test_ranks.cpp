// The rank launch alone (no mpirun): the launcher's variables, malformed ones ignored; one rank's
// joins and barriers return at once; a wait past its deadline is one CommTimeout line; the sizes,
// bus factors and BF16 rounding the collectives use; the GPU each rank of a launch drives.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "rafter/collector/ranks.hpp"

namespace {

struct EnvGuard {  // sets variables for one test and removes them after
  std::vector<std::string> names;
  void set(const char* name, const char* value) {
    setenv(name, value, 1);
    names.emplace_back(name);
  }
  ~EnvGuard() {
    for (const auto& n : names) unsetenv(n.c_str());
  }
};

TEST(Ranks, OpenMpiVariablesGiveRankSizeAndLocalRank) {
  EnvGuard env;
  env.set("OMPI_COMM_WORLD_RANK", "3");
  env.set("OMPI_COMM_WORLD_SIZE", "8");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  const rafter::RankInfo i = rafter::ranks_from_environment();
  EXPECT_TRUE(i.launched);
  EXPECT_EQ(i.launcher, "openmpi");
  EXPECT_EQ(i.rank, 3);
  EXPECT_EQ(i.size, 8);
  EXPECT_EQ(i.local_rank, 1);
}

TEST(Ranks, MalformedVariablesAreNotALaunch) {
  for (const auto& [rank, size] : std::vector<std::pair<const char*, const char*>>{
           {"x", "2"}, {"1", "two"}, {"2", "2"}, {"-1", "2"}, {"0", "0"}, {"", "2"}, {"1 ", "2"}}) {
    EnvGuard env;
    env.set("PMIX_RANK", rank);
    env.set("PMIX_SIZE", size);
    const rafter::RankInfo i = rafter::ranks_from_environment();
    EXPECT_FALSE(i.launched) << "rank '" << rank << "' size '" << size << "'";
    EXPECT_EQ(i.size, 1);
    EXPECT_EQ(i.rank, 0);
  }
}

TEST(Ranks, AloneIsRankZeroOfOneAndItsWaitsAreBounded) {
  rafter::Ranks& r = rafter::Ranks::world();
  ASSERT_FALSE(r.mpi());  // the test runs without mpirun
  EXPECT_EQ(r.rank(), 0);
  EXPECT_EQ(r.size(), 1);
  r.join("all_reduce (8 B)");
  r.barrier("barrier");
  const double mine[2] = {1, 2};
  EXPECT_EQ(r.all_gather(mine, "gather"), (std::vector<double>{1, 2}));
  EXPECT_THROW(r.set_timeout_seconds(0), rafter::InputError);
  r.set_timeout_seconds(0.05);
  try {
    r.wait("all_gather (16 MiB)", [] { return false; });
    FAIL() << "a wait that never completes returned";
  } catch (const rafter::CommTimeout& e) {
    EXPECT_STREQ(e.what(), "all_gather (16 MiB) did not complete within 0.05 s on rank 0 (a rank stopped mid-collective)");
  }
  EXPECT_TRUE(r.broken());  // MPI is not finalized after a timeout
  r.set_timeout_seconds(rafter::Ranks::kDefaultTimeoutSeconds);
}

TEST(Ranks, SizesBusFactorsAndBf16) {
  EXPECT_EQ(rafter::bytes_label(8), "8 B");
  EXPECT_EQ(rafter::bytes_label(16 << 20), "16 MiB");
  EXPECT_EQ(rafter::bytes_label(1536), "1.5 KiB");
  EXPECT_DOUBLE_EQ(rafter::bus_factor(rafter::Collective::AllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(rafter::bus_factor(rafter::Collective::AllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(rafter::bus_factor(rafter::Collective::ReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(rafter::bus_factor(rafter::Collective::SendRecv, 8), 1);
  EXPECT_DOUBLE_EQ(rafter::bus_factor(rafter::Collective::AllReduce, 1), 0);
  EXPECT_EQ(rafter::from_bf16(rafter::to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(rafter::from_bf16(rafter::to_bf16(1.0f + 1.0f / 256)), 1.0f);  // a tie rounds to even
  EXPECT_EQ(rafter::from_bf16(rafter::to_bf16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  EXPECT_TRUE(std::isnan(rafter::from_bf16(rafter::to_bf16(std::nanf("")))));
}

TEST(Ranks, EachRankDrivesItsOwnGpu) {
  rafter::RankInfo two;
  two.size = 2;
  two.local_rank = 1;
  EXPECT_EQ(rafter::rank_device("cuda", two), "cuda:1");
  EXPECT_EQ(rafter::rank_device("cuda:0", two), "cuda:1");
  EXPECT_EQ(rafter::rank_device("cuda:2", two), "cuda:3");  // the node's first GPU for this run
  EXPECT_EQ(rafter::rank_device("cpu", two), "cpu");
  EXPECT_EQ(rafter::rank_device("cuda:x", two), "cuda:x");  // left for the device parser's error
  EXPECT_EQ(rafter::rank_device("cudax", two), "cudax");
  const rafter::RankInfo alone;
  EXPECT_EQ(rafter::rank_device("cuda", alone), "cuda");
  EXPECT_EQ(rafter::rank_device("cuda:1", alone), "cuda:1");
}

}  // namespace

// A TP×DP grid on 8 ranks (tp 4, dp 2): tensor-parallel groups are consecutive ranks, the
// data-parallel groups every 4th; each rank's place and group follow, and a world that does not
// divide is one line naming it.
TEST(Ranks, GroupsOfATensorByDataParallelGrid) {
  using rafter::rank_group;
  std::vector<std::vector<int>> tp(2), dp(4);
  for (int r = 0; r < 8; ++r) {
    const auto t = rank_group(r, 8, 4);
    EXPECT_EQ(t.size, 4);
    ASSERT_LT(t.color, 2);
    EXPECT_EQ(t.rank, int(tp[std::size_t(t.color)].size()));  // places in rank order
    tp[std::size_t(t.color)].push_back(r);
    const auto d = rank_group(r, 8, 2, 4);
    ASSERT_LT(d.color, 4);
    EXPECT_EQ(d.rank, int(dp[std::size_t(d.color)].size()));
    dp[std::size_t(d.color)].push_back(r);
  }
  EXPECT_EQ(tp, (std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(dp, (std::vector<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  const auto world = rank_group(5, 8, 8);
  EXPECT_EQ(world.rank, 5);
  EXPECT_EQ(world.color, 0);
  try {
    rank_group(0, 2, 4);
    FAIL() << "4 ranks out of 2";
  } catch (const rafter::InputError& e) {
    EXPECT_STREQ(e.what(), "ranks=4 but the run has 2 rank(s) (mpirun -np 4)");
  }
  EXPECT_THROW(rank_group(0, 6, 2, 2), rafter::InputError);  // 6 ranks: no groups of 2 ranks 2 apart
  EXPECT_THROW(rank_group(0, 4, 0), rafter::InputError);
}
