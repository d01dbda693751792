// GPU hardware counters through CUPTI's range profiler (CUDA 13): one counted pass over a launch,
// user replay, every kernel the launch enqueues counted in its own auto range and summed. No
// CUDA headers here; the counting is implemented in collector/cuda/cupti_counters.cpp (CUDA build
// only), the metric -> level / precision arithmetic in collector/src/gpu_counters.cpp (pure, tested
// on recorded values in tests/fixtures/gpu_counters/). Where counters cannot be read (no GPU,
// NVreg_RestrictProfilingToAdminUsers=1 without root, an unsupported chip) the status says why and
// count_launch throws DeviceUnavailable: callers keep analytic bytes and never see made-up zeros.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "rafter/collector/gpu_timing.hpp"

namespace rafter::gpu {

// The metrics rafter asks for: DRAM read/write bytes, L2 (lts) bytes, L1TEX bytes, SASS thread
// instructions per FP op and precision, and the tensor-pipe metrics of `chip` that exist.
std::vector<std::string> counter_metrics(const std::vector<std::string>& tensor_metrics);

// Tensor-pipe metric names of a chip's base-metric list (sm__ops_path_tensor_src_*): used to pick
// what to count on the chip at hand.
std::vector<std::string> tensor_metrics_of(const std::vector<std::string>& base_metrics);

// Shared-memory wavefronts (ld/st.shared, atomics, wgmma operand reads): recorded with every count;
// the "shared" level is counted only where this is 0 (see gpu_work_from_metrics).
inline constexpr const char* kSharedWavefronts = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum";
// L2 sectors (32 bytes) the SMs (L1TEX) ask for, and those forwarded over the fabric between the L2
// partitions (recorded beside them; lts__t_bytes counts both).
inline constexpr const char* kL2SectorsFromSms = "lts__t_sectors_srcunit_tex.sum";
inline constexpr const char* kL2SectorsOverFabric = "lts__t_sectors_srcunit_ltcfabric.sum";

struct GpuCountedWork {
  std::map<std::string, double> bytes_by_level;  // "shared" (L1TEX), "L2", "HBM"
  std::map<std::string, double> flops;           // "fp64", "fp32", "fp16", "bf16", "tf32", "fp8", "int8"
};

// Bytes per level and FLOPs per precision from metric values (metric name -> value summed over
// the kernels): HBM = DRAM read + write, L2 = lts bytes, shared = l1tex bytes only where the launch
// did no shared-memory wavefronts (absent otherwise: the analytic figure stands). FP64/FP32/FP16 FLOPs: add + mul + 2 x fma thread instructions. Tensor metrics:
// sm__ops_path_tensor_src_<type>... counts per source type (bf16 and fp16 kept apart, fp8 types
// merged, int8 as "int8"), times kTensorFlopsPerOp. Throws InputError on a missing byte or FP
// metric or a negative value.
GpuCountedWork gpu_work_from_metrics(const std::map<std::string, double>& metrics);
extern const double kTensorFlopsPerOp;

struct GpuCounterStatus {
  bool available = false;
  std::string reason;           // why not, or the chip ("gh100")
  std::string summary() const;  // "available (cupti, gh100)" or "unavailable (why)"
};

// Whether CUPTI can count on `device` (probed once per device per process; never throws).
GpuCounterStatus gpu_counter_status(int device);

// The L2 a counted pass starts from (CUPTI 13.4's cache control, Nsight Compute's --cache-control).
// Without the reset, a pass's HBM writes held the operator's whole output: RMSNorm 4096 x 4096
// counted 34 MB where 9.7 MB left L2 inside the kernel (Nsight Compute: 11.7 MB; H200,
// docs/gpu-counters.md).
enum class CacheControl { None, All, L2 };
// The cache control a counted pass asks for: a cold timing (its L2 flush before each launch) resets
// L2 before each pass (All), as Nsight Compute does by default; a warm one keeps what the launch
// before left (None). `env` (RAFTER_CUPTI_CACHE, may be null) overrides: none, all or l2; anything
// else is an InputError.
CacheControl cache_control_for(bool cold, const char* env);
const char* to_string(CacheControl c);

struct CountedPass {
  std::map<std::string, double> metrics;  // summed over every kernel of the launch
  int passes = 0;                         // times the launch ran until CUPTI had every metric
  int kernels = 0;                        // auto ranges (kernels) counted
  std::string replay;                     // "user", or "kernel" (RAFTER_CUPTI_REPLAY=kernel, a diagnostic)
  // The cache control the passes ran under: "all", "l2", "none", or "none (why)" where the one
  // asked for was not available (a CUPTI older than 13.4, or one that refused it).
  std::string cache_control;
  // HBM bytes written back after the launch, of the lines it left dirty in L2 (the read-flush behind
  // it, counted in a range of its own, where the passes ran under the reset); -1 where not counted.
  double hbm_written_after = -1;
  int cupti_version = 0;                  // cuptiGetVersion() of the CUPTI loaded (130401: 13.4)
  double seconds = 0;                     // wall time of the whole counted pass (set-up, passes, evaluation)
};

// The DRAM write metric (kept apart for the write-back after a launch).
inline constexpr const char* kDramBytesWritten = "dram__bytes_write.sum";

// The counted work of a pass: gpu_work_from_metrics of its metrics (what moved inside the launch),
// with the HBM write-back after it (hbm_written_after, where counted) added to the HBM bytes: all the
// traffic the launch causes at that level, as the analytic model counts it.
GpuCountedWork counted_work(const CountedPass& pass);

// What every counted record and probe says of its pass: passes, kernels, cache_control,
// hbm_written_after_bytes, cupti_version (callers add their own fields).
nlohmann::json counted_pass_details(const CountedPass& pass);

// Runs `launch` on `device` under CUPTI user replay, once per pass the metrics need, and sums
// `metrics` over its kernels. `before_each_pass` (the L2 flush of a cold timing; may be empty)
// runs ahead of each pass outside the counted range, so that every pass starts from the cache
// state the timed launches had; with it, CUPTI (13.4 on) also resets L2 before each pass
// (cache_control_for: dirty lines written back, all dropped), so the count is what left L2 inside
// the launch, the window its time measures; the same flush then also runs right behind the launch,
// counted in a range of its own, for the write-back of what it left dirty (hbm_written_after). The
// launch repeats: an operator that updates its inputs in place
// is counted on its later values (the traffic is the same). Throws DeviceUnavailable when counters
// cannot be read here, InputError on other CUPTI/CUDA errors.
CountedPass count_launch(const LaunchFn& launch, const LaunchFn& before_each_pass, int device,
                         const std::vector<std::string>& metrics);

// The metrics to count on `device`: counter_metrics() with the chip's own tensor metrics (looked up once
// per device).
const std::vector<std::string>& counter_metrics_for(int device);

}  // namespace rafter::gpu
