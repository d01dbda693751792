// Statistics over repeated samples: median, min, max, spread, and a flag when the spread is large.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

namespace rafter {

struct Summary {
  double median = 0;
  double min = 0;
  double max = 0;
  double mean = 0;
  double stddev = 0;
  std::size_t samples = 0;
  // (max - min) / median, the relative spread; large values mean the figure is unreliable.
  double spread = 0;
  bool noisy = false;  // spread above the threshold given to summarize()
};

// Relative spread above which a summary is flagged noisy unless told otherwise.
inline constexpr double kDefaultNoisySpread = 0.10;

// Summarizes samples (any unit). Throws InputError on an empty span.
Summary summarize(std::span<const double> samples, double noisy_spread = kDefaultNoisySpread);

// Applies f to each of median/min/max/mean/stddev (e.g. to turn seconds into bytes per second,
// where min and max swap because f is decreasing).
template <class F>
Summary transform(const Summary& s, F f) {
  Summary r = s;
  double a = f(s.min), b = f(s.max);
  r.min = a < b ? a : b;
  r.max = a < b ? b : a;
  r.median = f(s.median);
  r.mean = f(s.mean);
  r.stddev = s.mean != 0 ? s.stddev / s.mean * r.mean : 0;
  if (r.stddev < 0) r.stddev = -r.stddev;
  r.spread = r.median != 0 ? (r.max - r.min) / r.median : 0;
  return r;
}

}  // namespace rafter
