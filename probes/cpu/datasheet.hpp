// Theoretical peaks derived from the microarchitecture (the "datasheet" figures beside measured
// ones): FLOPs per cycle per core for a kernel on a known core, times the measured clock and cores.
// Only cores whose FMA pipes are documented are listed; elsewhere there is no datasheet value.
#pragma once
#include <optional>
#include <string>

#include "cpu_features.hpp"
#include "kernels.hpp"

namespace rafter::probes::cpu {

struct PeakPerCycle {
  double flops_per_cycle_per_core = 0;
  std::string basis;  // how it was derived, e.g. "Zen 4: 2 FMA pipes x 256 bit (AVX-512 double-pumped)"
};

std::optional<PeakPerCycle> datasheet_peak(const CpuFeatures& f, const ComputeKernel& kernel);

}  // namespace rafter::probes::cpu
