// rafter probe --device cpu|cuda[:N]: characterize a device, write machine.json atomically and
// print the ceilings as a table. The output path is checked before anything is measured.
#include <fmt/core.h>

#include <cmath>

#include "commands.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/collector/json_io.hpp"
#include "rafter/probes/probe.hpp"

namespace rafter::cli {
namespace {

struct ProbeArgs {
  std::string device = "cpu";
  std::string output = "machine.json";
  bool list = false;
  std::string max_working_set;
  probes::ProbeOptions options;
};

std::string human(double v, std::string_view unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
  if (unit == "s") {
    if (v < 1e-6) return fmt::format("{:.2f} ns", v * 1e9);
    return fmt::format("{:.2f} us", v * 1e6);
  }
  int i = 0;
  while (std::fabs(v) >= 1000 && i < 5) {
    v /= 1000;
    ++i;
  }
  return fmt::format("{:.1f} {}{}", v, prefixes[i], unit);
}

void print_table(const MachineProfile& p) {
  for (const Device& d : p.devices)
    fmt::print("{} ({}): {} cores, {} threads; counters {}\n", d.name, d.id, d.cores, d.threads, d.counters);
  fmt::print("\n{:<10}{:<6}{:<9}{:<7}{:<7}{:>4}{:>15}{:>15}{:>15}{:>6}{:>7}  {}\n", "kind", "level", "op",
             "isa", "scope", "thr", "median", "min", "max", "GHz", "sheet", "flag");
  for (const Ceiling& c : p.ceilings) {
    const std::string sheet = c.datasheet_ratio ? fmt::format("{:.0f}%", *c.datasheet_ratio * 100) : "-";
    fmt::print("{:<10}{:<6}{:<9}{:<7}{:<7}{:>4}{:>15}{:>15}{:>15}{:>6.2f}{:>7}  {}\n", to_string(c.kind),
               c.resource, c.operation, c.isa, c.scope, c.threads, human(c.figure.value, c.figure.unit),
               human(c.figure.stats.min, c.figure.unit), human(c.figure.stats.max, c.figure.unit),
               c.frequency_hz / 1e9, sheet, c.flag);
  }
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

void run_probe(ProbeArgs& a) {
  if (a.list) {
    for (const auto& p : probes::probe_registry())
      fmt::print("{:<16}{:<6}{}\n", p.name, p.device_kind, p.summary);
    return;
  }
  if (!a.max_working_set.empty()) a.options.max_working_set_bytes = parse_bytes(a.max_working_set);
  if (a.options.quick) a.options.policy = RepeatPolicy::quick();
  check_writable(a.output);  // fail before minutes of measuring, not after
  const MachineProfile profile = probes::characterize(a.device, a.options);
  write_file_atomic(a.output, to_json(profile).dump(2) + "\n");
  print_table(profile);
  fmt::print("\nwrote {}\n", a.output);
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
  sub->add_flag("--list", a->list, "List the probes and exit");
  sub->callback([a] { run_probe(*a); });
}

}  // namespace rafter::cli
