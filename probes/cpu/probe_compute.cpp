// cpu.compute: FP64/FP32 FMA at every vector width the CPU has, BF16/FP16/INT8 where present (dot
// products, and AMX's tile dot products where the CPU has its matrix unit), on 1 thread and all cores. A
// precision the CPU lacks is recorded as absent, never as 0 FLOP/s; BF16 and FP16 without native arithmetic
// get the FP32 roof their work runs on instead, labelled so. Each ceiling is the best of a few
// trials taken in rounds over all kernels (trials.hpp): on a shared host a neighbour busy for a
// moment takes FLOPs from one trial, not from the ceiling.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "cpu_options.hpp"
#include "datasheet.hpp"
#include "kernels.hpp"
#include "stream_check.hpp"
#include "thread_team.hpp"
#include "trials.hpp"

namespace rafter::probes::cpu {
namespace {

std::vector<const ComputeKernel*> kernels_to_run(const ProbeOptions& options, nlohmann::json& absent) {
  const CpuFeatures& f = cpu_features();
  std::vector<const ComputeKernel*> run;
  if (options.isa.empty() || options.isa == "avx512")
    if (const std::string bad = check_amx_tiles(f); !bad.empty())
      throw std::runtime_error("cpu.compute: kernel check failed: " + bad);
  for (const ComputeKernel& k : compute_kernels()) {
    if (!options.isa.empty() && k.isa != options.isa) continue;
    if (!k.present(f)) {
      const bool refused = k.operation == "tile_dot" && !f.amx_refused.empty();
      absent.push_back({{"precision", k.precision},
                        {"isa", k.isa},
                        {"instruction", k.instruction},
                        {"reason", refused ? "AMX unusable here: " + f.amx_refused
                                           : std::string("this CPU lacks the instruction (CPUID)")}});
      continue;
    }
    if (const std::string bad = check_compute_kernel(k); !bad.empty())
      throw std::runtime_error("cpu.compute: kernel check failed: " + bad);
    run.push_back(&k);
  }
  return run;
}

// One trial: the kernel's repeats on every thread of the team, in FLOP/s.
Trial time_kernel(ThreadTeam& team, const ComputeKernel& k, const ProbeOptions& options,
                  double start_seconds) {
  std::int64_t iterations = 1000;
  std::vector<double> sink(static_cast<std::size_t>(team.size()));
  auto body = [&](int t) { sink[static_cast<std::size_t>(t)] = k.run(iterations); };
  team_sample(team, body);
  const double per_iteration =
      std::max(team_sample(team, body).seconds, 1e-9) / static_cast<double>(iterations);
  const double target = options.quick ? 0.002 : 0.01;
  iterations = std::max<std::int64_t>(1000, static_cast<std::int64_t>(target / per_iteration));
  // Compute samples are cheap (a few ms) and a preempted one reads far too low: take more of them.
  RepeatPolicy policy = probe_policy(options);
  policy.min_repeats = std::max(policy.min_repeats, options.quick ? 5 : 9);
  policy.max_repeats = std::max(policy.max_repeats, policy.min_repeats);
  double overlap = 1;
  const Summary s = measure_team_seconds(policy, team, body, &overlap);
  const double flops = team.size() * static_cast<double>(iterations) * k.flops_per_iteration;
  return Trial{transform(s, [flops](double t) { return flops / t; }), now_seconds() - start_seconds, 0,
               overlap};
}

Ceiling make_ceiling(const Device& cpu, const ComputeKernel& k, int threads, Figure figure, bool pinned) {
  Ceiling c;
  c.kind = CeilingKind::Compute;
  c.device = cpu.id;
  c.resource = k.precision;
  c.operation = k.operation;
  c.isa = k.isa;
  c.scope = threads == 1 ? "core" : "device";
  c.threads = threads;
  c.figure = std::move(figure);
  c.probe = "cpu.compute";
  c.params = {{"instruction", k.instruction},
              {"vector_bits", k.vector_bits},
              {"accumulators", k.accumulators},
              {"flops_per_iteration", k.flops_per_iteration},
              {"pinned", pinned},
              {"per_core_flops_per_second", c.figure.value / threads}};
  if (k.precision == "int8")
    c.params["unit_note"] = "integer OP/s (multiply and add counted), reported as FLOP/s";
  return c;
}

// BF16 and FP16 that this (held) CPU has no instruction for still run — GEMMs through oneDNN's
// FP32 matmul on widened operands, the native kernels in FP32 arithmetic — so their roof is the
// FP32 one: the best FP32 ceiling of each thread count, again under the precision's name, with
// `params.emulated_via` = "fp32" and a note. (INT8 is not among them: its GEMMs stay integer.)
std::vector<Ceiling> emulated_ceilings(const std::vector<Ceiling>& measured) {
  std::vector<Ceiling> out;
  for (const char* p : {"bf16", "fp16"}) {
    const bool native = std::any_of(compute_kernels().begin(), compute_kernels().end(), [&](const ComputeKernel& k) {
      return k.precision == p && k.present(cpu_features());
    });
    if (native) continue;
    std::vector<const Ceiling*> best;  // the best fp32 ceiling per thread count
    for (const Ceiling& c : measured) {
      if (c.resource != "fp32") continue;
      auto it = std::find_if(best.begin(), best.end(), [&](const Ceiling* b) { return b->threads == c.threads; });
      if (it == best.end()) best.push_back(&c);
      else if (c.figure.value > (*it)->figure.value) *it = &c;
    }
    for (const Ceiling* fp32 : best) {
      Ceiling c = *fp32;
      c.resource = p;
      c.params["emulated_via"] = "fp32";
      c.params["same_measurement_as"] = fp32->id();
      c.params["note"] = fmt::format("no native {} arithmetic on this CPU: the fp32 roof that {} work runs on", p, p);
      out.push_back(std::move(c));
    }
  }
  return out;
}

void probe_cpu_compute(const ProbeOptions& options, const Device& cpu, MachineProfile& profile) {
  nlohmann::json absent = nlohmann::json::array();
  const auto kernels = kernels_to_run(options, absent);
  const int all = all_core_threads(options, cpu);
  std::vector<int> thread_counts{1};
  if (all > 1) thread_counts.push_back(all);
  const int rounds = trial_count(options);
  Progress progress("cpu.compute", kernels.size() * thread_counts.size() * rounds);
  ProbeWindow window;
  const double start = now_seconds();
  std::vector<Ceiling> ceilings;
  for (int threads : thread_counts) {
    ThreadTeam team(threads);
    std::vector<std::vector<Trial>> trials(kernels.size());
    for (int round = 0; round < rounds; ++round)
      for (std::size_t i = 0; i < kernels.size(); ++i) {
        const ComputeKernel& k = *kernels[i];
        progress.step(fmt::format("trial {} of {} {} {} thread(s)", round + 1, k.precision, k.isa, threads));
        trials[i].push_back(time_kernel(team, k, options, start));
      }
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      Ceiling c = make_ceiling(cpu, *kernels[i], threads,
                               Figure::measured(trials[i].front().figure, "FLOP/s"), team.pinned());
      record_trials(c, trials[i]);
      ceilings.push_back(std::move(c));
    }
  }
  progress.finish();
  window.close();
  for (Ceiling& c : ceilings) {
    const ComputeKernel* k = *std::find_if(kernels.begin(), kernels.end(), [&](const ComputeKernel* x) {
      return x->precision == c.resource && x->isa == c.isa && x->operation == c.operation;
    });
    if (const auto peak = datasheet_peak(cpu_features(), *k)) {
      c.datasheet_value = peak->flops_per_cycle_per_core * window.hz() * c.threads;
      c.datasheet_basis = peak->basis;
    }
    finish_ceiling(c, window);
    flag_drifting_trials(c);
  }
  const auto emulated = emulated_ceilings(ceilings);
  ceilings.insert(ceilings.end(), emulated.begin(), emulated.end());
  nlohmann::json precisions_absent = nlohmann::json::array(), precisions_emulated = nlohmann::json::object();
  for (const char* p : {"fp64", "fp32", "bf16", "fp16", "int8"}) {
    const auto it = std::find_if(ceilings.begin(), ceilings.end(), [p](const Ceiling& c) { return c.resource == p; });
    if (it == ceilings.end()) precisions_absent.push_back(p);
    else if (it->params.contains("emulated_via")) precisions_emulated[p] = it->params["emulated_via"];
  }
  for (Ceiling& c : ceilings) profile.ceilings.push_back(std::move(c));
  for (auto& d : profile.devices) {
    if (d.id != cpu.id) continue;
    d.properties["compute_kernels_absent"] = absent;
    d.properties["precisions_absent"] = precisions_absent;  // no kernel of that precision ran: absent, not 0
    d.properties["precisions_emulated"] = precisions_emulated;  // {"bf16": "fp32"}: the roof of that path
  }
}

}  // namespace

RAFTER_REGISTER_PROBE("cpu.compute", "cpu",
                      "FP64/FP32 FMA per vector width, BF16/FP16/INT8 dot/FMA (AMX tiles too) where present; "
                      "1 thread and all cores",
                      probe_cpu_compute);

}  // namespace rafter::probes::cpu
