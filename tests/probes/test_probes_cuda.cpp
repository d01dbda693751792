// CUDA characterization without a GPU: datasheet derivation per SM per clock, level naming from
// device properties, plateau windows, and `rafter probe --device cuda` failing cleanly (exit 2, one
// line) where there is no GPU. Tests that need a GPU skip when none is present.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "../../probes/cuda/burst_window.hpp"
#include "run_cli.hpp"

#ifdef RAFTER_HAVE_CUDA
#include "../../probes/cuda/gpu_model.hpp"
#include "rafter/collector/gpu_timing.hpp"
#endif

namespace {

struct Outcome {
  int exit_code = -1;
  std::string output;
};

Outcome run(const std::string& args) {
  Outcome o;
  std::string cmd = std::string(RAFTER_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return o;
  std::array<char, 512> buf{};
  while (fgets(buf.data(), int(buf.size()), p)) o.output += buf.data();
  int status = pclose(p);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

bool gpu_present() {
#ifdef RAFTER_HAVE_CUDA
  return rafter::gpu::device_count() > 0;
#else
  return false;
#endif
}

TEST(ProbeCudaCli, NoGpuExitsTwoWithOneLine) {
  if (gpu_present()) GTEST_SKIP() << "a GPU is present";
  const auto dir = rafter::testing::make_temp_dir("cuda-no-gpu");
  Outcome o = run("probe --device cuda -o " + (dir / "machine.json").string());
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "something was written";
  std::filesystem::remove_all(dir);
  EXPECT_EQ(o.exit_code, 2);
  ASSERT_FALSE(o.output.empty());
  EXPECT_EQ(o.output.find('\n'), o.output.size() - 1) << o.output;  // exactly one line
  EXPECT_EQ(o.output.rfind("rafter: error:", 0), 0u) << o.output;
}

TEST(ProbeCudaCli, NoGpuNamedIndexExitsTwo) {
  if (gpu_present()) GTEST_SKIP() << "a GPU is present";
  const auto dir = rafter::testing::make_temp_dir("cuda-no-gpu");
  Outcome o = run("probe --device cuda:3 -o " + (dir / "machine.json").string());
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "something was written";
  std::filesystem::remove_all(dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_EQ(o.output.find('\n'), o.output.size() - 1) << o.output;
}

#ifdef RAFTER_HAVE_CUDA
using namespace rafter::probes::cuda;

// H100 SXM (132 SMs): the whitepaper's dense peaks follow from the per-SM rates at its clocks.
TEST(GpuDatasheet, HopperPeaksFollowFromPerSmRates) {
  auto bf16 = compute_datasheet(9, 0, "bf16", 132, 1.83e9);
  ASSERT_TRUE(bf16);
  EXPECT_NEAR(bf16->value, 989.4e12, 0.5e12);  // 4 tensor cores x 1024 FLOP/clk
  EXPECT_NEAR(compute_datasheet(9, 0, "fp8", 132, 1.83e9)->value, 1978.9e12, 1e12);
  EXPECT_NEAR(compute_datasheet(9, 0, "tf32", 132, 1.83e9)->value, 494.7e12, 0.5e12);
  EXPECT_NEAR(compute_datasheet(9, 0, "fp32", 132, 1.98e9)->value, 66.9e12, 0.1e12);
  EXPECT_NEAR(compute_datasheet(9, 0, "fp64", 132, 1.98e9)->value, 33.45e12, 0.1e12);
  EXPECT_NEAR(compute_datasheet(9, 0, "fp64_tensor", 132, 1.98e9)->value, 66.9e12, 0.1e12);
  EXPECT_NE(bf16->basis.find("132 SMs"), std::string::npos);
  EXPECT_NE(bf16->basis.find("measured"), std::string::npos);
}

TEST(GpuDatasheet, ScalesLinearlyWithClockAndSms) {
  double a = compute_datasheet(9, 0, "int8", 132, 1.5e9)->value;
  double b = compute_datasheet(9, 0, "int8", 66, 3.0e9)->value;
  EXPECT_DOUBLE_EQ(a, b);
}

TEST(GpuDatasheet, AbsentUnitsHaveNoFigure) {
  EXPECT_FALSE(compute_datasheet(9, 0, "fp4", 132, 1.8e9));  // no FP4 tensor cores on sm_90
  EXPECT_FALSE(compute_datasheet(8, 0, "fp8", 108, 1.4e9));  // nor FP8 on sm_80
  EXPECT_FALSE(compute_datasheet(7, 5, "bf16", 40, 1.5e9));  // not in the table
  EXPECT_FALSE(compute_datasheet(9, 0, "bf16", 132, 0));     // no clock reading
}

TEST(GpuDatasheet, MemoryAndLinks) {
  // H100 SXM HBM3: 2619 MHz x 2 x 5120 bits = 3.35 TB/s.
  EXPECT_NEAR(device_memory_datasheet(2619e6, 5120)->value, 3.352e12, 0.005e12);
  EXPECT_FALSE(device_memory_datasheet(0, 5120));
  EXPECT_NEAR(shared_memory_datasheet(132, 1.98e9).value, 33.45e12, 0.01e12);
  EXPECT_NEAR(pcie_datasheet(5, 16)->value, 63.0e9, 0.1e9);  // 32 GT/s x 16 x 128/130 / 8
  EXPECT_NEAR(pcie_datasheet(4, 16)->value, 31.5e9, 0.1e9);
  EXPECT_FALSE(pcie_datasheet(0, 16));
  EXPECT_NEAR(nvlink_datasheet(9, 18)->value, 450e9, 1e6);  // H100 SXM: 18 links x 25 GB/s each way
  EXPECT_NEAR(nvlink_datasheet(10, 18)->value, 900e9, 1e6);
  EXPECT_FALSE(nvlink_datasheet(9, 0));
  EXPECT_FALSE(nvlink_datasheet(6, 4));
}

TEST(GpuPeerLink, NamedFromNvmlFacts) {
  // Two GPUs of an HGX board: every NVLink ends at an NVSwitch.
  nlohmann::json hgx = {
      {"nvml", "available"}, {"nvlink_p2p", true}, {"common_ancestor", "system"}, {"nvlinks", {}}};
  for (int l = 0; l < 18; ++l)
    hgx["nvlinks"].push_back({{"link", l}, {"version", "4.0"}, {"remote", "switch"}, {"to_peer", false}});
  PeerLinkName n = name_peer_link(hgx);
  EXPECT_EQ(n.kind, "nvlink");
  EXPECT_EQ(n.via, "nvswitch");
  EXPECT_EQ(n.links, 18);
  EXPECT_EQ(n.version, "4.0");
  // A bridge: 4 of 12 active links reach this peer directly, the rest other GPUs.
  nlohmann::json bridge = {{"nvml", "available"}, {"nvlink_p2p", true}, {"nvlinks", {}}};
  for (int l = 0; l < 12; ++l)
    bridge["nvlinks"].push_back({{"link", l}, {"remote", "gpu"}, {"to_peer", l < 4}});
  n = name_peer_link(bridge);
  EXPECT_EQ(n.kind, "nvlink");
  EXPECT_EQ(n.via, "direct");
  EXPECT_EQ(n.links, 4);
  // PCIe: no NVLink P2P; the level joining the two is named.
  n = name_peer_link({{"nvml", "available"}, {"nvlink_p2p", false}, {"common_ancestor", "host_bridge"}});
  EXPECT_EQ(n.kind, "pcie");
  EXPECT_EQ(n.via, "host_bridge");
  EXPECT_EQ(n.links, 0);
  EXPECT_EQ(name_peer_link({{"nvml", "unavailable (libnvidia-ml.so.1 not found)"}}).kind, "unknown");
}

TEST(GpuDatasheet, AttachFlagsAboveAndBelow) {
  rafter::Ceiling c;
  c.figure.value = 110;
  attach_datasheet(c, Datasheet{100, "test"});
  EXPECT_EQ(c.flag, "above_datasheet");
  ASSERT_TRUE(c.datasheet_ratio);
  EXPECT_DOUBLE_EQ(*c.datasheet_ratio, 1.1);
  c.figure.value = 50;
  attach_datasheet(c, Datasheet{100, "test"});
  EXPECT_EQ(c.flag, "below_60pct_datasheet");
}

GpuMemorySizes h100() {
  GpuMemorySizes s;
  s.cc_major = 9;
  s.sms = 132;
  s.shared_per_sm_bytes = 233472;
  s.l2_bytes = 50.0 * (1 << 20);
  s.device_memory_bytes = 80.0 * (1ull << 30);
  s.bus_width_bits = 5120;
  return s;
}

TEST(GpuLevels, NamedFromDeviceProperties) {
  auto levels = gpu_memory_levels(h100());
  ASSERT_EQ(levels.size(), 4u);
  EXPECT_EQ(levels[0].name, "shared");
  EXPECT_EQ(levels[1].name, "L1");
  EXPECT_EQ(levels[2].name, "L2");
  EXPECT_EQ(levels[3].name, "HBM");
  EXPECT_DOUBLE_EQ(levels[0].size_bytes, 233472);
  EXPECT_DOUBLE_EQ(levels[1].size_bytes, 256.0 * 1024);
  EXPECT_DOUBLE_EQ(levels[2].size_bytes, 50.0 * (1 << 20));
  GpuMemorySizes gddr = h100();
  gddr.bus_width_bits = 384;
  EXPECT_EQ(gpu_memory_levels(gddr).back().name, "DRAM");
}

TEST(GpuLevels, PlateauWindowsSitInsideEachLevel) {
  auto levels = gpu_memory_levels(h100());
  auto l1 = plateau_window(levels, "L1"), l2 = plateau_window(levels, "L2"),
       hbm = plateau_window(levels, "HBM");
  ASSERT_TRUE(l1 && l2 && hbm);
  EXPECT_DOUBLE_EQ(l1->high_bytes, 128.0 * 1024);
  EXPECT_DOUBLE_EQ(l2->low_bytes, 512.0 * 1024);
  EXPECT_DOUBLE_EQ(l2->high_bytes, 25.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(hbm->low_bytes, 100.0 * (1 << 20));
  EXPECT_FALSE(plateau_window(levels, "L3"));
}

TEST(GpuLevels, PlateauIsTheMedianPointInTheWindow) {
  std::vector<rafter::SweepPoint> pts;
  for (double ws : {1e3, 2e3, 4e3, 8e3, 16e3}) {
    rafter::SweepPoint p;
    p.working_set_bytes = ws;
    p.figure.value = ws < 5e3 ? 10.0 + ws / 1e3 : 2.0;
    pts.push_back(p);
  }
  auto p = find_plateau(pts, Window{0, 4.5e3});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->points, 3);
  EXPECT_DOUBLE_EQ(p->point.figure.value, 12.0);
  EXPECT_NEAR(p->spread, 3.0 / 12.0, 1e-12);
  EXPECT_FALSE(find_plateau(pts, Window{1e6, 2e6}));
}

// The HBM probe's operator-sized streams: 132, 264 and 528 MiB a stream on the H200 (one grid chunk
// of 8 blocks x 132 SMs x 256 threads x 32 vectors, doubled) within buffers of 1 GiB; fewer where
// the buffers hold less, the first alone where it fills them.
TEST(GpuLevels, OperatorSizedStreamsDoubleWithinTheBuffers) {
  const std::size_t chunk = std::size_t(8) * 132 * 256 * 32, gib = (std::size_t(1) << 30) / 16;
  EXPECT_EQ(operator_sized_streams(chunk, gib, 3), (std::vector<std::size_t>{chunk, 2 * chunk, 4 * chunk}));
  EXPECT_EQ(operator_sized_streams(chunk, 4 * gib, 3).size(), 3u);
  EXPECT_EQ(operator_sized_streams(chunk, 3 * chunk, 3), (std::vector<std::size_t>{chunk, 2 * chunk}));
  EXPECT_EQ(operator_sized_streams(chunk, chunk, 3), (std::vector<std::size_t>{chunk}));
  EXPECT_TRUE(operator_sized_streams(chunk, chunk - 1, 3).empty());
  EXPECT_TRUE(operator_sized_streams(0, gib, 3).empty());
}

// Per-line L2 hit latencies: two partitions give two groups (the shape seen on the H100, 70 % of
// the lines near at ~270 cycles, the rest at ~305); one group, or groups too close, give none.
TEST(GpuLevels, LatencySplitFindsTwoPartitions) {
  std::vector<double> cycles;
  for (int i = 0; i < 700; ++i) cycles.push_back(265 + (i % 11));  // 265..275
  for (int i = 0; i < 300; ++i) cycles.push_back(300 + (i % 13));  // 300..312
  auto s = split_latencies(cycles);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->fast_lines, 700u);
  EXPECT_EQ(s->slow_lines, 300u);
  EXPECT_NEAR(s->fast_share, 0.7, 1e-12);
  EXPECT_NEAR(s->fast_median, 270, 1.0);
  EXPECT_NEAR(s->slow_median, 306, 1.0);
  EXPECT_LT(s->fast_p90, s->slow_p10);

  std::vector<double> one;
  for (int i = 0; i < 1000; ++i) one.push_back(280 + (i % 17));  // 280..296: one level, no split
  EXPECT_FALSE(split_latencies(one));
  std::vector<double> rare = one;
  for (int i = 0; i < 20; ++i) rare.push_back(600);  // 2 % outliers (HBM misses) are not a partition
  EXPECT_FALSE(split_latencies(rare));
  EXPECT_FALSE(split_latencies({1, 2}));
}

// A TLB sweep: flat, one step, a lone slow point (not a step), a second step held to the end.
TEST(GpuLevels, LatencyStepsNameEachHeldRise) {
  const double MiB = 1 << 20;
  std::vector<std::pair<double, double>> sweep = {{32 * MiB, 300},   {64 * MiB, 305},  {128 * MiB, 420},
                                                  {256 * MiB, 425},  {512 * MiB, 600}, {1024 * MiB, 430},
                                                  {2048 * MiB, 700}, {4096 * MiB, 710}};
  auto steps = latency_steps(sweep);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].working_set_bytes, 128 * MiB);
  EXPECT_EQ(steps[0].cycles_before, 300);
  EXPECT_EQ(steps[0].cycles_after, 420);
  EXPECT_EQ(steps[1].working_set_bytes, 2048 * MiB);
  EXPECT_EQ(steps[1].cycles_before, 420);
  EXPECT_TRUE(latency_steps({{1, 300}, {2, 310}, {4, 320}}).empty());
  EXPECT_TRUE(latency_steps({}).empty());
}

// The mapped-pages TLB sweep's address plan: every page's word lies in that page, and no two of the
// 256K pages (512 GiB of 2 MiB pages over one 32-page allocation) share a physical word.
TEST(GpuLevels, MappedPageWordsAreDistinctPhysicalWords) {
  const unsigned long long page = 2ull << 20, per_map = 32, pages = 262144;
  std::set<std::pair<unsigned long long, unsigned long long>> physical;  // (physical page, word)
  for (unsigned long long i = 0; i < pages; ++i) {
    const unsigned long long e = mapped_page_word(i, page, per_map);
    ASSERT_EQ(e / (page / 8), i);
    physical.emplace(i % per_map, e % (page / 8));
  }
  EXPECT_EQ(physical.size(), pages);
}
#endif

// cuda.tensor's best window, on made-up traces: a point every 16 iterations and 10 µs.
struct FakeTrace {
  std::vector<unsigned long long> words{0, ~0ULL};
  unsigned long long ns = 1'000'000'000, clock = 0;
  void run(double seconds, double hz) {  // points with the SM clock at `hz`
    for (double t = 0; t < seconds - 1e-12; t += 10e-6) {
      words.push_back(ns);
      words.push_back(clock);
      ns += 10'000;
      clock += static_cast<unsigned long long>(hz * 10e-6);
    }
  }
  long long points() const { return static_cast<long long>(words.size() - 2) / 2; }
};

TEST(TensorBurstWindow, ASteadyClockIsItsOwnBest) {
  FakeTrace f;
  f.run(5e-3, 1.7e9);
  f.words[0] = f.words[2];
  f.words[1] = f.ns;
  auto w = rafter::probes::cuda::best_clock_window(f.words, f.points(), 16, 1e-3, 0.5e-3);
  ASSERT_TRUE(w);
  EXPECT_NEAR(w->window_sm_hz, 1.7e9, 1e6);
  EXPECT_NEAR(w->sm_hz_first, 1.7e9, 1e6);
  EXPECT_NEAR(w->window_iterations_per_s, 1.6e6, 1e3);  // 16 iterations each 10 µs
  EXPECT_NEAR(w->all_blocks_running_s, 5e-3, 1e-9);
}

TEST(TensorBurstWindow, TheClimbIsFoundAndTheLonelyTailLeftOut) {
  FakeTrace f;
  f.run(4e-3, 1.60e9);
  f.run(4e-3, 1.75e9);
  const unsigned long long first_end = f.ns;  // then one block runs alone at a higher clock
  f.run(3e-3, 1.98e9);
  f.words[0] = f.words[2];
  f.words[1] = first_end;
  auto w = rafter::probes::cuda::best_clock_window(f.words, f.points(), 16, 1e-3, 0.5e-3);
  ASSERT_TRUE(w);
  EXPECT_NEAR(w->window_sm_hz, 1.75e9, 1e6);
  EXPECT_GE(w->window_at_s, 4e-3 - 1e-9);
  EXPECT_NEAR(w->sm_hz_first, 1.60e9, 1e6);
  EXPECT_NEAR(w->sm_hz_last, 1.75e9, 1e6);
  EXPECT_NEAR(w->all_blocks_running_s, 8e-3, 1e-9);
}

TEST(TensorBurstWindow, LateStartsUnwrittenPointsAndShortSpans) {
  FakeTrace f;
  f.run(1e-3, 1.98e9);  // before the last block started: left out
  const unsigned long long last_start = f.ns;
  f.run(3e-3, 1.70e9);
  f.words[0] = last_start;
  f.words[1] = f.ns;
  f.words.insert(f.words.end(), 6, 0);  // points the kernel never wrote
  const long long points = f.points();
  auto w = rafter::probes::cuda::best_clock_window(f.words, points, 16, 1e-3, 0.5e-3);
  ASSERT_TRUE(w);
  EXPECT_NEAR(w->window_sm_hz, 1.70e9, 1e6);
  EXPECT_FALSE(rafter::probes::cuda::best_clock_window(f.words, points, 16, 4e-3, 0.5e-3));
  EXPECT_FALSE(rafter::probes::cuda::best_clock_window(f.words, points + 1, 16, 1e-3, 0.5e-3));
}

}  // namespace
