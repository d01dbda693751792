// The CPU micro-kernels, one table per ISA (stream_<isa>.cpp / compute_<isa>.cpp, compiled with
// that ISA's flags and called only when CPUID says the CPU has it). Like likwid-bench, every kernel
// declares what one element (stream kernels) or one iteration (compute kernels) moves and computes,
// so that the bandwidth and FLOP/s arithmetic lives here and nowhere else.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu_features.hpp"

namespace rafter::probes::cpu {

// Stream kernels work on arrays of doubles whose length is a multiple of this (512 B), aligned to
// 64 B; each repeats its pass `passes` times so that small (L1) working sets amortise the call.
inline constexpr std::size_t kStreamBlockDoubles = 64;

struct StreamKernels {
  std::string isa;
  // load: reads a[0..n); returns the XOR of all 64-bit words (a checksum the compiler cannot drop).
  std::uint64_t (*load)(const double* a, std::size_t n, int passes);
  // load_pairs: the same checksum, the loads XORed in pairs first (two accumulators, not eight).
  // Which form reads a level faster depends on the core; the bandwidth probe times all three.
  std::uint64_t (*load_pairs)(const double* a, std::size_t n, int passes);
  // load_discard: the loads alone, as likwid-bench's: of each block of 8 × lanes doubles only the
  // first vector (lanes doubles) reaches the checksum, the other seven are loaded and not read.
  std::uint64_t (*load_discard)(const double* a, std::size_t n, int passes);
  std::size_t lanes;  // doubles per vector register
  // store: a[i] = value.  nt_store: the same with non-temporal (streaming) stores.
  void (*store)(double* a, std::size_t n, double value, int passes);
  void (*nt_store)(double* a, std::size_t n, double value, int passes);
  // copy: dst[i] = src[i].
  void (*copy)(double* dst, const double* src, std::size_t n, int passes);
  // triad: a[i] = b[i] + s * c[i] (an FMA where the ISA has one).
  void (*triad)(double* a, const double* b, const double* c, double s, std::size_t n, int passes);
};

// Per element of each array: the bytes the kernel streams (write-allocate traffic of plain stores
// is not counted, as in likwid-bench and STREAM) and the FLOPs it computes.
struct StreamOperation {
  const char* name;  // "load", "store", "nt_store", "copy", "triad"
  int arrays;        // how many arrays of n doubles the working set holds
  double bytes_per_element;
  double flops_per_element;
};
inline constexpr StreamOperation kStreamOperations[] = {
    {"load", 1, 8, 0},      // 1 load
    {"store", 1, 8, 0},     // 1 store
    {"nt_store", 1, 8, 0},  // 1 non-temporal store
    {"copy", 2, 16, 0},     // 1 load + 1 store
    {"triad", 3, 24, 2},    // 2 loads + 1 store, 1 FMA (2 FLOPs)
};

const StreamKernels& stream_kernels(const std::string& isa);  // InputError for an unknown ISA

// A compute kernel: `accumulators` independent chains of one vector instruction each per iteration
// (enough to cover the instruction's latency times its throughput), run for `iterations`.
// Floating-point chains compute acc = acc * 0.5 + 1, which converges to exactly 2 and stays there,
// so the result is checkable exactly at any iteration count ≥ 64 and never denormal or infinite.
// dpbf16 adds 1*1 + 1*1 = 2 per lane and iteration, vnni 4 * (1*1) = 4 (exact below 2^24 / 2^31).
struct ComputeKernel {
  std::string precision;    // "fp64", "fp32", "bf16", "fp16", "int8"
  std::string operation;    // "fma", "mul_add" (no FMA at that width), "dot" (bf16/int8 dot products)
  std::string isa;          // "avx512", "avx2", "sse", "scalar"
  std::string instruction;  // "vfmadd231pd zmm", ...
  int vector_bits = 0;
  int accumulators = 0;
  double flops_per_iteration = 0;                    // accumulators x lanes x FLOPs per lane per instruction
  double (*run)(std::int64_t iterations) = nullptr;  // returns the sum of all lanes
  // The exact result of run(iterations) for iterations >= 64 (and below the exactness bounds).
  double (*expected)(std::int64_t iterations) = nullptr;
  bool (*present)(const CpuFeatures& f) = nullptr;
};

const std::vector<ComputeKernel>& compute_kernels();  // all of the above, widest first

}  // namespace rafter::probes::cpu
