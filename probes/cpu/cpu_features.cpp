// CPUID decoding. The OS must also have enabled the register state (XCR0), or AVX code faults.
#include "cpu_features.hpp"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "rafter/collector/error.hpp"

namespace rafter::probes::cpu {
namespace {

struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub = 0) {
  Regs r;
  __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
  return r;
}

unsigned long long xgetbv0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

bool bit(unsigned v, int n) { return ((v >> n) & 1u) != 0; }

// Linux (5.16 on) hands out the AMX tile data state per process, on request; without it the first
// tile instruction raises SIGILL. Returns why AMX cannot be used, empty when it can.
std::string request_amx(unsigned long long xcr0) {
  constexpr unsigned long long kTileState = (1ull << 17) | (1ull << 18);  // XTILECFG, XTILEDATA
  if ((xcr0 & kTileState) != kTileState) return "the OS has not enabled the tile state (XCR0 bits 17, 18)";
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0)
    return "the kernel refused the tile state (arch_prctl ARCH_REQ_XCOMP_PERM; Linux 5.16 or later needed)";
  return "";
}

CpuFeatures detect() {
  CpuFeatures f;
  const Regs v = cpuid(0);
  char vendor[13] = {};
  std::memcpy(vendor, &v.b, 4);
  std::memcpy(vendor + 4, &v.d, 4);
  std::memcpy(vendor + 8, &v.c, 4);
  f.vendor = vendor;
  const Regs l1 = cpuid(1);
  const int base_family = static_cast<int>((l1.a >> 8) & 0xf);
  f.family = base_family + (base_family == 0xf ? static_cast<int>((l1.a >> 20) & 0xff) : 0);
  f.model = static_cast<int>((l1.a >> 4) & 0xf);
  if (base_family == 0x6 || base_family == 0xf) f.model |= static_cast<int>((l1.a >> 16) & 0xf) << 4;
  const bool osxsave = bit(l1.c, 27);
  const unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
  f.sse41 = bit(l1.c, 19);
  f.sse42 = bit(l1.c, 20);
  f.avx = bit(l1.c, 28) && os_avx;
  f.fma = bit(l1.c, 12) && os_avx;
  f.f16c = bit(l1.c, 29) && os_avx;
  if (v.a >= 7) {
    const Regs l7 = cpuid(7, 0);
    const Regs l7s1 = cpuid(7, 1);
    f.avx2 = bit(l7.b, 5) && os_avx;
    f.avx512f = bit(l7.b, 16) && os_avx512;
    f.avx512dq = bit(l7.b, 17) && os_avx512;
    f.avx512bw = bit(l7.b, 30) && os_avx512;
    f.avx512vl = bit(l7.b, 31) && os_avx512;
    f.avx512_vnni = bit(l7.c, 11) && os_avx512;
    f.avx512_fp16 = bit(l7.d, 23) && os_avx512;
    f.avx512_bf16 = bit(l7s1.a, 5) && os_avx512;
    f.avx_vnni = bit(l7s1.a, 4) && os_avx;
    if (bit(l7.d, 24)) {  // AMX-TILE; AMX-BF16 is bit 22, AMX-INT8 bit 25
      f.amx_refused = request_amx(xcr0);
      f.amx_tile = f.amx_refused.empty();
      f.amx_bf16 = f.amx_tile && bit(l7.d, 22);
      f.amx_int8 = f.amx_tile && bit(l7.d, 25);
    }
  }
  char brand[49] = {};
  if (cpuid(0x80000000).a >= 0x80000004) {
    for (unsigned i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &r, 16);
    }
  }
  f.brand = brand;
  const auto first = f.brand.find_first_not_of(' ');
  f.brand = first == std::string::npos ? "" : f.brand.substr(first);
  while (!f.brand.empty() && f.brand.back() == ' ') f.brand.pop_back();
  return f;
}

// Clears what lies above the held ISA (RAFTER_CPU_ISA), as a CPU that stops there would read.
CpuFeatures hold(CpuFeatures f) {
  const auto held = held_cpu_isa();
  if (!held) return f;
  if (*held < CpuIsa::Avx512) {
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512_bf16 = f.avx512_vnni = f.avx512_fp16 = false;
    f.amx_tile = f.amx_bf16 = f.amx_int8 = false;  // AMX came after AVX-512: a CPU held below it has none
  }
  if (*held < CpuIsa::Avx2) f.avx = f.avx2 = f.fma = f.f16c = f.avx_vnni = false;
  if (*held < CpuIsa::Sse41) f.sse41 = f.sse42 = false;
  return f;
}

}  // namespace

const CpuFeatures& detected_cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = hold(detected_cpu_features());
  return features;
}

std::vector<std::string> isa_extension_names(const CpuFeatures& f) {
  std::vector<std::string> names;
  const std::pair<bool, const char*> all[] = {{f.sse41, "sse4_1"},
                                              {f.sse42, "sse4_2"},
                                              {f.avx, "avx"},
                                              {f.avx2, "avx2"},
                                              {f.fma, "fma"},
                                              {f.f16c, "f16c"},
                                              {f.avx_vnni, "avx_vnni"},
                                              {f.avx512f, "avx512f"},
                                              {f.avx512dq, "avx512dq"},
                                              {f.avx512bw, "avx512bw"},
                                              {f.avx512vl, "avx512vl"},
                                              {f.avx512_vnni, "avx512_vnni"},
                                              {f.avx512_bf16, "avx512_bf16"},
                                              {f.avx512_fp16, "avx512_fp16"},
                                              {f.amx_tile, "amx_tile"},
                                              {f.amx_bf16, "amx_bf16"},
                                              {f.amx_int8, "amx_int8"}};
  for (const auto& [present, name] : all)
    if (present) names.emplace_back(name);
  return names;
}

const std::vector<std::string>& kernel_isas() {
  static const std::vector<std::string> isas = {"avx512", "avx2", "sse", "scalar"};
  return isas;
}

bool cpu_has_isa(const CpuFeatures& f, std::string_view isa) {
  if (isa == "avx512") return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.fma;
  if (isa == "avx2") return f.avx2 && f.fma;
  if (isa == "sse") return f.sse41;
  if (isa == "scalar") return true;
  throw InputError("unknown ISA '" + std::string(isa) + "' (expected avx512, avx2, sse or scalar)");
}

CpuIsa isa_level(std::string_view isa) {
  if (isa == "avx512") return CpuIsa::Avx512;
  if (isa == "avx2") return CpuIsa::Avx2;
  if (isa == "sse") return CpuIsa::Sse41;
  if (isa == "scalar") return CpuIsa::Scalar;
  throw InputError("unknown ISA '" + std::string(isa) + "' (expected avx512, avx2, sse or scalar)");
}

std::string widest_isa(const CpuFeatures& f) {
  for (const auto& isa : kernel_isas())
    if (cpu_has_isa(f, isa)) return isa;
  return "scalar";
}

int vector_bits(std::string_view isa) {
  if (isa == "avx512") return 512;
  if (isa == "avx2") return 256;
  if (isa == "sse") return 128;
  return 64;
}

}  // namespace rafter::probes::cpu
