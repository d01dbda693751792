// GPU timing policy (see timing_plan.hpp).
#include "timing_plan.hpp"

#include <algorithm>
#include <cmath>

namespace rafter::workloads::cuda {

TimingPlan plan_gpu_timing(double estimated_seconds, bool warm_cache, double flush_seconds,
                           double target_sample_seconds) {
  TimingPlan p;
  p.flush_l2 = !warm_cache;
  p.subtract_flush = false;  // only the fallback subtracts (op_timer.cu)
  double per_launch = std::max(0.0, estimated_seconds) + (warm_cache ? 0.0 : std::max(0.0, flush_seconds));
  int n = per_launch > 0 ? static_cast<int>(std::ceil(target_sample_seconds / per_launch)) : 8;
  p.launches_per_sample = std::clamp(n, 1, 32);
  p.use_graph = true;
  p.method = warm_cache ? "CUDA graph of " + std::to_string(p.launches_per_sample) +
                              " back-to-back launches (warm L2), time / launches"
                        : "CUDA graph of " + std::to_string(p.launches_per_sample) +
                              " x (L2 read-flush, event, launch, event); each launch's event pair is a sample";
  return p;
}

}  // namespace rafter::workloads::cuda
