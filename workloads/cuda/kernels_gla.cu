// Gated linear attention kernels (gla.hpp). The chunked forward follows flash-linear-attention's
// structure, per (sequence, head) and chunk n of C tokens with in-chunk cumulative log-gates b_t:
//   A_tτ = Σ_i q_ti k_τi e^{b_ti − b_τi}  (τ ≤ t)                       gla_scores
//   h_{n+1} = diag(e^{b_C})·h_n + (K ∘ e^{b_C − b})ᵀ·V,  h_0 = 0          gla_states (sequential)
//   o_t = (q_t ∘ e^{b_t})·h_n + Σ_τ A_tτ v_τ                              gla_output
// The products are m16n8k16 tiles: BF16/FP16 operands on tensor cores (mma.sync, FP32
// accumulation); for FP32 storage the same tiles run as FMAs on CUDA cores (the fragment layout is
// kept, so one code path serves both). The scores split the chunk into sub-chunks of 16 tokens as
// the CPU kernel does: a pair in different sub-chunks factors through r, the first token of t's
// sub-chunk, as (q_t∘e^{b_t−b_r})·(k_τ∘e^{b_r−b_τ}) with both exponents ≤ 0; pairs within one
// sub-chunk take e^{b_t−b_τ} term by term. The states between chunks are stored (storage type,
// FP32 for FP32) so that the output kernel runs over all chunks at once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "cuda_util.hpp"
#include "gla.hpp"

