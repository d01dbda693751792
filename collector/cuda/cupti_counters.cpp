// CUPTI range profiler (CUDA 13): a counted pass over one launch with user replay and auto ranges
// (one range per kernel; the launch repeated once per pass the metrics need, the caller's L2 flush
// before each pass, outside the counted range), the ranges' values summed. The host side (config
// image, evaluation) goes through cupti_profiler_host.h and is built once per device.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <cupti_version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rafter/collector/error.hpp"
#include "rafter/collector/gpu_counters.hpp"

namespace rafter::gpu {
namespace {

// Ranges (kernels) a counted launch may hold. The counter data image and the first Start of a pass
// cost time in proportion (4096 ranges: 2.2 s and 4.5 s per operator on the H100), so a launch is
// first counted for kFewRanges and counted again for kMaxRanges only when CUPTI dropped ranges; more
// than kMaxRanges is an error, never a short count.
constexpr std::size_t kFewRanges = 64;
constexpr std::size_t kMaxRanges = 4096;

// Replay mode: user replay (rafter repeats the launch, its L2 flush before each pass) unless
// RAFTER_CUPTI_REPLAY=kernel asks for CUPTI's kernel replay (a diagnostic: bench/counters_vs_ncu.sh).
CUpti_ProfilerReplayMode replay_mode() {
  const char* env = std::getenv("RAFTER_CUPTI_REPLAY");
  return env && std::string(env) == "kernel" ? CUPTI_KernelReplay : CUPTI_UserReplay;
}

// Range mode: one auto range per kernel, unless RAFTER_CUPTI_RANGE=user asks for one user range
// around the whole launch (a diagnostic: bench/counters_vs_ncu.sh's rafter_user_range, beside ncu's
// application-range replay, which also counts an operator's kernels as one result).
bool user_range() {
  const char* env = std::getenv("RAFTER_CUPTI_RANGE");
  return env && std::string(env) == "user";
}

// A zeroed parameter block with its size set, as every CUPTI profiler call wants.
template <class P>
P params(std::size_t size) {
  P p{};
  p.structSize = size;
  return p;
}

std::string cupti_text(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : "CUPTI error " + std::to_string(int(r));
}

// Errors that mean "counters cannot be read here" (DeviceUnavailable), with what to change.
[[noreturn]] void fail(CUptiResult r, const char* what) {
  switch (r) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      throw DeviceUnavailable(
          "GPU performance counters are restricted to administrators: load the nvidia module with "
          "NVreg_RestrictProfilingToAdminUsers=0 (e.g. in /etc/modprobe.d) or run rafter as root");
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_INITIALIZED:
      throw DeviceUnavailable(std::string(what) + ": " + cupti_text(r));
    default:
      throw InputError(std::string(what) + ": " + cupti_text(r));
  }
}

// RAFTER_CUPTI_TRACE=1 prints each CUPTI call and its result on stderr (diagnosing a driver).
// Each line carries the seconds since the first traced call (where a counted pass spends its time).
void check(CUptiResult r, const char* what) {
  static const bool trace = std::getenv("RAFTER_CUPTI_TRACE") != nullptr;
  static const auto t0 = std::chrono::steady_clock::now();
  if (trace) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "rafter: cupti: %9.3f s %s -> %d\n", t, what, int(r));
    std::fflush(stderr);
  }
  if (r != CUPTI_SUCCESS) fail(r, what);
}

CUcontext context_of(int device) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= device || device < 0)
    throw DeviceUnavailable("no CUDA device " + std::to_string(device));
  if (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess)
    throw DeviceUnavailable("CUDA device " + std::to_string(device) + " cannot be initialised");
  // The driver's cuCtxGetCurrent through the runtime: a direct call would make every rafter binary
  // need libcuda.so.1, and fail to start on a machine without the NVIDIA driver.
  static PFN_cuCtxGetCurrent_v4000 get_current = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 4000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuCtxGetCurrent_v4000>(fn);
  }();
  CUcontext ctx = nullptr;
  if (!get_current || get_current(&ctx) != CUDA_SUCCESS || !ctx) throw DeviceUnavailable("no current CUDA context");
  return ctx;
}

void profiler_initialize() {
  static std::once_flag once;
  static CUptiResult result = CUPTI_SUCCESS;
  std::call_once(once, [] {
    auto p = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    result = cuptiProfilerInitialize(&p);
  });
  check(result, "cuptiProfilerInitialize");
}

