// The repeat policy loop and the CPU cache flusher.
#include "rafter/collector/timing.hpp"

#include <cstring>

#include "rafter/collector/interrupt.hpp"

namespace rafter {

Summary measure_seconds(const RepeatPolicy& policy, const std::function<void()>& body,
                        const std::function<void()>& before_each) {
  for (int i = 0; i < policy.warmup; ++i) {
    throw_if_interrupted();
    if (before_each) before_each();
    body();
  }
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(policy.max_repeats));
  double measured = 0;
  const double start = now_seconds();
  while (static_cast<int>(samples.size()) < policy.max_repeats) {
    const int n = static_cast<int>(samples.size());
    if (n >= policy.min_repeats &&
        (measured >= policy.min_total_seconds || now_seconds() - start >= policy.max_total_seconds))
      break;
    throw_if_interrupted();  // an interrupt abandons this measurement at its next repeat
    if (before_each) before_each();
    const double t0 = now_seconds();
    body();
    const double dt = now_seconds() - t0;
    samples.push_back(dt);
    measured += dt;
  }
  return summarize(samples);
}

CacheFlusher::CacheFlusher(std::size_t bytes) : buffer_(bytes, 1) {}

void CacheFlusher::flush() {
  // Write then read every line: evicts dirty lines of the measured data from every level.
  volatile unsigned char* p = buffer_.data();
  unsigned acc = sink_;
  for (std::size_t i = 0; i < buffer_.size(); i += 64) {
    p[i] = static_cast<unsigned char>(p[i] + 1);
    acc += p[i];
  }
  sink_ = acc;
}

}  // namespace rafter