namespace rafter::workloads::cuda {
namespace {

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
// FP32 keeps the precise exp (its check is 1e-5); the 16-bit paths round far coarser than __expf.
template <class T>
__device__ __forceinline__ float gate_exp(float x) {
  if constexpr (std::is_same_v<T, float>)
    return expf(x);
  else
    return __expf(x);
}

template <class T>
__device__ __forceinline__ unsigned pack2(T lo, T hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return unsigned(__bfloat16_as_ushort(lo)) | (unsigned(__bfloat16_as_ushort(hi)) << 16);
  else
    return unsigned(__half_as_ushort(lo)) | (unsigned(__half_as_ushort(hi)) << 16);
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
    const auto A = [&](int m, int k) { return a[m * ars + k * acs]; };
    const auto B = [&](int k, int n) { return b[k * brs + n * bcs]; };
    const unsigned a0 = pack2(A(g, 2 * q), A(g, 2 * q + 1)), a1 = pack2(A(g + 8, 2 * q), A(g + 8, 2 * q + 1));
    const unsigned a2 = pack2(A(g, 2 * q + 8), A(g, 2 * q + 9)),
                   a3 = pack2(A(g + 8, 2 * q + 8), A(g + 8, 2 * q + 9));
    const unsigned b0 = pack2(B(2 * q, g), B(2 * q + 1, g)), b1 = pack2(B(2 * q + 8, g), B(2 * q + 9, g));
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

// Index helpers over [batch, seq, heads, d].
struct Dims {
  int seq, heads, dk, dv, chunk, chunks;
  __device__ std::size_t row(int bh, int t) const {  // (batch, t, head) row of a [b, s, h, ·] tensor
    return (std::size_t(bh / heads) * seq + t) * heads + bh % heads;
  }
};

// The chunk's log-gates for columns [i0, i0+w) into b (C × kLd FP32, zero past w), then their
// cumulative sums along the chunk. Ends with a barrier.
template <class T>
__device__ void stage_cumulative_gates(const T* __restrict__ g, const Dims& d, int bh, int t0, int i0, int w,
                                       float* b) {
  for (int idx = threadIdx.x; idx < d.chunk * kTile; idx += blockDim.x) {
    const int t = idx / kTile, i = idx % kTile;
    b[t * kLd + i] = i < w ? to_f(g[d.row(bh, t0 + t) * d.dk + i0 + i]) : 0.f;
  }
  __syncthreads();
  if (threadIdx.x < kTile) {
    float run = 0.f;
    for (int t = 0; t < d.chunk; ++t) b[t * kLd + threadIdx.x] = run += b[t * kLd + threadIdx.x];
  }
  __syncthreads();
}

// ---- scores: grid (chunks, batch·heads) --------------------------------------------------------
template <class T>
__global__ void __launch_bounds__(kThreads)
    gla_scores(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ g,
               float* __restrict__ A, Dims d) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int C = d.chunk, nsub = C / kSub, n = blockIdx.x, bh = blockIdx.y, t0 = n * C;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* b = reinterpret_cast<float*>(smem);   // [C][kLd]
  float* qf = b + C * kLd;                     // [C][kLd]
  float* kf = qf + C * kLd;                    // [C][kLd]
  T* qd = reinterpret_cast<T*>(kf + C * kLd);  // [C][kLd]: q_t ∘ e^{b_t − b_r(t)}
  T* kd = qd + C * kLd;  // sub-chunk I ≥ 1: rows 8·I·(I−1) …, 16·I rows of k_τ ∘ e^{b_r − b_τ}
  // Off-diagonal tiles (I > J, 8 columns each): at most 12 for C = 64, three per warp.
  const int tiles = nsub * (nsub - 1);
  float acc[3][4] = {};
  // Diagonal pairs (t ≥ τ in one sub-chunk): 136 per sub-chunk, at most five per thread.
  constexpr int kPairs = kSub * (kSub + 1) / 2;
  float dacc[5] = {};
  for (int i0 = 0; i0 < d.dk; i0 += kTile) {
    const int w = min(kTile, d.dk - i0);
    __syncthreads();  // the previous slice is read
    for (int idx = threadIdx.x; idx < C * kTile; idx += blockDim.x) {
      const int t = idx / kTile, i = idx % kTile;
      const std::size_t at = d.row(bh, t0 + t) * d.dk + i0 + i;
      qf[t * kLd + i] = i < w ? to_f(q[at]) : 0.f;
      kf[t * kLd + i] = i < w ? to_f(k[at]) : 0.f;
    }
    stage_cumulative_gates(g, d, bh, t0, i0, w, b);
    for (int idx = threadIdx.x; idx < C * kTile; idx += blockDim.x) {
      const int t = idx / kTile, i = idx % kTile, r = t / kSub * kSub;
      qd[t * kLd + i] = from_f<T>(qf[t * kLd + i] * gate_exp<T>(b[t * kLd + i] - b[r * kLd + i]));
    }
    for (int I = 1; I < nsub; ++I) {
      T* kI = kd + 8 * I * (I - 1) * kLd;
      const int r = I * kSub;
      for (int idx = threadIdx.x; idx < r * kTile; idx += blockDim.x) {
        const int tau = idx / kTile, i = idx % kTile;
        kI[tau * kLd + i] = from_f<T>(kf[tau * kLd + i] * gate_exp<T>(b[r * kLd + i] - b[tau * kLd + i]));
      }
    }
    __syncthreads();
#pragma unroll
    for (int s = 0; s < 3; ++s) {
      const int tile = warp + 4 * s;
      if (tile >= tiles) break;
      // tile → (I, J, half): I > J, enumerated I-major.
      int I = 1, rest = tile / 2;
      while (rest >= I) rest -= I, ++I;
      const int J = rest, half = tile % 2;
      const T* a = qd + I * kSub * kLd;
      const T* bm = kd + (8 * I * (I - 1) + J * kSub + half * 8) * kLd;
      for (int kk = 0; kk < w; kk += 16) mma16(acc[s], a + kk, kLd, 1, bm + kk, 1, kLd);
    }
#pragma unroll
    for (int j = 0; j < 5; ++j) {
      const int p = threadIdx.x + j * kThreads;
      if (p >= nsub * kPairs) break;
      const int I = p / kPairs;
      int tl = 0, l = p % kPairs;
      while (l > tl) l -= ++tl;  // l-th pair of the triangle: row tl, column l
      const float *qt = qf + (I * kSub + tl) * kLd, *kt = kf + (I * kSub + l) * kLd;
      const float *bt = b + (I * kSub + tl) * kLd, *bk = b + (I * kSub + l) * kLd;
      float s = 0.f;
      for (int i = 0; i < w; ++i) s += qt[i] * kt[i] * gate_exp<T>(bt[i] - bk[i]);
      dacc[j] += s;
    }
  }
  float* An = A + (std::size_t(bh) * d.chunks + n) * C * C;
  for (int idx = threadIdx.x; idx < C * C; idx += blockDim.x)
    if (idx % C > idx / C) An[idx] = 0.f;
#pragma unroll
  for (int j = 0; j < 5; ++j) {
    const int p = threadIdx.x + j * kThreads;
    if (p >= nsub * kPairs) break;
    const int I = p / kPairs;
    int tl = 0, l = p % kPairs;
    while (l > tl) l -= ++tl;
    An[(I * kSub + tl) * C + I * kSub + l] = dacc[j];
  }
  const int gq = lane >> 2, qq = lane & 3;
#pragma unroll
  for (int s = 0; s < 3; ++s) {
    const int tile = warp + 4 * s;
    if (tile >= tiles) break;
    int I = 1, rest = tile / 2;
    while (rest >= I) rest -= I, ++I;
    const int row = I * kSub + gq, col = rest * kSub + (tile % 2) * 8 + 2 * qq;
    An[row * C + col] = acc[s][0];
    An[row * C + col + 1] = acc[s][1];
    An[(row + 8) * C + col] = acc[s][2];
    An[(row + 8) * C + col + 1] = acc[s][3];
  }
}

// ---- states: grid (dv tiles, dk tiles, batch·heads), sequential over chunks --------------------
// Warp w owns state rows [16w, 16w+16) of the block's 64×64 tile: eight 16×8 accumulators.
template <class T, class H>
__global__ void __launch_bounds__(kThreads) gla_states(const T* __restrict__ k, const T* __restrict__ v,
                                                       const T* __restrict__ g, H* __restrict__ h, Dims d) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int C = d.chunk, bh = blockIdx.z, j0 = blockIdx.x * kTile, i0 = blockIdx.y * kTile;
  const int wv = min(kTile, d.dv - j0), wk = min(kTile, d.dk - i0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, qq = lane & 3;
  float* b = reinterpret_cast<float*>(smem);  // [C][kLd]
  T* kd = reinterpret_cast<T*>(b + C * kLd);  // [C][kLd]: k_τ ∘ e^{b_C − b_τ}
  T* vs = kd + C * kLd;                       // [C][kLd]
  float acc[8][4] = {};
  const int r0 = warp * 16 + gq;  // this lane's state rows r0, r0 + 8 (tile-local)
  for (int n = 0; n < d.chunks; ++n) {
    H* hn = h + ((std::size_t(bh) * d.chunks + n) * d.dk + i0) * d.dv + j0;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int c = nt * 8 + 2 * qq;
      if (c >= wv) continue;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = r0 + 8 * half;
        if (r < wk) {
          hn[std::size_t(r) * d.dv + c] = from_f<H>(acc[nt][2 * half]);
          hn[std::size_t(r) * d.dv + c + 1] = from_f<H>(acc[nt][2 * half + 1]);
        }
      }
    }
    if (n + 1 == d.chunks) break;
    const int t0 = n * C;
    __syncthreads();  // the previous chunk's operands are read
    for (int idx = threadIdx.x; idx < C * kTile; idx += blockDim.x) {
      const int t = idx / kTile, j = idx % kTile;
      vs[t * kLd + j] = j < wv ? v[d.row(bh, t0 + t) * d.dv + j0 + j] : from_f<T>(0.f);
    }
    stage_cumulative_gates(g, d, bh, t0, i0, wk, b);
    const float* last = b + (C - 1) * kLd;
    for (int idx = threadIdx.x; idx < C * kTile; idx += blockDim.x) {
      const int t = idx / kTile, i = idx % kTile;
      const float kv = i < wk ? to_f(k[d.row(bh, t0 + t) * d.dk + i0 + i]) : 0.f;
      kd[t * kLd + i] = from_f<T>(kv * gate_exp<T>(last[i] - b[t * kLd + i]));
    }
    __syncthreads();
    const float decay0 = gate_exp<T>(last[r0]), decay1 = gate_exp<T>(last[r0 + 8]);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      acc[nt][0] *= decay0, acc[nt][1] *= decay0;
      acc[nt][2] *= decay1, acc[nt][3] *= decay1;
    }
    for (int kk = 0; kk < C; kk += 16)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        mma16(acc[nt], kd + kk * kLd + warp * 16, 1, kLd, vs + kk * kLd + nt * 8, kLd, 1);
  }
}

