// AMX compute kernels (Intel's tile matrix unit): BF16 (tdpbf16ps, AMX-BF16) and INT8 (tdpbssd,
// AMX-INT8) tile dot products. Eight tiles of 16 rows x 64 bytes: six accumulators (C) and the two
// sources (A, B), loaded once; each iteration issues one instruction per accumulator, six chains
// in flight to cover the instruction's latency (about 3x its issue interval on Sapphire Rapids).
// Call only when CPUID says the CPU has AMX and Linux granted the tile state (cpu_features.cpp).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernel_entry_points.hpp"

namespace rafter::probes::cpu {
namespace {

constexpr int kRows = 16, kRowBytes = 64;

// Palette 1: every tile 16 rows x 64 bytes (LDTILECFG's 64-byte layout).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

void configure_tiles() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = kRowBytes;
    c.rows[t] = kRows;
  }
  _tile_loadconfig(&c);
}

// A tile's worth of one 16- or 8-bit value repeated.
template <class T>
void fill(T (&tile)[kRows * kRowBytes / sizeof(T)], T value) {
  for (auto& x : tile) x = value;
}

// Sums the six accumulator tiles' elements (fp32 or int32) in memory order.
template <class T>
double sum_accumulators() {
  alignas(64) T c[6][kRows * kRowBytes / sizeof(T)];
  _tile_stored(0, c[0], kRowBytes);
  _tile_stored(1, c[1], kRowBytes);
  _tile_stored(2, c[2], kRowBytes);
  _tile_stored(3, c[3], kRowBytes);
  _tile_stored(4, c[4], kRowBytes);
  _tile_stored(5, c[5], kRowBytes);
  double s = 0;
  for (const auto& tile : c)
    for (T x : tile) s += static_cast<double>(x);
  return s;
}

void zero_accumulators() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
}

// Sources (tiles 6 and 7) of `one` repeated, accumulators zeroed, `iterations` calls of `step`
// (one instruction into each of the six accumulators), the accumulators' sum.
template <class Source, class Accumulator, class Step>
double run_tiles(Source one, std::int64_t iterations, Step step) {
  configure_tiles();
  alignas(64) Source ones[kRows * kRowBytes / sizeof(Source)];
  fill(ones, one);
  _tile_loadd(6, ones, kRowBytes);
  _tile_loadd(7, ones, kRowBytes);
  zero_accumulators();
  for (std::int64_t i = 0; i < iterations; ++i) step();
  const double s = sum_accumulators<Accumulator>();
  _tile_release();
  return s;
}

// One tile instruction into each of the six accumulators, from tiles 6 and 7 (tile numbers are
// immediates: the instruction is a macro argument, not a function).
#define RAFTER_INTO_SIX_TILES(dot) \
  dot(0, 6, 7);                    \
  dot(1, 6, 7);                    \
  dot(2, 6, 7);                    \
  dot(3, 6, 7);                    \
  dot(4, 6, 7);                    \
  dot(5, 6, 7)

// A and B hold 1.0 (bf16 0x3f80): every C element gains 32 (16 pairs of 1 x 1 + 1 x 1) a step.
double dot_bf16_impl(std::int64_t iterations) {
  return run_tiles<std::uint16_t, float>(0x3f80, iterations, [] { RAFTER_INTO_SIX_TILES(_tile_dpbf16ps); });
}

// A and B hold signed 1: every C element gains 64 (64 products of 1 x 1) a step.
double dot_int8_impl(std::int64_t iterations) {
  return run_tiles<std::int8_t, std::int32_t>(1, iterations, [] { RAFTER_INTO_SIX_TILES(_tile_dpbssd); });
}
#undef RAFTER_INTO_SIX_TILES

// c_out = c_in + a . b by one tile instruction (`dot`, into tile 0 from tiles 6 and 7).
template <class Source, class Accumulator, class Dot>
void tile_product(const Source* a, const Source* b, const Accumulator* c_in, Accumulator* c_out, Dot dot) {
  configure_tiles();
  _tile_loadd(0, c_in, kRowBytes);
  _tile_loadd(6, a, kRowBytes);
  _tile_loadd(7, b, kRowBytes);
  dot();
  _tile_stored(0, c_out, kRowBytes);
  _tile_release();
}

}  // namespace

// Exported one by one (see compute_avx512.cpp): the tables live in baseline code.
namespace amx {
double dot_bf16(std::int64_t iterations) { return dot_bf16_impl(iterations); }
double dot_int8(std::int64_t iterations) { return dot_int8_impl(iterations); }

void tile_product_bf16(const std::uint16_t* a, const std::uint16_t* b, const float* c_in, float* c_out) {
  tile_product(a, b, c_in, c_out, [] { _tile_dpbf16ps(0, 6, 7); });
}
void tile_product_int8(const std::int8_t* a, const std::int8_t* b, const std::int32_t* c_in,
                       std::int32_t* c_out) {
  tile_product(a, b, c_in, c_out, [] { _tile_dpbssd(0, 6, 7); });
}
}  // namespace amx

}  // namespace rafter::probes::cpu
