// Device helpers shared by our kernels: 16-byte vectors of 8 BF16 values, FP32 conversion,
// warp/block reductions, mma.sync tiles and 16-byte asynchronous copies. Included by
// workloads/cuda/*.cu only.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace rafter::workloads::cuda::dev {

// 8 BF16 values in one 16-byte load/store.
struct alignas(16) Bf16x8 {
  __nv_bfloat162 h[4];
};

__device__ __forceinline__ Bf16x8 load8(const __nv_bfloat16* p) {
  uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
  return *reinterpret_cast<Bf16x8*>(&u);
}
// Streaming load: read once, keep it out of L1 (evict-first in L2 is not needed for HBM streams).
__device__ __forceinline__ Bf16x8 load8_stream(const __nv_bfloat16* p) {
  uint4 u = __ldcs(reinterpret_cast<const uint4*>(p));
  return *reinterpret_cast<Bf16x8*>(&u);
}
__device__ __forceinline__ void store8(__nv_bfloat16* p, const Bf16x8& v) {
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&v);
}
// A BF16 value is the top half of its FP32 one: a shift for the low value of each pair and a mask
// for the high one, one instruction each (__bfloat1622float2 took a byte permute more for the high).
__device__ __forceinline__ void to_float8(const Bf16x8& v, float (&f)[8]) {
  const auto* w = reinterpret_cast<const std::uint32_t*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ Bf16x8 from_float8(const float (&f)[8]) {
  Bf16x8 v;
#pragma unroll
  for (int i = 0; i < 4; ++i) v.h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum/max; `scratch` holds 32 floats; every thread gets the result.
template <bool IsMax>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = IsMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < warps ? scratch[lane] : (IsMax ? -INFINITY : 0.f);
  return IsMax ? warp_max(r) : warp_sum(r);
}

__device__ __forceinline__ float silu(float g) { return g / (1.f + __expf(-g)); }

// Tensor cores without wgmma (sm_80+): D = A·B + D on one warp, m16n8k16, BF16 in, FP32 accumulate;
// A and B in the mma.sync fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16").
__device__ __forceinline__ void mma_bf16(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// The same with FP16 inputs.
__device__ __forceinline__ void mma_f16(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                        unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Four 8×8 matrices of 16-bit elements from shared memory (sm_75+): lanes 8m … 8m+7 give the
// 16-byte-aligned addresses of matrix m's rows; register m receives matrix m in the mma.sync
// fragment layout (lane l: row l/4, columns 2(l%4), +1), or with .trans its transpose (rows
// 2(l%4), +1 of column l/4): the B operand of m16n8k16 from a row-major [k][n] tile.
__device__ __forceinline__ unsigned smem_u32(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

// 16 bytes global → shared through L2 only (cp.async.cg, sm_80+). `bytes` 16 copies; 0 reads
// nothing and writes 16 zero bytes (src must still be a valid address). Groups: cp_async_commit
// closes one; cp_async_wait<N> waits until at most N are still pending.
__device__ __forceinline__ void cp_async16(void* smem_dst, const void* src, int bytes) {
  const unsigned dst = unsigned(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

}  // namespace rafter::workloads::cuda::dev
