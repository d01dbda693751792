// Placement: each operator record judged against a device's roofs. Per record: achieved FLOP/s
// per precision, arithmetic intensity per memory level, the lower bound in time that each
// resource sets (t_p = F_p / peak_p, t_L = B_L / BW_L, t_link = B_link / BW_link), the binding
// resource (the largest bound), efficiency = t_bound / t_measured and the gap t_measured - t_bound.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rafter/collector/machine_profile.hpp"
#include "rafter/collector/run_record.hpp"
#include "rafter/roofline/roofs.hpp"

namespace rafter::roofline {

// Launch: the launch floor (GPU records: every call is at least one kernel launch).
enum class ResourceKind { Compute, Memory, Link, Launch };
std::string_view to_string(ResourceKind k);

// The lower bound in time one resource sets for one call of an operator.
struct ResourceBound {
  ResourceKind kind = ResourceKind::Compute;
  std::string resource;     // compute class, memory level, link name or "launch"
  double amount = 0;        // FLOPs (compute), bytes (memory, link) or launches per call
  Source amount_source = Source::Analytic;  // where the bytes came from (analytic or counter)
  double ceiling = 0;       // FLOP/s, B/s or launches/s; 0 when the profile has no such roof
  double seconds = 0;       // amount / ceiling; 0 without a ceiling
  bool has_ceiling() const { return ceiling > 0; }
};

// One point of the hierarchical roofline: the operator at one memory level.
struct LevelPoint {
  std::string level;
  double bytes = 0;
  Source source = Source::Analytic;
  double ai_flops_per_byte = 0;        // total FLOPs / bytes at this level (0 when no FLOPs)
  double bandwidth_bytes_per_second = 0;  // 0 when the profile has no roof for this level
  double roof_flops_per_second = 0;    // min(peak, AI x BW) at this level's AI
  // Analytic bytes / counted bytes where both exist (the report's "model/measured").
  std::optional<double> model_over_measured;
  bool model_mismatch = false;  // the two disagree (kModelMismatch and kModelMismatchFloorBytes)
};

// The analytic model and the counters disagree when |model - measured| > kModelMismatch x measured
// (e.g. GEMM tiles re-reading operands from L2) and by more than kModelMismatchFloorBytes; such
// records get a remark. Below the floor a difference is the counted pass's own traffic: on an H200
// 0.49 MB was written back behind a one-token RMSNorm that writes 8 KB (docs/gpu-counters.md), so
// its 25 KB model read 0.05 of the count.
inline constexpr double kModelMismatch = 0.25;
inline constexpr double kModelMismatchFloorBytes = 1 << 20;

struct Placement {
  // Identity, copied from the record.
  std::string op, label, phase, backend, device, precision;
  std::map<std::string, std::int64_t> shape;
  bool emulated = false;
  std::string emulated_via;
  std::string judged_as;  // the compute class whose roof judges it (emulated_via's for emulated records)
  std::string main_class;  // the compute class with the most FLOPs (judged_as when there are none)
  RecordStatus status = RecordStatus::Planned;
  std::string note;
  double count = 1;

  bool timed = false;             // a measured time exists (Ok or Invalid records)
  double seconds_per_call = 0;    // measured median
  double min_seconds_per_call = 0, max_seconds_per_call = 0;
  double step_seconds = 0;        // seconds_per_call x count
  double share_of_step = 0;       // step_seconds / the run's timed step time

  double total_flops = 0;         // per call
  Source flops_source = Source::Analytic;  // Counter when the record's FLOPs were counted
  double model_flops = 0;         // the analytic FLOPs per call (equal to total_flops when not counted)
  std::map<std::string, double> flops_by_class;             // per call, by compute class
  std::map<std::string, double> flops_per_second_by_class;  // achieved (timed records only)
  double flops_per_second = 0;    // total achieved

  std::vector<LevelPoint> levels;     // memory levels, innermost first
  std::vector<ResourceBound> bounds;  // compute classes, memory levels, links
  std::optional<ResourceBound> binding;  // the largest bound; empty when no resource has a roof
  double bound_seconds = 0;       // per call
  double efficiency = 0;          // bound / measured (timed records with a binding resource)
  double gap_seconds = 0;         // measured - bound, per call
  std::vector<std::string> remarks;  // missing roofs, "faster than its roof", emulation

  std::string display_name() const;  // label, else op
  std::string binding_name() const;  // "DRAM", "bf16 compute", "nvlink", or "-"
  // Identifies the same operator across runs of one model (precision left out on purpose).
  std::string match_key() const;
};

struct RunPlacement {
  std::string run_name;  // file stem or a label given by the caller
  std::string run_host, run_timestamp;
  std::string interrupted;  // the signal that stopped the run, empty when it completed
  nlohmann::json suite = nlohmann::json::object();
  DeviceRoofs roofs;     // the roofs of the run's device
  std::vector<Placement> records;
  double step_seconds = 0;        // sum over timed records of time x count
  double bound_step_seconds = 0;  // sum over timed records of bound x count
  double gap_step_seconds = 0;    // step - bound over timed records
  int timed_records = 0, untimed_records = 0;
  // The step's FLOPs and DRAM/HBM bytes (x count), and the part of each in timed records: the
  // rest no measured time covers (no backend, failed, does not fit).
  double step_flops = 0, timed_step_flops = 0, step_outer_bytes = 0, timed_step_outer_bytes = 0;
  std::map<std::string, double> step_seconds_by_binding;  // where the step's time goes
  std::map<std::string, double> step_seconds_by_work;     // by work_kind of the timed records
  OverlapTotals overlap;  // collectives whose overlap with the step's GEMMs was measured
  std::vector<std::string> memory_levels() const;  // levels drawn: roofs first, then any in records
  std::vector<std::string> precisions() const;     // compute classes judged, in first-seen order
};

// The kind of work an operator does, as a step's time splits (work_kinds() order): "GEMM",
// "attention" (fused or not, GLA), "quantization" (quantize, dequantize, the hot-channel patch: the
// low-precision recipes' overhead), "communication" (collectives), "memory-bound" (the rest).
std::string work_kind(std::string_view op);
const std::vector<std::string>& work_kinds();

// A timed record within this factor of the launch floor is named launch-bound.
inline constexpr double kLaunchBoundFactor = 1.5;

// Judges one record against `roofs`.
Placement place_record(const OperatorRecord& record, const DeviceRoofs& roofs);

// Judges every record of `run` against `machine` (the run's own machine, or another one for a
// what-if). Records on another device than the run's are judged against that device's roofs.
RunPlacement place_run(const Run& run, const MachineProfile& machine, std::string run_name = "run.json");

}  // namespace rafter::roofline
