// Plateau detection on synthetic sweeps: levels named after the capacity they fit, noise and
// transition points left out, latency (lower is better) handled, empty levels skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "../../probes/cpu/plateau.hpp"

using namespace rafter::probes::cpu;

namespace {

constexpr double KiB = 1024, MiB = 1024 * 1024;

std::vector<LevelCapacity> zen4_one_core() {
  return {{"L1", 32 * KiB}, {"L2", 1 * MiB}, {"L3", 32 * MiB}, {"DRAM"}};
}

// A staircase: value per level, with points every half octave from 4 KiB to 256 MiB and a linear
// (in log size) transition over the octave above each capacity.
std::vector<SweepSample> staircase(const std::vector<LevelCapacity>& levels,
                                   const std::vector<double>& values) {
  std::vector<SweepSample> s;
  for (double ws = 4 * KiB; ws <= 256 * MiB; ws *= std::sqrt(2.0)) {
    std::size_t i = 0;
    while (i + 1 < levels.size() && ws > levels[i].capacity_bytes) ++i;
    double v = values[i];
    if (i > 0 && ws < 2 * levels[i - 1].capacity_bytes) {  // transition region
      const double f = std::log2(ws / levels[i - 1].capacity_bytes);
      v = values[i - 1] + f * (values[i] - values[i - 1]);
    }
    s.push_back({ws, v});
  }
  return s;
}

}  // namespace

TEST(Plateau, NamesEachPlateauAfterTheLevelItFits) {
  const auto levels = zen4_one_core();
  const auto sweep = staircase(levels, {220e9, 118e9, 95e9, 30e9});
  const auto p = detect_plateaus(sweep, levels, true);
  ASSERT_EQ(p.size(), 4u);
  const char* names[] = {"L1", "L2", "L3", "DRAM"};
  const double values[] = {220e9, 118e9, 95e9, 30e9};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(p[i].level, names[i]);
    EXPECT_DOUBLE_EQ(p[i].median_value, values[i]) << names[i];
    EXPECT_DOUBLE_EQ(sweep[p[i].best].value, values[i]) << names[i];
    EXPECT_GE(p[i].points, 2u) << names[i];
  }
  // A plateau never reaches into the level above: its last point fits half the capacity.
  EXPECT_LE(sweep[p[0].last].working_set_bytes, 16 * KiB);
  EXPECT_GT(sweep[p[3].first].working_set_bytes, 4 * 32 * MiB * 0.99);
}

TEST(Plateau, OutliersAreLeftOutAndTheBestPointIsOnThePlateau) {
  const auto levels = zen4_one_core();
  auto sweep = staircase(levels, {220e9, 118e9, 95e9, 30e9});
  // A preempted sample inside L2's window: far below the plateau, so not part of it.
  for (auto& s : sweep)
    if (s.working_set_bytes > 200 * KiB && s.working_set_bytes < 300 * KiB) s.value = 20e9;
  const auto p = detect_plateaus(sweep, levels, true);
  ASSERT_EQ(p[1].level, "L2");
  EXPECT_DOUBLE_EQ(p[1].median_value, 118e9);
  EXPECT_DOUBLE_EQ(sweep[p[1].best].value, 118e9);
}

TEST(Plateau, LatencyTakesTheLowestPoint) {
  const auto levels = zen4_one_core();
  auto sweep = staircase(levels, {1e-9, 4e-9, 15e-9, 100e-9});
  sweep[1].value = 0.98e-9;  // within tolerance: the best (lowest) of the L1 plateau
  const auto p = detect_plateaus(sweep, levels, false);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_DOUBLE_EQ(sweep[p[0].best].value, 0.98e-9);
  EXPECT_LT(p[0].median_value, p[1].median_value);
  EXPECT_LT(p[2].median_value, p[3].median_value);
}

TEST(Plateau, AllCoreCapacitiesShiftThePlateaus) {
  // Two cores: private L1/L2 double, the shared L3 does not.
  const std::vector<LevelCapacity> two = {{"L1", 64 * KiB}, {"L2", 2 * MiB}, {"L3", 32 * MiB}, {"DRAM"}};
  const auto sweep = staircase(two, {440e9, 236e9, 190e9, 50e9});
  const auto p = detect_plateaus(sweep, two, true);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_DOUBLE_EQ(p[0].median_value, 440e9);
  EXPECT_GT(sweep[p[0].last].working_set_bytes, 16 * KiB);  // past one core's L1 half
}

TEST(Plateau, ASweepThatStopsEarlyHasNoDramPlateau) {
  const auto levels = zen4_one_core();
  std::vector<SweepSample> sweep;
  for (double ws = 4 * KiB; ws <= 512 * KiB; ws *= 2) sweep.push_back({ws, ws <= 32 * KiB ? 200e9 : 110e9});
  const auto p = detect_plateaus(sweep, levels, true);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].level, "L1");
  EXPECT_EQ(p[1].level, "L2");
}

TEST(Plateau, TwoPointWindowStillYieldsAPlateau) {
  const std::vector<LevelCapacity> levels = {{"L1", 32 * KiB}, {"DRAM"}};
  const std::vector<SweepSample> sweep = {{8 * KiB, 100}, {16 * KiB, 100}, {256 * KiB, 10}, {512 * KiB, 14}};
  const auto p = detect_plateaus(sweep, levels, true);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1].level, "DRAM");
  EXPECT_GE(p[1].points, 1u);
}

TEST(Plateau, EmptySweepGivesNoPlateaus) {
  const auto levels = zen4_one_core();
  EXPECT_TRUE(detect_plateaus({}, levels, true).empty());
}

TEST(Plateau, ABusyMachineSlowsMostPointsButNotTheCeiling) {
  // Another process slowed three of the five L2-window points: the level's ceiling stays the
  // undisturbed value, and the plateau holds only the points near it.
  const auto levels = zen4_one_core();
  std::vector<SweepSample> sweep;
  for (double ws = 4 * KiB; ws <= 512 * KiB; ws *= 2) sweep.push_back({ws, ws <= 16 * KiB ? 220e9 : 118e9});
  sweep.push_back({768 * KiB, 100e9});
  for (auto& s : sweep)
    if (s.working_set_bytes == 64 * KiB || s.working_set_bytes == 256 * KiB || s.working_set_bytes == 512 * KiB)
      s.value = 60e9;
  const auto p = detect_plateaus(sweep, levels, true);
  ASSERT_GE(p.size(), 2u);
  EXPECT_EQ(p[1].level, "L2");
  EXPECT_DOUBLE_EQ(sweep[p[1].best].value, 118e9);
  EXPECT_DOUBLE_EQ(p[1].median_value, 118e9);
  EXPECT_EQ(p[1].points, 1u);  // only 128 KiB is left undisturbed inside (64 KiB, 512 KiB]
}
