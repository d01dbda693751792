// Device helpers of the GLA kernels (kernels_gla.cu, kernels_gla_bwd.cu): storage-type
// conversion, the gates' exp, one m16n8k16 product tile from shared memory (mma.sync for BF16/FP16,
// FMAs in the same fragment layout for FP32), 16-byte asynchronous copies, and [b, s, h, d] indexing.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <type_traits>

#include "cuda_util.hpp"
#include "kernel_common.cuh"

namespace rafter::workloads::cuda::gla_dev {

constexpr int kTile = 64;       // dk / dv columns of one block's slice
constexpr int kLd = kTile + 8;  // shared-memory row stride (elements): consecutive rows shift banks
constexpr int kThreads = 128;   // four warps
constexpr int kSub = 16;        // sub-chunk of the scores (tokens)

template <class T>
__device__ __forceinline__ float to_f(T x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(x);
  else
    return __half2float(x);
}
template <class T>
__device__ __forceinline__ T from_f(float x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16(x);
  else
    return __float2half(x);
}
// FP32 keeps the precise exp (its check is 1e-5); the 16-bit paths round far coarser than __expf,
// and take 2^(x·log2 e) by ex2.approx.ftz: __expf's value wherever that is a normal float, and 0
// under 2^-126, where __expf builds the subnormal from a halved exponent and a square (a compare
// and two predicated multiplies more an exp: the scores' diagonal loop was 5 instructions an exp
// instead of 2). A gate term under 2^-126 is below any 16-bit check.
template <class T>
__device__ __forceinline__ float gate_exp(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return expf(x);
  } else {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.44269504088896341f));
    return y;
  }
}

template <class T>
__device__ __forceinline__ unsigned pack2(T lo, T hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return unsigned(__bfloat16_as_ushort(lo)) | (unsigned(__bfloat16_as_ushort(hi)) << 16);
  else
    return unsigned(__half_as_ushort(lo)) | (unsigned(__half_as_ushort(hi)) << 16);
}

// Two adjacent elements (even element offset) in one 4- or 8-byte load.
template <class T>
__device__ __forceinline__ float2 load2(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return *reinterpret_cast<const float2*>(p);
  } else {
    const unsigned u = *reinterpret_cast<const unsigned*>(p);
    T lo, hi;
    static_assert(sizeof(T) == 2);
    memcpy(&lo, &u, 2);
    memcpy(&hi, reinterpret_cast<const char*>(&u) + 2, 2);
    return make_float2(to_f(lo), to_f(hi));
  }
}

// Two adjacent outputs (even element offset) in one 4- or 8-byte store.
template <class T>
__device__ __forceinline__ void store2(T* p, float x, float y) {
  if constexpr (std::is_same_v<T, float>)
    *reinterpret_cast<float2*>(p) = make_float2(x, y);
  else
    *reinterpret_cast<unsigned*>(p) = pack2(from_f<T>(x), from_f<T>(y));
}

// c += A·B on tensor cores from fragments (16-bit storage types only).
template <class T>
__device__ __forceinline__ void mma_frag(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    dev::mma_bf16(c, a[0], a[1], a[2], a[3], b0, b1);
  else
    dev::mma_f16(c, a[0], a[1], a[2], a[3], b0, b1);
}

// c += A(16×16)·B(16×8) with A(m, κ) = a[m·ars + κ·acs] and B(κ, n) = b[κ·brs + n·bcs] in shared
// memory. Fragments as PTX's m16n8k16: lane (g = lane/4, q = lane%4) holds c at rows g, g+8 and
// columns 2q, 2q+1.
template <class T>
__device__ __forceinline__ void mma16(float (&c)[4], const T* a, int ars, int acs, const T* b, int brs,
                                      int bcs) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  if constexpr (std::is_same_v<T, float>) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      const float a0 = a[g * ars + k * acs], a1 = a[(g + 8) * ars + k * acs];
      const float b0 = b[k * brs + 2 * q * bcs], b1 = b[k * brs + (2 * q + 1) * bcs];
      c[0] = fmaf(a0, b0, c[0]);
      c[1] = fmaf(a0, b1, c[1]);
      c[2] = fmaf(a1, b0, c[2]);
      c[3] = fmaf(a1, b1, c[3]);
    }
  } else {
    // A pair (κ, κ+1) is one 32-bit word where κ runs along memory (stride 1; κ even, rows even).
    const auto A = [&](int m, int k) {
      if (acs == 1) return *reinterpret_cast<const unsigned*>(a + m * ars + k);
      return pack2(a[m * ars + k * acs], a[m * ars + (k + 1) * acs]);
    };
    const auto B = [&](int k, int n) {
      if (brs == 1) return *reinterpret_cast<const unsigned*>(b + n * bcs + k);
      return pack2(b[k * brs + n * bcs], b[(k + 1) * brs + n * bcs]);
    };
    const unsigned a[4] = {A(g, 2 * q), A(g + 8, 2 * q), A(g, 2 * q + 8), A(g + 8, 2 * q + 8)};
    mma_frag<T>(c, a, B(2 * q, g), B(2 * q + 8, g));
  }
}

