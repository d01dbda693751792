// Precisions rafter knows, their storage size, the compute class whose ceiling judges them,
// and the correctness tolerance per precision (the one place these are written down).
// Added by B (backward compatible): check_tolerance() for operator-specific tolerances, the
// storage size of the second operand of mixed FP8 GEMMs, and the output precision of a GEMM.
#pragma once
#include <span>
#include <string>
#include <string_view>

namespace rafter::workloads {

struct PrecisionInfo {
  std::string_view name;           // "fp64", "fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2",
                                   // "fp8_e4m3_e5m2", "fp8_e5m2_e4m3", "int8", "nvfp4", "mxfp4"
  std::string_view compute_class;  // the ceiling's resource: "fp64", "fp32", "tf32", "bf16", "fp16",
                                   // "fp8", "int8", "fp4"
  double bytes_per_element;        // storage incl. block scales (nvfp4: 0.5 + 1/16, mxfp4: 0.5 + 1/32)
  double tolerance;                // relative L2 error allowed against the FP64 reference
  std::string_view description;
};

std::span<const PrecisionInfo> all_precisions();
// Throws InputError "unknown precision 'x' (known: ...)".
const PrecisionInfo& precision_info(std::string_view name);

// Storage bytes per element of the second (B) operand: differs from the first only for the mixed
// FP8 GEMMs (fp8_e4m3_e5m2: A in E4M3, B in E5M2), where both are one byte anyway.
double operand_b_bytes_per_element(std::string_view precision);
// The precision a GEMM writes its output in: fp64/fp32/tf32 → same width (8/4 B), int8 → int32
// (4 B), everything else (bf16, fp16, fp8, fp4) → 2 B (bf16/fp16 output, as cuBLASLt does).
double gemm_output_bytes_per_element(std::string_view precision);

// The tolerance a check uses for one operator instance: the precision's tolerance, except for
// the quantizers, whose output is compared with an exact FP64 emulation of the same format (so a
// near-exact tolerance applies) unless stochastic rounding makes the result random.
double check_tolerance(std::string_view op, std::string_view precision, bool stochastic_rounding);

}  // namespace rafter::workloads
