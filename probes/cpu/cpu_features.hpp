// What this x86 CPU can run, read from CPUID (and XGETBV for the OS-enabled register state), so
// that the probes pick their kernels at run time while the binary stays baseline x86-64. Under
// RAFTER_CPU_ISA (rafter/collector/cpu_isa.hpp) the features above the held ISA read as absent: the
// probes then measure this CPU as they would one that stops there.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "rafter/collector/cpu_isa.hpp"

namespace rafter::probes::cpu {

struct CpuFeatures {
  std::string vendor;  // "AuthenticAMD", "GenuineIntel"
  std::string brand;   // "AMD EPYC 9654 96-Core Processor"
  int family = 0;      // display family (base + extended)
  int model = 0;       // display model
  bool sse41 = false, sse42 = false, avx = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false, avx512_fp16 = false, avx_vnni = false;
  // AMX (Intel's tile matrix unit, Sapphire Rapids on): CPUID, the OS's tile state (XCR0 bits 17
  // and 18) and Linux's per-process permission (arch_prctl ARCH_REQ_XCOMP_PERM), asked once here.
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
  std::string amx_refused;  // the CPU has AMX-TILE but it cannot be used here: why (else empty)
};

const CpuFeatures& cpu_features();  // detected once, held to RAFTER_CPU_ISA
// The features as detected, without the hold (to say what a held run leaves out).
const CpuFeatures& detected_cpu_features();

// ISA extension names present, for Device::isa ("sse4_1", "avx2", "fma", "avx512f", ...).
std::vector<std::string> isa_extension_names(const CpuFeatures& f);

// The kernel ISAs rafter has, widest first: "avx512", "avx2", "sse", "scalar".
const std::vector<std::string>& kernel_isas();
bool cpu_has_isa(const CpuFeatures& f, std::string_view isa);  // InputError for an unknown name
// The RAFTER_CPU_ISA level of a kernel ISA: "sse" is SSE4.1 (what its kernels are compiled for).
CpuIsa isa_level(std::string_view isa);
std::string widest_isa(const CpuFeatures& f);
int vector_bits(std::string_view isa);  // 512, 256, 128, 64

}  // namespace rafter::probes::cpu
