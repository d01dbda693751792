// Facts about where and when rafter runs: version, timestamp, host name.
#pragma once
#include <string>

namespace rafter {

std::string rafter_version();
std::string utc_timestamp();  // ISO 8601, e.g. 2026-11-22T17:30:00Z
std::string host_name();

}  // namespace rafter
