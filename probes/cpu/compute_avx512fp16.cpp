// AVX512_FP16 compute kernel: FP16 FMA on zmm (Sapphire Rapids and later). Compiled with
// -mavx512fp16 and called only when CPUID reports AVX512_FP16.
#include <immintrin.h>

#include <cstring>

#include "compute_chains.hpp"
#include "kernel_entry_points.hpp"

namespace rafter::probes::cpu {
namespace {

constexpr int kAcc = 12;

double fma_fp16_impl(std::int64_t iterations) {
  const __m512h half = _mm512_set1_ph(static_cast<_Float16>(0.5f));
  const __m512h one = _mm512_set1_ph(static_cast<_Float16>(1.0f));
  return run_chains<__m512h, kAcc>(
      iterations, _mm512_set1_ph(static_cast<_Float16>(chain_seed())),
      [half, one](__m512h a) { return _mm512_fmadd_ph(a, half, one); },
      [](__m512h a) {
        alignas(64) _Float16 lanes[32];
        std::memcpy(lanes, &a, sizeof a);
        double s = 0;
        for (_Float16 x : lanes) s += static_cast<double>(x);
        return s;
      });
}

}  // namespace

// Exported one by one: the tables live in kernels.cpp, compiled for baseline x86-64, so that
// nothing built with this file's ISA flags runs before CPUID said the CPU has them.
namespace avx512 {
double fma_fp16(std::int64_t iterations) { return fma_fp16_impl(iterations); }
}  // namespace avx512

}  // namespace rafter::probes::cpu
