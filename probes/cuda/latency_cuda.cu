// cuda.latency: load-to-use latency per level by pointer chase: one thread, each load's address is
// the previous load's value, over a random cycle of 128-byte lines. Two sweeps over working sets:
// ld.global.ca (through L1) and ld.global.cg (L2 and beyond). A third chase touches one line per
// page (all lines fit in L2), so its steps are TLB misses: over one cudaMalloc allocation, and over
// pages mapped one by one onto a few physical ones. The chase ends where the host says it must, or
// the point is flagged. Per-line L2 hit latencies name the near and far L2
// partitions where they fall in two groups.
#include <cudaTypedefs.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <span>
#include <unordered_set>
#include <vector>

#include "cuda_util.hpp"
#include "gpu_model.hpp"

namespace rafter::probes::cuda {
namespace {

using u64 = unsigned long long;

template <bool kThroughL1>
__device__ __forceinline__ u64 load(const u64* p) {
  u64 v;
  if constexpr (kThroughL1)
    asm volatile("ld.global.ca.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Each launch writes the line it ended on to out[0] and its cycle count to out[1 + slot]: one
// cycle count per timed launch, so that a latency's stats are those of the figure it reports.
template <bool kThroughL1>
__global__ void chase(const u64* buf, u64 start, long long warm_hops, long long hops, u64* out, int slot) {
  u64 j = start;
  for (long long i = 0; i < warm_hops; ++i) j = load<kThroughL1>(buf + j);
  long long t0 = clock64();
  for (long long i = 0; i < hops; ++i) j = load<kThroughL1>(buf + j);
  long long t1 = clock64();
  out[0] = j;
  out[1 + slot] = u64(t1 - t0);
}

__global__ void scatter(u64* buf, const u64* where, const u64* value, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    buf[where[i]] = value[i];
}

// A random cycle over `count` distinct positions (element indices) drawn from `slots` slots of
// `slot_elems` elements; each position is a random 128-byte line inside its slot.
std::vector<u64> random_cycle(u64 slots, u64 slot_elems, std::size_t count, std::mt19937_64& rng) {
  std::vector<u64> chosen;
  if (slots <= count) {
    for (u64 s = 0; s < slots; ++s) chosen.push_back(s);
  } else {
    std::unordered_set<u64> seen;
    std::uniform_int_distribution<u64> pick(0, slots - 1);
    while (chosen.size() < count)
      if (u64 s = pick(rng); seen.insert(s).second) chosen.push_back(s);
  }
  std::shuffle(chosen.begin(), chosen.end(), rng);
  std::uniform_int_distribution<u64> line(0, slot_elems / 16 - 1);
  for (auto& s : chosen) s = s * slot_elems + (slot_elems > 16 ? line(rng) * 16 : 0);
  return chosen;
}

struct ChasePoint {
  double cycles_per_hop = 0;     // median over the timed launches
  Summary seconds_per_hop;       // in-kernel cycles at the measured SM clock, per timed launch
  Summary wall_seconds_per_hop;  // event time / hops: launch overhead and warm-up hops included
  bool ok = false;
  ClockState clocks;
};

template <bool kThroughL1>
ChasePoint run_chase(const ProbeOptions& options, const Device& device, u64* buf,
                     const std::vector<u64>& cycle, bool warm) {
  const std::size_t n = cycle.size();
  std::vector<u64> next(n);
  for (std::size_t i = 0; i < n; ++i) next[i] = cycle[(i + 1) % n];
  constexpr int kSlots = 64;  // cycle counts kept: the last kSlots launches (warm-ups included)
  DeviceBuffer where(n * 8), value(n * 8), out((1 + kSlots) * 8);
  check(cudaMemcpy(where.get(), cycle.data(), n * 8, cudaMemcpyHostToDevice), "copy chase positions");
  check(cudaMemcpy(value.get(), next.data(), n * 8, cudaMemcpyHostToDevice), "copy chase links");
  check(cudaMemset(out.get(), 0, out.bytes()), "clear chase results");  // slots not launched read back as 0
  scatter<<<256, 256>>>(buf, where.get<u64>(), value.get<u64>(), n);
  check_launch("scatter");
  // The chase runs on the timing's own non-blocking stream, which does not wait for this one.
  check(cudaDeviceSynchronize(), "scatter");
  const long long hops = std::max<long long>(options.quick ? 2048 : 8192, warm ? (long long)n : 0);
  const long long warm_hops = warm ? (long long)n : 0;
  auto t = timing_options(options, device, !warm);  // cold points: L2 flushed before each sample
  t.policy.min_repeats = 3;
  t.policy.max_repeats = 5;
  t.use_graph = false;
  int launches = 0;
  gpu::GpuTiming timing = gpu::time_launches(
      [&](void* s) {
        chase<kThroughL1><<<1, 1, 0, cudaStream_t(s)>>>(buf, cycle[0], warm_hops, hops, out.get<u64>(),
                                                        launches++ % kSlots);
        check_launch("chase");
      },
      t);
  std::vector<u64> h(1 + kSlots);
  check(cudaMemcpy(h.data(), out.get(), h.size() * 8, cudaMemcpyDeviceToHost), "copy chase result");
  ChasePoint p;
  p.ok = h[0] == cycle[std::size_t((warm_hops + hops) % (long long)n)];
  // The timed launches are the last timing.seconds.samples ones (warm-ups come first).
  const int timed = std::clamp(int(timing.seconds.samples), 1, std::min(launches, kSlots));
  std::vector<double> cycles;
  for (int i = launches - timed; i < launches; ++i) cycles.push_back(double(h[1 + i % kSlots]) / double(hops));
  const Summary cycle_stats = summarize(cycles);
  p.cycles_per_hop = cycle_stats.median;
  const double hz = timing.clocks.core_hz_after;
  const double total_hops = double(warm_hops + hops);
  p.wall_seconds_per_hop = transform(timing.seconds, [total_hops](double s) { return s / total_hops; });
  p.seconds_per_hop = hz > 0 ? transform(cycle_stats, [hz](double c) { return c / hz; }) : p.wall_seconds_per_hop;
  p.clocks = timing.clocks;
  return p;
}

SweepPoint to_point(double ws, const ChasePoint& c) {
  SweepPoint p;
  p.working_set_bytes = ws;
  // value = median of the in-kernel cycle counts per hop at the measured SM clock (the wall time
  // adds the launch and the warm-up hops; it stays in the ceiling's params).
  p.figure = Figure::measured(c.seconds_per_hop, "s");
  return p;
}

template <bool kThroughL1>
void level_sweep(const ProbeOptions& options, const Device& device, double l2, double max_ws,
                 DeviceBuffer& buf, MachineProfile& profile, std::vector<std::pair<double, ChasePoint>>& raw) {
  std::mt19937_64 rng(kThroughL1 ? 17 : 18);
  Sweep sw{device.id, "latency", "chase", kThroughL1 ? "ld.global.ca" : "ld.global.cg", 1, false, {}};
  for (double ws = 16384; ws <= max_ws; ws *= options.quick ? 4 : 2) {
    auto cycle = random_cycle(u64(ws / 128), 16, options.quick ? 4096 : 16384, rng);
    ChasePoint c = run_chase<kThroughL1>(options, device, buf.get<u64>(), cycle, ws <= l2 / 2);
    sw.points.push_back(to_point(ws, c));
    raw.emplace_back(ws, c);
  }
  profile.sweeps.push_back(std::move(sw));
}

void add_level_ceiling(const Device& device, const std::string& level, const std::string& isa,
                       const std::vector<std::pair<double, ChasePoint>>& raw, const Sweep& sw,
                       double max_ws, MachineProfile& profile) {
  auto window = plateau_window(device.memory_levels, level);
  if (!window) return;
  auto plateau = find_plateau(sw.points, *window);
  if (!plateau) return;
  const ChasePoint* cp = nullptr;
  for (const auto& [ws, c] : raw)
    if (ws == plateau->point.working_set_bytes) cp = &c;
  Ceiling c;
  c.kind = CeilingKind::Latency;
  c.device = device.id;
  c.resource = level;
  c.operation = "chase";
  c.isa = isa;
  c.scope = "core";
  c.threads = 1;
  c.figure = plateau->point.figure;
  c.probe = "cuda.latency";
  if (cp) {
    c.clocks = cp->clocks;
    c.frequency_hz = loaded_sm_hz(cp->clocks);
  }
  c.params = {{"working_set_bytes", plateau->point.working_set_bytes},
              {"cycles", cp ? cp->cycles_per_hop : 0.0}, {"plateau_points", plateau->points},
              {"value_is", "median of the timed launches' in-kernel clock64() cycles per hop / SM clock"},
              {"wall_seconds_per_hop", cp ? to_json(cp->wall_seconds_per_hop) : nlohmann::json()},
              {"window_bytes", {window->low_bytes, std::min(window->high_bytes, max_ws)}},
              {"check", {{"pass", cp && cp->ok}, {"what", "chase ends at the host-computed line"}}}};
  attach_datasheet(c, std::nullopt);
  if (cp && !cp->ok) c.flag = "check_failed";
  profile.ceilings.push_back(std::move(c));
}

// Per-line L2 hit latency from one SM: each line is loaded once, then 16 dependent re-loads of it
// are timed (ld.global.cg: every one an L2 hit; the line holds 0, so each address is the same).
// A line homed in the SM's near L2 partition answers faster than one in the far partition.
__global__ void line_latency(const u64* buf, const unsigned* lines, int n, unsigned* cycles) {
  constexpr int kReloads = 16;
  for (int l = 0; l < n; ++l) {
    const u64* p = buf + std::size_t(lines[l]) * 16;
    u64 j = load<false>(p);
    const long long t0 = clock64();
    for (int r = 0; r < kReloads; ++r) j = load<false>(p + j);
    const long long t1 = clock64();
    cycles[l] = unsigned((t1 - t0) / kReloads) + unsigned(j);  // j is 0: keeps the chain live
  }
}

// Near and far L2: the per-line hit latencies of `lines` lines spread over a quarter of the L2
// (every line stays resident), split in two groups when the partitions show (split_latencies).
// Each line keeps its fastest of three passes (a pass that met another launch's traffic reads high).
void l2_partitions(const ProbeOptions& options, const Device& device, double l2, MachineProfile& profile) {
  const int n = options.quick ? 1024 : 4096;
  const std::size_t span_lines = std::size_t(l2 / 4 / 128);
  std::vector<unsigned> lines(n);
  std::mt19937_64 rng(20);
  std::uniform_int_distribution<std::size_t> pick(0, span_lines - 1);
  for (auto& l : lines) l = unsigned(pick(rng));
  DeviceBuffer buf(span_lines * 128), where(n * 4), out(n * 4);
  check(cudaMemset(buf.get(), 0, buf.bytes()), "clear the line buffer");
  check(cudaMemcpy(where.get(), lines.data(), n * 4, cudaMemcpyHostToDevice), "copy line list");
  const int dev = device_index(device);
  const gpu::Clocks before = gpu::read_clocks(dev);
  std::vector<double> fastest(n, 1e30);
  std::vector<unsigned> got(n);
  for (int pass = 0; pass < 3; ++pass) {
    line_latency<<<1, 1>>>(buf.get<u64>(), where.get<unsigned>(), n, out.get<unsigned>());
    check_launch("line_latency");
    check(cudaMemcpy(got.data(), out.get(), n * 4, cudaMemcpyDeviceToHost), "copy line latencies");
    for (int i = 0; i < n; ++i) fastest[i] = std::min(fastest[i], double(got[i]));
  }
  const gpu::Clocks after = gpu::read_clocks(dev);
  const std::string key = "cuda.latency." + device.id + ".l2_partitions";
  auto split = split_latencies(fastest);
  if (!split) {
    profile.conditions[key] = "one group of per-line L2 hit latencies (" + std::to_string(n) +
                              " lines from one SM): no near/far partition named";
    return;
  }
  const ClockState clocks{before.sm_hz, after.sm_hz, before.memory_hz, after.memory_hz,
                          after.sm_hz < 0.95 * before.sm_hz};
  const double hz = loaded_sm_hz(clocks);
  std::sort(fastest.begin(), fastest.end());  // the fast group first (split_latencies cuts the sorted values)
  for (double& c : fastest) c /= hz;
  for (bool near : {true, false}) {
    const double cycles = near ? split->fast_median : split->slow_median;
    Ceiling c;
    c.kind = CeilingKind::Latency;
    c.device = device.id;
    c.resource = "L2";
    c.operation = near ? "hit_near_partition" : "hit_far_partition";
    c.isa = "ld.global.cg";
    c.scope = "core";
    c.threads = 1;
    const std::span<const double> group(fastest.data() + (near ? 0 : split->fast_lines),
                                        near ? split->fast_lines : split->slow_lines);
    c.figure = Figure::measured(summarize(group), "s");
    c.probe = "cuda.latency";
    c.clocks = clocks;
    c.frequency_hz = hz;
    c.params = {{"cycles", cycles},
                {"share_of_lines", near ? split->fast_share : 1 - split->fast_share},
                {"lines", n},
                {"span_bytes", double(span_lines) * 128},
                {"cycles_p10_p90",
                 {near ? split->fast_p10 : split->slow_p10, near ? split->fast_p90 : split->slow_p90}},
                {"value_is",
                 "per line: 16 dependent re-loads of it (L2 hits) from one SM, fastest of 3 "
                 "passes, / SM clock; stats over the group's lines"},
                {"partition_other_cycles", near ? split->slow_median : split->fast_median}};
    attach_datasheet(c, std::nullopt);
    profile.ceilings.push_back(std::move(c));
  }
  profile.conditions[key] = "near " + std::to_string(int(split->fast_median)) + " cycles (" +
                            std::to_string(int(100 * split->fast_share + 0.5)) + "% of lines), far " +
                            std::to_string(int(split->slow_median)) + " cycles, from one SM";
}

// The driver's virtual-memory calls, through the runtime: a direct call would make every rafter
// binary need libcuda.so.1 (see collector/cuda/cupti_counters.cpp).
template <class Fn>
Fn driver_entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 10020, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || !fn)
    throw InputError(std::string("cuda: driver entry point ") + name + " not found");
  return reinterpret_cast<Fn>(fn);
}

void check_cu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS)
    throw InputError(std::string("cuda: ") + what + " failed (CUresult " + std::to_string(int(r)) + ")");
}

