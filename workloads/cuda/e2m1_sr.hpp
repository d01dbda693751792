// Stochastic rounding onto E2M1 on the float's bits: the decision the CUDA encoders make per value
// (kernels_quant.cu's encode_fp4x8), written once for the device and for the host, so that a CPU
// test (tests/workloads/test_e2m1_sr.cpp) checks it against the exact rule over every draw.
//
// A 16-bit draw r stands for the uniform u = 1 − (r + 1/2)/2^16; a value a >= 0 between grid points
// lo and hi rounds up exactly when u < (a − lo)/(hi − lo), for a >= 1. From 1 on the fraction is the
// float's mantissa bits under bit 22 over 2^22, and u < it exactly when those bits plus the addend
// 64·r + 31 carry into bit 22; the exponent and bit 22 are then the code (the bits >> 22, less 252),
// saturating at 6 (a grid of one value there; NaN and infinity give 7, as the CPU encoder's). Below 1
// the grid steps by 0.5 as it does in [1, 2): a + 1 takes the same path and its code less 2 is a's.
// The add rounds a to 2^-23, so below 1 the probability is within 2^-22 of a step of the exact one
// (under the draws' own 2^-16). Five instructions and a select on sm_90a, where splitting 2a into its
// integer part and fraction against a float of r took ten.
#pragma once

#include <bit>
#include <cstdint>

#ifdef __CUDACC__
#define RAFTER_SR_FN __host__ __device__ __forceinline__
#else
#define RAFTER_SR_FN inline
#endif

namespace rafter::workloads::cuda {

// The addends of the two 16-bit draws in a 32-bit generator word: its low half, then its high half.
RAFTER_SR_FN std::uint32_t e2m1_sr_addend_low(std::uint32_t w) { return ((w << 6) & 0x3fffc0u) | 31u; }
RAFTER_SR_FN std::uint32_t e2m1_sr_addend_high(std::uint32_t w) { return ((w >> 10) & 0x3fffc0u) | 31u; }

// a >= 0 (a quotient |x|/S) to its E2M1 magnitude code 0..7, rounded up or down by the draw's addend.
RAFTER_SR_FN int e2m1_code_sr(float a, std::uint32_t add) {
  const bool low = a < 1.0f;
  const std::uint32_t u = std::bit_cast<std::uint32_t>(low ? a + 1.0f : a) + add;
  const int code = int(u >> 22) - (low ? 254 : 252);
  return code < 7 ? code : 7;
}

}  // namespace rafter::workloads::cuda

#undef RAFTER_SR_FN