// ---- outputs: grid (dv tiles, chunks, batch·heads) ---------------------------------------------
// Warp w owns chunk rows [16w, 16w+16) (idle past C) and the block's 64 dv columns.
template <class T, class H>
__global__ void __launch_bounds__(kThreads)
    gla_output(const T* __restrict__ q, const T* __restrict__ v, const T* __restrict__ g,
               const H* __restrict__ h, const float* __restrict__ A, T* __restrict__ o, Dims d) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int C = d.chunk, j0 = blockIdx.x * kTile, n = blockIdx.y, bh = blockIdx.z, t0 = n * C;
  const int wv = min(kTile, d.dv - j0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, qq = lane & 3;
  float* b = reinterpret_cast<float*>(smem);  // [C][kLd]
  T* qd = reinterpret_cast<T*>(b + C * kLd);  // [C][kLd]: q_t ∘ e^{b_t}, later the scores
  T* hs = qd + C * kLd;                       // [64][kLd]: state slice, later V
  const bool active = warp * 16 < C;
  float acc[8][4] = {};
  const H* hn = h + (std::size_t(bh) * d.chunks + n) * d.dk * d.dv + j0;
  for (int i0 = 0; i0 < d.dk; i0 += kTile) {
    const int wk = min(kTile, d.dk - i0);
    __syncthreads();  // the previous slice is read
    for (int idx = threadIdx.x; idx < kTile * kTile; idx += blockDim.x) {
      const int i = idx / kTile, j = idx % kTile;
      hs[i * kLd + j] = from_f<T>(i < wk && j < wv ? float(to_f(hn[std::size_t(i0 + i) * d.dv + j])) : 0.f);
    }
    stage_cumulative_gates(g, d, bh, t0, i0, wk, b);
    for (int idx = threadIdx.x; idx < C * kTile; idx += blockDim.x) {
      const int t = idx / kTile, i = idx % kTile;
      const float qv = i < wk ? to_f(q[d.row(bh, t0 + t) * d.dk + i0 + i]) : 0.f;
      qd[t * kLd + i] = from_f<T>(qv * gate_exp<T>(b[t * kLd + i]));
    }
    __syncthreads();
    if (active)
      for (int kk = 0; kk < wk; kk += 16)
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
          mma16(acc[nt], qd + warp * 16 * kLd + kk, kLd, 1, hs + kk * kLd + nt * 8, kLd, 1);
  }
  __syncthreads();
  const float* An = A + (std::size_t(bh) * d.chunks + n) * C * C;
  for (int idx = threadIdx.x; idx < C * C; idx += blockDim.x)
    qd[(idx / C) * kLd + idx % C] = from_f<T>(An[idx]);
  for (int idx = threadIdx.x; idx < C * kTile; idx += blockDim.x) {
    const int t = idx / kTile, j = idx % kTile;
    hs[t * kLd + j] = j < wv ? v[d.row(bh, t0 + t) * d.dv + j0 + j] : from_f<T>(0.f);
  }
  __syncthreads();
  if (!active) return;
  for (int kk = 0; kk <= warp * 16; kk += 16)  // causal: scores past the warp's rows are zero
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
      mma16(acc[nt], qd + warp * 16 * kLd + kk, kLd, 1, hs + kk * kLd + nt * 8, kLd, 1);
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const int c = nt * 8 + 2 * qq;
    if (c >= wv) continue;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      T* dst = o + d.row(bh, t0 + warp * 16 + gq + 8 * half) * d.dv + j0 + c;
      dst[0] = from_f<T>(acc[nt][2 * half]);
      dst[1] = from_f<T>(acc[nt][2 * half + 1]);
    }
  }
}

