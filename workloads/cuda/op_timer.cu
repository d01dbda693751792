// Operator timing on the GPU (see op_timer.hpp and timing_plan.hpp).
#include <algorithm>
#include <mutex>
#include <vector>

#include "cuda_util.hpp"
#include "op_timer.hpp"
#include "rafter/collector/gpu_timing.hpp"

namespace rafter::workloads::cuda {
namespace {

Summary shifted(const Summary& s, double by) {
  Summary r = s;
  r.median = s.median - by;
  r.min = s.min - by;
  r.max = s.max - by;
  r.mean = s.mean - by;
  r.spread = r.median > 0 ? (r.max - r.min) / r.median : 0;
  r.noisy = r.spread > kDefaultNoisySpread;
  return r;
}

}  // namespace

void l2_read_flush(cudaStream_t stream) {
  int device = 0;
  RAFTER_CUDA_CHECK(cudaGetDevice(&device));
  gpu::read_flush(device, stream);
}

double estimate_seconds(const StreamFn& op) {
  cudaEvent_t a, b;
  RAFTER_CUDA_CHECK(cudaEventCreate(&a));
  RAFTER_CUDA_CHECK(cudaEventCreate(&b));
  op(nullptr);  // warm: module load, cuBLASLt's first-call work
  RAFTER_CUDA_CHECK(cudaEventRecord(a, nullptr));
  op(nullptr);
  RAFTER_CUDA_CHECK(cudaEventRecord(b, nullptr));
  RAFTER_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  RAFTER_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms * 1e-3;
}

namespace {

// Cold timing with events inside the graph: N x (read-flush, event, launch, event), each launch
// timed on its own (collector's time_each_launch), as in Nsight Compute's gpu__time_duration.
bool time_cold_events(const StreamFn& op, const ExecContext& ctx, OpTiming& out) {
  gpu::GpuTiming t;
  const bool ok = gpu::time_each_launch([&](void* s) { op(static_cast<cudaStream_t>(s)); },
                                        [](void* s) { l2_read_flush(static_cast<cudaStream_t>(s)); },
                                        out.plan.launches_per_sample, ctx.policy, current_device_index(ctx.device), t);
  if (!ok) return false;
  out.seconds = t.seconds;
  out.clocks = t.clocks;
  out.graph_used = true;
  return true;
}

}  // namespace

OpTiming time_operator(const StreamFn& op, const ExecContext& ctx) {
  const int device = current_device_index(ctx.device);
  gpu::read_flush_prepare(device);  // allocate the flush buffer now: no cudaMalloc inside a stream capture
  OpTiming out;
  out.plan = plan_gpu_timing(estimate_seconds(op), ctx.warm_cache);
  if (out.plan.flush_l2 && time_cold_events(op, ctx, out)) return out;
  gpu::GpuTimingOptions opts;
  opts.device = device;
  opts.policy = ctx.policy;
  opts.use_graph = out.plan.use_graph;
  opts.launches_per_sample = out.plan.launches_per_sample;
  opts.flush_l2 = false;  // we flush ourselves, inside the graph, before every launch
  auto as_stream = [](void* s) { return static_cast<cudaStream_t>(s); };
  if (!out.plan.flush_l2) {
    auto t = gpu::time_launches([&](void* s) { op(as_stream(s)); }, opts);
    out.seconds = t.seconds, out.clocks = t.clocks, out.graph_used = t.graph_used;
    return out;
  }
  // The launches could not be captured with events: flush-subtracted whole-graph timing instead.
  out.plan.method = "CUDA graph of " + std::to_string(out.plan.launches_per_sample) +
                    " x (L2 read-flush, launch) minus the same graph of flushes alone, / launches";
  auto base = gpu::time_launches([&](void* s) { l2_read_flush(as_stream(s)); }, opts);
  auto t = gpu::time_launches(
      [&](void* s) {
        l2_read_flush(as_stream(s));
        op(as_stream(s));
      },
      opts);
  out.flush_seconds = base.seconds.median;
  out.seconds = shifted(t.seconds, base.seconds.median);
  out.clocks = t.clocks;
  out.clocks.core_hz_before = base.clocks.core_hz_before;
  out.clocks.memory_hz_before = base.clocks.memory_hz_before;
  out.clocks.throttled = t.clocks.throttled || base.clocks.throttled;
  out.graph_used = t.graph_used && base.graph_used;
  return out;
}

nlohmann::json gpu_details(int device) {
  nlohmann::json j = device_facts(device);
  try {
    nlohmann::json nv = gpu::nvml_properties(device);
    if (nv.contains("driver_version")) j["driver_version"] = nv["driver_version"];
    else j["driver_version"] = nv.value("nvml", std::string("unavailable"));
  } catch (const std::exception& e) {
    j["driver_version"] = std::string("unavailable (") + e.what() + ")";
  }
  return j;
}

void time_into_record(const StreamFn& op, const ExecContext& ctx, OperatorRecord& record) {
  OpTiming t = time_operator(op, ctx);
  record.time = Figure::measured(t.seconds, "s");
  record.clocks = t.clocks;
  record.details["timing"] = {{"method", t.plan.method},
                              {"launches_per_sample", t.plan.launches_per_sample},
                              {"graph", t.graph_used},
                              {"warm_cache", !t.plan.flush_l2},
                              {"flush_seconds_subtracted", t.flush_seconds},
                              {"clock_dropped", t.clocks.throttled}};
  record.details["gpu"] = gpu_details(current_device_index(ctx.device));
  if (t.seconds.median <= 0) {
    record.status = RecordStatus::Failed;
    record.note = "time after subtracting the L2 flush is not positive (operator too short to time cold)";
  }
  if (ctx.counters) count_into_record(op, t.plan.flush_l2, ctx, record);
}

}  // namespace rafter::workloads::cuda
