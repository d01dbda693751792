// RAFTER_CPU_ISA: parsing and the question "may code for this ISA run?".
#include "rafter/collector/cpu_isa.hpp"

#include <cstdlib>
#include <string>

#include "rafter/collector/error.hpp"

namespace rafter {

std::string_view to_string(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar: return "scalar";
    case CpuIsa::Sse41: return "sse4.1";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
  }
  return "scalar";
}

CpuIsa parse_cpu_isa(std::string_view name) {
  for (CpuIsa isa : {CpuIsa::Avx512, CpuIsa::Avx2, CpuIsa::Sse41, CpuIsa::Scalar})
    if (name == to_string(isa)) return isa;
  throw InputError("RAFTER_CPU_ISA=" + std::string(name) + ": unknown ISA (expected avx512, avx2, sse4.1 or scalar)");
}

std::optional<CpuIsa> held_cpu_isa() {
  const char* env = std::getenv("RAFTER_CPU_ISA");
  if (!env || !*env) return std::nullopt;
  return parse_cpu_isa(env);
}

bool cpu_isa_allowed(CpuIsa isa) {
  const auto held = held_cpu_isa();
  return !held || isa <= *held;
}

}  // namespace rafter