// Opts a kernel in to `bytes` of dynamic shared memory once (outside any graph capture: the first
// call of a shape is the check's or the timing estimate's, never a captured one). The largest
// chunk (64) sets the bound, so that smaller chunks need no second call.
template <auto Kernel>
void allow_smem(int bytes) {
  static const bool done = [&] {
    RAFTER_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    return true;
  }();
  (void)done;
}

template <class T, class H>
void chunked_fwd(const T* q, const T* k, const T* v, const T* g, T* o, void* scratch, const GlaShape& s,
                 cudaStream_t stream) {
  const Dims d{int(s.seq), int(s.heads), int(s.dk), int(s.dv), int(s.chunk), int(s.seq / s.chunk)};
  const int C = d.chunk, nsub = C / kSub;
  const unsigned bh = unsigned(s.batch * s.heads);
  auto* A = static_cast<float*>(scratch);
  H* h = reinterpret_cast<H*>(A + std::size_t(bh) * d.chunks * C * C);
  const auto scores_bytes = [](int c, int subs) {
    return 3 * c * kLd * 4 + (c + 8 * subs * (subs - 1)) * kLd * int(sizeof(T));
  };
  const int scores_smem = scores_bytes(C, nsub);
  allow_smem<gla_scores<T>>(scores_bytes(64, 4));
  gla_scores<T><<<dim3(unsigned(d.chunks), bh), kThreads, scores_smem, stream>>>(q, k, g, A, d);
  RAFTER_CUDA_LAUNCH_CHECK("gla_scores");
  const unsigned v_tiles = unsigned((s.dv + kTile - 1) / kTile),
                 k_tiles = unsigned((s.dk + kTile - 1) / kTile);
  const int states_smem = C * kLd * (4 + 2 * int(sizeof(T)));
  allow_smem<gla_states<T, H>>(64 * kLd * (4 + 2 * int(sizeof(T))));
  gla_states<T, H><<<dim3(v_tiles, k_tiles, bh), kThreads, states_smem, stream>>>(k, v, g, h, d);
  RAFTER_CUDA_LAUNCH_CHECK("gla_states");
  const int output_smem = C * kLd * (4 + int(sizeof(T))) + kTile * kLd * int(sizeof(T));
  allow_smem<gla_output<T, H>>(64 * kLd * (4 + 2 * int(sizeof(T))));
  gla_output<T, H>
      <<<dim3(v_tiles, unsigned(d.chunks), bh), kThreads, output_smem, stream>>>(q, v, g, h, A, o, d);
  RAFTER_CUDA_LAUNCH_CHECK("gla_output");
}

