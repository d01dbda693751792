// The loop shared by the compute kernels: N independent accumulator chains of one instruction each.
// Included only by the compute_<isa>.cpp files; everything here has internal linkage so that code
// compiled with one ISA's flags is never picked by the linker for another file.
#pragma once
#include <cstdint>

namespace rafter::probes::cpu {
namespace {  // NOLINT(cert-dcl59-cpp): internal linkage on purpose, see above

// 2.0 read through a volatile so that the compiler cannot fold the chains away.
inline volatile double g_chain_seed = 2.0;
inline double chain_seed() { return g_chain_seed; }

template <class V, int N, class Step, class Reduce>
double run_chains(std::int64_t iterations, V init, Step step, Reduce reduce) {
  V acc[N];
  for (int k = 0; k < N; ++k) acc[k] = init;
  for (std::int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < N; ++k) acc[k] = step(acc[k]);
  }
  double sum = 0;
  for (int k = 0; k < N; ++k) sum += reduce(acc[k]);
  return sum;
}

}  // namespace
}  // namespace rafter::probes::cpu
