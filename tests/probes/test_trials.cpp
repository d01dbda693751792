// Combining a ceiling's trials on synthetic values: the best median becomes the ceiling, the
// trials' min/median/max and spread are recorded, and "drifting" is flagged above the threshold
// only; the recorded fields survive machine.json's writer and validating reader.
#include <gtest/gtest.h>

#include <vector>

#include "../../probes/cpu/trials.hpp"
#include "rafter/collector/error.hpp"

using namespace rafter;
using namespace rafter::probes::cpu;

namespace {

// A trial whose repeats are the median +-2%, taken at `at` seconds.
Trial trial(double median, double at = 0) {
  const std::vector<double> repeats{median * 0.98, median, median * 1.02};
  return Trial{summarize(repeats), at, 256.0 * 1024 * 1024, 1.0};
}

Ceiling dram_ceiling() {
  Ceiling c;
  c.kind = CeilingKind::Bandwidth;
  c.device = "cpu";
  c.resource = "DRAM";
  c.operation = "load";
  c.isa = "avx512";
  c.scope = "device";
  c.threads = 2;
  c.probe = "cpu.bandwidth";
  c.figure = Figure::measured(trial(37e9).figure, "B/s");
  c.params = {{"per_core_bytes_per_second", 18.5e9}};
  return c;
}

}  // namespace

TEST(Trials, BestMedianIsChosenAndSpreadIsOverTheMedians) {
  // The drift seen on a 2-core KVM guest: 37, 65 and 42 GB/s a minute apart.
  const std::vector<Trial> t{trial(37e9, 1), trial(65e9, 8), trial(42e9, 15)};
  const TrialCombination k = combine_trials(t);
  EXPECT_EQ(k.best, 1u);
  EXPECT_DOUBLE_EQ(k.median_min, 37e9);
  EXPECT_DOUBLE_EQ(k.median_median, 42e9);
  EXPECT_DOUBLE_EQ(k.median_max, 65e9);
  EXPECT_DOUBLE_EQ(k.spread, (65e9 - 37e9) / 42e9);
  EXPECT_TRUE(k.disagree);
}

TEST(Trials, EvenCountTakesTheMeanOfTheMiddleMedians) {
  const std::vector<Trial> t{trial(40e9), trial(50e9), trial(44e9), trial(46e9)};
  const TrialCombination k = combine_trials(t);
  EXPECT_EQ(k.best, 1u);
  EXPECT_DOUBLE_EQ(k.median_median, 45e9);
}

TEST(Trials, LowerIsBetterPicksTheSmallestMedian) {
  const std::vector<Trial> t{trial(90e-9), trial(80e-9), trial(85e-9)};
  EXPECT_EQ(combine_trials(t, false).best, 1u);
}

TEST(Trials, FlagSetAboveTheThresholdOnly) {
  // 10% apart: agree at the default 15%; 20% apart: disagree.
  EXPECT_FALSE(combine_trials(std::vector<Trial>{trial(100), trial(105), trial(110)}).disagree);
  EXPECT_TRUE(combine_trials(std::vector<Trial>{trial(100), trial(110), trial(120)}).disagree);
  // The threshold is a parameter: the same 20% agrees at 25%.
  EXPECT_FALSE(combine_trials(std::vector<Trial>{trial(100), trial(110), trial(120)}, true, 0.25).disagree);
  // One trial cannot disagree with itself.
  const TrialCombination one = combine_trials(std::vector<Trial>{trial(100)});
  EXPECT_EQ(one.spread, 0);
  EXPECT_FALSE(one.disagree);
}

TEST(Trials, NoTrialIsAnInputError) { EXPECT_THROW(combine_trials(std::vector<Trial>{}), InputError); }

TEST(Trials, RecordMakesTheBestTrialTheFigureAndKeepsEveryTrial) {
  Ceiling c = dram_ceiling();
  const std::vector<Trial> t{trial(37e9, 1), trial(65e9, 8), trial(42e9, 15)};
  record_trials(c, t);
  EXPECT_DOUBLE_EQ(c.figure.value, 65e9);
  EXPECT_EQ(c.figure.unit, "B/s");
  EXPECT_EQ(c.figure.source, Source::Measured);
  EXPECT_DOUBLE_EQ(c.figure.stats.min, 65e9 * 0.98);  // the best trial's own repeats
  EXPECT_DOUBLE_EQ(c.figure.stats.max, 65e9 * 1.02);
  EXPECT_DOUBLE_EQ(c.params["per_core_bytes_per_second"].get<double>(), 32.5e9);
  ASSERT_EQ(c.params["trials"].size(), 3u);
  EXPECT_DOUBLE_EQ(c.params["trials"][2]["at_seconds"].get<double>(), 15);
  EXPECT_DOUBLE_EQ(c.params["trials"][0]["median"].get<double>(), 37e9);
  EXPECT_EQ(c.params["best_trial"].get<int>(), 1);
  EXPECT_DOUBLE_EQ(c.params["trial_medians"]["median"].get<double>(), 42e9);
  EXPECT_DOUBLE_EQ(c.params["between_trial_spread"].get<double>(), 28.0 / 42);
  EXPECT_TRUE(c.params["trials_disagree"].get<bool>());
}

TEST(Trials, DriftingFlagFollowsTheTrialsAfterApplyFlags) {
  Ceiling drifting = dram_ceiling();
  record_trials(drifting, std::vector<Trial>{trial(37e9), trial(65e9), trial(42e9)});
  apply_flags(drifting);
  flag_drifting_trials(drifting);
  EXPECT_EQ(drifting.flag, "drifting");

  Ceiling steady = dram_ceiling();
  record_trials(steady, std::vector<Trial>{trial(60e9), trial(63e9), trial(65e9)});
  apply_flags(steady);
  flag_drifting_trials(steady);
  EXPECT_EQ(steady.flag, "");

  Ceiling throttled = dram_ceiling();  // a clock flag says more than the drift
  record_trials(throttled, std::vector<Trial>{trial(37e9), trial(65e9)});
  throttled.clocks.throttled = true;
  apply_flags(throttled);
  flag_drifting_trials(throttled);
  EXPECT_EQ(throttled.flag, "throttled");

  Ceiling untried = dram_ceiling();  // no trials recorded (a 1-thread ceiling): untouched
  untried.flag = "noisy";
  flag_drifting_trials(untried);
  EXPECT_EQ(untried.flag, "noisy");
}

TEST(Trials, RecordedTrialsSurviveTheMachineJsonRoundTrip) {
  MachineProfile p;
  p.rafter_version = "test";
  p.timestamp = "2026-11-22T20:00:00Z";
  Device cpu;
  cpu.id = "cpu";
  cpu.kind = "cpu";
  p.devices.push_back(cpu);
  Ceiling c = dram_ceiling();
  record_trials(c, std::vector<Trial>{trial(37e9, 1), trial(65e9, 8), trial(42e9, 15)});
  flag_drifting_trials(c);
  p.ceilings.push_back(c);
  const MachineProfile back = machine_profile_from_json(to_json(p));
  ASSERT_EQ(back.ceilings.size(), 1u);
  EXPECT_DOUBLE_EQ(back.ceilings[0].figure.value, 65e9);
  EXPECT_EQ(back.ceilings[0].flag, "drifting");
  EXPECT_EQ(back.ceilings[0].params["trials"].size(), 3u);
  EXPECT_DOUBLE_EQ(back.ceilings[0].params["between_trial_spread"].get<double>(), 28.0 / 42);
}
