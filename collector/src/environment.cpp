// Version, timestamp and host name recorded in every output file; the hypervisor's steal.
#include "rafter/collector/environment.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <ctime>
#include <fstream>

#ifndef RAFTER_VERSION
#define RAFTER_VERSION "0.0.0"
#endif

namespace rafter {

std::string rafter_version() { return RAFTER_VERSION; }

std::string utc_timestamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf.data();
}

std::string host_name() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) return "unknown";
  return buf.data();
}

CpuTicks parse_cpu_ticks(std::string_view text) {
  CpuTicks t;
  // The first line is "cpu  user nice system idle iowait irq softirq steal guest guest_nice".
  if (!text.starts_with("cpu ")) return t;
  text = text.substr(0, text.find('\n'));
  std::array<double, 8> field{};
  std::size_t n = 0, pos = 3;
  while (n < field.size()) {
    pos = text.find_first_not_of(' ', pos);
    if (pos == std::string_view::npos) break;
    unsigned long long v = 0;
    const auto [end, ec] = std::from_chars(text.data() + pos, text.data() + text.size(), v);
    if (ec != std::errc()) return t;
    field[n++] = static_cast<double>(v);
    pos = static_cast<std::size_t>(end - text.data());
  }
  if (n < field.size()) return t;  // kernels before 2.6.11 have no steal field
  t.busy = field[0] + field[1] + field[2] + field[5] + field[6];
  t.steal = field[7];
  t.known = true;
  return t;
}

CpuTicks read_cpu_ticks() {
  std::ifstream in("/proc/stat");
  std::string first;
  if (!std::getline(in, first)) return {};
  return parse_cpu_ticks(first);
}

double steal_fraction(const CpuTicks& before, const CpuTicks& after) {
  if (!before.known || !after.known) return -1;
  const double steal = after.steal - before.steal, busy = after.busy - before.busy;
  if (steal < 0 || busy < 0 || steal + busy <= 0) return -1;
  // /proc/stat rounds the kernel's nanoseconds down to ticks: one stolen tick may be a microsecond.
  return std::max(steal - 1, 0.0) / (steal + busy);
}

}  // namespace rafter
