// One profiling run: a record per timed (or planned) operator. Serialized as run.json
// (docs/run-json.md). roofline/ reads it together with a MachineProfile.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rafter/collector/machine_profile.hpp"
#include "rafter/collector/provenance.hpp"

namespace rafter {

inline constexpr const char* kRunSchemaName = "rafter.run";
inline constexpr int kRunSchemaVersion = 1;

// Bytes moved at one memory level ("L1", "L2", "L3", "DRAM", "HBM", "shared", or a link name
// such as "nvlink", "pcie") with where the number came from (analytic model or counters).
// A link between ranks rather than a memory level: the names a collective's cost puts its bus
// bytes under ("nvlink", "network", "pcie").
bool is_link_level(std::string_view level);

struct LevelBytes {
  LevelBytes() = default;
  LevelBytes(std::string level_name, double bytes_per_call, Source from,
             std::optional<double> model = std::nullopt)
      : level(std::move(level_name)), bytes(bytes_per_call), source(from), model_bytes(model) {}
  std::string level;
  double bytes = 0;
  Source source = Source::Analytic;
  // The analytic model's figure, kept beside a counted one (source Counter) so that the report can
  // show model/measured; absent when the bytes are analytic or the model has none for this level.
  std::optional<double> model_bytes;
};

// The correctness check made before timing: relative error against the FP64 reference.
struct CheckResult {
  bool ran = false;
  bool passed = false;
  double error = 0;      // ||out - ref|| / ||ref|| (or the metric named below)
  double tolerance = 0;
  std::string metric = "rel_l2";
  std::string shape_note;  // e.g. "checked at m=256 n=256 k=256" when the check used a smaller shape
};

// DoesNotFit: the instance needs more device memory than is free and cannot be timed on a slice.
// NotRun: the run was interrupted before this instance finished (Run::interrupted says how).
enum class RecordStatus { Ok, Invalid, NoBackend, Planned, Failed, DoesNotFit, NotRun };
std::string_view to_string(RecordStatus s);
RecordStatus record_status_from_string(std::string_view s);

// A streaming operator too large for the device's free memory is timed on the largest slice of
// one shape parameter that fits, and its time scaled by the ratio of compulsory bytes.
struct ScaledFrom {
  std::string axis;           // the shape parameter sliced ("params", "tokens", ...)
  std::int64_t slice = 0;     // the value timed
  std::int64_t full = 0;      // the record's own value
  double factor = 1;          // time multiplier: compulsory bytes of the full shape / of the slice
  double needed_bytes = 0;    // device memory the full shape needs
  double free_bytes = 0;      // device memory free when it was planned
};

struct OperatorRecord {
  std::string op;         // catalogue name: "gemm", "rmsnorm", "attention_prefill", ...
  std::string label;      // role in the model step: "layer.attn.q_proj" (may equal op)
  std::string phase;      // "fwd", "bwd", "bwd_input", "bwd_weight", "step", ...
  std::string backend;    // "cpu.onednn", "cpu.native", "cuda.cublaslt", "cuda.native", ...
  std::string device;     // "cpu", "cuda:0"
  std::map<std::string, std::int64_t> shape;  // named shape parameters
  std::string precision;  // "bf16", "fp8_e4m3", "nvfp4", ...
  bool emulated = false;  // precision did not run natively (e.g. FP8 on a CPU)
  std::string emulated_via;  // the precision whose roofs it really ran against ("bf16", "fp8_e4m3")
  double count = 1;       // occurrences in one model step
  RecordStatus status = RecordStatus::Planned;
  std::optional<Figure> time;  // seconds per call (measured)
  std::map<std::string, double> flops;  // FLOPs per call, per precision (the analytic model)
  // FLOPs per call counted by hardware counters, per precision (same keys as `flops`); empty when
  // no counted pass ran. The roofline places a record by these where present.
  std::map<std::string, double> flops_counted;
  std::vector<LevelBytes> bytes;        // bytes per call, per memory level / link
  double compulsory_bytes = 0;          // every input read once, every output written once
  // The written share of compulsory_bytes (0 read-only … 1 write-only): the roofline judges the
  // record on the bandwidth roof of this read:write mix. Absent when unknown.
  std::optional<double> write_fraction;
  CheckResult check;
  std::optional<ScaledFrom> scaled_from;  // set when the time comes from a slice (see ScaledFrom)
  ClockState clocks;
  nlohmann::json details = nlohmann::json::object();  // algorithm chosen, flush policy, ...
  std::string note;       // a short reason for NoBackend / Failed / Invalid

  double total_flops() const;
  const LevelBytes* bytes_at(std::string_view level) const;
  // Bytes per call at the outermost level (HBM, else DRAM), else the compulsory bytes.
  double outer_bytes() const;
};

struct Run {
  std::string rafter_version;
  std::string timestamp;
  std::string host;
  Device device;  // the device the run executed on (id, name, driver/CUDA/library versions)
  nlohmann::json suite = nlohmann::json::object();   // model, phase, batch, seq, precision recipe, tp, zero, dp
  nlohmann::json conditions = nlohmann::json::object();  // warm_cache, repeat policy, counters
  std::vector<OperatorRecord> records;
  // Empty for a complete run; else the signal that stopped it ("SIGINT", "SIGTERM"): the records
  // that finished are intact and the rest are NotRun.
  std::string interrupted;
};

// Replaces the bytes at `level` by a counted figure (source Counter), keeping the analytic figure
// that was there as model_bytes; adds the level when the model had none.
void set_counted_bytes(OperatorRecord& r, std::string_view level, double bytes);

// model / measured for a counted level, nullopt when either is missing or the measured figure is 0.
std::optional<double> model_over_measured(const LevelBytes& b);

// The collectives whose overlap with the step's compute was measured (details.overlap, written by
// cuda.nccl): their seconds per step alone and what stays exposed beside the step's GEMMs.
struct OverlapTotals {
  int records = 0;
  double alone_seconds = 0, exposed_seconds = 0;  // x count
  double hidden_fraction() const { return alone_seconds > 0 ? 1 - exposed_seconds / alone_seconds : 0; }
};
OverlapTotals overlap_totals(const Run& run);

nlohmann::json to_json(const CheckResult& c);  // as the record's "check" field
nlohmann::json to_json(const OperatorRecord& r);
nlohmann::json to_json(const Run& r);
Run run_from_json(const nlohmann::json& j, std::string_view origin = "run.json");

}  // namespace rafter