// acc (a warp's 16 rows x 64 columns, m16n8k16 fragments) += A[rows][kk] · B[kk][0..64) for kk in
// [kk_begin, kk_end), 16 at a time; `a_rows` points at the warp's first row, A and B are row-major
// with stride kLd.
template <class T>
__device__ __forceinline__ void mma_rows_x64(float (&acc)[8][4], const T* a_rows, const T* b, int kk_begin,
                                             int kk_end) {
  for (int kk = kk_begin; kk < kk_end; kk += 16)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) mma16(acc[nt], a_rows + kk, kLd, 1, b + kk * kLd + nt * 8, kLd, 1);
}

// The four lanes of a quad (lanes 4g … 4g+3) hold a 4×4 matrix of words, lane q its row a[0..3];
// afterwards lane q holds its column (a[r] = lane r's former a[q]). Two butterfly steps: the
// off-diagonal 2×2 blocks trade across lanes q, q^2, then each 2×2 block transposes across q, q^1.
// Every lane of the warp must take part.
__device__ __forceinline__ void quad_transpose(unsigned (&a)[4]) {
  const int q = threadIdx.x & 3;
  const bool hi = q & 2, odd = q & 1;
  unsigned r0 = __shfl_xor_sync(0xffffffffu, hi ? a[0] : a[2], 2);
  unsigned r1 = __shfl_xor_sync(0xffffffffu, hi ? a[1] : a[3], 2);
  if (hi)
    a[0] = r0, a[1] = r1;
  else
    a[2] = r0, a[3] = r1;
  r0 = __shfl_xor_sync(0xffffffffu, odd ? a[0] : a[1], 1);
  r1 = __shfl_xor_sync(0xffffffffu, odd ? a[2] : a[3], 1);
  if (odd)
    a[0] = r0, a[2] = r1;
  else
    a[1] = r0, a[3] = r1;
}

// Stores a warp's fragment (rows [16w, 16w + 16) of 64 columns): fragment row r goes to row_ptr(r)
// (r counted from the tile's first row); rows from `rows` on and columns from `w` on (w a multiple
// of 8) are skipped. 16-bit storage: a fragment row's words sit in its quad as [lane][n-tile], so a
// quad transpose per row and half of the n-tiles leaves lane q with n-tiles q and q + 4 whole (16
// bytes each, row_ptr(r) 16-byte aligned): four 16-byte stores a lane rather than sixteen 4-byte
// ones, each row's 128 bytes in one store instruction (the 4-byte stores half-filled each 32-byte
// sector they touched). Every lane of the warp must call it.
template <class T, class RowPtr>
__device__ __forceinline__ void store_rows_x64(const float (&acc)[8][4], RowPtr row_ptr, int rows, int w) {
  const int lane = threadIdx.x & 31, first = (threadIdx.x >> 5) * 16 + (lane >> 2), qq = lane & 3;
  T* const top = first < rows ? row_ptr(first) : nullptr;  // each row's address once, not per column
  T* const bottom = first + 8 < rows ? row_ptr(first + 8) : nullptr;
  if constexpr (std::is_same_v<T, float>) {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int c = nt * 8 + 2 * qq;
      if (c >= w) continue;
      if (top) store2(top + c, acc[nt][0], acc[nt][1]);
      if (bottom) store2(bottom + c, acc[nt][2], acc[nt][3]);
    }
  } else {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int nt = 4 * half + qq, c = nt * 8;  // the n-tile this lane stores
#pragma unroll
      for (int row = 0; row < 2; ++row) {
        unsigned words[4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
          words[j] = pack2(from_f<T>(acc[4 * half + j][2 * row]), from_f<T>(acc[4 * half + j][2 * row + 1]));
        quad_transpose(words);
        T* const p = row == 0 ? top : bottom;
        if (p && c < w) *reinterpret_cast<uint4*>(p + c) = make_uint4(words[0], words[1], words[2], words[3]);
      }
    }
  }
}

