// SSE compute kernels: 128-bit multiply then add (SSE has no FMA), FP64 and FP32. Each chain is a
// dependent mul+add pair, so 12 chains keep both the multiply and the add pipes busy.
#include <immintrin.h>

#include "compute_chains.hpp"
#include "kernel_entry_points.hpp"

namespace rafter::probes::cpu {
namespace {

constexpr int kAcc = 12;

double mul_add_fp64_impl(std::int64_t iterations) {
  return run_chains<__m128d, kAcc>(
      iterations, _mm_set1_pd(chain_seed()),
      [](__m128d a) { return _mm_add_pd(_mm_mul_pd(a, _mm_set1_pd(0.5)), _mm_set1_pd(1.0)); },
      [](__m128d a) {
        alignas(16) double l[2];
        _mm_store_pd(l, a);
        return l[0] + l[1];
      });
}

double mul_add_fp32_impl(std::int64_t iterations) {
  return run_chains<__m128, kAcc>(
      iterations, _mm_set1_ps(static_cast<float>(chain_seed())),
      [](__m128 a) { return _mm_add_ps(_mm_mul_ps(a, _mm_set1_ps(0.5f)), _mm_set1_ps(1.0f)); },
      [](__m128 a) {
        alignas(16) float l[4];
        _mm_store_ps(l, a);
        return static_cast<double>(l[0]) + l[1] + l[2] + l[3];
      });
}

}  // namespace

// Exported one by one: the tables live in kernels.cpp, compiled for baseline x86-64, so that
// nothing built with this file's ISA flags runs before CPUID said the CPU has them.
namespace sse {
double mul_add_fp64(std::int64_t iterations) { return mul_add_fp64_impl(iterations); }
double mul_add_fp32(std::int64_t iterations) { return mul_add_fp32_impl(iterations); }
}  // namespace sse

}  // namespace rafter::probes::cpu
