// Kernel checks (see stream_check.hpp).
#include "stream_check.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "thread_team.hpp"

namespace rafter::probes::cpu {
namespace {

void fill_random(double* a, std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  for (std::size_t i = 0; i < n; ++i) a[i] = d(rng);
}

void poison(double* a, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) a[i] = std::numeric_limits<double>::quiet_NaN();
}

std::uint64_t xor_reference(const double* a, std::size_t n) {
  std::uint64_t r = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t u;
    std::memcpy(&u, a + i, sizeof u);
    r ^= u;
  }
  return r;
}

}  // namespace

std::string check_stream_kernels(const StreamKernels& k, std::size_t n) {
  n = (n + kStreamBlockDoubles - 1) / kStreamBlockDoubles * kStreamBlockDoubles;
  AlignedBuffer a(n * sizeof(double), false), b(n * sizeof(double), false), c(n * sizeof(double), false);
  std::mt19937_64 rng(42);
  fill_random(b.data(), n, rng);
  fill_random(c.data(), n, rng);
  // load: odd pass counts XOR to the single-pass checksum, even ones to zero.
  if (k.load(b.data(), n, 3) != xor_reference(b.data(), n)) return k.isa + " load: checksum differs";
  if (k.load_pairs(b.data(), n, 3) != xor_reference(b.data(), n))
    return k.isa + " load_pairs: checksum differs";
  const double value = 0.123456789;
  for (auto store : {k.store, k.nt_store}) {
    poison(a.data(), n);
    store(a.data(), n, value, 2);
    for (std::size_t i = 0; i < n; ++i)
      if (a.data()[i] != value)
        return fmt::format("{} {}: a[{}] not stored", k.isa, store == k.store ? "store" : "nt_store", i);
  }
  poison(a.data(), n);
  k.copy(a.data(), b.data(), n, 2);
  if (std::memcmp(a.data(), b.data(), n * sizeof(double)) != 0) return k.isa + " copy: differs from source";
  poison(a.data(), n);
  const double s = 1.75;
  k.triad(a.data(), b.data(), c.data(), s, n, 2);
  for (std::size_t i = 0; i < n; ++i) {
    const double ref = b.data()[i] + s * c.data()[i];
    // FMA rounds once, mul+add twice: allow one rounding of the product.
    if (!(std::fabs(a.data()[i] - ref) <= 4 * std::numeric_limits<double>::epsilon() * (std::fabs(ref) + 2)))
      return fmt::format("{} triad: a[{}] = {} expected {}", k.isa, i, a.data()[i], ref);
  }
  return "";
}

std::string check_compute_kernel(const ComputeKernel& kernel, std::int64_t iterations) {
  const double got = kernel.run(iterations);
  const double want = kernel.expected(iterations);
  if (got != want)
    return fmt::format("{} {} {}: result {} expected {}", kernel.precision, kernel.operation, kernel.isa, got,
                       want);
  return "";
}

}  // namespace rafter::probes::cpu
