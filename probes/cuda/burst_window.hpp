// The best window of a traced wgmma launch (cuda.tensor's best_1ms_after_idle form): host-only
// arithmetic on the trace the kernel leaves, kept apart so that it is tested without a GPU.
//
// The trace: [0] the last block's start and [1] the first block's end (global timer, ns), then one
// point every `every` iterations of block 0's warpgroup 0: (global timer ns, SM clock64). Only the
// span in which every block runs counts: a block that has finished draws no power and lets the clock
// rise for the rest. The window is chosen by its SM clock, not by warpgroup 0's progress: with three
// warpgroups an SM the tensor pipe does not serve them evenly over a millisecond (an H200 saw
// warpgroup 0 advance 1.163 and 0.974 times its share), while the clock is the SM's own.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace rafter::probes::cuda {

struct TracedLaunch {
  double all_blocks_running_s = 0;         // the span: the last block's start to the first's end
  double sm_hz_first = 0, sm_hz_last = 0;  // the SM clock over the span's first and last `edge` s
  double window_sm_hz = 0;                 // the highest SM clock over `window` seconds in the span
  double window_at_s = 0;                  // where that window starts, from the span's start
  double window_iterations_per_s = 0;      // warpgroup 0's iterations a second in that window
};

// nullopt when the span holds no `window` seconds between two trace points.
inline std::optional<TracedLaunch> best_clock_window(const std::vector<unsigned long long>& trace,
                                                     long long points, long long every, double window,
                                                     double edge) {
  if (trace.size() < std::size_t(2 + 2 * points)) return std::nullopt;
  auto ns = [&](long long i) { return trace[std::size_t(2 + 2 * i)]; };
  auto t = [&](long long i) { return double(ns(i)) * 1e-9; };
  auto hz = [&](long long i, long long j) {
    return double(trace[std::size_t(3 + 2 * j)] - trace[std::size_t(3 + 2 * i)]) / (t(j) - t(i));
  };
  const double from = double(trace[0]) * 1e-9, to = double(trace[1]) * 1e-9;
  long long lo = 0, hi = points - 1;  // the written trace points inside [from, to]
  while (lo < points && (ns(lo) == 0 || t(lo) < from)) ++lo;
  while (hi > lo && (ns(hi) == 0 || t(hi) > to)) --hi;
  if (lo >= points || hi <= lo || t(hi) - t(lo) < window) return std::nullopt;
  auto at = [&](double when) {  // the first trace point at or after `when`, at most hi
    long long i = lo;
    while (i < hi && t(i) < when) ++i;
    return i;
  };
  TracedLaunch r;
  r.all_blocks_running_s = to - from;
  r.sm_hz_first = hz(lo, std::max(at(t(lo) + edge), lo + 1));
  const long long tail = at(t(hi) - edge);
  r.sm_hz_last = hz(tail < hi ? tail : hi - 1, hi);
  for (long long i = lo, j = lo; i <= hi; ++i) {
    while (j <= hi && t(j) - t(i) < window) ++j;
    if (j > hi) break;
    const double f = hz(i, j);
    if (f > r.window_sm_hz) {
      r.window_sm_hz = f;
      r.window_at_s = t(i) - from;
      r.window_iterations_per_s = double((j - i) * every) / (t(j) - t(i));
    }
  }
  return r;
}

}  // namespace rafter::probes::cuda