// ---- decode --------------------------------------------------------------------------------------
// Block (split, sequence·head): state rows [split·rows, …), four dv columns per thread per pass;
// the state streams through once (read, decayed and updated, written), o's partial sums stay in
// registers. Every block writes its partial for every column.
template <class T>
__global__ void __launch_bounds__(kThreads)
    gla_decode_rows(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                    const T* __restrict__ g, const float* __restrict__ S, float* __restrict__ S_out,
                    float* __restrict__ part, int dk, int dv, int rows) {
  const int split = blockIdx.x, bh = blockIdx.y, bhs = gridDim.y;
  const int r0 = split * rows, r1 = min(dk, r0 + rows);
  for (int c4 = threadIdx.x; c4 < dv / 4; c4 += blockDim.x) {
    const T* vv = v + std::size_t(bh) * dv + 4 * c4;
    const float v0 = to_f(vv[0]), v1 = to_f(vv[1]), v2 = to_f(vv[2]), v3 = to_f(vv[3]);
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
    for (int i = r0; i < r1; ++i) {
      const std::size_t ki = std::size_t(bh) * dk + i;
      const float alpha = gate_exp<T>(to_f(g[ki])), kv = to_f(k[ki]), qv = to_f(q[ki]);
      const std::size_t at = (ki * dv) / 4 + c4;
      const float4 s = __ldcs(reinterpret_cast<const float4*>(S) + at);
      const float4 u = make_float4(fmaf(alpha, s.x, kv * v0), fmaf(alpha, s.y, kv * v1),
                                   fmaf(alpha, s.z, kv * v2), fmaf(alpha, s.w, kv * v3));
      __stcs(reinterpret_cast<float4*>(S_out) + at, u);
      acc.x = fmaf(qv, u.x, acc.x), acc.y = fmaf(qv, u.y, acc.y);
      acc.z = fmaf(qv, u.z, acc.z), acc.w = fmaf(qv, u.w, acc.w);
    }
    reinterpret_cast<float4*>(part + (std::size_t(split) * bhs + bh) * dv)[c4] = acc;
  }
}

template <class T>
__global__ void gla_decode_merge(const float* __restrict__ part, T* __restrict__ o, int dv, int splits) {
  const int bh = blockIdx.x, bhs = gridDim.x;
  for (int j = threadIdx.x; j < dv; j += blockDim.x) {
    float s = 0.f;
    for (int p = 0; p < splits; ++p) s += part[(std::size_t(p) * bhs + bh) * dv + j];
    o[std::size_t(bh) * dv + j] = from_f<T>(s);
  }
}

