// `rafter probe`'s FP4 ceiling from rafter's own emulated NVFP4 GEMM (fp4_gemm_ceiling.cpp).
#pragma once
#include <string_view>

#include "rafter/collector/machine_profile.hpp"
#include "rafter/probes/probe.hpp"

namespace rafter::cli {

// Its name for --filter and --list.
inline constexpr std::string_view kFp4GemmProbe = "cuda.fp4_gemm";

// For every GPU of `profile` without FP4 tensor cores (compute capability 9.x): times the NVFP4
// GEMM operator (8192³, 4096³ with --quick) and adds its FLOP rate as an emulated fp4 ceiling;
// profile.conditions says what happened. Nothing where --filter excludes kFp4GemmProbe.
void add_fp4_gemm_ceilings(MachineProfile& profile, const probes::ProbeOptions& options);

}  // namespace rafter::cli
