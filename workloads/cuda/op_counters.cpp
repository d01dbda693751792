// The counted pass of a CUDA operator (rafter profile --counters): after timing, one separate
// launch of the same operator under CUPTI user replay (collector's gpu_counters.hpp), each pass
// after the same L2 read-flush as the cold timing. Counted
// bytes replace the analytic ones per level (kept as model_bytes), counted FLOPs go to
// flops_counted, and the raw metrics to details["counters"]. Timing itself is never counted.
// The counted launch sits in an NVTX range "rafter_counted", and runs (uncounted) even when
// counters are unavailable: an outside profiler (ncu --nvtx --nvtx-include rafter_counted/) then
// counts exactly the same kernels (bench/counters_vs_ncu.sh).
#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "cuda_util.hpp"
#include "op_timer.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/collector/gpu_counters.hpp"

namespace rafter::workloads::cuda {
namespace {

void note_once(const std::string& status) {
  static std::once_flag once;
  std::call_once(once,
                 [&] { fmt::print(stderr, "rafter: note: GPU counters {}; bytes stay analytic\n", status); });
}

// NVTX range around the counted launch (a no-op without an NVTX tool attached).
struct CountedRange {
  CountedRange() { nvtxRangePushA("rafter_counted"); }
  ~CountedRange() { nvtxRangePop(); }
  CountedRange(const CountedRange&) = delete;
  CountedRange& operator=(const CountedRange&) = delete;
};

// The launch alone, uncounted, in the NVTX range: for an outside profiler. With
// RAFTER_NVTX_WRITEBACK set (a diagnostic: bench/counters_vs_ncu.sh's variant ncu_writeback), the
// read-flush that rafter's own count runs behind the launch also runs inside the range, so that a
// profiler measuring the whole range (ncu --replay-mode app-range) counts the write-back of the
// launch's dirty L2 lines too, as the record's counted HBM bytes do (hbm_written_after_bytes).
void launch_marked(const StreamFn& op, bool flush_l2) {
  if (flush_l2) l2_read_flush(nullptr);  // ncu's own cache control flushes too: same state either way
  CountedRange range;
  op(nullptr);
  RAFTER_CUDA_CHECK(cudaDeviceSynchronize());
  if (flush_l2 && std::getenv("RAFTER_NVTX_WRITEBACK") != nullptr) {
    l2_read_flush(nullptr);
    RAFTER_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

}  // namespace

void count_into_record(const StreamFn& op, bool flush_l2, const ExecContext& ctx, OperatorRecord& record) {
  const int device = current_device_index(ctx.device);
  const gpu::GpuCounterStatus status = gpu::gpu_counter_status(device);
  if (!status.available) {
    note_once(status.summary());
    record.details["counters"] = {{"status", status.summary()}};
    launch_marked(op, flush_l2);
    return;
  }
  gpu::CountedPass pass;
  try {
    CountedRange range;
    const auto flush = [](void* s) { l2_read_flush(static_cast<cudaStream_t>(s)); };
    pass = gpu::count_launch([&](void* s) { op(static_cast<cudaStream_t>(s)); },
                             flush_l2 ? gpu::LaunchFn(flush) : gpu::LaunchFn(), device,
                             gpu::counter_metrics_for(device));
  } catch (const InputError& e) {  // DeviceUnavailable included: the timed record stands
    const std::string why = fmt::format("unavailable ({})", e.what());
    note_once(why);
    record.details["counters"] = {{"status", why}};
    return;
  }
  const gpu::GpuCountedWork work = gpu::counted_work(pass);
  for (const auto& [level, bytes] : work.bytes_by_level) set_counted_bytes(record, level, bytes);
  record.flops_counted = work.flops;
  nlohmann::json& details = record.details["counters"] = gpu::counted_pass_details(pass);
  details["status"] = status.summary();
  details["metrics"] = pass.metrics;
  details["seconds"] = pass.seconds;
  details["replay"] = pass.replay;
  details["l2_flushed_before_each_pass"] = flush_l2;
}

}  // namespace rafter::workloads::cuda
