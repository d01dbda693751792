// Metric values of a counted GPU pass -> bytes per memory level and FLOPs per precision (see
// gpu_counters.hpp). Pure: tested on recorded values without a GPU.
#include "rafter/collector/gpu_counters.hpp"

#include <algorithm>

#include "rafter/collector/error.hpp"

namespace rafter::gpu {
namespace {

constexpr const char* kTensorPrefix = "sm__ops_path_tensor_src_";

double value_of(const std::map<std::string, double>& m, const std::string& name) {
  auto it = m.find(name);
  if (it == m.end()) throw InputError("GPU counters: metric " + name + " missing");
  if (!(it->second >= 0)) throw InputError("GPU counters: metric " + name + " is negative or not a number");
  return it->second;
}

// The precision key of a tensor metric's source type: "sm__ops_path_tensor_src_bf16_dst_fp32.sum" ->
// "bf16", "..._src_fp8.sum" -> "fp8" (also "tf32", "fp16", "fp64", "int8", "int1").
std::string tensor_precision(const std::string& metric) {
  std::string src = metric.substr(std::string(kTensorPrefix).size());
  return src.substr(0, src.find_first_of("_."));
}

}  // namespace

// sm__ops_path_tensor_* counts math operations, a multiply-add being two (as ncu's roofline
// sections read it; checked against 2mnk on GEMMs by bench/counters_vs_ncu.sh).
const double kTensorFlopsPerOp = 1.0;

std::vector<std::string> tensor_metrics_of(const std::vector<std::string>& base_metrics) {
  // Per source type once: no _sparsity_on/_off splits, and no _dst_ split of a type that is
  // also counted whole (sm__ops_path_tensor_src_fp16 covers ..._src_fp16_dst_fp32).
  std::vector<std::string> names;
  for (const auto& m : base_metrics)
    if (m.rfind(kTensorPrefix, 0) == 0 && m.find("sparsity") == std::string::npos)
      names.push_back(m.substr(0, m.find('.')));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<std::string> out;
  for (const auto& m : names) {
    const bool covered = std::any_of(
        names.begin(), names.end(), [&](const std::string& o) { return o != m && m.rfind(o + "_", 0) == 0; });
    if (!covered) out.push_back(m + ".sum");
  }
  return out;
}

std::vector<std::string> counter_metrics(const std::vector<std::string>& tensor_metrics) {
  // Shared-memory wavefronts (ld/st.shared, atomics and wgmma operand reads) are recorded beside the
  // byte figures: l1tex__t_bytes does not see shared memory.
  std::vector<std::string> m = {"dram__bytes_read.sum", kDramBytesWritten, "lts__t_bytes.sum",
                                "l1tex__t_bytes.sum", kSharedWavefronts, kL2SectorsFromSms, kL2SectorsOverFabric};
  for (const char* p : {"d", "f", "h"})
    for (const char* op : {"add", "mul", "fma"})
      m.push_back(std::string("sm__sass_thread_inst_executed_op_") + p + op + "_pred_on.sum");
  m.insert(m.end(), tensor_metrics.begin(), tensor_metrics.end());
  return m;
}

GpuCountedWork gpu_work_from_metrics(const std::map<std::string, double>& metrics) {
  GpuCountedWork w;
  w.bytes_by_level["HBM"] = value_of(metrics, "dram__bytes_read.sum") + value_of(metrics, kDramBytesWritten);
  // L2: the sectors the SMs ask of it. lts__t_bytes also counts a request again where it crosses
  // the fabric to the other L2 partition (lts__t_sectors_srcunit_ltcfabric), and so read 1.5x
  // every streaming operator's traffic on the H200. Recordings without the SM sectors keep it.
  w.bytes_by_level["L2"] = metrics.count(kL2SectorsFromSms) ? 32 * value_of(metrics, kL2SectorsFromSms)
                                                            : value_of(metrics, "lts__t_bytes.sum");
  // l1tex__t_bytes is the global/local traffic through L1 and misses shared memory (a BF16 GEMM on the
  // H100: 12 KB against ~26 M shared wavefronts). The level is counted only for a launch that did no
  // shared-memory work, where it is the whole L1 traffic; otherwise it keeps its analytic bytes.
  if (auto wf = metrics.find(kSharedWavefronts); wf != metrics.end() && wf->second == 0)
    w.bytes_by_level["shared"] = value_of(metrics, "l1tex__t_bytes.sum");
  const std::pair<const char*, const char*> classes[] = {{"d", "fp64"}, {"f", "fp32"}, {"h", "fp16"}};
  for (const auto& [p, key] : classes) {
    const std::string base = std::string("sm__sass_thread_inst_executed_op_") + p;
    const double f = value_of(metrics, base + "add_pred_on.sum") +
                     value_of(metrics, base + "mul_pred_on.sum") +
                     2 * value_of(metrics, base + "fma_pred_on.sum");
    if (f > 0) w.flops[key] += f;
  }
  for (const auto& [name, v] : metrics) {
    if (name.rfind(kTensorPrefix, 0) != 0) continue;
    const double f = value_of(metrics, name) * kTensorFlopsPerOp;
    if (f > 0) w.flops[tensor_precision(name)] += f;
  }
  return w;
}

GpuCountedWork counted_work(const CountedPass& pass) {
  GpuCountedWork w = gpu_work_from_metrics(pass.metrics);
  if (pass.hbm_written_after > 0) w.bytes_by_level["HBM"] += pass.hbm_written_after;
  return w;
}

nlohmann::json counted_pass_details(const CountedPass& pass) {
  return {{"passes", pass.passes},
          {"kernels", pass.kernels},
          {"cache_control", pass.cache_control},
          {"hbm_written_after_bytes", pass.hbm_written_after},
          {"cupti_version", pass.cupti_version}};
}

CacheControl cache_control_for(bool cold, const char* env) {
  if (!env || !*env) return cold ? CacheControl::All : CacheControl::None;
  const std::string v = env;
  if (v == "none") return CacheControl::None;
  if (v == "all") return CacheControl::All;
  if (v == "l2") return CacheControl::L2;
  throw InputError("RAFTER_CUPTI_CACHE=" + v + ": expected none, all or l2");
}

const char* to_string(CacheControl c) {
  switch (c) {
    case CacheControl::All:
      return "all";
    case CacheControl::L2:
      return "l2";
    case CacheControl::None:
      break;
  }
  return "none";
}

std::string GpuCounterStatus::summary() const {
  return available ? "available (cupti, " + reason + ")" : "unavailable (" + reason + ")";
}

}  // namespace rafter::gpu
