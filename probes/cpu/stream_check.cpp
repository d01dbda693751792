// Kernel checks (see stream_check.hpp).
#include "stream_check.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernel_entry_points.hpp"
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

// The XOR of the words of each block's first vector (load_discard's checksum): lanes doubles of
// every 8 × lanes.
std::uint64_t xor_block_heads(const double* a, std::size_t n, std::size_t lanes) {
  std::uint64_t r = 0;
  for (std::size_t i = 0; i < n; i += 8 * lanes) r ^= xor_reference(a + i, lanes);
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
  if (k.load_discard(b.data(), n, 3) != xor_block_heads(b.data(), n, k.lanes))
    return k.isa + " load_discard: checksum differs";
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

std::string check_amx_tiles(const CpuFeatures& f, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  if (f.amx_bf16) {
    // A: 16 rows of 32 bf16; B: 16 rows of 16 pairs (row k holds B[2k][n], B[2k+1][n] for n = 0..15).
    // Values -4..4 and C0 -1000..1000: every product and sum is exact in fp32.
    std::uniform_int_distribution<int> small(-4, 4), c(-1000, 1000);
    alignas(64) std::uint16_t a[512], b[512];
    alignas(64) float c0[256], out[256];
    const auto bf16_bits = [](float v) {
      std::uint32_t u;
      std::memcpy(&u, &v, sizeof u);
      return static_cast<std::uint16_t>(u >> 16);  // exact for small integers
    };
    std::vector<float> av(512), bv(512);
    for (int i = 0; i < 512; ++i) {
      av[i] = float(small(rng));
      bv[i] = float(small(rng));
      a[i] = bf16_bits(av[i]);
      b[i] = bf16_bits(bv[i]);
    }
    for (float& x : c0) x = float(c(rng));
    for (float& x : out) x = std::numeric_limits<float>::quiet_NaN();
    amx::tile_product_bf16(a, b, c0, out);
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        double ref = c0[m * 16 + n];
        for (int k = 0; k < 16; ++k)
          for (int p = 0; p < 2; ++p) ref += double(av[m * 32 + 2 * k + p]) * bv[k * 32 + 2 * n + p];
        if (out[m * 16 + n] != ref)
          return fmt::format("bf16 tile_dot (tdpbf16ps): C[{}][{}] = {} expected {}", m, n, out[m * 16 + n],
                             ref);
      }
  }
  if (f.amx_int8) {
    // A: 16 rows of 64 s8; B: 16 rows of 16 quads (row k holds B[4k..4k+3][n]); full s8 range.
    std::uniform_int_distribution<int> s8(-128, 127), c(-1000000, 1000000);
    alignas(64) std::int8_t a[1024], b[1024];
    alignas(64) std::int32_t c0[256], out[256];
    for (auto& x : a) x = static_cast<std::int8_t>(s8(rng));
    for (auto& x : b) x = static_cast<std::int8_t>(s8(rng));
    for (auto& x : c0) x = c(rng);
    for (auto& x : out) x = std::numeric_limits<std::int32_t>::min();
    amx::tile_product_int8(a, b, c0, out);
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        std::int64_t ref = c0[m * 16 + n];
        for (int k = 0; k < 16; ++k)
          for (int p = 0; p < 4; ++p) ref += std::int64_t(a[m * 64 + 4 * k + p]) * b[k * 64 + 4 * n + p];
        if (out[m * 16 + n] != ref)
          return fmt::format("int8 tile_dot (tdpbssd): C[{}][{}] = {} expected {}", m, n, out[m * 16 + n],
                             ref);
      }
  }
  return "";
}

}  // namespace rafter::probes::cpu
