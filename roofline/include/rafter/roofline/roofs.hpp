// The roofs of one device, gathered from a MachineProfile: one compute ceiling per precision,
// one bandwidth ceiling per memory level, one per link, and the launch-latency floor. Placement
// and every chart read these rather than the raw ceiling list.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rafter/collector/machine_profile.hpp"

namespace rafter::roofline {

struct ComputeRoof {
  std::string precision;  // compute class: "fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"
  double flops_per_second = 0;
  bool emulated = false;  // the probe itself ran emulated (e.g. FP4 on sm_90)
  Source source = Source::Measured;
  std::string ceiling_id;
  // Set where the device has no arithmetic of this precision and the roof is that of the path its
  // work runs on (the ceiling's params.emulated_via: a CPU without AVX512_BF16 → "fp32").
  std::string emulated_via;
};

// One measured read:write mix of a level: read-only (0), triad 2:1 (1/3), copy 1:1 (1/2), write-only (1).
struct MixPoint {
  double write_fraction = 0;
  double bytes_per_second = 0;
  std::string ceiling_id;
  double below_bytes = 0;  // small_mixes only: the ceiling judges records moving fewer bytes
};

// A memory level's or a link's bandwidth ceiling.
struct BandwidthRoof {
  std::string name;  // "L1", "L2", "L3", "DRAM", "shared", "HBM", or a link ("nvlink", "pcie")
  double bytes_per_second = 0;  // the best over every mix (what charts draw)
  Source source = Source::Measured;
  std::string ceiling_id;
  std::vector<MixPoint> mixes;  // by write fraction, ascending; empty for links
  // Mixes measured on streams of a small operator's size (Ceiling::small_operators_below_bytes):
  // the L2 still holds part of such an operator's written lines when its timing stops.
  std::vector<MixPoint> small_mixes;

  // The roof for traffic of this write fraction: linear between the two nearest measured mixes,
  // the nearest one beyond them; the best over every mix when the fraction or the mixes are unknown.
  double at_mix(std::optional<double> write_fraction) const;
  // As at_mix for `bytes` of traffic at this level: records moving fewer bytes than the small
  // mixes' bound (interpolated alike) are judged on the higher of both roofs.
  double at(std::optional<double> write_fraction, double bytes) const;
};

// The write fraction of a bandwidth probe's operation: load/read 0, triad 1/3, copy 1/2,
// store/nt_store/write 1; nullopt for others.
std::optional<double> write_fraction_of(std::string_view operation);

// A collective's own roofs from a comm probe (comm.nccl, comm.mpi): the bus bandwidth at its
// sweep's largest size and the time at its smallest, per collective, rank count and type. A
// collective record's link bytes (bus bytes, DESIGN.md's factors) are judged on these.
struct CollectiveRoof {
  std::string resource;   // the probe's link and rank count: "nccl:2", "mpi:4"
  std::string operation;  // "all_reduce", "all_gather", ...
  std::string type;       // the ceiling's isa: "bf16", "fp32"
  int ranks = 0;
  double bus_bytes_per_second = 0;  // 0 where only the latency was measured (one rank)
  std::optional<double> latency_seconds;
  std::string ceiling_id;  // the bandwidth ceiling's (else the latency one's)
  double largest_bytes =
      0;  // the message size S its bus bandwidth was measured at (params.bytes); 0: not said
};

struct DeviceRoofs {
  std::string device_id;    // as named in the profile
  std::string device_kind;  // "cpu", "cuda"
  std::string device_name;
  std::string host;         // the machine profile's host
  std::vector<ComputeRoof> compute;   // highest first
  std::vector<BandwidthRoof> memory;  // innermost level first
  std::vector<BandwidthRoof> links;
  std::vector<CollectiveRoof> collectives;
  // "burst", "sustained", or "sustained where measured" (some precisions held, others burst only).
  std::string compute_regime = "burst";
  // The launch floor: the `launch` latency ceiling timed as operators are (operation "operator";
  // else the smallest launch ceiling), its fastest sample (the figure's stats.min; the value
  // where no stats were kept), when measured. Every launch form measured, by operation
  // ("operator", "graph_node", "stream"): what a step pays per kernel as a graph or launch by launch.
  std::optional<double> launch_latency_seconds;
  std::map<std::string, double> launch_seconds_by_form;

  const ComputeRoof* compute_for(std::string_view precision) const;
  const BandwidthRoof* memory_for(std::string_view level) const;
  const BandwidthRoof* link_for(std::string_view link) const;
  // The roofs measured for this collective and rank count, of this type where measured, else of
  // another type (bus bandwidth in bytes does not depend on it much); nullptr when none.
  const CollectiveRoof* collective_for(std::string_view operation, int ranks, std::string_view type) const;
  double top_compute_flops_per_second() const;  // 0 when there is no compute roof
  double top_memory_bytes_per_second() const;
};

// The compute class whose roof judges a precision: "fp8_e4m3" -> "fp8", "nvfp4"/"mxfp4" -> "fp4";
// other names are returned as they are (already a class: "bf16", "fp32", ...).
std::string compute_class_of(std::string_view precision);

// The roofs of `device_id` in `profile`. When the profile has no device of that id (judging a run
// against another machine's profile), the first device of the same kind ("cuda:1" -> "cuda:0") is
// used. Throws InputError naming the device when the profile has none of that kind.
// `sustained`: compute roofs from the ceilings held at the power limit (`rafter probe --sustained`)
// where the profile has them, burst ones elsewhere (compute_regime says which).
DeviceRoofs roofs_for(const MachineProfile& profile, std::string_view device_id, bool sustained = false);

// The device kind of an id: "cuda:0" -> "cuda", "cpu" -> "cpu".
std::string device_kind_of(std::string_view device_id);

}  // namespace rafter::roofline
