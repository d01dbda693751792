// The functions each ISA file exports (stream_<isa>.cpp, compute_<isa>.cpp). Only kernels.cpp
// calls these, through the tables it builds; call one only when CPUID says the CPU has its ISA.
#pragma once
#include <cstddef>
#include <cstdint>

namespace rafter::probes::cpu {

#define RAFTER_STREAM_ENTRY_POINTS                                               \
  std::uint64_t stream_load(const double* a, std::size_t n, int passes);         \
  std::uint64_t stream_load_pairs(const double* a, std::size_t n, int passes);   \
  std::uint64_t stream_load_discard(const double* a, std::size_t n, int passes); \
  void stream_store(double* a, std::size_t n, double v, int passes);             \
  void stream_nt_store(double* a, std::size_t n, double v, int passes);          \
  void stream_copy(double* d, const double* s, std::size_t n, int passes);       \
  void stream_triad(double* a, const double* b, const double* c, double s, std::size_t n, int passes);

namespace avx512 {
RAFTER_STREAM_ENTRY_POINTS
double fma_fp64(std::int64_t iterations);
double fma_fp32(std::int64_t iterations);
double dot_bf16(std::int64_t iterations);
double dot_int8(std::int64_t iterations);
double fma_fp16(std::int64_t iterations);  // compute_avx512fp16.cpp
}  // namespace avx512
namespace amx {  // compute_amx.cpp: call only when CpuFeatures::amx_tile (CPUID and Linux's permission)
double dot_bf16(std::int64_t iterations);
double dot_int8(std::int64_t iterations);
// One tile product on 16 x 64-byte tiles: c_out = c_in + a . b (tdpbf16ps / tdpbssd), for the checks.
void tile_product_bf16(const std::uint16_t* a, const std::uint16_t* b, const float* c_in, float* c_out);
void tile_product_int8(const std::int8_t* a, const std::int8_t* b, const std::int32_t* c_in,
                       std::int32_t* c_out);
}  // namespace amx
namespace avx2 {
RAFTER_STREAM_ENTRY_POINTS
double fma_fp64(std::int64_t iterations);
double fma_fp32(std::int64_t iterations);
double dot_int8(std::int64_t iterations);
}  // namespace avx2
namespace sse {
RAFTER_STREAM_ENTRY_POINTS
double mul_add_fp64(std::int64_t iterations);
double mul_add_fp32(std::int64_t iterations);
}  // namespace sse
namespace scalar {
RAFTER_STREAM_ENTRY_POINTS
double mul_add_fp64(std::int64_t iterations);
double mul_add_fp32(std::int64_t iterations);
}  // namespace scalar

#undef RAFTER_STREAM_ENTRY_POINTS

}  // namespace rafter::probes::cpu