// Scales a fragment's two rows (the thread's r0 and r0 + 8) by their decays.
__device__ __forceinline__ void scale_rows(float (&acc)[8][4], float top, float bottom) {
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    acc[nt][0] *= top, acc[nt][1] *= top;
    acc[nt][2] *= bottom, acc[nt][3] *= bottom;
  }
}

// b[t][i] = Σ_{τ≤t} g[τ][i] over the chunk's C rows and kTile columns from the raw tile graw
// [C][kLd]: Parts threads per column, each scanning C / Parts consecutive rows (C a multiple of
// Parts), then adding the totals of the column's earlier parts; Parts · kTile threads (128 or 256).
// Ends with a barrier.
template <int Parts = 2, class T>
__device__ __forceinline__ void cumulative_gates(const T* graw, float* b, int C) {
  static_assert(Parts == 2 || Parts == 4);
  constexpr int kMaxRows = kTile / Parts;
  const int i = threadIdx.x % kTile, part = threadIdx.x / kTile, rows = C / Parts, r0 = part * rows;
  float x[kMaxRows];  // the column's part in registers: all loads in flight, then the scan
#pragma unroll
  for (int t = 0; t < kMaxRows; ++t) x[t] = t < rows ? to_f(graw[(r0 + t) * kLd + i]) : 0.f;
#pragma unroll
  for (int t = 1; t < kMaxRows; ++t) x[t] += x[t - 1];
#pragma unroll
  for (int t = 0; t < kMaxRows; ++t)
    if (t < rows) b[(r0 + t) * kLd + i] = x[t];
  __syncthreads();
  float base = 0.f;  // the earlier parts' totals: their last rows, before any part adds to its own
  for (int p = 0; p < part; ++p) base += b[((p + 1) * rows - 1) * kLd + i];
  if constexpr (Parts > 2) __syncthreads();  // (with two parts, part 0 adds nothing)
  if (part > 0)
    for (int t = r0; t < r0 + rows; ++t) b[t * kLd + i] += base;
  __syncthreads();
}

// The keys of a chunk's earlier sub-chunks as seen from later sub-chunk I ≥ 1 (r = 16I its first
// token): K̃_I[τ][i] = k_τ[i]·e^{b_r[i]−b_τ[i]} for τ < r (every exponent ≤ 0), from the raw tile k
// and the cumulative gates b ([C][kLd]); K̃_I starts 8·I·(I−1) rows into kd. The forward's scores
// and the backward's dq take their cross-sub-chunk products through these. No barrier.
template <class T>
__device__ __forceinline__ void earlier_key_factors(const T* k, const float* b, T* kd, int nsub) {
  for (int I = 1; I < nsub; ++I) {
    T* kI = kd + 8 * I * (I - 1) * kLd;
    const int r = I * kSub;
    for (int idx = threadIdx.x; idx < r * kTile; idx += blockDim.x) {
      const int tau = idx / kTile, i = idx % kTile;
      kI[tau * kLd + i] = from_f<T>(to_f(k[tau * kLd + i]) * gate_exp<T>(b[r * kLd + i] - b[tau * kLd + i]));
    }
  }
}

// Index helpers over [batch, seq, heads, d].
struct Dims {
  int seq, heads, dk, dv, chunk, chunks;
  __device__ std::size_t row(int bh, int t) const {  // (batch, t, head) row of a [b, s, h, ·] tensor
    return (std::size_t(bh / heads) * seq + t) * heads + bh % heads;
  }
};

