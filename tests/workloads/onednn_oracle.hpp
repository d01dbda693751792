// What oneDNN itself says about this CPU, asked directly rather than through rafter, so that the
// tests of rafter's GEMM paths compare its labels with an independent answer. Ask only after
// rafter has made its engine (any CPU GEMM): oneDNN fixes its ISA at first use, and rafter's
// RAFTER_CPU_ISA hold must come first.
#pragma once
#include <cpuid.h>

#include <cctype>
#include <cstdlib>
#include <dnnl.hpp>
#include <string>

namespace rafter::test {

// A BF16 matmul descriptor can be created (oneDNN 2.6: AVX-512 and up).
inline bool onednn_creates_bf16_matmul() {
  using dt = dnnl::memory::data_type;
  try {
    const dnnl::engine e(dnnl::engine::kind::cpu, 0);
    const dnnl::memory::desc a({1, 16, 16}, dt::bf16, dnnl::memory::format_tag::abc);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, a, a), e);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

// oneDNN's ISA held by the user's variable (ONEDNN_MAX_CPU_ISA, or the older DNNL_MAX_CPU_ISA)
// to a value without BF16 dot products; unset, empty or ALL: no hold.
inline bool onednn_held_below_bf16_dot() {
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    std::string isa(v);
    for (char& c : isa) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return isa.rfind("AVX512_CORE_BF16", 0) != 0 && isa.rfind("AVX512_CORE_AMX", 0) != 0 && isa != "ALL";
  }
  return false;
}

// rafter's BF16 GEMMs run oneDNN's BF16 matmul: it has one, and the CPU has BF16 dot products
// (CPUID, asked here directly; without them oneDNN emulates them and rafter widens to FP32), which
// neither rafter's hold nor the user's hold on oneDNN takes away.
inline bool bf16_matmul_is_native() {
  const char* held = std::getenv("RAFTER_CPU_ISA");
  if (held && *held && std::string(held) != "avx512") return false;
  if (onednn_held_below_bf16_dot()) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // AVX512_BF16: leaf 7, subleaf 1, EAX bit 5
  return onednn_creates_bf16_matmul() && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && ((eax >> 5) & 1u);
}

// oneDNN's int8 GEMMs sum exactly: its generated kernels on an ISA with int8 dot products (VNNI),
// or its reference code where it generates none (below SSE4.1: effective ISA `all`). Its kernels
// for SSE4.1 up to AVX-512 without VNNI sum pairs of products in saturating int16.
inline bool onednn_int8_matmul_is_exact() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::all:
    case dnnl::cpu_isa::avx2_vnni:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx: return true;
    default: return false;
  }
}

}  // namespace rafter::test
