// The precision table: storage size, compute class and check tolerance of every precision.
//
// Tolerances are relative L2 errors (||out - ref|| / ||ref||) of a backend's output against the
// FP64 reference computed from the unrounded inputs, so they include the rounding of the inputs
// to the storage format. With u the format's unit roundoff (2^-(mantissa bits + 1)), one rounded
// input gives a relative error near u/sqrt(3); a dot product over k terms keeps that order (the
// errors are independent); the tolerances below are about 4-8x the errors we measure on random
// uniform data at the check shapes, so a real bug (a wrong index, a missing scale) fails loudly.
#include "rafter/workloads/precision.hpp"

#include <array>
#include <fmt/format.h>

#include "rafter/collector/error.hpp"

namespace rafter::workloads {
namespace {

constexpr std::array<PrecisionInfo, 12> kPrecisions{{
    {"fp64", "fp64", 8, 1e-12, "IEEE binary64"},
    {"fp32", "fp32", 4, 1e-5, "IEEE binary32"},
    {"tf32", "tf32", 4, 5e-3, "TensorFloat-32: fp32 storage, 10-bit mantissa products"},
    {"bf16", "bf16", 2, 1e-2, "bfloat16 (8-bit exponent, 7-bit mantissa), fp32 accumulation"},
    {"fp16", "fp16", 2, 2e-3, "IEEE binary16, fp32 accumulation"},
    {"fp8_e4m3", "fp8", 1, 8e-2, "OCP FP8 E4M3 operands, per-tensor scale, fp32 accumulation"},
    {"fp8_e5m2", "fp8", 1, 1.5e-1, "OCP FP8 E5M2 operands, per-tensor scale, fp32 accumulation"},
    {"fp8_e4m3_e5m2", "fp8", 1, 1.5e-1, "FP8 A in E4M3, B in E5M2 (e.g. weight gradient)"},
    {"fp8_e5m2_e4m3", "fp8", 1, 1.5e-1, "FP8 A in E5M2, B in E4M3 (e.g. input gradient)"},
    {"int8", "int8", 1, 3e-2, "int8 operands, per-tensor symmetric scale, int32 accumulation"},
    {"nvfp4", "fp4", 0.5 + 1.0 / 16, 2.5e-1,
     "NVFP4: E2M1 values, E4M3 scale per 16 along K, FP32 tensor scale"},
    {"mxfp4", "fp4", 0.5 + 1.0 / 32, 3e-1, "MXFP4: E2M1 values, E8M0 scale per 32 along K"},
}};

}  // namespace

std::span<const PrecisionInfo> all_precisions() { return kPrecisions; }

const PrecisionInfo& precision_info(std::string_view name) {
  for (const auto& p : kPrecisions)
    if (p.name == name) return p;
  std::string known;
  for (const auto& p : kPrecisions) known += (known.empty() ? "" : ", ") + std::string(p.name);
  throw InputError(fmt::format("unknown precision '{}' (known: {})", name, known));
}

double operand_b_bytes_per_element(std::string_view precision) {
  return precision_info(precision).bytes_per_element;
}

double gemm_output_bytes_per_element(std::string_view precision) {
  if (precision == "fp64") return 8;
  if (precision == "fp32" || precision == "tf32" || precision == "int8") return 4;
  precision_info(precision);  // validates the name
  return 2;
}

double check_tolerance(std::string_view op, std::string_view precision, bool stochastic_rounding) {
  const bool quantizer = op == "quantize" || op == "dequantize";
  if (quantizer && !stochastic_rounding) {
    // Exact emulation on both sides; a rare tie rounded differently by fp32 vs fp64 arithmetic
    // moves one element by one grid step, far below this.
    return 2e-2;
  }
  return precision_info(precision).tolerance;
}

}  // namespace rafter::workloads
