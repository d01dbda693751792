// The stream kernels (load, store, non-temporal store, copy, triad), written once over a vector
// traits type V and included by each ISA's file (stream_<isa>.cpp), which compiles them with that
// ISA's flags. Per iteration the kernels touch 8 registers (8 × V::lanes doubles): enough
// independent work to keep the load/store ports busy. Bytes per element, likwid-style:
//   load 8 (read), store 8 (write), nt_store 8 (write, bypassing the caches), copy 16, triad 24
//   (and 2 FLOPs per element for triad). n must be a multiple of 8 × V::lanes.
//
// V provides: I (integer register), D (double register), lanes (doubles per register),
//   zero(), xor_load(I, const double*), load_i(const double*), xor_i(I, I), fold(I) → xor of its
//   64-bit lanes, discard7(const double*) → seven aligned register loads from there, results unread,
//   set1(double), load(const double*), store(double*, D), stream(double*, D), fence(),
//   fma(D s, D c, D b) → s·c + b.
// The load kernel XORs into independent integer accumulators: integer logic runs on more ports
// than FP adds, so the loads, not the reduction, are what limits it.
#include <cstddef>
#include <cstdint>

namespace rafter::probes::cpu {
namespace {

template <class V>
struct StreamKernels {
  static constexpr std::size_t kStep = 8 * V::lanes;

  static std::uint64_t load(const double* a, std::size_t n, int passes) {
    typename V::I x0 = V::zero(), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0, x7 = x0;
    for (int p = 0; p < passes; ++p) {
      for (std::size_t i = 0; i < n; i += kStep) {
        x0 = V::xor_load(x0, a + i + 0 * V::lanes);
        x1 = V::xor_load(x1, a + i + 1 * V::lanes);
        x2 = V::xor_load(x2, a + i + 2 * V::lanes);
        x3 = V::xor_load(x3, a + i + 3 * V::lanes);
        x4 = V::xor_load(x4, a + i + 4 * V::lanes);
        x5 = V::xor_load(x5, a + i + 5 * V::lanes);
        x6 = V::xor_load(x6, a + i + 6 * V::lanes);
        x7 = V::xor_load(x7, a + i + 7 * V::lanes);
      }
    }
    return V::fold(x0) ^ V::fold(x1) ^ V::fold(x2) ^ V::fold(x3) ^ V::fold(x4) ^ V::fold(x5) ^ V::fold(x6) ^
           V::fold(x7);
  }

  // The same checksum with the loads XORed in pairs before they meet an accumulator: two
  // loop-carried chains instead of eight, so fewer XORs wait on a slow load. On a Zen 4 VM it read
  // the L3 about 10 % faster than `load` and the L2 up to half as fast; the probe times both.
  static std::uint64_t load_pairs(const double* a, std::size_t n, int passes) {
    typename V::I x0 = V::zero(), x1 = x0;
    for (int p = 0; p < passes; ++p) {
      for (std::size_t i = 0; i < n; i += kStep) {
        const typename V::I t0 = V::xor_load(V::load_i(a + i + 0 * V::lanes), a + i + 1 * V::lanes);
        const typename V::I t1 = V::xor_load(V::load_i(a + i + 2 * V::lanes), a + i + 3 * V::lanes);
        const typename V::I t2 = V::xor_load(V::load_i(a + i + 4 * V::lanes), a + i + 5 * V::lanes);
        const typename V::I t3 = V::xor_load(V::load_i(a + i + 6 * V::lanes), a + i + 7 * V::lanes);
        x0 = V::xor_i(x0, V::xor_i(t0, t1));
        x1 = V::xor_i(x1, V::xor_i(t2, t3));
      }
    }
    return V::fold(x0) ^ V::fold(x1);
  }

