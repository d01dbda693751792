// RAFTER_CPU_ISA on the CPU probes: what lies above the held ISA reads as absent (so the probes
// measure this CPU as one that stops there).
#include <gtest/gtest.h>

#include "../../probes/cpu/cpu_features.hpp"
#include "../../probes/cpu/kernels.hpp"
#include "rafter/collector/cpu_isa.hpp"

using namespace rafter;
using namespace rafter::probes::cpu;

TEST(CpuIsaHold, FeaturesAboveTheHeldIsaReadAsAbsent) {
  const auto held = held_cpu_isa();
  const CpuFeatures &f = cpu_features(), &all = detected_cpu_features();
  for (const std::string& isa : kernel_isas()) {
    if (cpu_has_isa(f, isa)) {
      EXPECT_TRUE(cpu_has_isa(all, isa)) << isa;  // a hold only takes away
      if (held) {
        EXPECT_LE(isa_level(isa), *held) << isa;
      }
    } else if (cpu_has_isa(all, isa)) {
      ASSERT_TRUE(held.has_value()) << isa << " present but not offered, and nothing is held";
      EXPECT_GT(isa_level(isa), *held) << isa;
    }
  }
  if (held && *held < CpuIsa::Avx512) {
    EXPECT_FALSE(f.avx512f || f.avx512_bf16 || f.avx512_vnni || f.avx512_fp16);
  }
  if (held && *held < CpuIsa::Avx2) {
    EXPECT_FALSE(f.avx || f.avx2 || f.fma || f.avx_vnni);
  }
  EXPECT_TRUE(cpu_has_isa(f, widest_isa(f)));
}
