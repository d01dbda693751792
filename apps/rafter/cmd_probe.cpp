// rafter probe --device cpu|cuda[:N]: characterize a device, write machine.json atomically and
// print the ceilings as a table. The output path is checked before anything is measured.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "fp4_gemm_ceiling.hpp"
#include "rafter/collector/environment.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/collector/interrupt.hpp"
#include "rafter/collector/json_io.hpp"
#include "rafter/collector/output_lock.hpp"
#include "rafter/collector/ranks.hpp"
#include "rafter/collector/text_table.hpp"
#include "rafter/probes/probe.hpp"

namespace rafter::cli {
namespace {

struct ProbeArgs {
  std::string device = "cpu";
  std::string output = "machine.json";
  bool list = false;
  bool replace = false;
  std::string max_working_set;
  double comm_timeout = Ranks::kDefaultTimeoutSeconds;
  probes::ProbeOptions options;
};

// Ceilings to 4 significant digits: FP8 E4M3 and E5M2 at 1.775 and 1.791 PFLOP/s must not both
// read "1.8 PFLOP/s".
std::string human(double v, std::string_view unit) { return format_si(v, unit, 4); }

// "5x 43%": how many trials a ceiling had and how far their medians spread; "-" without trials.
std::string trials_cell(const Ceiling& c) {
  const auto trials = c.params.find("trials");
  const auto spread = c.params.find("between_trial_spread");
  if (trials == c.params.end() || !trials->is_array() || spread == c.params.end() || !spread->is_number())
    return "-";
  return fmt::format("{}x {:.0f}%", trials->size(), spread->get<double>() * 100);
}

// The all-core DRAM ceiling users compare operators against, with its trials' drift spelled out.
void print_dram_trials_note(const MachineProfile& p) {
  for (const Device& d : p.devices) {
    const Ceiling* c = p.best(d.id, CeilingKind::Bandwidth, "DRAM", "device");
    if (c == nullptr || !c->params.contains("trial_medians") || !c->params.contains("trials")) continue;
    const nlohmann::json& m = c->params["trial_medians"];
    const nlohmann::json& trials = c->params["trials"];
    const std::string_view unit = c->figure.unit;
    std::string medians;
    for (const nlohmann::json& t : trials)
      medians += fmt::format("{}{}", medians.empty() ? "" : ", ", human(t.value("median", 0.0), unit));
    fmt::print(
        "\n{} DRAM, all cores ({} {}): {} = best of {} trials taken {:.0f}-{:.0f} s into the probe ({})\n",
        d.id, c->operation, c->isa, human(c->figure.value, unit), trials.size(),
        trials.front().value("at_seconds", 0.0), trials.back().value("at_seconds", 0.0), medians);
    fmt::print("  trials' medians: min {} / median {} / max {}, spread {:.0f}%{}\n",
               human(m.value("min", 0.0), unit), human(m.value("median", 0.0), unit),
               human(m.value("max", 0.0), unit), c->params.value("between_trial_spread", 0.0) * 100,
               c->params.value("trials_disagree", false)
                   ? " (drifting: the host's bandwidth changed during the probe)"
                   : "");
  }
}

// The hypervisor's steal over each CPU probe (every ceiling of a probe carries the same figure).
void print_steal_note(const MachineProfile& p) {
  std::vector<std::pair<std::string, double>> probes;
  for (const Ceiling& c : p.ceilings) {
    if (c.clocks.steal_fraction < 0) continue;
    if (std::none_of(probes.begin(), probes.end(), [&](const auto& x) { return x.first == c.probe; }))
      probes.emplace_back(c.probe, c.clocks.steal_fraction);
  }
  if (probes.empty()) return;
  std::string list;
  for (const auto& [probe, steal] : probes)
    list += fmt::format("{}{} {:.1f}%", list.empty() ? "" : ", ", probe, steal * 100);
  const bool stolen = std::any_of(probes.begin(), probes.end(),
                                  [](const auto& x) { return x.second >= kStolenFlagFraction; });
  fmt::print(
      "\nhypervisor steal (share of the CPU time each probe wanted, /proc/stat): {}{}\n", list,
      stolen ? fmt::format(" (ceilings from {:.0f}% on are flagged stolen)", kStolenFlagFraction * 100) : "");
}

void print_table(const MachineProfile& p) {
  for (const Device& d : p.devices)
    fmt::print("{} ({}): {} cores, {} threads; counters {}\n", d.name, d.id, d.cores, d.threads, d.counters);
  std::vector<std::vector<std::string>> rows = {{"kind", "level", "op", "isa", "scope", "thr", "regime",
                                                 "value (median)", "min", "max", "GHz", "sheet", "trials", "flag"}};
  for (const Ceiling& c : p.ceilings) {
    const std::string sheet = c.datasheet_ratio ? fmt::format("{:.0f}%", *c.datasheet_ratio * 100) : "-";
    rows.push_back({std::string(to_string(c.kind)), c.resource, c.operation, c.isa, c.scope, fmt::format("{}", c.threads),
                    c.regime, human(c.figure.value, c.figure.unit), human(c.figure.stats.min, c.figure.unit),
                    human(c.figure.stats.max, c.figure.unit), fmt::format("{:.3f}", c.frequency_hz / 1e9), sheet,
                    trials_cell(c), c.flag});
  }
  fmt::print("\n{}", format_text_table(rows, {1, 2, 3, 4, 6, 13}));
  print_dram_trials_note(p);
  print_steal_note(p);
}

double parse_bytes(const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw InputError(fmt::format("--max-working-set '{}': not a size (bytes, or with K/M/G suffix)", text));
  }
  const std::string suffix = text.substr(used);
  double scale = 1;
  if (suffix == "K" || suffix == "KiB")
    scale = 1024;
  else if (suffix == "M" || suffix == "MiB")
    scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB")
    scale = 1024.0 * 1024 * 1024;
  else if (!suffix.empty() && suffix != "B")
    throw InputError(fmt::format("--max-working-set '{}': unknown unit '{}' (B, K, M, G)", text, suffix));
  if (!(v > 0)) throw InputError(fmt::format("--max-working-set '{}': must be positive", text));
  return v * scale;
}

// The profile already at the output path, read before anything is measured. A profile of this
// host is merged into (merge_earlier: this run's probes replace their earlier ceilings, the rest
// stay); anything else there is measured work too, so it is not overwritten unless --replace.
std::optional<MachineProfile> earlier_profile(const std::string& path) {
  if (!output_holds_a_file(path)) return std::nullopt;
  MachineProfile earlier;
  try {
    earlier = machine_profile_from_json(read_json_file(path), path);
  } catch (const InputError& e) {
    throw InputError(
        fmt::format("-o {}: the file there is not a machine profile ({}); not overwritten (--replace "
                    "overwrites it)",
                    path, e.what()));
  }
  if (const std::string here = host_name(); earlier.host != here)
    throw InputError(
        fmt::format("-o {}: the file there is a profile of host '{}', not of this one ('{}'); not "
                    "overwritten (--replace overwrites it)",
                    path, earlier.host, here));
  return earlier;
}

void run_probe(ProbeArgs& a) {
  if (a.list) {
    std::vector<std::vector<std::string>> rows = {{"probe", "device", "what it measures"}};
    for (const auto& p : probes::probe_registry()) rows.push_back({p.name, p.device_kind, p.summary});
    fmt::print("{}", format_text_table(rows, {1, 2}));
    return;
  }
  if (!a.max_working_set.empty()) a.options.max_working_set_bytes = parse_bytes(a.max_working_set);
  if (a.options.quick) a.options.policy = RepeatPolicy::quick();
  Ranks& ranks = Ranks::world();  // under mpirun (comm.mpi) every rank measures, rank 0 alone writes
  ranks.set_timeout_seconds(a.comm_timeout);
  std::optional<OutputLock> lock;  // one measuring run per output file
  std::optional<MachineProfile> earlier;
  on_rank0_for_all_ranks(ranks, [&] {
    check_writable(a.output);  // fail before minutes of measuring, not after
    lock.emplace(a.output);
    if (!a.replace) earlier = earlier_profile(a.output);
  });
  if (a.options.counters && a.device.rfind("cuda", 0) != 0)
    fmt::print(stderr, "rafter: note: --counters counts the GPU probes' launches (CUPTI); CPU ceilings stay uncounted\n");
  const InterruptScope interrupts;  // a first Ctrl-C stops after the current repeat and keeps what finished
  MachineProfile profile = probes::characterize(a.device, a.options);
  if (ranks.rank() != 0) return;
  attach_fp4_gemm_datasheets(profile);
  print_table(profile);
  const std::size_t measured = profile.ceilings.size();
  std::string kept;
  if (earlier) {
    if (const std::string other = other_machine(*earlier, profile); !other.empty()) {
      fmt::print(stderr, "rafter: note: replaced {}: {}\n", a.output, other);  // this host's hardware changed
    } else {
      profile = merge_earlier(*earlier, std::move(profile));
      if (profile.conditions.contains("merged"))
        kept = fmt::format(
            ", keeping {} ceiling(s) of probes this run did not run (from {}; --replace drops them)",
            profile.conditions["merged"].value("kept_ceilings", 0), earlier->timestamp);
    }
  }
  write_measured_file(a.output, to_json(profile).dump(2) + "\n");
  fmt::print("\nwrote {}{}\n", a.output, kept);
  if (!profile.interrupted.empty())
    throw interrupted_status(
        fmt::format("wrote {} with {} ceiling(s) of the probes that finished; not run: {}", a.output,
                    measured, profile.conditions.value("probes_not_run", nlohmann::json::array()).dump()));
}

}  // namespace

