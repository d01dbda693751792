// Scalar compute kernels: one double (or float) per instruction, multiply then add (baseline x86-64
// has no FMA). Auto-vectorization is off for this file so that "scalar" means scalar.
#pragma GCC optimize("no-tree-vectorize")
#include "compute_chains.hpp"
#include "kernel_entry_points.hpp"

namespace rafter::probes::cpu {
namespace {

constexpr int kAcc = 12;

double mul_add_fp64_impl(std::int64_t iterations) {
  return run_chains<double, kAcc>(
      iterations, chain_seed(), [](double a) { return a * 0.5 + 1.0; }, [](double a) { return a; });
}

double mul_add_fp32_impl(std::int64_t iterations) {
  return run_chains<float, kAcc>(
      iterations, static_cast<float>(chain_seed()), [](float a) { return a * 0.5f + 1.0f; },
      [](float a) { return static_cast<double>(a); });
}

}  // namespace

// Exported one by one: the tables live in kernels.cpp, compiled for baseline x86-64, so that
// nothing built with this file's ISA flags runs before CPUID said the CPU has them.
namespace scalar {
double mul_add_fp64(std::int64_t iterations) { return mul_add_fp64_impl(iterations); }
double mul_add_fp32(std::int64_t iterations) { return mul_add_fp32_impl(iterations); }
}  // namespace scalar

}  // namespace rafter::probes::cpu
