// Stochastic rounding onto E2M1 on the float's bits: the decision the CUDA encoders make per value
// (kernels_quant.cu's encode_fp4x8), written once for the device and for the host, so that a CPU
// test (tests/workloads/test_e2m1_sr.cpp) checks it against the exact rule over every draw.
//
// A 16-bit draw r stands for the uniform u = 1 − (r + 1/2)/2^16; a value a >= 0 between grid points
// lo and hi rounds up exactly when u < (a − lo)/(hi − lo), for a >= 1. From 1 on the fraction is the
// float's mantissa bits under bit 22 over 2^22, and u < it exactly when those bits plus 64·r + 31
// (the addend, 64·r, and 31 added with it) carry into bit 22; the exponent and bit 22 are then the
// code (the bits >> 22, less 252), saturating at 6 (a grid of one value there; NaN and infinity give
// 7, as the CPU encoder's). Below 1 the grid steps by 0.5 as it does in [1, 2): (a + 1)/2, one fused
// multiply-add, holds a + 1's bits one binade lower, in [0.5, 1), whose bits >> 22 less 252 are a's
// code; it is the larger of a and (a + 1)/2 exactly below 1, so a maximum picks it with no compare.
// The rounding of a + 1 to 2^-23 puts the probability below 1 within 2^-22 of a step of the exact
// one (under the draws' own 2^-16). On sm_90a: the FMA, the maximum, a three-input add, a
// shift-and-subtract and a minimum; the addend two instructions a draw. Splitting 2a into its
// integer part and fraction against a float of r took ten; a + 1 and a select six.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define RAFTER_SR_FN __host__ __device__ __forceinline__
#else
#define RAFTER_SR_FN inline
#endif

namespace rafter::workloads::cuda {

// The addends of the two 16-bit draws in a 32-bit generator word: its low half, then its high half.
RAFTER_SR_FN std::uint32_t e2m1_sr_addend_low(std::uint32_t w) { return (w << 6) & 0x3fffc0u; }
RAFTER_SR_FN std::uint32_t e2m1_sr_addend_high(std::uint32_t w) { return (w >> 10) & 0x3fffc0u; }

// a >= 0 (a quotient |x|/S) to its E2M1 magnitude code 0..7, rounded up or down by the draw's addend.
RAFTER_SR_FN int e2m1_code_sr(float a, std::uint32_t add) {
  const float t = fmaxf(a, fmaf(a, 0.5f, 0.5f));  // (a + 1)/2 below 1, a from 1 on (and NaN)
  const std::uint32_t u = std::bit_cast<std::uint32_t>(t) + add + 31u;
  const int code = int(u >> 22) - 252;
  return code < 7 ? code : 7;
}

}  // namespace rafter::workloads::cuda

#undef RAFTER_SR_FN
