// The CPU kernels against references on random data (outputs poisoned first), for every ISA this
// CPU has: the load checksum, store/nt_store values, copy and triad results, and every compute
// kernel's exact result. ISAs the CPU lacks are skipped, never run.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstring>
#include <random>

#include "../../probes/cpu/kernels.hpp"
#include "../../probes/cpu/stream_check.hpp"
#include "../../probes/cpu/thread_team.hpp"
#include "rafter/collector/error.hpp"

using namespace rafter::probes::cpu;

TEST(CpuKernels, StreamKernelsMatchTheReferenceOnEveryIsaPresent) {
  int checked = 0;
  for (const std::string& isa : kernel_isas()) {
    if (!cpu_has_isa(cpu_features(), isa)) continue;
    for (std::size_t n : {64u, 4096u, 64u * 1000u})
      EXPECT_EQ(check_stream_kernels(stream_kernels(isa), n), "") << isa;
    ++checked;
  }
  EXPECT_GE(checked, 1);  // scalar at least
}

TEST(CpuKernels, LoadChecksumIsTheXorOfAllWords) {
  AlignedBuffer a(4096 * sizeof(double), false);
  std::mt19937_64 rng(7);
  std::uint64_t want = 0;
  for (std::size_t i = 0; i < 4096; ++i) {
    const std::uint64_t w = rng();
    std::memcpy(a.data() + i, &w, sizeof w);
    want ^= w;
  }
  for (const std::string& isa : kernel_isas()) {
    if (!cpu_has_isa(cpu_features(), isa)) continue;
    EXPECT_EQ(stream_kernels(isa).load(a.data(), 4096, 1), want) << isa;
    EXPECT_EQ(stream_kernels(isa).load(a.data(), 4096, 2), 0u) << isa;  // XOR twice cancels
    EXPECT_EQ(stream_kernels(isa).load_pairs(a.data(), 4096, 1), want) << isa << " pairs";
    EXPECT_EQ(stream_kernels(isa).load_pairs(a.data(), 4096, 3), want) << isa << " pairs";
    // load_discard: only each block's first vector (lanes words of every 8 × lanes) is summed.
    const std::size_t lanes = stream_kernels(isa).lanes;
    std::uint64_t heads = 0;
    for (std::size_t i = 0; i < 4096; i += 8 * lanes)
      for (std::size_t l = 0; l < lanes; ++l) {
        std::uint64_t w;
        std::memcpy(&w, a.data() + i + l, sizeof w);
        heads ^= w;
      }
    EXPECT_NE(heads, want) << isa;  // the two sums differ: the check below tells the forms apart
    EXPECT_EQ(stream_kernels(isa).load_discard(a.data(), 4096, 1), heads) << isa << " discard";
    EXPECT_EQ(stream_kernels(isa).load_discard(a.data(), 4096, 3), heads) << isa << " discard";
    EXPECT_EQ(stream_kernels(isa).load_discard(a.data(), 4096, 2), 0u) << isa << " discard";
  }
}

TEST(CpuKernels, ComputeKernelsGiveTheExactResult) {
  int checked = 0;
  for (const ComputeKernel& k : compute_kernels()) {
    if (!k.present(cpu_features())) continue;
    for (std::int64_t it : {64, 1000, 100000})
      EXPECT_EQ(check_compute_kernel(k, it), "") << k.precision << " " << k.isa;
    EXPECT_GT(k.flops_per_iteration, 0);
    ++checked;
  }
  EXPECT_GE(checked, 2);  // scalar fp64 and fp32 at least
}

TEST(CpuKernels, FlopsPerIterationFollowFromWidthAndAccumulators) {
  for (const ComputeKernel& k : compute_kernels()) {
    const int element_bits = k.precision == "fp64" ? 64 : k.precision == "fp32" ? 32 : 0;
    if (element_bits == 0 || k.operation == "dot") continue;
    const int lanes = std::max(1, k.vector_bits / element_bits);
    EXPECT_DOUBLE_EQ(k.flops_per_iteration, 2.0 * lanes * k.accumulators) << k.precision << " " << k.isa;
  }
}

TEST(CpuKernels, UnknownIsaIsAnInputError) {
  EXPECT_THROW(stream_kernels("avx1024"), rafter::InputError);
  EXPECT_THROW(cpu_has_isa(cpu_features(), "neon"), rafter::InputError);
}

TEST(CpuKernels, WidestIsaIsPresentAndScalarAlwaysIs) {
  EXPECT_TRUE(cpu_has_isa(cpu_features(), widest_isa(cpu_features())));
  EXPECT_TRUE(cpu_has_isa(cpu_features(), "scalar"));
}

// A team pins its caller to core 0 while it lives and puts the caller's binding back after: threads
// the caller starts later (an OpenMP runtime's team, oneDNN's) inherit the caller's mask.
TEST(CpuKernels, ATeamLeavesItsCallerUnpinned) {
  cpu_set_t before, during, after;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "one hardware thread here: pinning cannot change the mask";
  {
    ThreadTeam team(2);
    ASSERT_EQ(sched_getaffinity(0, sizeof during, &during), 0);
    if (team.pinned()) {
      EXPECT_EQ(CPU_COUNT(&during), 1);
    }
  }
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after))
      << CPU_COUNT(&after) << " of " << CPU_COUNT(&before) << " CPUs after";
}

// AMX's tile products on random tiles, output poisoned first (check_amx_tiles): exact where the CPU
// has AMX and Linux granted it; elsewhere the features say so and no tile kernel is present.
TEST(CpuKernels, AmxTilesMatchTheReferenceOnRandomData) {
  const CpuFeatures& f = cpu_features();
  for (const ComputeKernel& k : compute_kernels()) {
    if (k.operation != "tile_dot") continue;
    EXPECT_EQ(k.present(f), k.precision == "bf16" ? f.amx_bf16 : f.amx_int8);
  }
  if (!f.amx_bf16 && !f.amx_int8)
    GTEST_SKIP() << "no usable AMX here" << (f.amx_refused.empty() ? "" : ": " + f.amx_refused);
  for (std::uint64_t seed : {1u, 2u, 3u}) EXPECT_EQ(check_amx_tiles(f, seed), "") << "seed " << seed;
}
