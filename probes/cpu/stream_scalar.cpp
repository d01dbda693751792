// Scalar stream kernels: one double per instruction. Auto-vectorization is switched off for this
// file so that "scalar" means scalar; the shared kernels unroll by 8 instead.
#pragma GCC optimize("no-tree-vectorize", "no-tree-loop-distribute-patterns")
#include <cstring>

#include "kernel_entry_points.hpp"
#include "stream_kernels.inl"

namespace rafter::probes::cpu {
namespace {
struct Scalar {
  using I = std::uint64_t;
  using D = double;
  static constexpr std::size_t lanes = 1;
  static I zero() { return 0; }
  static I xor_load(I acc, const double* p) {
    std::uint64_t u;
    std::memcpy(&u, p, sizeof u);
    return acc ^ u;
  }
  static I load_i(const double* p) { return xor_load(0, p); }
  static void discard7(const double* p) {
    asm volatile(
        "mov (%0), %%rax\n\tmov 8(%0), %%rax\n\tmov 16(%0), %%rax\n\tmov 24(%0), %%rax\n\t"
        "mov 32(%0), %%rax\n\tmov 40(%0), %%rax\n\tmov 48(%0), %%rax" ::"r"(p)
        : "rax", "memory");
  }
  static I xor_i(I a, I b) { return a ^ b; }
  static std::uint64_t fold(I x) { return x; }
  static D set1(double v) { return v; }
  static D load(const double* p) { return *p; }
  static void store(double* p, D v) { *p = v; }
  static void stream(double* p, D v) {  // movnti streams 8 bytes from a general-purpose register
    long long bits;
    std::memcpy(&bits, &v, sizeof bits);
    __builtin_ia32_movnti64(reinterpret_cast<long long*>(p), bits);
  }
  static void fence() { __builtin_ia32_sfence(); }
  static D fma(D s, D c, D b) { return s * c + b; }
};
}  // namespace
}  // namespace rafter::probes::cpu

RAFTER_EXPORT_STREAM_KERNELS(scalar, Scalar)
