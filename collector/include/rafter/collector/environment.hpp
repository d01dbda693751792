// Facts about where and when rafter runs: version, timestamp, host name, and the CPU time a
// hypervisor took from this guest (steal).
#pragma once
#include <string>
#include <string_view>

namespace rafter {

std::string rafter_version();
std::string utc_timestamp();  // ISO 8601, e.g. 2026-11-22T17:30:00Z
std::string host_name();

// CPU time of all CPUs together, in /proc/stat ticks: busy (user, nice, system, irq, softirq) and
// stolen (time a runnable virtual CPU waited while the hypervisor ran something else).
struct CpuTicks {
  double busy = 0;
  double steal = 0;
  bool known = false;  // a "cpu" line was read
};
CpuTicks parse_cpu_ticks(std::string_view proc_stat);  // from a /proc/stat text
CpuTicks read_cpu_ticks();                             // this host's, now; known = false off Linux
// The share of the time the CPUs wanted to run that the hypervisor took between two readings,
// (steal - 1) / (busy + steal) in ticks, in [0, 1]: a lower bound, one tick taken off for the
// rounding of /proc/stat, so that a short probe is not called robbed for one boundary crossed;
// -1 when unknown (a reading failed, or no tick passed). Idle CPUs do not dilute it: a one-thread
// probe robbed of a tenth of its time reads about 0.1.
double steal_fraction(const CpuTicks& before, const CpuTicks& after);

}  // namespace rafter
