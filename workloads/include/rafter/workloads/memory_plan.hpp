// Device memory is planned, not discovered: before an instance runs, what it needs (its tensors'
// footprint plus the backend's extra: workspaces, staging copies) is compared with the memory the
// device has free. An instance that fits runs as asked. A streaming operator too large for the
// device (AdamW of a 7B model, a long RMSNorm) is timed on the largest slice of its streaming
// parameter that fits and its time scaled by compulsory bytes (ScaledFrom); anything else that
// does not fit is not run (RecordStatus::DoesNotFit) and the rest of the step goes on.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rafter/collector/run_record.hpp"
#include "rafter/workloads/operator.hpp"

namespace rafter::workloads {

struct MemoryPlan {
  enum class Verdict { Fits, Sliced, DoesNotFit };
  Verdict verdict = Verdict::Fits;
  OpInstance run;                     // what to run: the instance, or its slice when Sliced
  double needed_bytes = 0;            // for the full instance
  double free_bytes = 0;              // 0: unknown (then everything "fits")
  std::optional<ScaledFrom> scaled;   // when Sliced
  std::string note;                   // one line when Sliced or DoesNotFit
};

// Device memory beyond the tensors' footprint that a backend needs for an instance.
using ExtraBytesFn = std::function<double(const OpInstance& inst, double footprint_bytes)>;

// `inst` normalized; `free_bytes` <= 0 means unknown (the instance runs as asked).
MemoryPlan plan_memory(const OperatorDef& op, const OpInstance& inst, double free_bytes, const ExtraBytesFn& extra,
                       const std::vector<MemoryLevel>& levels);

class Backend;
// plan_memory for `inst` (normalized here) on `backend`: its extra bytes, and `free_bytes`.
MemoryPlan plan_memory_on(const Backend& backend, const OpInstance& inst, double free_bytes,
                          const std::vector<MemoryLevel>& levels);

// Bytes as "12.3 GiB" for notes.
std::string format_gib(double bytes);

}  // namespace rafter::workloads