// `pages` virtual pages of the driver's smallest mapping granularity (2 MiB on Hopper): one
// physical allocation of kPagesPerMap such pages (64 MiB), mapped (cuMemMap) again and again over
// the whole range, so page i lands on physical page i % kPagesPerMap (a mapping smaller than the
// next page size keeps the driver on 2 MiB entries; one call per page took 7.8 s for 256K pages on
// the H100, one per 64 MiB takes 1/32 of that). word(i) gives each page's own 8-byte word that no
// other page's word shares, so a chase over one word a page stays in L2 (8 bytes a page: 2 MiB for
// 256K pages) while every hop needs its own translation, however many pages: cudaMalloc's memory
// cannot show this, as its translation reach was beyond the 32 GiB swept (the driver maps large
// allocations with larger pages).
class AliasedPages {
 public:
  AliasedPages(int device, int pages) : pages_(pages) {
    try {
      map(device);
    } catch (...) {
      release();
      throw;
    }
  }
  ~AliasedPages() { release(); }
  AliasedPages(const AliasedPages&) = delete;
  AliasedPages& operator=(const AliasedPages&) = delete;
  static constexpr int kPagesPerMap = 32;
  u64* get() const { return reinterpret_cast<u64*>(base_); }
  std::size_t page_bytes() const { return page_; }
  // Element index (u64) of page i's word (mapped_page_word).
  u64 word(u64 i) const { return mapped_page_word(i, page_, kPagesPerMap); }

