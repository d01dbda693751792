// Division of a 32-bit index by a run-time divisor d as a multiply-high, an add and a shift
// (Granlund-Montgomery), for the flat embedding kernel's row (kernels_gather.cu). Written once for
// the device and the host, so that a CPU test (tests/workloads/test_row_divider.cpp) checks it
// against integer division. Exact for every d >= 1 and every j < 2^31: the add then stays below
// 2^32.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define RAFTER_ROW_DIVIDER_FN __host__ __device__ __forceinline__
#else
#define RAFTER_ROW_DIVIDER_FN inline
#endif

namespace rafter::workloads::cuda {

struct RowDivider {
  unsigned magic, shift;  // j / d = (umulhi(j, magic) + j) >> shift

  RAFTER_ROW_DIVIDER_FN unsigned divide(unsigned j) const {
#ifdef __CUDA_ARCH__
    const unsigned hi = __umulhi(j, magic);
#else
    const auto hi = static_cast<unsigned>((std::uint64_t(j) * magic) >> 32);
#endif
    return (hi + j) >> shift;
  }
};

// shift = ceil(log2 d), magic = floor(2^32 · (2^shift − d) / d) + 1 (below 2^32 for every d >= 1).
inline RowDivider row_divider(unsigned d) {
  unsigned l = 0;
  while ((std::uint64_t(1) << l) < d) ++l;
  const auto m = ((std::uint64_t(1) << 32) * ((std::uint64_t(1) << l) - d)) / d + 1;
  return {static_cast<unsigned>(m), l};
}

}  // namespace rafter::workloads::cuda

#undef RAFTER_ROW_DIVIDER_FN
