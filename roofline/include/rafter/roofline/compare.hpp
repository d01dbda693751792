// Comparisons: several runs of one model side by side (BF16 vs FP8 vs NVFP4, or one run judged
// against several machines' profiles — the what-if), and two machine profiles ceiling by ceiling.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "rafter/roofline/placement.hpp"

namespace rafter::roofline {

// One operator across the placements; a cell is empty where that run has no such operator.
struct CompareRow {
  std::string key;    // Placement::match_key(), with "#n" for repeats within a run
  std::string name;   // display name
  std::string phase;
  std::vector<const Placement*> cells;
};

// Rows point into `columns`: moving keeps them valid, copying would not (so it is not allowed).
struct RunComparison {
  RunComparison() = default;
  RunComparison(RunComparison&&) = default;
  RunComparison& operator=(RunComparison&&) = default;
  RunComparison(const RunComparison&) = delete;
  RunComparison& operator=(const RunComparison&) = delete;
  std::vector<RunPlacement> columns;  // in the order given
  std::vector<CompareRow> rows;       // first-seen order over the columns
};

// Matches operators by label and phase (precision differs between the runs on purpose).
RunComparison compare_runs(std::vector<RunPlacement> placements);

// One ceiling across machines; a value of 0 means the machine has no such roof.
struct CeilingRow {
  std::string kind;      // "compute", "memory", "link", "latency"
  std::string resource;  // precision, level, link, "launch"
  std::string unit;      // "FLOP/s", "B/s", "s"
  std::vector<double> values;
};

struct MachineComparison {
  std::vector<std::string> names;  // one per machine (file stem)
  std::vector<DeviceRoofs> roofs;
  std::vector<CeilingRow> rows;
};

// Compares the roofs of the device `device_id` (or the same kind) in each profile.
MachineComparison compare_machines(const std::vector<std::string>& names,
                                   const std::vector<MachineProfile>& profiles, std::string_view device_id);

}  // namespace rafter::roofline