 private:
  struct Driver {
    PFN_cuMemGetAllocationGranularity_v10020 granularity =
        driver_entry<decltype(granularity)>("cuMemGetAllocationGranularity");
    PFN_cuMemCreate_v10020 create = driver_entry<decltype(create)>("cuMemCreate");
    PFN_cuMemRelease_v10020 release = driver_entry<decltype(release)>("cuMemRelease");
    PFN_cuMemAddressReserve_v10020 reserve = driver_entry<decltype(reserve)>("cuMemAddressReserve");
    PFN_cuMemAddressFree_v10020 free = driver_entry<decltype(free)>("cuMemAddressFree");
    PFN_cuMemMap_v10020 map = driver_entry<decltype(map)>("cuMemMap");
    PFN_cuMemUnmap_v10020 unmap = driver_entry<decltype(unmap)>("cuMemUnmap");
    PFN_cuMemSetAccess_v10020 set_access = driver_entry<decltype(set_access)>("cuMemSetAccess");
  };

  void map(int device) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    check_cu(cu_.granularity(&page_, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
             "cuMemGetAllocationGranularity");
    if (pages_ % kPagesPerMap) throw InputError("cuda: mapped pages must be a multiple of 32");
    const std::size_t chunk = page_ * kPagesPerMap;
    check_cu(cu_.create(&handle_, chunk, &prop, 0), "cuMemCreate");
    created_ = true;
    check_cu(cu_.reserve(&base_, page_ * pages_, chunk, 0, 0), "cuMemAddressReserve");
    for (; mapped_ < pages_; mapped_ += kPagesPerMap)
      check_cu(cu_.map(base_ + page_ * mapped_, chunk, 0, handle_, 0), "cuMemMap");
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    check_cu(cu_.set_access(base_, page_ * pages_, &access, 1), "cuMemSetAccess");
  }

