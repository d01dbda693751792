// E2M1 codes to FP16 bytes, the streaming decode GEMM's weight decode (kernels_fp4_gemm.cu), written
// once for the device and for the host so that a CPU test (tests/workloads/test_e2m1_f16_bits.cpp)
// checks the packed layout against the plain one over every byte.
//
// An E2M1 code × 2^-14 is an FP16 whose bits all sit in its high byte: sign at bit 7, the three
// magnitude bits at 3:1 (code 1, 0.5, becomes the subnormal 2^-15). So the 8 codes of a 32-bit word
// become two words of such bytes, lo from the low nibble of each byte and hi from the high one.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define RAFTER_F16_BITS_FN __host__ __device__ __forceinline__
#else
#define RAFTER_F16_BITS_FN inline
#endif

namespace rafter::workloads::cuda {

// A word as the quantizers write it (code 2i in the low nibble of byte i, 2i + 1 in its high one):
// seven instructions on sm_90a.
RAFTER_F16_BITS_FN void e2m1_f16_bytes(std::uint32_t w, std::uint32_t& lo, std::uint32_t& hi) {
  lo = ((w << 1) & 0x0E0E0E0Eu) | ((w << 4) & 0x80808080u);  // nibbles 0, 2, 4, 6
  hi = ((w >> 3) & 0x0E0E0E0Eu) | (w & 0x80808080u);         // nibbles 1, 3, 5, 7
}

// The decode GEMM's packed weights (fp4_pack_decode_weights) hold each byte's two codes rearranged
// so that lo is one mask: bit 7 the low code's sign, 6:4 the high code's magnitude, 3:1 the low
// code's magnitude, 0 the high code's sign. packed_f16_bytes then takes five instructions where
// e2m1_f16_bytes takes seven, and gives the same lo and hi.
RAFTER_F16_BITS_FN constexpr std::uint32_t packed_f16_word(std::uint32_t w) {
  return (w & 0x70707070u) | ((w & 0x07070707u) << 1) | ((w & 0x08080808u) << 4) | ((w & 0x80808080u) >> 7);
}
RAFTER_F16_BITS_FN void packed_f16_bytes(std::uint32_t w, std::uint32_t& lo, std::uint32_t& hi) {
  lo = w & 0x8E8E8E8Eu;
  hi = ((w >> 3) & 0x0E0E0E0Eu) | ((w << 7) & 0x80808080u);
}

}  // namespace rafter::workloads::cuda

#undef RAFTER_F16_BITS_FN