// Rows [0, rows) × columns [0, w) of a tile whose row r starts at row_ptr(r) (16-byte aligned) into
// dst [rows][ld] with 16-byte cp.async; columns [w, kTile) are zero-filled. w a multiple of 16.
template <class T, class RowPtr>
__device__ __forceinline__ void async_tile(T* dst, RowPtr row_ptr, int rows, int w, int ld = kLd) {
  constexpr int kVec = 16 / int(sizeof(T)), kPerRow = kTile / kVec;
  for (int idx = threadIdx.x; idx < rows * kPerRow; idx += blockDim.x) {
    const int r = idx / kPerRow, c = (idx % kPerRow) * kVec;
    const T* src = row_ptr(r) + (c < w ? c : 0);
    dev::cp_async16(dst + r * ld + c, src, c < w ? 16 : 0);  // 0: nothing read, 16 zero bytes written
  }
}

// FP32 tiles' row stride: rows 2 apart land 8 banks apart, so the m16n8k16 fragment reads of a
// warp (rows g + 2q…) touch 32 distinct banks.
constexpr int kLdF = kTile + 4;

// acc (a warp's 16 rows × 64 columns) += A(16 × 16 at k-step kk) · B[kk..kk+16)[0..64), with B a
// row-major [k][n] tile of stride kLd in shared memory, read by ldmatrix.trans: lanes 8m … 8m+7
// give rows kk + 8(m%2) … of columns 16p + 8(m/2), so registers 0-1 are n-tile 2p's fragment and
// 2-3 n-tile 2p+1's.
template <class T>
__device__ __forceinline__ void mma_x64_ldmatrix(float (&acc)[8][4], const unsigned (&a)[4], const T* b, int kk) {
  const int lane = threadIdx.x & 31, m = lane >> 3, r = lane & 7;
  const T* row = b + (kk + (m & 1) * 8 + r) * kLd + (m >> 1) * 8;
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    unsigned f[4];
    dev::ldmatrix_x4_trans(f, row + 16 * p);
    mma_frag<T>(acc[2 * p], a, f[0], f[1]);
    mma_frag<T>(acc[2 * p + 1], a, f[2], f[3]);
  }
}

// Side streams for launches that need nothing from the ones beside them (the forward's scores
// beside its states walk; the backward's state gradients beside the forward's recomputation), one
// per use and device, so that a use nested in another (the backward calls the forward's) has its
// own. Created on a device's first call, which is never a captured one; fork and join are events,
// so that a graph capture of the calling stream takes the side stream in.
struct SideStream {
  cudaStream_t stream;
  cudaEvent_t fork, join;
  // Work launched on `stream` after fork_from(main) follows what main had; main's work after
  // join_into(main) follows what `stream` had.
  void fork_from(cudaStream_t main) const {
    RAFTER_CUDA_CHECK(cudaEventRecord(fork, main));
    RAFTER_CUDA_CHECK(cudaStreamWaitEvent(stream, fork, 0));
  }
  void join_into(cudaStream_t main) const {
    RAFTER_CUDA_CHECK(cudaEventRecord(join, stream));
    RAFTER_CUDA_CHECK(cudaStreamWaitEvent(main, join, 0));
  }
};
enum class SideStreamUse { ForwardScores, BackwardStates };
inline SideStream side_stream(SideStreamUse use) {
  static PerDevice<SideStream> forward, backward;
  return (use == SideStreamUse::ForwardScores ? forward : backward).get([] {
    SideStream s{};
    RAFTER_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    RAFTER_CUDA_CHECK(cudaEventCreateWithFlags(&s.fork, cudaEventDisableTiming));
    RAFTER_CUDA_CHECK(cudaEventCreateWithFlags(&s.join, cudaEventDisableTiming));
    return s;
  });
}

// Opts a kernel in to `bytes` of dynamic shared memory once per device (outside any graph capture: the first
// call of a shape is the check's or the timing estimate's, never a captured one). The largest
// chunk (64) sets the bound, so that smaller chunks need no second call.
template <auto Kernel>
void allow_smem(int bytes) {
  static PerDevice<bool> opted_in;
  opted_in.get([&] {
    RAFTER_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    return true;
  });
}

}  // namespace rafter::workloads::cuda::gla_dev
