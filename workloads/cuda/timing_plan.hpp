// How an operator is timed on the GPU (no CUDA headers; unit-tested without a GPU).
//
// Cold cache (the default): each timed launch is preceded by an L2 flush that READS a buffer twice
// the L2 (a write flush would leave dirty lines that the operator then pays to write back, which
// Nsight Compute's cache control does not charge). A graph holds N × (flush, event, operator,
// event); each launch's event pair is one sample, so neither the flush nor the write-back of the
// operator's own dirty lines (paid by the next flush) lands in its time. Where events cannot be
// captured, the graph of N × (flush, operator) is timed whole and the same graph of flushes alone
// subtracted.
// Warm cache (--warm-cache): graphs of N back-to-back launches, time divided by N.
#pragma once
#include <string>

namespace rafter::workloads::cuda {

struct TimingPlan {
  bool flush_l2 = true;           // cold cache: read-flush before every launch
  bool subtract_flush = false;    // fallback: time a flush-only graph and subtract its median
  int launches_per_sample = 1;    // operator launches captured in one graph sample
  bool use_graph = true;
  std::string method;             // one line for record.details.timing
};

// `estimated_seconds`: one launch's time from an untimed trial (0 when unknown). N is chosen so a
// sample lasts about `target_sample_seconds` (events resolve ~0.5 µs), between 1 and 32.
TimingPlan plan_gpu_timing(double estimated_seconds, bool warm_cache, double flush_seconds = 35e-6,
                           double target_sample_seconds = 2e-3);

}  // namespace rafter::workloads::cuda
