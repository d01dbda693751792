// Version, timestamp and host name recorded in every output file.
#include "rafter/collector/environment.hpp"

#include <unistd.h>

#include <array>
#include <ctime>

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

}  // namespace rafter
