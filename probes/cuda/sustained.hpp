// Burst and sustained compute ceilings: a burst figure is launches of ~10 ms with the clock still at
// its boost; a training step runs for seconds at the power limit. hold_ceiling() holds the same
// launch for `seconds` and returns the sustained ceiling beside the burst one.
#pragma once
#include <cuda_runtime.h>

#include <functional>

#include "rafter/collector/machine_profile.hpp"

namespace rafter::probes::cuda {

// Back-to-back launches for `seconds`, each timed with events, the SM clock, board power and
// temperature read after each. The SM clock is the launch's own where `sm_cycles` gives the SM
// cycles it ran (clock64, as the burst figure's), else NVML's reading after it, which can catch the
// clock between two launches (1.79 GHz read on an H200 whose held BF16 loop ran at 1.60). The
// figure is the rate of the launches in the hold's second half (clock and power settled); params
// carry the hold, a trace (about 4 points a second) and the clock, power and temperature ranges.
// Everything else (resource, operation, isa) as `burst`.
Ceiling hold_ceiling(const Ceiling& burst, const std::function<void(cudaStream_t)>& launch,
                     double work_per_launch, double seconds, int device,
                     const std::function<double()>& sm_cycles = {});

}  // namespace rafter::probes::cuda
