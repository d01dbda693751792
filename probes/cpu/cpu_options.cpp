// Option checks, the sweep grid and the frequency measurement.
#include "cpu_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cpu_features.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::probes::cpu {

void validate_cpu_options(const ProbeOptions& options, const Device& cpu) {
  if (!options.isa.empty()) {
    const auto held = held_cpu_isa();
    if (held && isa_level(options.isa) > *held)  // throws if unknown
      throw InputError(fmt::format("--isa {}: wider than RAFTER_CPU_ISA={}", options.isa, to_string(*held)));
    if (!cpu_has_isa(cpu_features(), options.isa))
      throw DeviceUnavailable(fmt::format("--isa {}: this CPU ({}) does not have it", options.isa, cpu.name));
  }
  if (options.threads < 0 || options.threads > cpu.threads)
    throw InputError(fmt::format("--threads {}: expected 1..{} (hardware threads of this CPU)",
                                 options.threads, cpu.threads));
  const double memory = physical_memory_bytes(cpu);
  if (options.max_working_set_bytes < 0)
    throw InputError(fmt::format("--max-working-set {}: must be positive", options.max_working_set_bytes));
  if (options.max_working_set_bytes > 0 && options.max_working_set_bytes < 64 * 1024)
    throw InputError(fmt::format("--max-working-set {:.0f}: at least 65536 bytes (64 KiB)",
                                 options.max_working_set_bytes));
  if (memory > 0 && options.max_working_set_bytes > 0.8 * memory)
    throw InputError(
        fmt::format("--max-working-set {:.0f} bytes: larger than 80% of this machine's memory "
                    "({:.0f} bytes)",
                    options.max_working_set_bytes, memory));
  if (memory > 0 && options.max_working_set_bytes == 0 && max_working_set_bytes(options, cpu) > 0.8 * memory)
    throw InputError(
        fmt::format("the default sweep ({:.0f} bytes) does not fit in memory ({:.0f} bytes): "
                    "give --max-working-set",
                    max_working_set_bytes(options, cpu), memory));
}

std::string selected_isa(const ProbeOptions& options) {
  return options.isa.empty() ? widest_isa(cpu_features()) : options.isa;
}

int all_core_threads(const ProbeOptions& options, const Device& cpu) {
  return options.threads > 0 ? options.threads : std::max(cpu.cores, 1);
}

double last_level_cache_bytes(const Device& cpu) {
  double llc = 0;
  for (const MemoryLevel& m : cpu.memory_levels)
    if (m.name != "DRAM") llc = m.size_bytes;
  return llc > 0 ? llc : 32.0 * 1024 * 1024;
}

double physical_memory_bytes(const Device& cpu) {
  double memory = 0;
  for (const MemoryLevel& m : cpu.memory_levels)
    if (m.name == "DRAM") memory = m.size_bytes * m.instances;
  return memory;
}

double max_working_set_bytes(const ProbeOptions& options, const Device& cpu) {
  if (options.max_working_set_bytes > 0) return options.max_working_set_bytes;
  double total_llc = 0;
  for (const MemoryLevel& m : cpu.memory_levels)
    if (m.name != "DRAM") total_llc = m.size_bytes * m.instances;
  if (total_llc <= 0) total_llc = last_level_cache_bytes(cpu);
  return (options.quick ? 4 : 8) * total_llc;
}

std::vector<double> working_set_grid(double min_bytes, double max_bytes, int per_octave,
                                     double granule_bytes) {
  std::vector<double> grid;
  per_octave = std::max(per_octave, 1);
  // min x 2^(i/per_octave): exp2 of a whole number is exact, so every octave's point is exact.
  for (int i = 0;; ++i) {
    const double ws = min_bytes * std::exp2(static_cast<double>(i) / per_octave);
    if (ws > max_bytes * 1.0001) break;
    const double rounded = std::max(granule_bytes, std::floor(ws / granule_bytes) * granule_bytes);
    if (grid.empty() || rounded > grid.back()) grid.push_back(rounded);
  }
  const double top = std::floor(max_bytes / granule_bytes) * granule_bytes;
  if (grid.empty() || top > grid.back() * 1.05) grid.push_back(top);
  return grid;
}

RepeatPolicy probe_policy(const ProbeOptions& options) {
  if (options.quick) return RepeatPolicy{1, 3, 5, 0.002, 0.05};
  return RepeatPolicy{1, 5, 15, 0.02, 0.4};
}

double measure_core_frequency_hz(double seconds_per_try, int tries) {
  constexpr long kAddsPerIteration = 64;
  long iterations = 1000;
  double best_hz = 0;
  static volatile unsigned long one_source = 1;
  for (int t = 0; t < tries + 1; ++t) {
    unsigned long x = 0;
    const unsigned long one = one_source;
    const double t0 = now_seconds();
    for (long i = 0; i < iterations; ++i) {
      // 64 dependent register-register adds: the chain, not the loop (which runs alongside), sets
      // the time. Not `addq $1`: Golden Cove (Sapphire Rapids, Alder Lake) folds chains of
      // immediate adds at rename, several per cycle (measured there: 8.5–15.4 "GHz").
      __asm__ volatile(
          ".rept 64\n\t"
          "addq %1, %0\n\t"
          ".endr"
          : "+r"(x)
          : "r"(one));
    }
    const double dt = now_seconds() - t0;
    if (t == 0) {  // calibration try: size the next ones to seconds_per_try
      iterations = std::max(1000L, static_cast<long>(iterations * seconds_per_try / std::max(dt, 1e-7)));
      continue;
    }
    best_hz = std::max(best_hz, static_cast<double>(iterations) * kAddsPerIteration / dt);
  }
  return best_hz;
}

int trial_count(const ProbeOptions& options) { return options.quick ? 3 : 5; }

std::vector<LevelCapacity> level_capacities(const Device& cpu, int threads) {
  std::vector<LevelCapacity> levels;
  for (const MemoryLevel& m : cpu.memory_levels) {
    if (m.name == "DRAM") {
      levels.push_back({"DRAM"});
      continue;
    }
    const int per = std::max(m.shared_by_cores, 1);
    const int touched = std::min(m.instances, (threads + per - 1) / per);
    levels.push_back({m.name, m.size_bytes * std::max(touched, 1)});
  }
  return levels;
}

ProbeWindow::ProbeWindow() : ticks_before_(read_cpu_ticks()), hz_before_(measure_core_frequency_hz()) {}

void ProbeWindow::close() {
  hz_after_ = measure_core_frequency_hz();
  ticks_after_ = read_cpu_ticks();
}

ClockState ProbeWindow::clocks() const {
  ClockState c;
  c.core_hz_before = hz_before_;
  c.core_hz_after = hz_after_;
  c.throttled = hz_before_ > 0 && hz_after_ < 0.95 * hz_before_;
  c.steal_fraction = steal_fraction(ticks_before_, ticks_after_);
  return c;
}

void finish_ceiling(Ceiling& c, const ProbeWindow& window) {
  c.clocks = window.clocks();
  c.frequency_hz = window.hz();
  apply_flags(c);
}

}  // namespace rafter::probes::cpu
