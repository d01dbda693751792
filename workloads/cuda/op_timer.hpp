// Times one operator's launch sequence on the GPU with collector's time_launches, following the
// TimingPlan (cold L2 by a read-flush, flush time subtracted; or warm), and fills the record's
// time, clocks and the timing/device facts in details.
#pragma once
#include <cuda_runtime.h>

#include <functional>

#include "rafter/collector/run_record.hpp"
#include "rafter/workloads/backend.hpp"
#include "timing_plan.hpp"

namespace rafter::workloads::cuda {

using StreamFn = std::function<void(cudaStream_t)>;

struct OpTiming {
  Summary seconds;          // per launch of the operator
  ClockState clocks;
  TimingPlan plan;
  double flush_seconds = 0;  // median of one read-flush (subtracted)
  bool graph_used = false;
};

// Enqueues one read of a buffer twice the L2 size (evicts L2 without leaving dirty lines).
void l2_read_flush(cudaStream_t stream);
double estimate_seconds(const StreamFn& op);  // one warm launch timed with events
OpTiming time_operator(const StreamFn& op, const ExecContext& ctx);
// time_operator, then record.time / clocks / details ("timing", "gpu").
void time_into_record(const StreamFn& op, const ExecContext& ctx, OperatorRecord& record);
// With ctx.counters: one counted pass of `op` (CUPTI user replay, op_counters.cpp) after timing,
// L2 read-flushed before each of its passes where the timing was cold (`flush_l2`); counted bytes
// per level, flops_counted and details["counters"] (or its "unavailable" status).
void count_into_record(const StreamFn& op, bool flush_l2, const ExecContext& ctx, OperatorRecord& record);
// GPU, compute capability, driver, CUDA runtime and cuBLASLt versions for record.details.gpu.
nlohmann::json gpu_details(int device);

}  // namespace rafter::workloads::cuda
