// Printers for `rafter profile`: the plan and the measured run as a console table or CSV, over
// the one data model (rafter::Run). JSON is to_json(run) (run.json's schema).
#pragma once
#include <string>

#include "rafter/collector/run_record.hpp"

namespace rafter::workloads {

// Plan: operator, shape, precision, count, FLOPs and outer-level bytes per step, share of step FLOPs.
std::string plan_table(const Run& run);
std::string plan_csv(const Run& run);
// Run: per record time, share of step time, FLOP/s, GB/s, check; totals; invalid/no_backend marked.
std::string run_table(const Run& run);
std::string run_csv(const Run& run);

}  // namespace rafter::workloads
