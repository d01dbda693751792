// cpu.bandwidth: load, store, non-temporal store, copy and triad swept over working sets from 4 KiB
// to beyond the last-level cache, on 1 thread and on all cores (threads pinned, data first-touched
// by its own thread), then a bandwidth ceiling per plateau, named after the hwloc level it fits.
// The all-core plateaus are re-measured in trials spread over the probe (trials.hpp): the all-core
// sweeps run first, and their plateaus' points are measured again between the 1-thread sweeps and
// at the end, so that a quiet or busy moment of a shared host does not decide the ceiling alone.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string_view>

#include "cpu_features.hpp"
#include "cpu_options.hpp"
#include "kernels.hpp"
#include "stream_check.hpp"
#include "thread_team.hpp"
#include "trials.hpp"

namespace rafter::probes::cpu {
namespace {

struct ThreadData {
  AlignedBuffer buffer;
  std::uint64_t sink = 0;  // the load kernel's checksum, kept so the loads stay live
};

// The load's forms (StreamKernels): chains (load), pairs (load_pairs), discard (load_discard).
constexpr const char* kLoadForms[] = {"chains", "pairs", "discard"};

// `form`: which of kLoadForms a load runs.
void run_kernel(const StreamKernels& k, const StreamOperation& op, ThreadData& d, std::size_t n, int passes,
                int form) {
  double* a = d.buffer.data();
  double* b = a + n;
  double* c = b + n;
  const std::string_view name = op.name;
  if (name == "load")
    d.sink ^= (form == 2 ? k.load_discard : form == 1 ? k.load_pairs : k.load)(a, n, passes);
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
  double start_seconds;      // when the probe began (trials record their time from it)
  double worst_overlap = 1;  // of the threads' run times (see thread_team.hpp), over the sweep
  double point_overlap = 1;  // the same, over the last point's samples
  int point_form = 0;        // the last load point's fastest form (kLoadForms)
};

// One all-core ceiling's trials: the sweep's own point and its re-measurements, by index into the
// ceilings of the all-core part of the profile.
struct TrialTarget {
  std::size_t ceiling = 0;
  std::string isa;
  const StreamOperation* op = nullptr;
  std::size_t n = 0;  // doubles per array and thread
  std::vector<Trial> trials;
};

double sample_seconds(const ProbeOptions& options) { return options.quick ? 0.0005 : 0.002; }

// Trials per all-core ceiling, the sweep's own measurement included.
// Each thread's buffer, allocated and first-touched by the thread that streams it.
std::vector<ThreadData> allocate_team_data(ThreadTeam& team, double per_thread_bytes) {
  std::vector<ThreadData> data(static_cast<std::size_t>(team.size()));
  team.run([&](int t) {
    ThreadData& d = data[static_cast<std::size_t>(t)];
    d.buffer = AlignedBuffer(static_cast<std::size_t>(per_thread_bytes), true);
    const std::size_t n = d.buffer.bytes() / sizeof(double);
    for (std::size_t i = 0; i < n; ++i)
      d.buffer.data()[i] = 1.0 + 1e-6 * static_cast<double>((i * 7 + t) % 1000);
  });
  return data;
}

// One point: n doubles per array and thread, passes sized so a sample lasts sample_seconds. A load
// point times each form of the kernel and keeps the fastest median: which one reads a level
// fastest depends on the core (StreamKernels), and a ceiling is the rate the level gives, not one
// loop's.
SweepPoint measure_point(SweepContext& ctx, const StreamOperation& op, std::size_t n) {
  const double ws = ctx.team.size() * static_cast<double>(n) * op.arrays * sizeof(double);
  SweepPoint best{ws, {}};
  const int forms = std::string_view(op.name) == "load" ? static_cast<int>(std::size(kLoadForms)) : 1;
  for (int form = 0; form < forms; ++form) {
    int passes = 1;
    auto body = [&](int t) {
      run_kernel(ctx.kernels, op, ctx.data[static_cast<std::size_t>(t)], n, passes, form);
    };
    team_sample(ctx.team, body);  // warm the data into the level being measured
    const double one_pass = std::max(team_sample(ctx.team, body).seconds, 1e-8);
    passes = static_cast<int>(std::clamp(std::ceil(ctx.sample_seconds / one_pass), 1.0, 1e6));
    double overlap = 1;
    const Summary seconds = measure_team_seconds(ctx.policy, ctx.team, body, &overlap);
    ctx.worst_overlap = std::min(ctx.worst_overlap, overlap);
    const double bytes = ctx.team.size() * static_cast<double>(n) * op.bytes_per_element * passes;
    const Summary bw = transform(seconds, [bytes](double s) { return bytes / s; });
    if (form == 0 || bw.median > best.figure.value) {
      best.figure = Figure::measured(bw, "B/s");
      ctx.point_overlap = overlap;
      ctx.point_form = form;
    }
  }
  return best;
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
// With `targets`, every ceiling also becomes a trial target, its first trial the sweep's point.
void sweep_operation(SweepContext& ctx, const Device& cpu, const StreamOperation& op,
                     const std::vector<double>& grid, Progress& progress, MachineProfile& profile,
                     std::vector<TrialTarget>* targets) {
  const int threads = ctx.team.size();
  Sweep sweep{cpu.id, "bandwidth", op.name, ctx.kernels.isa, threads, ctx.data[0].buffer.huge_pages(), {}};
  std::vector<double> measured_at, overlap;  // per point: seconds from the probe's start, overlap
  std::vector<int> forms;                    // per load point: its fastest form (kLoadForms)
  for (double ws : grid) {
    progress.step(fmt::format("{} {} {} thread(s) {:.0f} KiB", op.name, ctx.kernels.isa, threads, ws / 1024));
    const double per_array = ws / (threads * op.arrays * sizeof(double));
    const auto n = std::max<std::size_t>(
        kStreamBlockDoubles, static_cast<std::size_t>(per_array / kStreamBlockDoubles) * kStreamBlockDoubles);
    SweepPoint p = measure_point(ctx, op, n);
    if (!sweep.points.empty() && p.working_set_bytes <= sweep.points.back().working_set_bytes) continue;
    sweep.points.push_back(std::move(p));
    measured_at.push_back(now_seconds() - ctx.start_seconds);
    overlap.push_back(ctx.point_overlap);
    forms.push_back(ctx.point_form);
  }
  for (Ceiling& c : plateau_ceilings(sweep, cpu, ctx.team.pinned())) {
    c.params["thread_overlap_min"] = ctx.worst_overlap;
    const double ws = c.params["working_set_bytes"].get<double>();
    const auto point = static_cast<std::size_t>(
        std::find_if(sweep.points.begin(), sweep.points.end(),
                     [ws](const SweepPoint& q) { return q.working_set_bytes == ws; }) -
        sweep.points.begin());
    if (std::string_view(op.name) == "load") c.params["load_kernel"] = kLoadForms[forms[point]];
    if (targets != nullptr) {
      const auto n = static_cast<std::size_t>(std::llround(ws / (threads * op.arrays * sizeof(double))));
      targets->push_back({profile.ceilings.size(),
                          ctx.kernels.isa,
                          &op,
                          n,
                          {Trial{c.figure.stats, measured_at[point], ws, overlap[point]}}});
    }
    profile.ceilings.push_back(std::move(c));
  }
  ctx.worst_overlap = 1;
  profile.sweeps.push_back(std::move(sweep));
}

// `after_each_operation` runs between the operations' sweeps (the trials' slots).
void sweep_threads(const ProbeOptions& options, const Device& cpu, int threads,
                   const std::vector<std::string>& isas, const std::vector<double>& grid,
                   double start_seconds, Progress& progress, MachineProfile& profile,
                   std::vector<TrialTarget>* targets, const std::function<void()>& after_each_operation) {
  ThreadTeam team(threads);
  std::vector<ThreadData> data = allocate_team_data(team, grid.back() / threads + 4096);
  profile.conditions[fmt::format("bandwidth_anon_huge_pages_bytes_{}t", threads)] = anon_huge_pages_bytes();
  for (const std::string& isa : isas) {
    SweepContext ctx{team,         data, stream_kernels(isa), probe_policy(options), sample_seconds(options),
                     start_seconds};
    for (const StreamOperation& op : kStreamOperations) {
      sweep_operation(ctx, cpu, op, grid, progress, profile, targets);
      if (after_each_operation) after_each_operation();
    }
  }
}

// One more trial of every target: a fresh all-core team and buffers (the sweep's are gone), each
// target's point measured again as in the sweep.
void run_trial(const ProbeOptions& options, int threads, double start_seconds,
               std::vector<TrialTarget>& targets, Progress& progress) {
  if (targets.empty()) return;
  double per_thread_bytes = 0;
  for (const TrialTarget& t : targets)
    per_thread_bytes = std::max(per_thread_bytes, static_cast<double>(t.n * t.op->arrays * sizeof(double)));
  ThreadTeam team(threads);
  std::vector<ThreadData> data = allocate_team_data(team, per_thread_bytes + 4096);
  for (TrialTarget& t : targets) {
    progress.step(fmt::format("trial {} of {} {} {} thread(s) {:.0f} KiB", t.trials.size() + 1, t.op->name,
                              t.isa, threads, t.trials.front().working_set_bytes / 1024));
    SweepContext ctx{
        team, data, stream_kernels(t.isa), probe_policy(options), sample_seconds(options), start_seconds};
    const SweepPoint p = measure_point(ctx, *t.op, t.n);
    t.trials.push_back(
        Trial{p.figure.stats, now_seconds() - start_seconds, p.working_set_bytes, ctx.point_overlap});
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

// The trials' buffers can sit beside the 1-thread sweep's only when both fit in memory; otherwise
// the trials wait for the 1-thread sweeps to end.
bool trials_fit_beside_sweep(const Device& cpu, const std::vector<double>& grid,
                             const std::vector<TrialTarget>& targets) {
  double trial_bytes = 0;
  for (const TrialTarget& t : targets)
    trial_bytes = std::max(trial_bytes, t.trials.front().working_set_bytes);
  const double memory = physical_memory_bytes(cpu);
  return memory <= 0 || grid.back() + trial_bytes <= 0.8 * memory;
}

void probe_cpu_bandwidth(const ProbeOptions& options, const Device& cpu, MachineProfile& profile) {
  const std::vector<std::string> isas = isas_to_sweep(options);
  for (const std::string& isa : isas)
    if (const std::string bad = check_stream_kernels(stream_kernels(isa)); !bad.empty())
      throw std::runtime_error("cpu.bandwidth: kernel check failed: " + bad);
  const double start = now_seconds();
  ProbeWindow window;
  const auto grid = working_set_grid(4096, max_working_set_bytes(options, cpu), options.quick ? 1 : 2, 512);
  const int all = all_core_threads(options, cpu);
  const std::size_t operations = isas.size() * std::size(kStreamOperations);
  const int retrials = all > 1 ? trial_count(options) - 1 : 0;
  Progress progress("cpu.bandwidth", (all > 1 ? 2 : 1) * operations * grid.size() +
                                         retrials * operations * cpu.memory_levels.size());
  // All cores first, so that their trials can follow at moments spread over the 1-thread sweeps;
  // their ceilings and sweeps are stored after the 1-thread ones, as they always were.
  MachineProfile device_part;
  std::vector<TrialTarget> targets;
  if (all > 1) sweep_threads(options, cpu, all, isas, grid, start, progress, device_part, &targets, {});
  const bool interleave = trials_fit_beside_sweep(cpu, grid, targets);
  std::size_t swept = 0;
  int trials_done = 0;
  auto next_trial_slot = [&] {  // trial r after ceil(r x operations / retrials) 1-thread sweeps
    ++swept;
    for (; interleave && trials_done < retrials &&
           swept * static_cast<std::size_t>(retrials) >= (trials_done + 1) * operations;
         ++trials_done)
      run_trial(options, all, start, targets, progress);
  };
  const std::size_t first = profile.ceilings.size();
  sweep_threads(options, cpu, 1, isas, grid, start, progress, profile, nullptr, next_trial_slot);
  for (; trials_done < retrials; ++trials_done) run_trial(options, all, start, targets, progress);
  progress.finish();
  window.close();
  for (const TrialTarget& t : targets) record_trials(device_part.ceilings[t.ceiling], t.trials);
  for (Ceiling& c : device_part.ceilings) profile.ceilings.push_back(std::move(c));
  for (Sweep& s : device_part.sweeps) profile.sweeps.push_back(std::move(s));
  for (const auto& [key, value] : device_part.conditions.items()) profile.conditions[key] = value;
  profile.conditions["bandwidth_trials_per_device_ceiling"] = all > 1 ? retrials + 1 : 0;
  for (std::size_t i = first; i < profile.ceilings.size(); ++i) {
    finish_ceiling(profile.ceilings[i], window);
    flag_drifting_trials(profile.ceilings[i]);
  }
}

}  // namespace

RAFTER_REGISTER_PROBE(
    "cpu.bandwidth", "cpu",
    "load/store/nt_store/copy/triad bandwidth swept over working sets; a ceiling per cache level and DRAM",
    probe_cpu_bandwidth);

}  // namespace rafter::probes::cpu
