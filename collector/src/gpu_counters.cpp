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

// The precision key of a tensor metric's source type: "sm__ops_path_tensor_src_fp8_dst_fp16.sum" ->
// "fp8"; bf16 and fp16 kept apart, tf32, fp64, int8 (int4 and other integer types as "int").
std::string tensor_precision(const std::string& metric) {
  std::string src = metric.substr(std::string(kTensorPrefix).size());
  src = src.substr(0, src.find_first_of("_."));
  if (src.rfind("fp8", 0) == 0 || src.rfind("e4m3", 0) == 0 || src.rfind("e5m2", 0) == 0) return "fp8";
  if (src.rfind("int", 0) == 0 || src.rfind("u", 0) == 0 || src.rfind("s", 0) == 0) return src.rfind("int8", 0) == 0 ? "int8" : "int";
  return src;
}

}  // namespace

// One tensor "op" in sm__ops_path_tensor_* is a multiply-add of one element pair (see docs/gpu-counters.md).
const double kTensorFlopsPerOp = 2.0;

std::vector<std::string> tensor_metrics_of(const std::vector<std::string>& base_metrics) {
  std::vector<std::string> out;
  for (const auto& m : base_metrics)
    if (m.rfind(kTensorPrefix, 0) == 0) out.push_back(m.find('.') == std::string::npos ? m + ".sum" : m);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::string> counter_metrics(const std::vector<std::string>& tensor_metrics) {
  std::vector<std::string> m = {"dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum",
                                "l1tex__t_bytes.sum"};
  for (const char* p : {"d", "f", "h"})
    for (const char* op : {"add", "mul", "fma"})
      m.push_back(std::string("sm__sass_thread_inst_executed_op_") + p + op + "_pred_on.sum");
  m.insert(m.end(), tensor_metrics.begin(), tensor_metrics.end());
  return m;
}

GpuCountedWork gpu_work_from_metrics(const std::map<std::string, double>& metrics) {
  GpuCountedWork w;
  w.bytes_by_level["HBM"] = value_of(metrics, "dram__bytes_read.sum") + value_of(metrics, "dram__bytes_write.sum");
  w.bytes_by_level["L2"] = value_of(metrics, "lts__t_bytes.sum");
  w.bytes_by_level["shared"] = value_of(metrics, "l1tex__t_bytes.sum");
  const std::pair<const char*, const char*> classes[] = {{"d", "fp64"}, {"f", "fp32"}, {"h", "fp16"}};
  for (const auto& [p, key] : classes) {
    const std::string base = std::string("sm__sass_thread_inst_executed_op_") + p;
    const double f = value_of(metrics, base + "add_pred_on.sum") + value_of(metrics, base + "mul_pred_on.sum") +
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

std::string GpuCounterStatus::summary() const {
  return available ? "available (cupti, " + reason + ")" : "unavailable (" + reason + ")";
}

}  // namespace rafter::gpu
