// The probe registry and characterize(): which devices a spec names, which probes run on them.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <regex>

#include "../cpu/cpu_options.hpp"
#include "rafter/collector/counters.hpp"
#include "rafter/collector/environment.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/collector/interrupt.hpp"
#include "rafter/collector/progress.hpp"
#include "rafter/probes/probe.hpp"
#include "rafter/probes/topology.hpp"

namespace rafter::probes {

std::vector<ProbeInfo>& probe_registry() {
  static std::vector<ProbeInfo> registry;
  return registry;
}

bool register_probe(ProbeInfo info) {
  probe_registry().push_back(std::move(info));
  return true;
}

std::vector<ProbeInfo> select_probes(std::string_view device_kind, std::string_view filter) {
  std::regex re;
  try {
    re = std::regex(std::string(filter.empty() ? ".*" : filter), std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw InputError(fmt::format("--filter '{}': not a valid regular expression ({})", filter, e.what()));
  }
  std::vector<ProbeInfo> selected;
  for (const ProbeInfo& p : probe_registry())
    if (p.device_kind == device_kind && std::regex_search(p.name, re)) selected.push_back(p);
  // The links between ranks (comm.*) after the device's own ceilings, whatever the link order.
  std::stable_partition(selected.begin(), selected.end(), [](const ProbeInfo& p) { return p.name.rfind("comm.", 0) != 0; });
  return selected;
}

namespace {

MachineProfile empty_profile(const ProbeOptions& options) {
  MachineProfile profile;
  profile.rafter_version = rafter_version();
  profile.timestamp = utc_timestamp();
  profile.host = host_name();
  profile.conditions = {{"quick", options.quick},
                        {"isa", options.isa.empty() ? "widest" : options.isa},
                        {"threads", options.threads},
                        {"filter", options.filter}};
  return profile;
}

// Runs the probes on one device into `profile`. An interrupt abandons the probe in progress (its
// partial ceilings and sweeps are dropped: a ceiling from half a sweep would be wrong) and lists it
// and the probes after it in conditions.probes_not_run. Returns false once interrupted.
bool run_probes(const std::vector<ProbeInfo>& probes, const ProbeOptions& options, const Device& device,
                MachineProfile& profile) {
  Progress progress("probe " + device.id, probes.size());
  for (std::size_t i = 0; i < probes.size(); ++i) {
    const std::size_t ceilings = profile.ceilings.size(), sweeps = profile.sweeps.size();
    progress.step(probes[i].name);
    try {
      throw_if_interrupted();
      probes[i].run(options, device, profile);
    } catch (const Interrupted& e) {
      profile.ceilings.resize(ceilings);
      profile.sweeps.resize(sweeps);
      profile.interrupted = signal_name(e.signal);
      auto& not_run = profile.conditions["probes_not_run"];
      if (!not_run.is_array()) not_run = nlohmann::json::array();
      for (std::size_t k = i; k < probes.size(); ++k) not_run.push_back(fmt::format("{} on {}", probes[k].name, device.id));
      return false;
    }
  }
  return true;
}

std::vector<ProbeInfo> probes_or_throw(std::string_view kind, const ProbeOptions& options) {
  auto probes = select_probes(kind, options.filter);
  if (probes.empty())
    throw InputError(
        fmt::format("no {} probe matches --filter '{}' (see rafter probe --list)", kind, options.filter));
  return probes;
}

MachineProfile characterize_cpu(const ProbeOptions& options) {
  Device cpu = describe_cpu();
  cpu::validate_cpu_options(options, cpu);  // before anything is measured
  const auto probes = probes_or_throw("cpu", options);
  const CounterStatus& counters = cpu_counter_status();
  if (!counters.available) note_counters_unavailable_once();
  cpu.counters = counters.summary();
  MachineProfile profile = empty_profile(options);
  profile.topology = topology_summary();
  profile.devices.push_back(cpu);
  run_probes(probes, options, cpu, profile);
  profile.conditions["probes"] = nlohmann::json::array();
  for (const ProbeInfo& p : probes) profile.conditions["probes"].push_back(p.name);
  return profile;
}

std::vector<Device> cuda_devices_for(std::string_view spec) {
  std::vector<Device> all = describe_cuda_devices();
  if (all.empty()) {
#ifdef RAFTER_HAVE_CUDA
    throw DeviceUnavailable(fmt::format("{}: no CUDA GPU found", spec));
#else
    throw DeviceUnavailable(fmt::format("{}: no GPU: rafter was built without CUDA", spec));
#endif
  }
  if (spec == "cuda") return all;
  const std::string_view digits = spec.substr(5);
  int index = -1;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || index < 0)
    throw InputError(fmt::format("unknown device '{}' (expected cpu, cuda or cuda:N)", spec));
  if (index >= static_cast<int>(all.size()))
    throw DeviceUnavailable(fmt::format("{}: no such GPU ({} found)", spec, all.size()));
  return {all[static_cast<std::size_t>(index)]};
}

}  // namespace

MachineProfile characterize(std::string_view spec, const ProbeOptions& options) {
  if (spec == "cpu") return characterize_cpu(options);
  if (spec != "cuda" && !spec.starts_with("cuda:"))
    throw InputError(fmt::format("unknown device '{}' (expected cpu, cuda or cuda:N)", spec));
  const std::vector<Device> gpus = cuda_devices_for(spec);
  const auto probes = probes_or_throw("cuda", options);
  MachineProfile profile = empty_profile(options);
  profile.topology = topology_summary();
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    profile.devices.push_back(gpus[g]);
    if (run_probes(probes, options, gpus[g], profile)) continue;
    for (std::size_t k = g + 1; k < gpus.size(); ++k)  // the GPUs after it: every probe not run
      for (const ProbeInfo& p : probes) profile.conditions["probes_not_run"].push_back(fmt::format("{} on {}", p.name, gpus[k].id));
    break;
  }
  return profile;
}

#ifndef RAFTER_HAVE_CUDA
// Without CUDA there is no GPU to describe; probes/cuda/ defines this when CUDA is built.
std::vector<Device> describe_cuda_devices() { return {}; }
#endif

}  // namespace rafter::probes
