// Scalar stream kernels: one double per instruction. Auto-vectorization is switched off for this
// file so that "scalar" means scalar; the loops are unrolled by hand instead.
#pragma GCC optimize("no-tree-vectorize", "no-tree-loop-distribute-patterns")
#include <cstring>

#include "kernel_entry_points.hpp"

namespace rafter::probes::cpu {
namespace {

std::uint64_t bits(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

std::uint64_t load(const double* a, std::size_t n, int passes) {
  std::uint64_t x0 = 0, x1 = 0, x2 = 0, x3 = 0, x4 = 0, x5 = 0, x6 = 0, x7 = 0;
  for (int p = 0; p < passes; ++p) {
    for (std::size_t i = 0; i < n; i += 8) {
      x0 ^= bits(a[i + 0]);
      x1 ^= bits(a[i + 1]);
      x2 ^= bits(a[i + 2]);
      x3 ^= bits(a[i + 3]);
      x4 ^= bits(a[i + 4]);
      x5 ^= bits(a[i + 5]);
      x6 ^= bits(a[i + 6]);
      x7 ^= bits(a[i + 7]);
    }
  }
  return x0 ^ x1 ^ x2 ^ x3 ^ x4 ^ x5 ^ x6 ^ x7;
}

void store(double* a, std::size_t n, double value, int passes) {
  for (int p = 0; p < passes; ++p)
    for (std::size_t i = 0; i < n; ++i) a[i] = value;
}

void nt_store(double* a, std::size_t n, double value, int passes) {
  // movnti streams 8 bytes at a time from a general-purpose register.
  long long v;
  std::memcpy(&v, &value, sizeof v);
  for (int p = 0; p < passes; ++p)
    for (std::size_t i = 0; i < n; ++i) __builtin_ia32_movnti64(reinterpret_cast<long long*>(a + i), v);
  __builtin_ia32_sfence();
}

void copy(double* dst, const double* src, std::size_t n, int passes) {
  for (int p = 0; p < passes; ++p)
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
}

void triad(double* a, const double* b, const double* c, double s, std::size_t n, int passes) {
  for (int p = 0; p < passes; ++p)
    for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

}  // namespace

// Exported one by one (see kernels.cpp: the table is built in baseline code).
namespace scalar {
std::uint64_t stream_load(const double* a, std::size_t n, int passes) { return load(a, n, passes); }
void stream_store(double* a, std::size_t n, double v, int passes) { store(a, n, v, passes); }
void stream_nt_store(double* a, std::size_t n, double v, int passes) { nt_store(a, n, v, passes); }
void stream_copy(double* d, const double* s, std::size_t n, int passes) { copy(d, s, n, passes); }
void stream_triad(double* a, const double* b, const double* c, double s, std::size_t n, int passes) {
  triad(a, b, c, s, n, passes);
}
}  // namespace scalar

}  // namespace rafter::probes::cpu
