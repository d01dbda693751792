// Shared pieces of the wgmma probes: the K-major, no-swizzle shared-memory tile layout that the
// descriptors describe, the descriptor itself, host decoders of the operand types, and the check
// of a probe's output against a float64 reference.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rafter::probes::cuda {

// One wgmma k-step reads 32 bytes of K per row: 16 bf16/fp16, 8 tf32, 32 fp8/int8.
constexpr int kStepBytes = 32;

// Byte offset of (row, kbyte) in a tile of `rows` rows: k-steps of rows x 32 bytes one after the
// other; inside a step, 8-row x 16-byte core matrices (128 contiguous bytes), two along K 128 bytes
// apart (the descriptor's K-direction offset) and successive 8-row groups 256 bytes apart (its
// M/N-direction offset).
__host__ __device__ inline int tile_offset(int row, int kbyte, int rows) {
  int step = kbyte / kStepBytes, kb = kbyte % kStepBytes;
  return step * rows * kStepBytes + (row / 8) * 256 + (kb / 16) * 128 + (row % 8) * 16 + kb % 16;
}

// Shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address, leading
// and stride byte offsets, all in 16-byte units; layout type 0 = no swizzle.
__device__ inline std::uint64_t make_smem_desc(const void* smem, int leading_bytes, int stride_bytes) {
  auto addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  return std::uint64_t((addr & 0x3FFFF) >> 4) | std::uint64_t(leading_bytes >> 4) << 16 |
         std::uint64_t(stride_bytes >> 4) << 32;
}

__device__ inline void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Row and column of accumulator register i of a thread in a warpgroup's 64 x N wgmma tile.
__host__ __device__ inline void acc_coords(int thread_in_wg, int i, int& row, int& col) {
  int warp = thread_in_wg / 32, lane = thread_in_wg % 32;
  row = warp * 16 + lane / 4 + 8 * ((i / 2) % 2);
  col = (i / 4) * 8 + (lane % 4) * 2 + (i % 2);
}

// Host decoders (exact) of one element of each operand type.
double decode_bf16(std::uint16_t v);
double decode_fp16(std::uint16_t v);
double decode_tf32(std::uint32_t v);  // fp32 bits, low 13 mantissa bits dropped
double decode_e4m3(std::uint8_t v);
double decode_e5m2(std::uint8_t v);

// ||got - want|| / ||want||; also "sorted": the same after sorting both (a match there but not in
// place means the values are right and only the output mapping is off).
struct CheckResult {
  double error = 0, sorted_error = 0, tolerance = 0;
  bool pass = false;
  nlohmann::json to_json() const;
};
CheckResult compare(const std::vector<double>& got, const std::vector<double>& want, double tolerance);

}  // namespace rafter::probes::cuda
