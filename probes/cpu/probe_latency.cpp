// cpu.latency: dependent loads through a random cyclic permutation of cache lines (a pointer
// chase, so each load waits for the previous one and no prefetcher can guess the next line), per
// working set, on one pinned thread; huge pages where the system allows, recorded either way.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "cpu_options.hpp"
#include "thread_team.hpp"

namespace rafter::probes::cpu {
namespace {

constexpr std::size_t kLineBytes = 64;
void* volatile g_chase_end = nullptr;  // where the last chase ended: keeps the loads live

// Links every line of the buffer into one random cycle (Sattolo's algorithm), each line's first
// word pointing at the next line.
void build_cycle(AlignedBuffer& buf, std::size_t lines, std::mt19937_64& rng) {
  std::vector<std::size_t> order(lines);
  std::iota(order.begin(), order.end(), 0);
  for (std::size_t i = lines - 1; i > 0; --i) {
    std::uniform_int_distribution<std::size_t> pick(0, i - 1);
    std::swap(order[i], order[pick(rng)]);
  }
  char* base = reinterpret_cast<char*>(buf.data());
  for (std::size_t i = 0; i < lines; ++i)
    *reinterpret_cast<void**>(base + order[i] * kLineBytes) = base + order[(i + 1) % lines] * kLineBytes;
}

// Follows `steps` links (a multiple of 16) from p; returns where it ended so the chain stays live.
void* chase(void* p, std::size_t steps) {
  for (std::size_t i = 0; i < steps; i += 16) {
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) p = *static_cast<void**>(p);
  }
  return p;
}

struct LatencyPoint {
  SweepPoint point;
  double cycles = 0;
};

LatencyPoint measure_chase(AlignedBuffer& buf, double ws, const ProbeOptions& options, double hz,
                           std::mt19937_64& rng) {
  const std::size_t lines = std::max<std::size_t>(16, static_cast<std::size_t>(ws) / kLineBytes);
  build_cycle(buf, lines, rng);
  void* p = buf.data();
  p = chase(p, std::min<std::size_t>(lines, 1 << 20) / 16 * 16 + 16);  // warm the level
  const double t0 = now_seconds();
  p = chase(p, 16384);
  const double per_step = std::max((now_seconds() - t0) / 16384, 1e-10);
  const double target = options.quick ? 0.001 : 0.004;
  const std::size_t steps =
      std::max<std::size_t>(16384, static_cast<std::size_t>(target / per_step) / 16 * 16);
  const Summary s = measure_seconds(probe_policy(options), [&] { p = chase(p, steps); });
  g_chase_end = p;
  const Summary per_access = transform(s, [steps](double t) { return t / static_cast<double>(steps); });
  return {SweepPoint{static_cast<double>(lines * kLineBytes), Figure::measured(per_access, "s")},
          per_access.median * hz};
}

void probe_cpu_latency(const ProbeOptions& options, const Device& cpu, MachineProfile& profile) {
  ThreadTeam team(1);  // pins this thread to core 0
  ProbeWindow window;
  const auto grid =
      working_set_grid(4096, max_working_set_bytes(options, cpu), options.quick ? 1 : 2, kLineBytes);
  AlignedBuffer buf(static_cast<std::size_t>(grid.back()) + 4096, true);
  std::fill_n(buf.data(), buf.bytes() / sizeof(double), 1.0);  // touch it: THP backs it now or never
  const double huge_bytes = anon_huge_pages_bytes();
  Sweep sweep{cpu.id, "latency", "chase", "scalar", 1, buf.huge_pages(), {}};
  std::vector<double> cycles;
  std::mt19937_64 rng(2024);
  Progress progress("cpu.latency", grid.size());
  for (double ws : grid) {
    progress.step(fmt::format("chase {:.0f} KiB", ws / 1024));
    LatencyPoint lp = measure_chase(buf, ws, options, window.hz_before(), rng);
    cycles.push_back(lp.cycles);
    sweep.points.push_back(std::move(lp.point));
  }
  progress.finish();
  window.close();
  std::vector<SweepSample> samples;
  for (const SweepPoint& p : sweep.points) samples.push_back({p.working_set_bytes, p.figure.value});
  for (const Plateau& p : detect_plateaus(samples, level_capacities(cpu, 1), false)) {
    Ceiling c;
    c.kind = CeilingKind::Latency;
    c.device = cpu.id;
    c.resource = p.level;
    c.operation = "chase";
    c.isa = "scalar";
    c.scope = "core";
    c.threads = 1;
    c.figure = sweep.points[p.best].figure;
    c.probe = "cpu.latency";
    const double hz = window.hz();
    c.params = {{"working_set_bytes", sweep.points[p.best].working_set_bytes},
                {"ns", c.figure.value * 1e9},
                {"cycles", c.figure.value * hz},
                {"plateau_from_bytes", sweep.points[p.first].working_set_bytes},
                {"plateau_to_bytes", sweep.points[p.last].working_set_bytes},
                {"plateau_median_seconds", p.median_value},
                {"huge_pages", sweep.huge_pages},
                {"anon_huge_pages_bytes", huge_bytes},
                {"pinned", team.pinned()}};
    finish_ceiling(c, window);
    profile.ceilings.push_back(std::move(c));
  }
  profile.conditions["latency_huge_pages"] = sweep.huge_pages;
  profile.conditions["latency_cycles_per_point"] = cycles;
  profile.sweeps.push_back(std::move(sweep));
}

}  // namespace

RAFTER_REGISTER_PROBE("cpu.latency", "cpu",
                      "pointer-chase load latency per working set (ns and cycles); a ceiling per level",
                      probe_cpu_latency);

}  // namespace rafter::probes::cpu
