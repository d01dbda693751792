// The ceiling that RAFTER_CPU_ISA puts on rafter's own CPU code: its probes, its kernels and the
// oneDNN it calls run as if the CPU had nothing wider than the named ISA, so that the narrower
// paths can be tested and compared on a wide machine. Read by probes/cpu and workloads/cpu alike.
#pragma once
#include <optional>
#include <string_view>

namespace rafter {

// Narrow to wide: `a <= b` reads "code for a may run under a hold at b".
enum class CpuIsa { Scalar, Sse41, Avx2, Avx512 };

std::string_view to_string(CpuIsa isa);  // "scalar", "sse4.1", "avx2", "avx512"
// "avx512" | "avx2" | "sse4.1" | "scalar"; anything else: InputError naming the value.
CpuIsa parse_cpu_isa(std::string_view name);

// RAFTER_CPU_ISA, parsed (read on every call: cheap, and a test may set it); nullopt when unset
// or empty. InputError for an unknown value.
std::optional<CpuIsa> held_cpu_isa();

// Whether code for `isa` may run under the hold (always, without one). Says nothing about the
// CPU: callers still ask CPUID.
bool cpu_isa_allowed(CpuIsa isa);

}  // namespace rafter