void add_probe_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "probe", "Measure a device's ceilings (bandwidth, latency, compute) into machine.json");
  auto a = std::make_shared<ProbeArgs>();
  sub->add_option("--device", a->device, "cpu, cuda (every GPU) or cuda:N")->capture_default_str();
  sub->add_option("-o,--output", a->output, "Where to write the machine profile")->capture_default_str();
  sub->add_flag("--quick", a->options.quick, "Coarse sweep and fewer repeats (< 30 s on 2 cores)");
  sub->add_option("--isa", a->options.isa,
                  "Force the kernels' ISA: avx512, avx2, sse, scalar (default: widest)");
  sub->add_option("--threads", a->options.threads, "Threads of the all-core figures (default: every core)");
  sub->add_option("--filter", a->options.filter, "Regular expression over probe names (see --list)");
  sub->add_option("--max-working-set", a->max_working_set,
                  "Largest working set of the sweeps, bytes (K/M/G suffix)");
  sub->add_flag("--counters", a->options.counters,
                "GPU: count each ceiling's timed launch once more (CUPTI) and record its bytes and FLOPs "
                "beside the probe's declared work (params.counters)");
  sub->add_option("--sustained", a->options.sustained_seconds,
                  "GPU: also hold each compute ceiling this many seconds at the power limit (10-30)")
      ->check(CLI::Range(1.0, 600.0));
  sub->add_option("--comm-timeout", a->comm_timeout, "Seconds any wait for the other ranks may last (mpirun)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_flag("--replace", a->replace,
                "Write only this run's ceilings (default: a profile of this machine at the output path keeps "
                "the ceilings of the probes this run did not run)");
  sub->add_flag("--list", a->list, "List the probes and exit");
  sub->callback([a] { run_probe(*a); });
}

}  // namespace rafter::cli