  void release() {
    cudaDeviceSynchronize();
    if (mapped_ > 0) cu_.unmap(base_, page_ * mapped_);
    if (base_) cu_.free(base_, page_ * pages_);
    if (created_) cu_.release(handle_);
    mapped_ = 0, base_ = 0, created_ = false;
  }

  Driver cu_;
  int pages_ = 0, mapped_ = 0;
  std::size_t page_ = 0;
  CUdeviceptr base_ = 0;
  CUmemGenericAllocationHandle handle_{};
  bool created_ = false;
};

// The TLB sweep's points as (working set, cycles per hop), and its steps in a condition.
void record_tlb_steps(const Device& device, const std::string& name, const std::string& pages_of,
                      const std::vector<std::pair<double, double>>& points, MachineProfile& profile,
                      double rise = 1.15) {
  const auto steps = latency_steps(points, rise);
  nlohmann::json j = nlohmann::json::array();
  for (const auto& s : steps)
    j.push_back({{"working_set_bytes", s.working_set_bytes},
                 {"cycles_before", s.cycles_before},
                 {"cycles_after", s.cycles_after}});
  const std::string key = "cuda.latency." + device.id + "." + name;
  if (steps.empty())
    profile.conditions[key] = "no step up to " +
                              std::to_string((long long)(points.empty() ? 0 : points.back().first)) +
                              " bytes (" + pages_of + ")";
  else
    profile.conditions[key] = {{"pages", pages_of}, {"steps", j}};
}

