// Embedding backward without atomics: the token ids are radix-sorted (cub) with their positions,
// then the first position of each distinct id sums the dy rows of all its duplicates and updates
// that dW row once (read, add, write). Every dW row has one writer, the accesses are 16-byte and
// coalesced, and the HBM traffic is dy once plus each touched dW row read and written once.
#include <cub/device/device_radix_sort.cuh>

#include "cuda_util.hpp"
#include "kernel_common.cuh"
#include "kernels.hpp"

namespace rafter::workloads::cuda {
namespace {

using namespace dev;

constexpr int kColsPerThread = 8;
constexpr int kThreads = 128;

__global__ void iota_kernel(std::int32_t* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] = static_cast<std::int32_t>(i);
}

// grid.x: sorted positions; grid.y: column blocks of kThreads × 8 columns.
__global__ void accumulate_sorted_kernel(const std::int32_t* __restrict__ ids, const std::int32_t* __restrict__ pos,
                                         const bf16* __restrict__ dy, float* __restrict__ dtable, std::int64_t tokens,
                                         int hidden) {
  const std::int64_t i = blockIdx.x;
  const std::int32_t id = ids[i];
  if (i > 0 && ids[i - 1] == id) return;  // not the first of its id: the first one sums them all
  const int col = (blockIdx.y * kThreads + threadIdx.x) * kColsPerThread;
  if (col >= hidden) return;
  float acc[8] = {};
  for (std::int64_t j = i; j < tokens && ids[j] == id; ++j) {
    float g[8];
    to_float8(load8_stream(dy + std::int64_t(pos[j]) * hidden + col), g);
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] += g[e];
  }
  float4* dst = reinterpret_cast<float4*>(dtable + std::int64_t(id) * hidden + col);
  float4 a = dst[0], b = dst[1];
  dst[0] = make_float4(a.x + acc[0], a.y + acc[1], a.z + acc[2], a.w + acc[3]);
  dst[1] = make_float4(b.x + acc[4], b.y + acc[5], b.z + acc[6], b.w + acc[7]);
}

int key_bits(std::int64_t vocab) {
  int bits = 1;
  while ((std::int64_t{1} << bits) < vocab) ++bits;
  return bits;
}

std::size_t sort_temp_bytes(std::int64_t tokens) {
  std::size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const std::int32_t*>(nullptr),
                                  static_cast<std::int32_t*>(nullptr), static_cast<const std::int32_t*>(nullptr),
                                  static_cast<std::int32_t*>(nullptr), static_cast<int>(tokens));
  return bytes;
}

}  // namespace

std::size_t embedding_bwd_workspace_bytes(std::int64_t tokens) {
  return 3 * std::size_t(tokens) * sizeof(std::int32_t) + sort_temp_bytes(tokens) + 256;
}

void embedding_bwd_sorted(const std::int32_t* ids, const bf16* dout, float* dtable, std::int64_t tokens,
                          std::int64_t hidden, std::int64_t vocab, void* workspace, cudaStream_t stream) {
  static_assert(kColsPerThread == 8, "embedding_limit's multiple");
  if (std::string why = embedding_limit(hidden); !why.empty()) throw InputError(why);
  auto* base = static_cast<char*>(workspace);
  auto* positions = reinterpret_cast<std::int32_t*>(base);
  auto* sorted_ids = positions + tokens;
  auto* sorted_pos = sorted_ids + tokens;
  // cub wants its temporary storage aligned: round the offset up to 256 bytes (budgeted in the size).
  auto temp_offset = (reinterpret_cast<std::uintptr_t>(sorted_pos + tokens) + 255) & ~std::uintptr_t{255};
  void* temp = reinterpret_cast<void*>(temp_offset);
  std::size_t temp_bytes = sort_temp_bytes(tokens);
  iota_kernel<<<static_cast<int>(std::min<std::int64_t>((tokens + 255) / 256, 4096)), 256, 0, stream>>>(positions, tokens);
  RAFTER_CUDA_LAUNCH_CHECK("iota_kernel");
  RAFTER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, ids, sorted_ids, positions, sorted_pos,
                                                    static_cast<int>(tokens), 0, key_bits(vocab), stream));
  dim3 grid(static_cast<unsigned>(tokens),
            static_cast<unsigned>((hidden / kColsPerThread + kThreads - 1) / kThreads));
  accumulate_sorted_kernel<<<grid, kThreads, 0, stream>>>(sorted_ids, sorted_pos, dout, dtable, tokens, int(hidden));
  RAFTER_CUDA_LAUNCH_CHECK("accumulate_sorted_kernel");
}

}  // namespace rafter::workloads::cuda