  // The loads alone, as likwid-bench's load kernel: each block's first vector XORed into the
  // checksum, the other seven loaded into one register that nothing reads (V::discard7: inline
  // assembly, which the compiler keeps). On a Sapphire Rapids core every load that feeds an XOR
  // (`load`, `load_pairs`) held L1 to ~1.5 loads a cycle: this form read L1 1.5x (AVX2) and
  // 1.2-1.3x (AVX-512) faster there, as likwid-bench does. The checksum covers each block's first
  // vector, so a wrong stride or range still shows (check_stream_kernels).
  static std::uint64_t load_discard(const double* a, std::size_t n, int passes) {
    typename V::I x0 = V::zero();
    for (int p = 0; p < passes; ++p) {
      for (std::size_t i = 0; i < n; i += kStep) {
        x0 = V::xor_load(x0, a + i);
        V::discard7(a + i + V::lanes);
      }
    }
    return V::fold(x0);
  }

  static void store(double* a, std::size_t n, double value, int passes) {
    const typename V::D v = V::set1(value);
    for (int p = 0; p < passes; ++p)
      for (std::size_t i = 0; i < n; i += kStep)
        for (std::size_t k = 0; k < 8; ++k) V::store(a + i + k * V::lanes, v);
  }

  static void nt_store(double* a, std::size_t n, double value, int passes) {
    const typename V::D v = V::set1(value);
    for (int p = 0; p < passes; ++p)
      for (std::size_t i = 0; i < n; i += kStep)
        for (std::size_t k = 0; k < 8; ++k) V::stream(a + i + k * V::lanes, v);
    V::fence();
  }

  static void copy(double* dst, const double* src, std::size_t n, int passes) {
    for (int p = 0; p < passes; ++p)
      for (std::size_t i = 0; i < n; i += kStep)
        for (std::size_t k = 0; k < 8; ++k) V::store(dst + i + k * V::lanes, V::load(src + i + k * V::lanes));
  }

  static void triad(double* a, const double* b, const double* c, double s, std::size_t n, int passes) {
    const typename V::D vs = V::set1(s);
    for (int p = 0; p < passes; ++p)
      for (std::size_t i = 0; i < n; i += kStep)
        for (std::size_t k = 0; k < 8; ++k) {
          const std::size_t j = i + k * V::lanes;
          V::store(a + j, V::fma(vs, V::load(c + j), V::load(b + j)));
        }
  }
};

}  // namespace
}  // namespace rafter::probes::cpu

// Exports one ISA's kernels under rafter::probes::cpu::<ns> (see kernel_entry_points.hpp).
#define RAFTER_EXPORT_STREAM_KERNELS(ns, V)                                                             \
  namespace rafter::probes::cpu::ns {                                                                   \
  std::uint64_t stream_load(const double* a, std::size_t n, int passes) {                               \
    return StreamKernels<V>::load(a, n, passes);                                                        \
  }                                                                                                     \
  std::uint64_t stream_load_pairs(const double* a, std::size_t n, int passes) {                         \
    return StreamKernels<V>::load_pairs(a, n, passes);                                                  \
  }                                                                                                     \
  std::uint64_t stream_load_discard(const double* a, std::size_t n, int passes) {                       \
    return StreamKernels<V>::load_discard(a, n, passes);                                                \
  }                                                                                                     \
  void stream_store(double* a, std::size_t n, double v, int passes) {                                   \
    StreamKernels<V>::store(a, n, v, passes);                                                           \
  }                                                                                                     \
  void stream_nt_store(double* a, std::size_t n, double v, int passes) {                                \
    StreamKernels<V>::nt_store(a, n, v, passes);                                                        \
  }                                                                                                     \
  void stream_copy(double* d, const double* s, std::size_t n, int passes) {                             \
    StreamKernels<V>::copy(d, s, n, passes);                                                            \
  }                                                                                                     \
  void stream_triad(double* a, const double* b, const double* c, double s, std::size_t n, int passes) { \
    StreamKernels<V>::triad(a, b, c, s, n, passes);                                                     \
  }                                                                                                     \
  }
