// The first, plain version of the chunked GLA forward (gla.hpp: gla_chunked_fwd_simple): the same
// three kernels as kernels_gla.cu (scores, states, outputs) with synchronous element-wise staging
// and a serial cumulative sum per column. Kept as the tests' second opinion on the pipelined
// kernels: the two share the scratch layout and the product tiles (gla_device.cuh), not the staging.
#include "gla.hpp"
#include "gla_device.cuh"

namespace rafter::workloads::cuda {
namespace {

using namespace gla_dev;

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

}  // namespace

void gla_chunked_fwd_simple(GlaType t, const void* q, const void* k, const void* v, const void* g, void* o,
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

}  // namespace rafter::workloads::cuda