std::string chip_name(int device) {
  auto p = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  p.deviceIndex = std::size_t(device);
  check(cuptiDeviceGetChipName(&p), "cuptiDeviceGetChipName");
  return p.pChipName;
}

std::vector<std::uint8_t> counter_availability(CUcontext ctx) {
  auto p = params<CUpti_Profiler_GetCounterAvailability_Params>(
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  p.ctx = ctx;
  check(cuptiProfilerGetCounterAvailability(&p), "cuptiProfilerGetCounterAvailability");
  std::vector<std::uint8_t> image(p.counterAvailabilityImageSize);
  p.pCounterAvailabilityImage = image.data();
  check(cuptiProfilerGetCounterAvailability(&p), "cuptiProfilerGetCounterAvailability");
  return image;
}

// The profiler-host object of one chip: builds config images and evaluates counter data.
struct Host {
  CUpti_Profiler_Host_Object* object = nullptr;
  Host(const std::string& chip, const std::vector<std::uint8_t>& availability) {
    auto p = params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    p.pChipName = chip.c_str();
    // No availability image: on the H100 (CUPTI 13.0, driver 580) cuptiProfilerHostConfigAddMetrics
    // crashed when the host was initialised with the context's image (bench call of this commit's
    // parent); the NVIDIA-maintained nvbench passes none either. Counters the context cannot
    // read then fail at set-up or collection with an error, which counts as "unavailable".
    p.pCounterAvailabilityImage = nullptr;
    (void)availability;
    check(cuptiProfilerHostInitialize(&p), "cuptiProfilerHostInitialize");
    object = p.pHostObject;
  }
  ~Host() {
    auto p =
        params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
    p.pHostObject = object;
    cuptiProfilerHostDeinitialize(&p);
  }
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  std::vector<std::string> base_metrics() const {
    auto p = params<CUpti_Profiler_Host_GetBaseMetrics_Params>(
        CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE);
    p.pHostObject = object;
    p.metricType = CUPTI_METRIC_TYPE_COUNTER;
    check(cuptiProfilerHostGetBaseMetrics(&p), "cuptiProfilerHostGetBaseMetrics");
    return std::vector<std::string>(p.ppMetricNames, p.ppMetricNames + p.numMetrics);
  }

  std::vector<std::uint8_t> config(std::vector<const char*>& names) const {
    auto a = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    a.pHostObject = object;
    a.ppMetricNames = names.data();
    a.numMetrics = names.size();
    check(cuptiProfilerHostConfigAddMetrics(&a), "cuptiProfilerHostConfigAddMetrics");
    auto s = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    s.pHostObject = object;
    check(cuptiProfilerHostGetConfigImageSize(&s), "cuptiProfilerHostGetConfigImageSize");
    std::vector<std::uint8_t> image(s.configImageSize);
    auto g = params<CUpti_Profiler_Host_GetConfigImage_Params>(
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
    g.pHostObject = object;
    g.configImageSize = image.size();
    g.pConfigImage = image.data();
    check(cuptiProfilerHostGetConfigImage(&g), "cuptiProfilerHostGetConfigImage");
    return image;
  }
};

// The range profiler enabled on a context for the life of this object, under a cache control where
// the CUPTI at hand has one (13.4 on; `cache_control` then says what it ran under, `resets_l2`
// whether it resets L2 before each pass).
struct RangeProfiler {
  CUpti_RangeProfiler_Object* object = nullptr;
  std::size_t max_ranges = kFewRanges;
  CacheControl asked = CacheControl::None;
  std::string cache_control;
  bool resets_l2 = false;
  std::uint32_t cupti_version = 0;  // cuptiGetVersion() of the libcupti loaded
  RangeProfiler(CUcontext ctx, std::size_t ranges, CacheControl cache) : max_ranges(ranges), asked(cache) {
    // The parameters as CUPTI 13.0 knew them (no cache control): what an older libcupti takes.
    auto p = params<CUpti_RangeProfiler_Enable_Params>(
        CUPTI_PROFILER_STRUCT_SIZE(CUpti_RangeProfiler_Enable_Params, pRangeProfilerObject));
    p.ctx = ctx;
    cuptiGetVersion(&cupti_version);
    const std::uint32_t loaded = cupti_version;
    cache_control = to_string(cache);
    if (cache != CacheControl::None && (CUPTI_API_VERSION < 130400 || loaded < 130400))
      cache_control = "none (CUPTI " + std::to_string(std::min<std::uint32_t>(CUPTI_API_VERSION, loaded)) +
                      " has no cache control; 13.4 does)";
#if CUPTI_API_VERSION >= 130400
    if (cache != CacheControl::None && loaded >= 130400) {
      auto c = params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
      c.ctx = ctx;
      c.cacheControlMode =
          cache == CacheControl::All ? CUPTI_CACHE_CONTROL_MODE_ALL : CUPTI_CACHE_CONTROL_MODE_L2;
      const CUptiResult r = cuptiRangeProfilerEnable(&c);
      if (r == CUPTI_SUCCESS) {
        object = c.pRangeProfilerObject;
        resets_l2 = true;
        return;
      }
      if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) check(r, "cuptiRangeProfilerEnable");
      // A driver that refuses the cache control: count without it, and say so.
      cache_control = "none (CUPTI refused cache control " + cache_control + ": " + cupti_text(r) + ")";
    }
#endif
    check(cuptiRangeProfilerEnable(&p), "cuptiRangeProfilerEnable");
    object = p.pRangeProfilerObject;
  }
  ~RangeProfiler() {
    auto p = params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = object;
    cuptiRangeProfilerDisable(&p);
  }
  RangeProfiler(const RangeProfiler&) = delete;
  RangeProfiler& operator=(const RangeProfiler&) = delete;

  std::vector<std::uint8_t> counter_data(std::vector<const char*>& names) const {
    auto s = params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
    s.pRangeProfilerObject = object;
    s.pMetricNames = names.data();
    s.numMetrics = names.size();
    s.maxNumOfRanges = max_ranges;
    s.maxNumRangeTreeNodes = max_ranges;
    check(cuptiRangeProfilerGetCounterDataSize(&s), "cuptiRangeProfilerGetCounterDataSize");
    std::vector<std::uint8_t> data(s.counterDataSize);
    auto i = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    i.pRangeProfilerObject = object;
    i.counterDataSize = data.size();
    i.pCounterData = data.data();
    check(cuptiRangeProfilerCounterDataImageInitialize(&i), "cuptiRangeProfilerCounterDataImageInitialize");
    return data;
  }

  void configure(const std::vector<std::uint8_t>& config, std::vector<std::uint8_t>& data) const {
    auto p = params<CUpti_RangeProfiler_SetConfig_Params>(CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = object;
    p.configSize = config.size();
    p.pConfig = config.data();
    p.counterDataImageSize = data.size();
    p.pCounterDataImage = data.data();
    p.range = user_range() ? CUPTI_UserRange : CUPTI_AutoRange;
    p.replayMode = replay_mode();
    p.maxRangesPerPass = max_ranges;
    p.numNestingLevels = 1;
    p.minNestingLevel = 1;
    p.passIndex = 0;
    p.targetNestingLevel = 1;
    check(cuptiRangeProfilerSetConfig(&p), "cuptiRangeProfilerSetConfig");
  }

  // Passes until CUPTI has every metric: `before` (uncounted), then the launch between Start and
  // Stop, and `after` (counted, in ranges of its own) behind it (under kernel replay CUPTI replays
  // inside the one pass). Returns the passes and the ranges CUPTI dropped (more kernels than
  // max_ranges).
  std::pair<int, std::size_t> run(const LaunchFn& launch, const LaunchFn& before,
                                  const LaunchFn& after) const {
    constexpr int kMaxPasses = 256;  // a config image needs tens of passes at most
    int passes = 0;
    for (bool all_submitted = false; !all_submitted; ++passes) {
      if (passes == kMaxPasses) throw InputError("GPU counters: the counted launch never completed its passes");
      if (before) before(nullptr);
      auto s = params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
      s.pRangeProfilerObject = object;
      check(cuptiRangeProfilerStart(&s), "cuptiRangeProfilerStart");
      const bool user = user_range();
      if (user) {
        auto r =
            params<CUpti_RangeProfiler_PushRange_Params>(CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE);
        r.pRangeProfilerObject = object;
        r.pRangeName = "launch";
        check(cuptiRangeProfilerPushRange(&r), "cuptiRangeProfilerPushRange");
      }
      launch(nullptr);  // the legacy default stream, after the flush on the same stream
      if (after) after(nullptr);
      const cudaError_t e = cudaDeviceSynchronize();
      if (user) {
        auto r = params<CUpti_RangeProfiler_PopRange_Params>(CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE);
        r.pRangeProfilerObject = object;
        check(cuptiRangeProfilerPopRange(&r), "cuptiRangeProfilerPopRange");
      }
      auto t = params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
      t.pRangeProfilerObject = object;
      check(cuptiRangeProfilerStop(&t), "cuptiRangeProfilerStop");
      if (e != cudaSuccess) throw InputError(std::string("counted launch: ") + cudaGetErrorString(e));
      all_submitted = t.isAllPassSubmitted != 0;
    }
    auto d = params<CUpti_RangeProfiler_DecodeData_Params>(CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
    d.pRangeProfilerObject = object;
    check(cuptiRangeProfilerDecodeData(&d), "cuptiRangeProfilerDecodeData");
    return {passes, d.numOfRangeDropped};
  }
};

// Sums the metrics over the launch's ranges into `out`; with `trailer`, the last range (the read-flush
// after the launch) goes into *trailer instead. Returns the ranges summed into `out`.
int sum_ranges(const Host& host, std::vector<std::uint8_t>& data, std::vector<const char*>& names,
               std::map<std::string, double>& out, std::map<std::string, double>* trailer = nullptr) {
  auto info = params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = data.data();
  info.counterDataImageSize = data.size();
  check(cuptiRangeProfilerGetCounterDataInfo(&info), "cuptiRangeProfilerGetCounterDataInfo");
  for (const char* n : names) out[n] = 0;
  if (trailer)
    for (const char* n : names) (*trailer)[n] = 0;
  const std::size_t own = info.numTotalRanges - (trailer && info.numTotalRanges > 0 ? 1 : 0);
  if (own == 0) throw InputError("GPU counters: the launch ran no kernel to count");
  std::vector<double> values(names.size());
  for (std::size_t r = 0; r < info.numTotalRanges; ++r) {
    auto e = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    e.pHostObject = host.object;
    e.pCounterDataImage = data.data();
    e.counterDataImageSize = data.size();
    e.rangeIndex = r;
    e.ppMetricNames = names.data();
    e.numMetrics = names.size();
    e.pMetricValues = values.data();
    check(cuptiProfilerHostEvaluateToGpuValues(&e), "cuptiProfilerHostEvaluateToGpuValues");
    auto& into = r < own ? out : *trailer;
    for (std::size_t i = 0; i < names.size(); ++i) into[names[i]] += values[i];
    if (std::getenv("RAFTER_CUPTI_TRACE"))  // each kernel's DRAM figures (where a write-back lands)
      for (std::size_t i = 0; i < names.size(); ++i)
        if (std::string(names[i]).rfind("dram__", 0) == 0)
          std::fprintf(stderr, "rafter: cupti: range %zu %s = %.6g\n", r, names[i], values[i]);
  }
  return int(own);
}

std::mutex& cupti_mutex() {
  static std::mutex m;
  return m;
}

// The host side of counting on one device, built once: the chip's profiler host and the config
// image of a metric set (a model step asks for the same set on every operator). The host adds each
// config's metrics to what it holds, so another set takes a new host.
struct DeviceCounting {
  std::string chip;
  Host host;
  std::vector<std::string> metrics;
  std::vector<const char*> names;
  std::vector<std::uint8_t> config;
  DeviceCounting(int device, const CUcontext ctx) : chip(chip_name(device)), host(chip, counter_availability(ctx)) {}
  void configure(const std::vector<std::string>& wanted) {
    metrics = wanted;
    for (const auto& m : metrics) names.push_back(m.c_str());
    config = host.config(names);
  }
};

// Under cupti_mutex. Never destroyed: CUPTI may be torn down before static destructors run.
// `metrics` empty: any host of the device will do (base metrics, status).
DeviceCounting& counting_on(int device, const std::vector<std::string>& metrics = {}) {
  static auto* known = new std::map<int, std::unique_ptr<DeviceCounting>>;
  auto& c = (*known)[device];
  const CUcontext ctx = context_of(device);
  profiler_initialize();
  const bool reconfigure = !metrics.empty() && (!c || c->metrics != metrics);
  if (!c || (reconfigure && !c->config.empty())) c = std::make_unique<DeviceCounting>(device, ctx);
  if (reconfigure) c->configure(metrics);
  return *c;
}

}  // namespace

const std::vector<std::string>& counter_metrics_for(int device) {
  std::lock_guard lock(cupti_mutex());
  static auto* known = new std::map<int, std::vector<std::string>>;  // never destroyed, as counting_on
  auto it = known->find(device);
  if (it == known->end())
    it = known->emplace(device, counter_metrics(tensor_metrics_of(counting_on(device).host.base_metrics()))).first;
  return it->second;
}

GpuCounterStatus gpu_counter_status(int device) {
  static std::mutex m;
  static std::map<int, GpuCounterStatus> known;
  std::lock_guard lock(m);
  if (auto it = known.find(device); it != known.end()) return it->second;
  GpuCounterStatus s;
  if (const char* env = std::getenv("RAFTER_GPU_COUNTERS"); env && std::string(env) == "off") {
    s.reason =
        "switched off by RAFTER_GPU_COUNTERS=off";  // e.g. while an outside profiler holds the counters
    return known[device] = s;
  }
  try {
    // Profiler set-up on the device, the range profiler enabled and disabled: what fails here
    // (privileges, an unsupported or virtualised GPU) fails every counted pass.
    std::lock_guard cupti_lock(cupti_mutex());
    DeviceCounting& counting = counting_on(device);
    RangeProfiler profiler(context_of(device), kFewRanges, CacheControl::None);
    s.available = true;
    s.reason = counting.chip;
  } catch (const std::exception& e) {
    s.reason = e.what();
  }
  known[device] = s;
  return s;
}

CountedPass count_launch(const LaunchFn& launch, const LaunchFn& before_each_pass, int device,
                         const std::vector<std::string>& metrics) {
  std::lock_guard lock(cupti_mutex());
  const auto t0 = std::chrono::steady_clock::now();
  DeviceCounting& counting = counting_on(device, metrics);
  CountedPass out;
  // The few-range profiler stays enabled between counted passes: enabling and configuring it per
  // operator cost 0.37 s of each 0.4 s pass. Left on, it does not move later timed launches: in a
  // Llama-2 7B prefill step each record's time with --counters over its plain time had the same
  // median (1.010) and range (1.00-1.06) as with the profiler disabled after every pass (1.008-1.014,
  // 0.99-1.06), while the counted passes took 2.2 s instead of 5.4 s (H100, 2026-11-25).
  static auto* kept = new std::map<int, std::unique_ptr<RangeProfiler>>;  // never destroyed, as counting_on
  const CacheControl cache = cache_control_for(bool(before_each_pass), std::getenv("RAFTER_CUPTI_CACHE"));
  for (std::size_t ranges = kFewRanges;; ranges = kMaxRanges) {
    std::unique_ptr<RangeProfiler> own;
    auto& held = (*kept)[device];
    if (ranges != kFewRanges || (held && held->asked != cache))
      held.reset();  // one profiler per context at a time
    if (ranges == kFewRanges && !held)
      held = std::make_unique<RangeProfiler>(context_of(device), ranges, cache);
    if (!held) own = std::make_unique<RangeProfiler>(context_of(device), ranges, cache);
    const RangeProfiler& profiler = held ? *held : *own;
    // Under the reset, the lines the launch leaves dirty in L2 are written back after its ranges,
    // outside its count as outside its time: the same read-flush right behind it, in a range of its
    // own, counts that write-back (the flush itself only reads). Not with one user range around the
    // launch, nor under kernel replay (diagnostics).
    const bool tail =
        before_each_pass && profiler.resets_l2 && !user_range() && replay_mode() == CUPTI_UserReplay;
    std::vector<std::uint8_t> data = profiler.counter_data(counting.names);
    profiler.configure(counting.config, data);
    const auto [passes, dropped] =
        profiler.run(launch, before_each_pass, tail ? before_each_pass : LaunchFn());
    if (dropped > 0 && ranges < kMaxRanges) continue;  // more kernels than kFewRanges: count again
    if (dropped > 0)
      throw InputError("GPU counters: " + std::to_string(dropped) + " kernels beyond " + std::to_string(kMaxRanges) +
                       " were not counted");
    out.passes = passes;
    out.replay = replay_mode() == CUPTI_KernelReplay ? "kernel" : "user";
    out.cache_control = profiler.cache_control;
    out.cupti_version = int(profiler.cupti_version);
    std::map<std::string, double> after;
    out.kernels = sum_ranges(counting.host, data, counting.names, out.metrics, tail ? &after : nullptr);
    if (tail) out.hbm_written_after = after.at(kDramBytesWritten);
    break;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace rafter::gpu
