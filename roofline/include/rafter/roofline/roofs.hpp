// The roofs of one device, gathered from a MachineProfile: one compute ceiling per precision,
// one bandwidth ceiling per memory level, one per link, and the launch-latency floor. Placement
// and every chart read these rather than the raw ceiling list.
#pragma once
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

// A memory level's or a link's bandwidth ceiling.
struct BandwidthRoof {
  std::string name;  // "L1", "L2", "L3", "DRAM", "shared", "HBM", or a link ("nvlink", "pcie")
  double bytes_per_second = 0;
  Source source = Source::Measured;
  std::string ceiling_id;
};

struct DeviceRoofs {
  std::string device_id;    // as named in the profile
  std::string device_kind;  // "cpu", "cuda"
  std::string device_name;
  std::string host;         // the machine profile's host
  std::vector<ComputeRoof> compute;   // highest first
  std::vector<BandwidthRoof> memory;  // innermost level first
  std::vector<BandwidthRoof> links;
  std::optional<double> launch_latency_seconds;  // Latency ceiling named "launch", when measured

  const ComputeRoof* compute_for(std::string_view precision) const;
  const BandwidthRoof* memory_for(std::string_view level) const;
  const BandwidthRoof* link_for(std::string_view link) const;
  double top_compute_flops_per_second() const;  // 0 when there is no compute roof
  double top_memory_bytes_per_second() const;
};

// The compute class whose roof judges a precision: "fp8_e4m3" -> "fp8", "nvfp4"/"mxfp4" -> "fp4";
// other names are returned as they are (already a class: "bf16", "fp32", ...).
std::string compute_class_of(std::string_view precision);

// The roofs of `device_id` in `profile`. When the profile has no device of that id (judging a run
// against another machine's profile), the first device of the same kind ("cuda:1" -> "cuda:0") is
// used. Throws InputError naming the device when the profile has none of that kind.
DeviceRoofs roofs_for(const MachineProfile& profile, std::string_view device_id);

// The device kind of an id: "cuda:0" -> "cuda", "cpu" -> "cpu".
std::string device_kind_of(std::string_view device_id);

}  // namespace rafter::roofline
