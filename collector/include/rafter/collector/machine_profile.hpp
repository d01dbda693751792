// The machine model that everything reads: devices, their topology and the measured ceilings
// (compute per precision, bandwidth and latency per memory level, links), plus the raw sweeps.
// Serialized as machine.json (docs/machine-json.md).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "rafter/collector/provenance.hpp"

namespace rafter {

inline constexpr const char* kMachineSchemaName = "rafter.machine";
inline constexpr int kMachineSchemaVersion = 1;

enum class CeilingKind { Compute, Bandwidth, Latency, Link };
std::string_view to_string(CeilingKind k);
CeilingKind ceiling_kind_from_string(std::string_view s);

// Clock readings around one probe, in Hz; throttled when the clock dropped while it ran.
struct ClockState {
  double core_hz_before = 0;
  double core_hz_after = 0;
  double memory_hz_before = 0;
  double memory_hz_after = 0;
  bool throttled = false;
  // Share of the probe's CPU time the hypervisor took (environment.hpp steal_fraction); -1 unknown.
  double steal_fraction = -1;
};

// A ceiling measured while the hypervisor took at least this share of the CPU time is "stolen".
inline constexpr double kStolenFlagFraction = 0.05;

// One ceiling: a compute rate for a precision, a bandwidth or latency of a memory level, or a link.
struct Ceiling {
  CeilingKind kind = CeilingKind::Compute;
  std::string device;     // "cpu", "cuda:0"
  std::string resource;   // precision ("fp64", "bf16", ...) for Compute; level ("L1", "L2", "L3",
                          // "DRAM", "shared", "HBM") for Bandwidth/Latency; link name for Link
  std::string operation;  // "fma", "dot", "load", "store", "nt_store", "copy", "triad", "chase",
                          // "h2d_pinned", ...
  std::string isa;        // "avx512", "avx2", "sse", "scalar", "ffma", "wgmma", "mma.sync", ...
  std::string scope;      // "core" (one thread/core), "device" (all cores or the whole GPU)
  int threads = 1;
  Figure figure;          // FLOP/s, B/s, s (latency) — the measured value with its spread
  double frequency_hz = 0;  // core clock measured during the probe (0 when unknown)
  ClockState clocks;
  bool emulated = false;    // e.g. FP4 on sm_90: unpack + FP8 MMA
  std::string probe;        // name of the probe that measured it
  nlohmann::json params = nlohmann::json::object();  // working set, block size, ...
  // Datasheet comparison: the vendor/theoretical figure at the measured clock, labelled as such.
  std::optional<double> datasheet_value;
  std::optional<double> datasheet_ratio;  // figure.value / datasheet_value
  std::string datasheet_basis;            // how the datasheet value was derived
  std::string flag;  // "", "above_datasheet", "below_60pct_datasheet", "stolen", "throttled", "noisy"
  // How long the figure was held: "burst" (the default: launches of ~10 ms, the clock still at its
  // boost) or "sustained" (held for params.hold_seconds at the power limit, as a training step
  // runs; `rafter probe --sustained`).
  std::string regime = "burst";

  // Stable identifier, e.g. "cpu/bandwidth/L1/load/avx512/core".
  std::string id() const;
  // The bytes below which a bandwidth ceiling judges operators (params.small_operators_below_bytes:
  // streams of a small operator's size, timed as operators are); 0 for a level's own roof.
  double small_operators_below_bytes() const;
};

// One point of a sweep over working-set sizes, kept so that plateaus can be re-detected and drawn.
struct SweepPoint {
  double working_set_bytes = 0;
  Figure figure;
};

struct Sweep {
  std::string device;
  std::string probe;      // "bandwidth", "latency"
  std::string operation;  // "load", "copy", "chase", ...
  std::string isa;
  int threads = 1;
  bool huge_pages = false;
  std::vector<SweepPoint> points;
};

// A memory level as the topology names it (hwloc cache objects or GPU device properties).
struct MemoryLevel {
  std::string name;            // "L1", "L2", "L3", "DRAM", "shared", "HBM"
  double size_bytes = 0;       // per instance; 0 for DRAM/HBM when unknown
  double line_bytes = 0;
  int shared_by_cores = 1;     // how many cores share one instance
  int instances = 1;
};

struct Device {
  std::string id;     // "cpu", "cuda:0"
  std::string kind;   // "cpu", "cuda"
  std::string name;   // "AMD EPYC ...", "NVIDIA H100 80GB HBM3"
  int cores = 0;      // CPU cores or GPU SMs
  int threads = 0;    // hardware threads (CPU)
  std::vector<std::string> isa;       // ISA extensions present (CPU) or compute capability (GPU)
  std::vector<MemoryLevel> memory_levels;  // innermost first
  nlohmann::json properties = nlohmann::json::object();  // driver, CUDA, ECC, clocks, ...
  std::string counters = "unavailable";  // "available (papi: ...)" or "unavailable (reason)"
};

struct MachineProfile {
  std::string rafter_version;
  std::string timestamp;  // ISO 8601 UTC
  std::string host;
  std::vector<Device> devices;
  std::vector<Ceiling> ceilings;
  std::vector<Sweep> sweeps;
  nlohmann::json topology = nlohmann::json::object();  // hwloc summary (rafter topology --json)
  nlohmann::json conditions = nlohmann::json::object();  // quick mode, huge pages, governor, ...
  // Empty for a complete profile; else the signal that stopped the probes ("SIGINT", "SIGTERM"):
  // the ceilings of the probes that finished are intact, conditions.probes_not_run lists the rest.
  std::string interrupted;

  const Device* find_device(std::string_view id) const;
  // The device-scope ceiling for a resource (precision or level) and kind, best (max for
  // compute/bandwidth/link, min for latency) over ISAs and operations; nullptr when absent.
  // Only ceilings of `regime` ("burst" or "sustained") count; the roofs of small operators never.
  const Ceiling* best(std::string_view device, CeilingKind kind, std::string_view resource,
                      std::string_view scope = "device", std::string_view regime = "burst") const;
};

// Why `earlier` is not a profile of the machine `fresh` measured ("" when it is): another host,
// or a device id that names another device (cuda:0 an H100 there, an H200 here).
std::string other_machine(const MachineProfile& earlier, const MachineProfile& fresh);

// `fresh` with what `earlier` (a profile of the same machine, other_machine() == "") measured and
// `fresh` did not: the devices it lacks, the ceilings of every (device, probe) with no ceiling in
// `fresh`, and the sweeps of every (device, sweep probe) with no sweep in `fresh`. A probe that ran
// again replaces all its earlier ceilings. Kept ceilings carry params.measured_at (the timestamp of
// the profile that measured them); conditions.merged says what was kept and from when.
MachineProfile merge_earlier(const MachineProfile& earlier, MachineProfile fresh);

// Fills the datasheet ratio and flags (above 1, below 0.6, stolen, throttled, noisy) on every ceiling.
void apply_flags(Ceiling& c);

nlohmann::json to_json(const Device& d);
Device device_from_json(const nlohmann::json& j, std::string_view where);
nlohmann::json to_json(const MachineProfile& p);
// Validates while reading; throws FormatError naming the field ("machine.json: ceilings[3].figure.value: ...").
MachineProfile machine_profile_from_json(const nlohmann::json& j, std::string_view origin = "machine.json");

}  // namespace rafter
