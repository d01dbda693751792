// cpu.launch: the launch floor of the CPU backend, the fork-join dispatch of the thread pool every
// CPU operator runs on (collector's cpu_pool): an empty parallel_for over every pool thread, timed
// as CPU operators are (the steady clock around the call). No CPU operator time that uses more than
// one thread can fall below it. A single-thread call never leaves the caller, so it has no floor.
#include <fmt/format.h>

#include "cpu_options.hpp"
#include "rafter/collector/thread_pool.hpp"
#include "rafter/collector/timing.hpp"

namespace rafter::probes::cpu {
namespace {

constexpr int kCallsPerSample = 64;  // a dispatch lasts microseconds: time many per clock reading

void probe_cpu_launch(const ProbeOptions& options, const Device& cpu, MachineProfile& profile) {
  const int threads = all_core_threads(options, cpu);
  if (threads < 2) return;  // one thread: the pool runs everything on the caller, there is no dispatch
  cpu_pool::set_threads(threads);
  ProbeWindow window;
  const cpu_pool::Job nothing = [](std::int64_t, std::int64_t, int) {};
  RepeatPolicy policy = probe_policy(options);
  policy.min_repeats = std::max(policy.min_repeats, 20);
  const Summary per_sample = measure_seconds(policy, [&] {
    for (int i = 0; i < kCallsPerSample; ++i) cpu_pool::parallel_for(threads, nothing, 1);
  });
  window.close();
  Ceiling c;
  c.kind = CeilingKind::Latency;
  c.device = cpu.id;
  c.resource = "launch";
  c.operation = "operator";
  c.isa = "scalar";
  c.scope = "device";
  c.threads = threads;
  c.figure = Figure::measured(transform(per_sample, [](double t) { return t / kCallsPerSample; }), "s");
  c.probe = "cpu.launch";
  c.params = {{"method", fmt::format("an empty parallel_for over the pool's {} threads (wake, run, join), {} per "
                                     "sample, timed with the steady clock as CPU operators are",
                                     threads, kCallsPerSample)},
              {"floor_of", "every CPU operator time that uses more than one thread"}};
  finish_ceiling(c, window);
  profile.ceilings.push_back(std::move(c));
}

}  // namespace

RAFTER_REGISTER_PROBE("cpu.launch", "cpu",
                      "launch floor: the thread pool's fork-join dispatch of an empty job over every core",
                      probe_cpu_launch);

}  // namespace rafter::probes::cpu
