// Counted work of one operator call on a CPU: counts of rafter's CPU events (counters.hpp) turned
// into FLOPs per precision and bytes per memory level, and the counted pass that collects them
// (every thread of the process counted, one replay of the call per event group). The arithmetic is
// pure so that it is tested on recorded counts where no PMU exists (tests/fixtures/counters/).
#pragma once
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rafter/collector/counters.hpp"
#include "rafter/collector/run_record.hpp"

namespace rafter {

struct CountedWork {
  std::map<std::string, double> flops;           // per precision ("fp64", "fp32", or the record's class)
  std::map<std::string, double> bytes_by_level;  // "L2", "L3", "DRAM"
  std::vector<std::string> notes;                // what the counts cannot tell (e.g. no precision split)
  int groups = 0;             // event groups, one replay of the call each (never multiplexed)
  bool thread_set_changed = false;  // threads came or went during the pass: counts may be short
  nlohmann::json raw = nlohmann::json::object();  // meaning -> count
};

// Splits `events` into groups of at most `counters` events, in order (each group is one replay).
// Throws InputError when `counters` < 1.
std::vector<std::vector<RafterEvent>> group_events(const std::vector<RafterEvent>& events, int counters);

// FLOPs and bytes from counts by meaning (rafter_cpu_events(pmu)[i].meaning -> count). Levels: a
// line filled into L1 crossed the L1-L2 boundary ("L2" bytes), a line filled into L2 the L2-L3 one
// ("L3"), a line from memory the DRAM one ("DRAM"); `line_bytes` per line. `precision_class` takes
// FLOPs a PMU does not split by precision (AMD Zen). Throws InputError on an unknown PMU or a
// count that is negative or missing.
CountedWork counted_work_from_counts(const std::string& pmu, const std::map<std::string, double>& counts,
                                     const std::string& precision_class, double line_bytes = 64);

// One counted pass: for each event group, `before()` (untimed: e.g. a cache flush), then `body()`
// with every thread of this process counting (PAPI attached per thread). Throws DeviceUnavailable
// with the reason when this machine has no usable counters (callers keep analytic bytes).
CountedWork count_cpu_pass(const std::function<void()>& before, const std::function<void()>& body,
                           const std::string& precision_class);

// Puts counted work into a record: bytes per level as source `counter` (the analytic figures kept
// as model_bytes), FLOPs as flops_counted, and the raw counts, groups and notes in
// details["counters"].
void apply_counted_work(const CountedWork& w, OperatorRecord& r);

}  // namespace rafter
