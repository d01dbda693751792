// Summary statistics over repeated samples.
#include "rafter/collector/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "rafter/collector/error.hpp"

namespace rafter {

Summary summarize(std::span<const double> samples, double noisy_spread) {
  if (samples.empty()) throw InputError("statistics: no samples to summarize");
  std::vector<double> v(samples.begin(), samples.end());
  std::sort(v.begin(), v.end());
  Summary s;
  s.samples = v.size();
  s.min = v.front();
  s.max = v.back();
  const std::size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(n);
  double sq = 0;
  for (double x : v) sq += (x - s.mean) * (x - s.mean);
  s.stddev = n > 1 ? std::sqrt(sq / static_cast<double>(n - 1)) : 0.0;
  s.spread = s.median != 0 ? (s.max - s.min) / std::fabs(s.median) : 0.0;
  s.noisy = s.spread > noisy_spread;
  return s;
}

}  // namespace rafter
