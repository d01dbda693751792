// `rafter probe`'s FP4 ceiling from rafter's own emulated NVFP4 GEMM (fp4_gemm_ceiling.cpp): the
// probe "cuda.fp4_gemm", registered from here (apps/ composes probes/ and workloads/).
#pragma once
#include "rafter/collector/machine_profile.hpp"

namespace rafter::cli {

// After the probes ran: each cuda.fp4_gemm ceiling gets the datasheet figure of the roof it runs
// under, BF16's, from the BF16 tensor ceiling of its device (the probes run in registration
// order, which does not put cuda.tensor first).
void attach_fp4_gemm_datasheets(MachineProfile& profile);

}  // namespace rafter::cli
