// What rafter knows of an NVIDIA GPU without running it: datasheet rates per SM per clock for each
// compute capability (labelled datasheet, scaled by the SM count and the clock measured during the
// probe), the memory levels named from the device properties, and the plateau of a bandwidth
// sweep inside each level. Plain C++ (no CUDA headers), so the unit tests run without a GPU.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rafter/collector/machine_profile.hpp"

namespace rafter::probes::cuda {

// A datasheet figure and how it was derived ("132 SMs x 4096 FLOP/clk/SM x 1.755 GHz (measured)").
struct Datasheet {
  double value = 0;
  std::string basis;
};

// Dense rate per SM per clock for a compute key: "fp64" (DFMA), "fp64_tensor" (DMMA), "fp32"
// (FFMA), "tf32", "fp16", "bf16", "fp8", "int8" (tensor). Empty when the GPU has no such unit or
// the compute capability is not in the table.
std::optional<double> per_sm_per_clock(int cc_major, int cc_minor, std::string_view key);

std::optional<Datasheet> compute_datasheet(int cc_major, int cc_minor, std::string_view key, int sms,
                                           double sm_clock_hz);

// Shared memory: 32 banks x 4 bytes per clock per SM (compute capability 7.0 and later).
Datasheet shared_memory_datasheet(int sms, double sm_clock_hz);

// Device memory: 2 transfers per memory clock (DDR) x bus width. Empty when either is unknown.
std::optional<Datasheet> device_memory_datasheet(double memory_clock_hz, int bus_width_bits);

// One direction of a PCIe link: transfer rate x lanes x encoding efficiency / 8. Empty when the
// generation is unknown (NVML absent).
std::optional<Datasheet> pcie_datasheet(int generation, int lanes);

// One direction of NVLink between two GPUs over `links` links: the per-link rate of the compute
// capability's NVLink generation (Volta, Ampere, Hopper: 25 GB/s each way; Blackwell: 50). Empty
// when the generation or the link count is unknown.
std::optional<Datasheet> nvlink_datasheet(int cc_major, int links);

// How a peer copy between two GPUs travels, named from NVML's facts (gpu::nvml_peer_link):
// "nvlink" when NVML says P2P over NVLink is OK, with the links it can use (the active NVLinks whose
// far end is the peer; where they end at NVSwitches, every active link to a switch) and their
// version; else "pcie", via the PCIe level joining the two; "unknown" without NVML.
struct PeerLinkName {
  std::string kind = "unknown", via, version;
  int links = 0;
};
PeerLinkName name_peer_link(const nlohmann::json& facts);

// Sets the datasheet value and basis on a measured ceiling and applies the flags.
void attach_datasheet(Ceiling& c, const std::optional<Datasheet>& d);

// Sizes read from the device properties.
struct GpuMemorySizes {
  int cc_major = 0, cc_minor = 0;
  int sms = 0;
  double shared_per_sm_bytes = 0;  // sharedMemPerMultiprocessor
  double l2_bytes = 0;             // l2CacheSize
  double device_memory_bytes = 0;  // totalGlobalMem
  int bus_width_bits = 0;          // memoryBusWidth: >= 1024 bits means stacked HBM
};

// Unified L1/shared SRAM per SM by compute capability (not a device property): 0 when unknown.
double unified_l1_bytes_per_sm(int cc_major, int cc_minor);

// Levels innermost first: "shared", "L1", "L2", "HBM" (or "DRAM" for a narrow GDDR bus).
std::vector<MemoryLevel> gpu_memory_levels(const GpuMemorySizes& s);

// The working-set window [low, high] of bytes in which a sweep sits inside `level`: half the
// level's capacity at most, twice the inner level's at least; the outermost level starts at twice
// the last cache. `levels` are the cached levels of gpu_memory_levels (without "shared").
struct Window {
  double low_bytes = 0, high_bytes = 0;
};
std::optional<Window> plateau_window(const std::vector<MemoryLevel>& levels, std::string_view level);

// The plateau of a sweep in a window: the point with the median value among those inside, with
// the relative spread of the values inside. Empty when no point falls in the window.
struct Plateau {
  SweepPoint point;
  int points = 0;
  double spread = 0;  // (max - min) / median over the points in the window
};
std::optional<Plateau> find_plateau(const std::vector<SweepPoint>& points, const Window& w);

// The sizes (vectors a stream) at which the HBM probe times its operator-sized streams: `first`,
// then doubling, while a stream fits the `held` vectors of a buffer, `count` at most.
std::vector<std::size_t> operator_sized_streams(std::size_t first, std::size_t held, int count);

// Two groups in a set of per-line latencies (cycles), as an L2 split in partitions gives them:
// the cut minimising the spread within the groups (Otsu's method on the sorted values). Empty
// unless each group holds at least `min_share` of the lines and the slow group's median is at
// least `min_ratio` times the fast one's, with the groups apart: the fast group's 90th
// percentile below the slow group's 10th.
struct LatencySplit {
  double fast_median = 0, slow_median = 0;
  double fast_p10 = 0, fast_p90 = 0, slow_p10 = 0, slow_p90 = 0;
  double fast_share = 0;  // of the lines
  std::size_t fast_lines = 0, slow_lines = 0;
};
std::optional<LatencySplit> split_latencies(std::vector<double> cycles, double min_share = 0.1,
                                            double min_ratio = 1.05);

// Where a latency sweep (working set ascending, cycles per hop) steps up: a point at least `rise`
// times the current plateau's first value, with the point after it (if any) as high too, so one
// slow point is not a step; the step's value then starts the next plateau.
struct LatencyStep {
  double working_set_bytes = 0, cycles_before = 0, cycles_after = 0;
};
std::vector<LatencyStep> latency_steps(const std::vector<std::pair<double, double>>& sweep,
                                       double rise = 1.15);

// The TLB sweep over mapped pages (cuda.latency): virtual page i of `page_bytes` maps physical
// page i % pages_per_map of one allocation. The 8-byte element (index from the range's start) page
// i's chase uses: word (i / pages_per_map) % words of its page, so that no two pages' words share
// a physical word while fewer than pages_per_map x page_bytes / 8 pages are swept.
inline unsigned long long mapped_page_word(unsigned long long page, unsigned long long page_bytes,
                                           unsigned long long pages_per_map) {
  const unsigned long long words = page_bytes / 8;
  return page * words + (page / pages_per_map) % words;
}

}  // namespace rafter::probes::cuda
