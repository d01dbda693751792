// What the CPU probes share: checking the options against this CPU before anything is measured,
// the working-set grid, the repeat policy, the thread counts, and the measured core clock.
#pragma once
#include <string>
#include <vector>

#include "plateau.hpp"
#include "rafter/collector/environment.hpp"
#include "rafter/probes/probe.hpp"

namespace rafter::probes::cpu {

// Throws InputError / DeviceUnavailable for an unknown ISA, an ISA this CPU lacks, a thread count
// outside 1..hardware threads, or a maximum working set larger than physical memory.
void validate_cpu_options(const ProbeOptions& options, const Device& cpu);

std::string selected_isa(const ProbeOptions& options);                 // --isa, or the widest present
int all_core_threads(const ProbeOptions& options, const Device& cpu);  // --threads, or every core

double last_level_cache_bytes(const Device& cpu);  // one instance of the outermost cache
double physical_memory_bytes(const Device& cpu);   // the DRAM level's total, 0 when unknown
// The largest working set of a sweep: --max-working-set, else 4x (quick) or 8x the total LLC.
double max_working_set_bytes(const ProbeOptions& options, const Device& cpu);

// A log grid of working-set sizes from min to max (both included), `per_octave` points per
// doubling, each rounded down to a multiple of `granule_bytes`.
std::vector<double> working_set_grid(double min_bytes, double max_bytes, int per_octave,
                                     double granule_bytes);

RepeatPolicy probe_policy(const ProbeOptions& options);
// Trials per ceiling where a probe takes several (trials.hpp): 3 with --quick, else 5.
int trial_count(const ProbeOptions& options);

// What `threads` threads on cores 0..threads-1 can hold at each level: one instance's size times
// the instances they touch (private L1/L2: one per thread; a shared L3: one); DRAM unbounded.
std::vector<LevelCapacity> level_capacities(const Device& cpu, int threads);

// The core clock and the hypervisor's steal around a probe: constructed before its measurements
// (clock measured, CPU ticks read), closed after them.
class ProbeWindow {
 public:
  ProbeWindow();
  void close();
  double hz_before() const { return hz_before_; }
  double hz_after() const { return hz_after_; }
  double hz() const { return 0.5 * (hz_before_ + hz_after_); }
  ClockState clocks() const;  // throttled when the clock fell by more than 5%; the steal share

 private:
  CpuTicks ticks_before_, ticks_after_;
  double hz_before_ = 0, hz_after_ = 0;
};

// Sets the measured clock and steal, then the datasheet ratio and flags (collector's apply_flags).
void finish_ceiling(Ceiling& c, const ProbeWindow& window);

// The core clock, measured: a chain of dependent integer adds (1 cycle each on every x86 core
// since the Pentium Pro) timed against the steady clock; the best of a few tries, since
// preemption only ever makes it look slower.
double measure_core_frequency_hz(double seconds_per_try = 0.001, int tries = 20);

}  // namespace rafter::probes::cpu
