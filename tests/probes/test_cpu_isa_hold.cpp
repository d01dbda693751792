// RAFTER_CPU_ISA on the CPU probes: what lies above the held ISA reads as absent (so the probes
// measure this CPU as one that stops there), and BF16 / FP16 always have a compute roof — native,
// or the FP32 one their work runs on, labelled emulated_via. ctest runs these again held to AVX2
// and to SSE4.1.
#include <gtest/gtest.h>

#include <algorithm>

#include "../../probes/cpu/cpu_features.hpp"
#include "../../probes/cpu/kernels.hpp"
#include "rafter/collector/cpu_isa.hpp"
#include "rafter/probes/probe.hpp"

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

TEST(CpuIsaHold, Bf16AndFp16ComputeRoofsAreNeverMissing) {
  probes::ProbeOptions o;
  o.quick = true;
  o.filter = "cpu.compute";
  const MachineProfile p = probes::characterize("cpu", o);
  const Ceiling* fp32 = p.best("cpu", CeilingKind::Compute, "fp32");
  ASSERT_NE(fp32, nullptr);
  const auto& absent = p.devices.at(0).properties.at("precisions_absent");
  for (const char* precision : {"bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    const Ceiling* c = p.best("cpu", CeilingKind::Compute, precision);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(std::find(absent.begin(), absent.end(), precision), absent.end());
    const bool native = std::any_of(compute_kernels().begin(), compute_kernels().end(), [&](const ComputeKernel& k) {
      return k.precision == precision && k.present(cpu_features());
    });
    if (native) {
      EXPECT_FALSE(c->params.contains("emulated_via"));
      continue;
    }
    EXPECT_EQ(c->params.value("emulated_via", ""), "fp32");
    EXPECT_EQ(c->params.value("same_measurement_as", ""), fp32->id());
    EXPECT_DOUBLE_EQ(c->figure.value, fp32->figure.value);  // the fp32 roof, not a new number
    EXPECT_EQ(p.devices.at(0).properties.at("precisions_emulated").value(precision, ""), "fp32");
  }
}
