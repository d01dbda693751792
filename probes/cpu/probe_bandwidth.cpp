// cpu.bandwidth: load, store, non-temporal store, copy and triad swept over working sets from 4 KiB
// to beyond the last-level cache, on 1 thread and on all cores (threads pinned, data first-touched
// by its own thread), then a bandwidth ceiling per plateau, named after the hwloc level it fits.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "cpu_features.hpp"
#include "cpu_options.hpp"
#include "kernels.hpp"
#include "stream_check.hpp"
#include "thread_team.hpp"

namespace rafter::probes::cpu {
namespace {

struct ThreadData {
  AlignedBuffer buffer;
  std::uint64_t sink = 0;  // the load kernel's checksum, kept so the loads stay live
};

void run_kernel(const StreamKernels& k, const StreamOperation& op, ThreadData& d, std::size_t n, int passes) {
  double* a = d.buffer.data();
  double* b = a + n;
  double* c = b + n;
  const std::string_view name = op.name;
  if (name == "load")
    d.sink ^= k.load(a, n, passes);
  else if (name == "store")
    k.store(a, n, 1.0, passes);
  else if (name == "nt_store")
    k.nt_store(a, n, 1.0, passes);
  else if (name == "copy")
    k.copy(a, b, n, passes);
  else
    k.triad(a, b, c, 0.5, n, passes);
}

struct SweepContext {
  ThreadTeam& team;
  std::vector<ThreadData>& data;
  const StreamKernels& kernels;
  RepeatPolicy policy;
  double sample_seconds;     // each timed sample lasts about this long
  double worst_overlap = 1;  // of the threads' run times (see thread_team.hpp)
};

// One point: n doubles per array and thread, passes sized so a sample lasts sample_seconds.
SweepPoint measure_point(SweepContext& ctx, const StreamOperation& op, std::size_t n) {
  int passes = 1;
  auto body = [&](int t) { run_kernel(ctx.kernels, op, ctx.data[static_cast<std::size_t>(t)], n, passes); };
  team_sample(ctx.team, body);  // warm the data into the level being measured
  const double one_pass = std::max(team_sample(ctx.team, body).seconds, 1e-8);
  passes = static_cast<int>(std::clamp(std::ceil(ctx.sample_seconds / one_pass), 1.0, 1e6));
  double overlap = 1;
  const Summary seconds = measure_team_seconds(ctx.policy, ctx.team, body, &overlap);
  ctx.worst_overlap = std::min(ctx.worst_overlap, overlap);
  const double bytes = ctx.team.size() * static_cast<double>(n) * op.bytes_per_element * passes;
  const Summary bw = transform(seconds, [bytes](double s) { return bytes / s; });
  const double ws = ctx.team.size() * static_cast<double>(n) * op.arrays * sizeof(double);
  return SweepPoint{ws, Figure::measured(bw, "B/s")};
}

std::vector<Ceiling> plateau_ceilings(const Sweep& sweep, const Device& cpu, bool pinned) {
  std::vector<SweepSample> samples;
  for (const SweepPoint& p : sweep.points) samples.push_back({p.working_set_bytes, p.figure.value});
  const auto levels = level_capacities(cpu, sweep.threads);
  std::vector<Ceiling> ceilings;
  for (const Plateau& p : detect_plateaus(samples, levels, true)) {
    Ceiling c;
    c.kind = CeilingKind::Bandwidth;
    c.device = cpu.id;
    c.resource = p.level;
    c.operation = sweep.operation;
    c.isa = sweep.isa;
    c.scope = sweep.threads == 1 ? "core" : "device";
    c.threads = sweep.threads;
    c.figure = sweep.points[p.best].figure;
    c.probe = "cpu.bandwidth";
    c.params = {{"working_set_bytes", sweep.points[p.best].working_set_bytes},
                {"plateau_from_bytes", sweep.points[p.first].working_set_bytes},
                {"plateau_to_bytes", sweep.points[p.last].working_set_bytes},
                {"plateau_points", p.points},
                {"plateau_median_bytes_per_second", p.median_value},
                {"per_core_bytes_per_second", c.figure.value / sweep.threads},
                {"huge_pages", sweep.huge_pages},
                {"pinned", pinned}};
    ceilings.push_back(std::move(c));
  }
  return ceilings;
}

// One operation's sweep over the grid with one ISA's kernels, and the ceilings of its plateaus.
void sweep_operation(SweepContext& ctx, const Device& cpu, const StreamOperation& op,
                     const std::vector<double>& grid, Progress& progress, MachineProfile& profile) {
  const int threads = ctx.team.size();
  Sweep sweep{cpu.id, "bandwidth", op.name, ctx.kernels.isa, threads, ctx.data[0].buffer.huge_pages(), {}};
  for (double ws : grid) {
    progress.step(fmt::format("{} {} {} thread(s) {:.0f} KiB", op.name, ctx.kernels.isa, threads, ws / 1024));
    const double per_array = ws / (threads * op.arrays * sizeof(double));
    const auto n = std::max<std::size_t>(
        kStreamBlockDoubles, static_cast<std::size_t>(per_array / kStreamBlockDoubles) * kStreamBlockDoubles);
    SweepPoint p = measure_point(ctx, op, n);
    if (!sweep.points.empty() && p.working_set_bytes <= sweep.points.back().working_set_bytes) continue;
    sweep.points.push_back(std::move(p));
  }
  for (Ceiling& c : plateau_ceilings(sweep, cpu, ctx.team.pinned())) {
    c.params["thread_overlap_min"] = ctx.worst_overlap;
    profile.ceilings.push_back(std::move(c));
  }
  ctx.worst_overlap = 1;
  profile.sweeps.push_back(std::move(sweep));
}

void sweep_threads(const ProbeOptions& options, const Device& cpu, int threads,
                   const std::vector<std::string>& isas, const std::vector<double>& grid, Progress& progress,
                   MachineProfile& profile) {
  ThreadTeam team(threads);
  std::vector<ThreadData> data(static_cast<std::size_t>(threads));
  const double per_thread_bytes = grid.back() / threads + 4096;
  team.run([&](int t) {  // allocated and first-touched by the thread that streams it
    ThreadData& d = data[static_cast<std::size_t>(t)];
    d.buffer = AlignedBuffer(static_cast<std::size_t>(per_thread_bytes), true);
    const std::size_t n = d.buffer.bytes() / sizeof(double);
    for (std::size_t i = 0; i < n; ++i)
      d.buffer.data()[i] = 1.0 + 1e-6 * static_cast<double>((i * 7 + t) % 1000);
  });
  profile.conditions[fmt::format("bandwidth_anon_huge_pages_bytes_{}t", threads)] = anon_huge_pages_bytes();
  for (const std::string& isa : isas) {
    SweepContext ctx{team, data, stream_kernels(isa), probe_policy(options), options.quick ? 0.0005 : 0.002};
    for (const StreamOperation& op : kStreamOperations)
      sweep_operation(ctx, cpu, op, grid, progress, profile);
  }
}

// --isa, or the widest ISA plus AVX2 where both exist: cores that run a 512-bit operation on two
// 256-bit halves (Zen 4) stream faster from L1 with 256-bit kernels, and a ceiling must be the
// machine's best.
std::vector<std::string> isas_to_sweep(const ProbeOptions& options) {
  const std::string widest = selected_isa(options);
  std::vector<std::string> isas{widest};
  if (options.isa.empty() && widest == "avx512" && cpu_has_isa(cpu_features(), "avx2"))
    isas.push_back("avx2");
  return isas;
}

void probe_cpu_bandwidth(const ProbeOptions& options, const Device& cpu, MachineProfile& profile) {
  const std::vector<std::string> isas = isas_to_sweep(options);
  for (const std::string& isa : isas)
    if (const std::string bad = check_stream_kernels(stream_kernels(isa)); !bad.empty())
      throw std::runtime_error("cpu.bandwidth: kernel check failed: " + bad);
  const double hz_before = measure_core_frequency_hz();
  const auto grid = working_set_grid(4096, max_working_set_bytes(options, cpu), options.quick ? 1 : 2, 512);
  const int all = all_core_threads(options, cpu);
  std::vector<int> thread_counts{1};
  if (all > 1) thread_counts.push_back(all);
  Progress progress("cpu.bandwidth",
                    thread_counts.size() * isas.size() * std::size(kStreamOperations) * grid.size());
  const std::size_t first = profile.ceilings.size();
  for (int threads : thread_counts) sweep_threads(options, cpu, threads, isas, grid, progress, profile);
  progress.finish();
  const double hz_after = measure_core_frequency_hz();
  for (std::size_t i = first; i < profile.ceilings.size(); ++i)
    finish_ceiling(profile.ceilings[i], hz_before, hz_after);
}

}  // namespace

RAFTER_REGISTER_PROBE(
    "cpu.bandwidth", "cpu",
    "load/store/nt_store/copy/triad bandwidth swept over working sets; a ceiling per cache level and DRAM",
    probe_cpu_bandwidth);

}  // namespace rafter::probes::cpu
