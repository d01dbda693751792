// Host-side timing: a steady clock, the warm-up and repeat policy shared by probes and operators,
// and cache flushing between repeats.
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <vector>

#include "rafter/collector/stats.hpp"

namespace rafter {

// How many times to run something and for how long. A sample is one call of the timed function.
struct RepeatPolicy {
  int warmup = 2;                // untimed calls first
  int min_repeats = 5;           // at least this many timed samples
  int max_repeats = 50;          // at most this many
  double min_total_seconds = 0.05;  // keep sampling until this much time was measured ...
  double max_total_seconds = 2.0;   // ... but stop past this budget (after min_repeats)

  static RepeatPolicy quick() { return {1, 3, 10, 0.01, 0.3}; }
};

inline double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// Runs `body` per the policy, calling `before_each` (untimed: e.g. a cache flush) before every
// sample, and returns the summary of the per-call times in seconds.
Summary measure_seconds(const RepeatPolicy& policy, const std::function<void()>& body,
                        const std::function<void()>& before_each = {});

// Evicts the CPU caches by streaming through a buffer larger than the last-level cache.
class CacheFlusher {
 public:
  explicit CacheFlusher(std::size_t bytes = std::size_t{256} << 20);
  void flush();

 private:
  std::vector<unsigned char> buffer_;
  unsigned sink_ = 0;
};

}  // namespace rafter