// One line per page: every line stays in L2, so latency steps are address translation. First on
// one cudaMalloc allocation (one line per 2 MiB), then on AliasedPages (the driver's own page).
void tlb_sweep(const ProbeOptions& options, const Device& device, MachineProfile& profile) {
  const double page = 2.0 * (1 << 20);
  const int max_pages = options.quick ? 2048 : 16384;
  size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  int pages = max_pages;
  while (pages > 16 && pages * page > 0.5 * double(free_bytes)) pages /= 2;
  std::mt19937_64 rng(19);
  {
    DeviceBuffer buf(static_cast<std::size_t>(pages * page));
    Sweep sw{device.id, "latency_tlb", "chase", "ld.global.cg", 1, false, {}};
    std::vector<std::pair<double, double>> points;
    for (int p = 16; p <= pages; p *= options.quick ? 4 : 2) {
      auto cycle = random_cycle(u64(p), u64(page / 8), std::size_t(p), rng);
      ChasePoint c = run_chase<false>(options, device, buf.get<u64>(), cycle, true);
      sw.points.push_back(to_point(p * page, c));
      points.emplace_back(p * page, c.cycles_per_hop);
    }
    record_tlb_steps(device, "tlb_steps_cudamalloc",
                     std::to_string(pages) + " pages of 2 MiB in one cudaMalloc", points, profile);
    profile.sweeps.push_back(std::move(sw));
  }
  const std::string key = "cuda.latency." + device.id + ".tlb_steps_mapped_pages";
  try {
    const int mapped = options.quick ? 16384 : 262144;  // 32 GiB or 512 GiB of address space
    const auto t0 = std::chrono::steady_clock::now();
    AliasedPages va(device_index(device), mapped);
    const double map_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Sweep sw{device.id, "latency_tlb_mapped_pages", "chase", "ld.global.cg", 1, false, {}};
    std::vector<std::pair<double, double>> points;
    for (int p = 2; p <= mapped; p *= options.quick ? 4 : 2) {
      std::vector<u64> cycle(p);
      for (int i = 0; i < p; ++i) cycle[i] = va.word(u64(i));
      std::shuffle(cycle.begin(), cycle.end(), rng);
      ChasePoint c = run_chase<false>(options, device, va.get(), cycle, true);
      if (!c.ok) throw InputError("the chase over mapped pages did not end at its line");
      sw.points.push_back(to_point(double(p) * double(va.page_bytes()), c));
      points.emplace_back(double(p) * double(va.page_bytes()), c.cycles_per_hop);
    }
    record_tlb_steps(device, "tlb_steps_mapped_pages",
                     std::to_string(mapped) + " pages of " + std::to_string(va.page_bytes() >> 20) +
                         " MiB, mapped (cuMemMap, " + std::to_string(int(map_seconds * 1e3)) +
                         " ms for all) 32 at a time onto one 64 MiB allocation; one 8-byte word a page",
                     points, profile, 1.10);
    profile.sweeps.push_back(std::move(sw));
  } catch (const std::exception& e) {
    profile.conditions[key] = std::string("not measured: ") + e.what();
  }
  profile.conditions["cuda.latency." + device.id + ".tlb_probe"] =
      "one line per page, lines L2-resident; a step is a working set whose latency is 15% (mapped "
      "pages: 10%) above the plateau before it, held at the next point";
}

