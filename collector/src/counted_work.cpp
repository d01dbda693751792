// Counts to FLOPs and bytes, event grouping, and the CPU counted pass (see counted_work.hpp).
#include "rafter/collector/counted_work.hpp"

#include <fmt/core.h>
#include <papi.h>

#include <filesystem>
#include <memory>
#include <set>

#include "rafter/collector/error.hpp"

namespace rafter {

std::vector<std::vector<RafterEvent>> group_events(const std::vector<RafterEvent>& events, int counters) {
  if (counters < 1) throw InputError(fmt::format("cannot group events into {} counters", counters));
  std::vector<std::vector<RafterEvent>> groups;
  for (const auto& e : events) {
    if (groups.empty() || static_cast<int>(groups.back().size()) == counters) groups.emplace_back();
    groups.back().push_back(e);
  }
  return groups;
}

namespace {

double count_of(const std::map<std::string, double>& counts, const std::string& meaning) {
  const auto it = counts.find(meaning);
  if (it == counts.end()) throw InputError(fmt::format("counted pass: no count for '{}'", meaning));
  if (!(it->second >= 0)) throw InputError(fmt::format("counted pass: '{}' counted {}", meaning, it->second));
  return it->second;
}

}  // namespace

CountedWork counted_work_from_counts(const std::string& pmu, const std::map<std::string, double>& counts,
                                     const std::string& precision_class, double line_bytes) {
  const auto events = rafter_cpu_events(pmu);
  if (events.empty()) throw InputError(fmt::format("no rafter CPU event table for PMU '{}'", pmu));
  CountedWork w;
  for (const auto& e : events) w.raw[e.meaning] = count_of(counts, e.meaning);
  const bool zen = pmu.rfind("amd64_fam19h_", 0) == 0;
  if (zen) {
    // RETIRED_SSE_AVX_FLOPS counts FLOPs (an FMA twice) without saying in which precision.
    w.flops[precision_class] = count_of(counts, "flops_any");
    w.notes.push_back(fmt::format("{} counts FLOPs without a precision: all taken as {}", pmu, precision_class));
    w.bytes_by_level["L2"] = count_of(counts, "l1d_fills_any") * line_bytes;
    w.bytes_by_level["L3"] = (count_of(counts, "l1d_fills_any") - count_of(counts, "l1d_fills_from_l2")) * line_bytes;
    w.bytes_by_level["DRAM"] = count_of(counts, "l1d_fills_from_dram") * line_bytes;
    w.notes.push_back("L3 and DRAM bytes are demand fills into L1: lines an L2 prefetcher brought are not seen");
    return w;
  }
  // Intel: FP_ARITH_INST_RETIRED by width, scale = FLOPs per instruction (an FMA counts twice).
  for (const auto& e : events) {
    if (e.unit != "FLOP") continue;
    const std::string precision = e.meaning.rfind("fp64", 0) == 0 ? "fp64" : "fp32";
    w.flops[precision] += count_of(counts, e.meaning) * e.scale;
  }
  w.bytes_by_level["L2"] = count_of(counts, "l1d_fills") * line_bytes;
  w.bytes_by_level["L3"] = count_of(counts, "l2_fills") * line_bytes;
  w.bytes_by_level["DRAM"] = count_of(counts, "llc_misses") * line_bytes;
  if (precision_class != "fp64" && precision_class != "fp32")
    w.notes.push_back(fmt::format("FP_ARITH_INST_RETIRED counts FP32/FP64 only: {} work is not in the counted FLOPs",
                                  precision_class));
  return w;
}

void apply_counted_work(const CountedWork& w, OperatorRecord& r) {
  for (const auto& [level, bytes] : w.bytes_by_level) set_counted_bytes(r, level, bytes);
  r.flops_counted.clear();
  for (const auto& [precision, flops] : w.flops)
    if (flops > 0) r.flops_counted[precision] = flops;
  r.details["counters"] = {{"source", "papi"}, {"counts", w.raw}, {"groups", w.groups}, {"notes", w.notes}};
}

namespace {

std::set<int> process_threads() {
  std::set<int> tids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task"))
    tids.insert(std::stoi(entry.path().filename().string()));
  return tids;
}

// One PAPI event set per thread of the process, attached to it.
class AttachedSets {
 public:
  AttachedSets(const std::vector<RafterEvent>& group, const std::set<int>& tids) {
    std::vector<std::string> names;
    for (const auto& e : group) names.push_back(e.native);
    for (int tid : tids) sets_.push_back(std::make_unique<CounterSet>(names, tid));
  }
  void start() {
    for (auto& s : sets_) s->start();
  }
  std::vector<double> stop() {
    std::vector<double> sum;
    for (auto& s : sets_) {
      const auto v = s->stop();
      sum.resize(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) sum[i] += static_cast<double>(v[i]);
    }
    return sum;
  }

 private:
  std::vector<std::unique_ptr<CounterSet>> sets_;
};

}  // namespace

CountedWork count_cpu_pass(const std::function<void()>& before, const std::function<void()>& body,
                           const std::string& precision_class) {
  const CounterStatus& status = cpu_counter_status();
  if (!status.available) throw DeviceUnavailable("hardware counters " + status.summary());
  const auto events = rafter_cpu_events(status.pmu);
  if (events.empty()) throw DeviceUnavailable(fmt::format("no rafter CPU event table for PMU '{}'", status.pmu));
  const auto groups = group_events(events, status.hardware_counters);
  std::map<std::string, double> counts;
  bool changed = false;
  for (const auto& group : groups) {
    if (before) before();
    const auto tids = process_threads();
    AttachedSets sets(group, tids);
    sets.start();
    body();
    const auto values = sets.stop();
    changed = changed || process_threads() != tids;
    for (std::size_t i = 0; i < group.size(); ++i) counts[group[i].meaning] = values.at(i);
  }
  CountedWork w = counted_work_from_counts(status.pmu, counts, precision_class);
  w.groups = static_cast<int>(groups.size());
  w.thread_set_changed = changed;
  if (changed) w.notes.push_back("threads started or ended during the counted pass: their counts may be missing");
  return w;
}

}  // namespace rafter