template <class T>
void decode_typed(const void* q, const void* k, const void* v, const void* g, const float* state_in, void* o,
                  float* state_out, float* partials, const GlaDecodePlan& p, std::int64_t bhs,
                  std::int64_t dk, std::int64_t dv, cudaStream_t stream) {
  gla_decode_rows<T><<<dim3(unsigned(p.splits), unsigned(bhs)), kThreads, 0, stream>>>(
      static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), static_cast<const T*>(g),
      state_in, state_out, partials, int(dk), int(dv), int(p.rows));
  RAFTER_CUDA_LAUNCH_CHECK("gla_decode_rows");
  gla_decode_merge<T>
      <<<unsigned(bhs), kThreads, 0, stream>>>(partials, static_cast<T*>(o), int(dv), int(p.splits));
  RAFTER_CUDA_LAUNCH_CHECK("gla_decode_merge");
}

}  // namespace

bool gla_chunked_supports(const GlaShape& s) {
  return s.dk > 0 && s.dk % 16 == 0 && s.dv > 0 && s.dv % 16 == 0 && s.chunk > 0 && s.chunk % kSub == 0 &&
         s.chunk <= 64 && s.seq > 0 && s.seq % s.chunk == 0;
}

std::size_t gla_chunked_scratch_bytes(const GlaShape& s, GlaType t) {
  const std::size_t chunks = std::size_t(s.batch * s.heads * (s.seq / s.chunk));
  const std::size_t state_elem = t == GlaType::F32 ? 4 : 2;
  return chunks * std::size_t(s.chunk * s.chunk) * 4 + chunks * std::size_t(s.dk * s.dv) * state_elem;
}

void gla_chunked_fwd(GlaType t, const void* q, const void* k, const void* v, const void* g, void* o,
                     void* scratch, const GlaShape& s, cudaStream_t stream) {
  switch (t) {
    case GlaType::BF16: {
      using T = __nv_bfloat16;
      return chunked_fwd<T, T>(static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
                               static_cast<const T*>(g), static_cast<T*>(o), scratch, s, stream);
    }
    case GlaType::F16: {
      using T = __half;
      return chunked_fwd<T, T>(static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
                               static_cast<const T*>(g), static_cast<T*>(o), scratch, s, stream);
    }
    default:
      return chunked_fwd<float, float>(static_cast<const float*>(q), static_cast<const float*>(k),
                                       static_cast<const float*>(v), static_cast<const float*>(g),
                                       static_cast<float*>(o), scratch, s, stream);
  }
}

bool gla_decode_supports(std::int64_t dk, std::int64_t dv) { return dk > 0 && dv > 0 && dv % 4 == 0; }

GlaDecodePlan gla_decode_plan(std::int64_t batch_heads, std::int64_t dk, int sms) {
  // Rows per block double while four blocks per SM remain: enough loads in flight, few partials.
  GlaDecodePlan p;
  const auto blocks = [&](std::int64_t rows) { return batch_heads * ((dk + rows - 1) / rows); };
  while (p.rows < 16 && p.rows < dk && blocks(2 * p.rows) >= 4 * std::int64_t(sms)) p.rows *= 2;
  p.splits = (dk + p.rows - 1) / p.rows;
  return p;
}

void gla_decode(GlaType t, const void* q, const void* k, const void* v, const void* g, const float* state_in,
                void* o, float* state_out, float* partials, const GlaDecodePlan& p, std::int64_t batch_heads,
                std::int64_t dk, std::int64_t dv, cudaStream_t stream) {
  switch (t) {
    case GlaType::BF16:
      return decode_typed<__nv_bfloat16>(q, k, v, g, state_in, o, state_out, partials, p, batch_heads, dk, dv,
                                         stream);
    case GlaType::F16:
      return decode_typed<__half>(q, k, v, g, state_in, o, state_out, partials, p, batch_heads, dk, dv,
                                  stream);
    default:
      return decode_typed<float>(q, k, v, g, state_in, o, state_out, partials, p, batch_heads, dk, dv,
                                 stream);
  }
}

}  // namespace rafter::workloads::cuda
