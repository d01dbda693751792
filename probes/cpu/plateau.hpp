// Plateau detection on a working-set sweep: which points of a bandwidth (or latency) curve sit
// flat inside one memory level, named after the hwloc level whose capacity they fit. A pure
// function over numbers, so it is unit-tested on synthetic sweeps.
#pragma once
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace rafter::probes::cpu {

struct LevelCapacity {
  std::string name;                                                 // "L1", "L2", "L3", "DRAM"
  double capacity_bytes = std::numeric_limits<double>::infinity();  // what the measuring threads can hold
};

struct SweepSample {
  double working_set_bytes = 0;
  double value = 0;  // B/s for bandwidth, s for latency
};

struct Plateau {
  std::string level;
  std::size_t first = 0, last = 0;  // indices of the plateau's points in the sweep (inclusive)
  std::size_t best = 0;             // its best point: the highest bandwidth or the lowest latency
  double median_value = 0;          // median over the plateau's points
  std::size_t points = 0;
};

// Points strictly inside a level — above 2x the capacity of the level inside it (from 4x for
// DRAM, whose inner level's replacement is least perfect) and at most half its own capacity — form its
// window (widened to the whole level range when that holds no point); the window's points within
// `tolerance` (relative) of its best point form the plateau. The best point, not the median, is the
// reference because contention only ever slows a point down: on a busy machine most points of a
// window can be disturbed, never faster than the hardware allows. Levels without
// any point get no plateau. `levels` are innermost first; points are sorted by working set.
std::vector<Plateau> detect_plateaus(std::span<const SweepSample> points,
                                     std::span<const LevelCapacity> levels, bool higher_is_better,
                                     double tolerance = 0.15);

}  // namespace rafter::probes::cpu
