// Trials of one ceiling taken at different moments of a probe (cpu.bandwidth's all-core ceilings,
// every cpu.compute ceiling), and how they combine. On a shared or virtualized host the bandwidth
// or FLOP rate a point reaches depends on what the neighbours do during its few tens of
// milliseconds; re-measuring the same point at moments spread over the probe shows that drift. The
// ceiling is the best trial's median (a ceiling is the best sustainable rate: the host only ever
// takes some away), and the trials' spread is recorded beside it so that the reader sees how far
// the machine moved. Pure functions over numbers, unit-tested on synthetic trials.
#pragma once
#include <cstddef>
#include <span>

#include "rafter/collector/machine_profile.hpp"
#include "rafter/collector/stats.hpp"

namespace rafter::probes::cpu {

// Trials whose medians spread by more than this, (max - min) / median, disagree: flag "drifting".
inline constexpr double kTrialDisagreeSpread = 0.15;

struct Trial {
  Summary figure;         // the repeats of this trial (B/s for bandwidth)
  double at_seconds = 0;  // when it was taken, from the start of the probe
  double working_set_bytes = 0;   // a bandwidth trial's; 0 (not recorded) for compute
  double thread_overlap_min = 1;  // how much the threads ran together (thread_team.hpp), worst sample
};

struct TrialCombination {
  std::size_t best = 0;                                      // index of the trial with the best median
  double median_min = 0, median_median = 0, median_max = 0;  // over the trials' medians
  double spread = 0;                                         // (median_max - median_min) / median_median
  bool disagree = false;                                     // spread > threshold
};

// Throws InputError when there is no trial. Latency-like figures pass higher_is_better = false.
TrialCombination combine_trials(std::span<const Trial> trials, bool higher_is_better = true,
                                double threshold = kTrialDisagreeSpread);

// Makes the best trial the ceiling's figure (keeping its unit and source) and records every trial
// and their combination in c.params (`trials`, `best_trial`, `trial_medians`,
// `between_trial_spread`, `trials_disagree`); per_core_bytes_per_second (or _flops_) follows the new
// figure.
void record_trials(Ceiling& c, std::span<const Trial> trials, double threshold = kTrialDisagreeSpread);

// After the collector's apply_flags (which clears the flag): "drifting" when the recorded trials
// disagree, unless a datasheet or clock flag already says more; it replaces "noisy", since a
// drifting machine explains a noisy trial too.
void flag_drifting_trials(Ceiling& c);

}  // namespace rafter::probes::cpu