void run_latency_probe(const ProbeOptions& options, const Device& device, MachineProfile& profile) {
  const int dev = device_index(device);
  check(cudaSetDevice(dev), "cudaSetDevice");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  const double l2 = p.l2CacheSize;
  double max_ws = 16384;
  while (max_ws < 4 * l2) max_ws *= 2;
  DeviceBuffer buf(static_cast<std::size_t>(max_ws));
  check(cudaFuncSetAttribute(chase<true>, cudaFuncAttributePreferredSharedMemoryCarveout, 0), "carveout");
  std::vector<std::pair<double, ChasePoint>> raw_ca, raw_cg;
  level_sweep<true>(options, device, l2, max_ws, buf, profile, raw_ca);
  const Sweep& ca = profile.sweeps.back();
  add_level_ceiling(device, "L1", "ld.global.ca", raw_ca, ca, max_ws, profile);
  level_sweep<false>(options, device, l2, max_ws, buf, profile, raw_cg);
  Sweep cg = profile.sweeps.back();
  add_level_ceiling(device, "L2", "ld.global.cg", raw_cg, cg, max_ws, profile);
  add_level_ceiling(device, device.memory_levels.back().name, "ld.global.cg", raw_cg, cg, max_ws, profile);
  l2_partitions(options, device, l2, profile);
  tlb_sweep(options, device, profile);
}

}  // namespace

RAFTER_REGISTER_PROBE("cuda.latency", "cuda", "pointer-chase latency through L1, L2, HBM and the TLB",
                      run_latency_probe);

}  // namespace rafter::probes::cuda
