// Backward of the chunked GLA (gla.hpp: gla_chunked_bwd), the chunk form of the CPU kernel
// (workloads/cpu/kernels_gla_bwd_avx2.cpp; derivation in workloads/src/ops_gla.cpp). Per (sequence,
// head) and chunk n with in-chunk cumulative log-gates b_t (b_C the chunk's last), h_n the state
// entering chunk n and dS_n the gradient of the state leaving it:
//   gla_scores, gla_states (the forward's, kernels_gla.cu)   A_tτ, h_n
//   state gradients (sequential backward, FP32 registers; on a second stream beside the two above):
//                                                            dS_{n−1} = diag(e^{b_C})·dS_n + (Q∘e^{b})ᵀ·dO
//     16-bit storage: the forward's gla_states_tc walking backwards over its q∘e^b and dO (the
//     same recurrence; ncu at batch 8 × 2048 on the H100: gla_bwd_dstates 808 µs, states_tc 192);
//     FP32: gla_bwd_dstates
//   gla_bwd_dqk (grid dk tiles × chunks):  dA = dO·Vᵀ,
//     dq_t = e^{b_t}∘(do_t·h_nᵀ) + Σ_{τ≤t} dA_tτ·k_τ∘e^{b_t−b_τ}
//     dk_τ = e^{b_C−b_τ}∘(v_τ·dS_nᵀ) + Σ_{t≥τ} dA_tτ·q_t∘e^{b_t−b_τ}
//     and the in-chunk reverse sums of p = q∘dq − k∘dk (FP32, from the unrounded gradients)
//   gla_bwd_dv (grid dv tiles × chunks):   dv_τ = (k_τ∘e^{b_C−b_τ})·dS_n + Σ_{t≥τ} A_tτ·do_t
//     (16-bit: k_τ∘e^{b_C−b_τ} from the forward's gla_prepare)
//   gla_bwd_dg_scan, gla_bwd_dg:           dg_t = Σ_{τ≥t} p_τ (the chunks' suffixes, then one add)
// The dk×dv products are m16n8k16 tiles (mma.sync for BF16/FP16, FMAs for FP32; gla_device.cuh).
// The gate-decayed intra-chunk sums of dq and dk: sub-chunks apart on the product tiles through
// K̃/Q̃ factors (every exponent ≤ 0, as the forward's scores), the diagonal 16×16 blocks term by
// term on CUDA cores. Staging by 16-byte cp.async; only the state gradients' walk double-buffers
// (the dq/dk and dv kernels wait for each slice).
#include <algorithm>

#include "gla.hpp"
#include "gla_device.cuh"

namespace rafter::workloads::cuda {
namespace {

using namespace gla_dev;

// Rows [rows, kTile) of a [kTile][kLd] tile set to zero: a partial slice's K rows must not carry
// stale (or uninitialised) values into a product.
template <class T>
__device__ __forceinline__ void zero_rows(T* tile, int rows) {
  for (int idx = threadIdx.x + rows * kTile; idx < kTile * kTile; idx += blockDim.x)
    tile[(idx / kTile) * kLd + idx % kTile] = from_f<T>(0.f);
}

// ---- state gradients: grid (dv tiles, dk tiles, batch·heads), sequential backward over chunks ----
// Warp w owns rows [16w, 16w+16) of the block's 64×64 tile of dS; dS_n stored for every chunk.
// Chunk n−1's q, g, dO are in flight while chunk n updates the gradient (as the forward's states).
template <class T>
__global__ void __launch_bounds__(kThreads)
    gla_bwd_dstates(const T* __restrict__ q, const T* __restrict__ g, const T* __restrict__ dO,
                    T* __restrict__ dS, Dims d) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int C = d.chunk, bh = blockIdx.z, j0 = blockIdx.x * kTile, i0 = blockIdx.y * kTile, te = C * kLd;
  const int wv = min(kTile, d.dv - j0), wk = min(kTile, d.dk - i0);
  const int warp = threadIdx.x >> 5, gq = (threadIdx.x & 31) >> 2;
  T* raw = reinterpret_cast<T*>(smem);                // [2][q, g, dO][C][kLd]
  float* b = reinterpret_cast<float*>(raw + 6 * te);  // [C][kLd]
  T* qdT = reinterpret_cast<T*>(b + te);              // [kTile][kLd]: (q_t ∘ e^{b_t})ᵀ
  const auto stage = [&](int n) {
    T* base = raw + (n & 1) * 3 * te;
    const int t0 = n * C;
    async_tile(
        base, [&](int r) { return q + d.row(bh, t0 + r) * d.dk + i0; }, C, wk);
    async_tile(
        base + te, [&](int r) { return g + d.row(bh, t0 + r) * d.dk + i0; }, C, wk);
    async_tile(
        base + 2 * te, [&](int r) { return dO + d.row(bh, t0 + r) * d.dv + j0; }, C, wv);
  };
  float acc[8][4] = {};
  const int r0 = warp * 16 + gq;
  if (d.chunks > 1) stage(d.chunks - 1);
  dev::cp_async_commit();
  for (int n = d.chunks - 1; n >= 0; --n) {
    T* dSn = dS + ((std::size_t(bh) * d.chunks + n) * d.dk + i0) * d.dv + j0;
    store_rows_x64<T>(acc, [&](int r) { return dSn + std::size_t(r) * d.dv; }, wk, wv);
    if (n == 0) break;
    if (n - 1 >= 1) stage(n - 1);  // chunk 0's inputs update no stored gradient
    dev::cp_async_commit();
    dev::cp_async_wait<1>();
    __syncthreads();
    const T* qr = raw + (n & 1) * 3 * te;
    const T *gr = qr + te, *dor = gr + te;
    cumulative_gates(gr, b, C);
    for (int idx = threadIdx.x; idx < C * kTile; idx += blockDim.x) {
      const int i = idx / C, t = idx % C;
      qdT[i * kLd + t] = from_f<T>(to_f(qr[t * kLd + i]) * gate_exp<T>(b[t * kLd + i]));
    }
    __syncthreads();
    const float* last = b + (C - 1) * kLd;
    scale_rows(acc, gate_exp<T>(last[r0]), gate_exp<T>(last[r0 + 8]));
    mma_rows_x64(acc, qdT + warp * 16 * kLd, dor, 0, C);
    __syncthreads();  // this chunk's buffers and qdT are free
  }
}

// ---- dq, dk: grid (dk tiles, chunks, batch·heads) ----------------------------------------------
// Warp w owns chunk rows [16w, 16w+16) (idle past C) and the block's 64 dk columns; over the dv
// slices it accumulates dO·hᵀ, V·dSᵀ and dA = dO·Vᵀ, then adds the decayed intra-chunk sums.
template <class T>
__global__ void __launch_bounds__(kThreads, 2)
    gla_bwd_dqk(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                const T* __restrict__ g, const T* __restrict__ dO, const T* __restrict__ h,
                const T* __restrict__ dS, T* __restrict__ dq, T* __restrict__ dk, float* __restrict__ psum,
                float* __restrict__ ptot, Dims d) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int C = d.chunk, i0 = blockIdx.x * kTile, n = blockIdx.y, bh = blockIdx.z, t0 = n * C, te = C * kLd;
  const int wk = min(kTile, d.dk - i0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, qq = lane & 3;
  const bool active = warp * 16 < C;
  // Products: dO, V [C][kLd]; h, dS slices [kTile][kLd] as (dk row, dv column).
  T* dor = reinterpret_cast<T*>(smem);
  T* vr = dor + te;
  T* hs = vr + te;
  T* dss = hs + kTile * kLd;
  float aq[8][4] = {}, ak[8][4] = {}, aa[8][4] = {};
  const std::size_t state = (std::size_t(bh) * d.chunks + n) * d.dk * d.dv;
  for (int j0 = 0; j0 < d.dv; j0 += kTile) {
    const int wv = min(kTile, d.dv - j0);
    __syncthreads();  // the previous slice is read
    async_tile(
        dor, [&](int r) { return dO + d.row(bh, t0 + r) * d.dv + j0; }, C, wv);
    async_tile(
        vr, [&](int r) { return v + d.row(bh, t0 + r) * d.dv + j0; }, C, wv);
    async_tile(
        hs, [&](int r) { return h + state + std::size_t(i0 + r) * d.dv + j0; }, wk, wv);
    async_tile(
        dss, [&](int r) { return dS + state + std::size_t(i0 + r) * d.dv + j0; }, wk, wv);
    dev::cp_async_commit();
    zero_rows(hs, wk);
    zero_rows(dss, wk);
    dev::cp_async_wait<0>();
    __syncthreads();
    if (!active) continue;
    const T *dow = dor + warp * 16 * kLd, *vw = vr + warp * 16 * kLd;
    for (int kk = 0; kk < wv; kk += 16)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        mma16(aq[nt], dow + kk, kLd, 1, hs + nt * 8 * kLd + kk, 1, kLd);
        mma16(ak[nt], vw + kk, kLd, 1, dss + nt * 8 * kLd + kk, 1, kLd);
        if (nt * 8 < C) mma16(aa[nt], dow + kk, kLd, 1, vr + nt * 8 * kLd + kk, 1, kLd);
      }
  }
  __syncthreads();  // the product operands are free: the same memory holds the chunk's q, k, g
  T* qr = reinterpret_cast<T*>(smem);
  T* kr = qr + te;
  T* gr = kr + te;
  float* b = reinterpret_cast<float*>(gr + te);
  float* dAs = b + te;
  float* ps = dAs + te;
  // The off-diagonal sub-chunk blocks' gated factors (every exponent ≤ 0), sub-chunk I ≥ 1's
  // K̃_I[τ] = k_τ∘e^{b_{16I}−b_τ} (τ < 16I; earlier_key_factors) and sub-chunk J < last's
  // Q̃_J[t] = q_t∘e^{b_t−b_{16J+15}} (t > 16J+15), then dA in the storage type: 16-bit storage
  // keeps it where the raw gates were, FP32 reads dAs itself.
  T* kd = reinterpret_cast<T*>(ps + te);
  T* qd = kd + 8 * (C / kSub) * (C / kSub - 1) * kLd;
  T* dAt = sizeof(T) == 4 ? reinterpret_cast<T*>(dAs) : gr;
  async_tile(
      qr, [&](int r) { return q + d.row(bh, t0 + r) * d.dk + i0; }, C, wk);
  async_tile(
      kr, [&](int r) { return k + d.row(bh, t0 + r) * d.dk + i0; }, C, wk);
  async_tile(
      gr, [&](int r) { return g + d.row(bh, t0 + r) * d.dk + i0; }, C, wk);
  dev::cp_async_commit();
  if (active)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
      if (nt * 8 < C)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          float* dst = dAs + (warp * 16 + gq + 8 * half) * kLd + nt * 8 + 2 * qq;
          dst[0] = aa[nt][2 * half];
          dst[1] = aa[nt][2 * half + 1];
        }
  dev::cp_async_wait<0>();
  __syncthreads();
  cumulative_gates(gr, b, C);  // ends with a barrier: dAs is complete too
  const int nsub = C / kSub;
  earlier_key_factors(kr, b, kd, nsub);
  for (int J = 0, rows0 = 0; J + 1 < nsub; rows0 += C - (J + 1) * kSub, ++J) {
    T* qJ = qd + rows0 * kLd;
    const int e = J * kSub + kSub - 1;
    for (int idx = threadIdx.x; idx < (C - e - 1) * kTile; idx += blockDim.x) {
      const int t = e + 1 + idx / kTile, i = idx % kTile;
      qJ[(t - e - 1) * kLd + i] =
          from_f<T>(to_f(qr[t * kLd + i]) * gate_exp<T>(b[t * kLd + i] - b[e * kLd + i]));
    }
  }
  if constexpr (sizeof(T) == 2)
    for (int idx = threadIdx.x; idx < C * C; idx += blockDim.x) {
      const int t = idx / C, tau = idx % C;
      dAt[t * kLd + tau] = from_f<T>(dAs[t * kLd + tau]);
    }
  __syncthreads();
  if (active) {
    // Warp w's rows are sub-chunk w (kSub = 16): rows rs … re.
    const int I = warp, rs = I * kSub, re = rs + kSub - 1;
    const float* last = b + (C - 1) * kLd;
    // f(n-tile, fragment element, row, column) over this lane's 32 fragment elements.
    const auto each = [&](auto&& f) {
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) f(nt, 2 * half + e, rs + gq + 8 * half, nt * 8 + 2 * qq + e);
    };
    // The inter-chunk terms' gates: dq_t's e^{b_t}, dk_τ's e^{b_C−b_τ}.
    each([&](int nt, int x, int r, int c) {
      aq[nt][x] *= gate_exp<T>(b[r * kLd + c]);
      ak[nt][x] *= gate_exp<T>(last[c] - b[r * kLd + c]);
    });
    // Earlier sub-chunks' part of dq: e^{b_t−b_rs}∘(dA[t, < rs]·K̃_I); later sub-chunks' part of
    // dk: e^{b_re−b_τ}∘(dA[> re, τ]ᵀ·Q̃_I). Tensor-core tiles (FMAs for FP32).
    float off[8][4];
#pragma unroll
    for (int side = 0; side < 2; ++side) {
      if (side == 0 ? I == 0 : I + 1 == nsub) continue;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) off[nt][0] = off[nt][1] = off[nt][2] = off[nt][3] = 0.f;
      if (side == 0) {
        const T* kI = kd + 8 * I * (I - 1) * kLd;
        for (int kk = 0; kk < rs; kk += 16)
#pragma unroll
          for (int nt = 0; nt < 8; ++nt)
            mma16(off[nt], dAt + rs * kLd + kk, kLd, 1, kI + kk * kLd + nt * 8, kLd, 1);
      } else {
        // Q̃_I's rows begin after the earlier sub-chunks' (C − 16(J+1) rows each, J < I).
        const T* qI = qd + (I * C - 8 * I * (I + 1)) * kLd;
        for (int kk = 0; kk < C - re - 1; kk += 16)
#pragma unroll
          for (int nt = 0; nt < 8; ++nt)
            mma16(off[nt], dAt + (re + 1 + kk) * kLd + rs, 1, kLd, qI + kk * kLd + nt * 8, kLd, 1);
      }
      each([&](int nt, int x, int r, int c) {
        if (side == 0)
          aq[nt][x] += off[nt][x] * gate_exp<T>(b[r * kLd + c] - b[rs * kLd + c]);
        else
          ak[nt][x] += off[nt][x] * gate_exp<T>(b[re * kLd + c] - b[r * kLd + c]);
      });
    }
    // The diagonal block term by term (exact FP32 dA).
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = rs + gq + 8 * half;  // dq's token t and dk's token τ
      float br[16];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) br[2 * nt + e] = b[r * kLd + nt * 8 + 2 * qq + e];
      for (int tau = rs; tau <= r; ++tau) {  // dq_r += Σ_{rs≤τ≤r} dA_rτ k_τ e^{b_r − b_τ}
        const float a = dAs[r * kLd + tau];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          const int c = nt * 8 + 2 * qq;
          const float2 kv = load2(kr + tau * kLd + c);
          const float2 bt = *reinterpret_cast<const float2*>(b + tau * kLd + c);
          aq[nt][2 * half] += a * kv.x * gate_exp<T>(br[2 * nt] - bt.x);
          aq[nt][2 * half + 1] += a * kv.y * gate_exp<T>(br[2 * nt + 1] - bt.y);
        }
      }
      for (int t = r; t <= re; ++t) {  // dk_r += Σ_{r≤t≤re} dA_tr q_t e^{b_t − b_r}
        const float a = dAs[t * kLd + r];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          const int c = nt * 8 + 2 * qq;
          const float2 qv = load2(qr + t * kLd + c);
          const float2 bt = *reinterpret_cast<const float2*>(b + t * kLd + c);
          ak[nt][2 * half] += a * qv.x * gate_exp<T>(bt.x - br[2 * nt]);
          ak[nt][2 * half + 1] += a * qv.y * gate_exp<T>(bt.y - br[2 * nt + 1]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int c = nt * 8 + 2 * qq;
        const float2 qv = load2(qr + r * kLd + c), kv = load2(kr + r * kLd + c);
        ps[r * kLd + c] = qv.x * aq[nt][2 * half] - kv.x * ak[nt][2 * half];
        ps[r * kLd + c + 1] = qv.y * aq[nt][2 * half + 1] - kv.y * ak[nt][2 * half + 1];
        if (c >= wk) continue;
        const std::size_t at = d.row(bh, t0 + r) * d.dk + i0 + c;
        store2(dq + at, aq[nt][2 * half], aq[nt][2 * half + 1]);
        store2(dk + at, ak[nt][2 * half], ak[nt][2 * half + 1]);
      }
    }
  }
  __syncthreads();
  if (threadIdx.x < wk) {  // in-chunk reverse sums of p; the chunk's total for the suffixes
    const int i = threadIdx.x;
    float run = 0.f;
    float* col = psum + (std::size_t(bh) * d.seq + t0) * d.dk + i0 + i;
    for (int t = C - 1; t >= 0; --t) {
      run += ps[t * kLd + i];
      col[std::size_t(t) * d.dk] = run;
    }
    ptot[(std::size_t(bh) * d.chunks + n) * d.dk + i0 + i] = run;
  }
}

// ---- dv: grid (dv tiles, chunks, batch·heads) --------------------------------------------------
// Warp w owns chunk rows [16w, 16w+16) (idle past C) and the block's 64 dv columns. With g null, k
// is already K∘e^{b_C−b} (the forward's gla_prepare, 16-bit storage): no gates here.
template <class T>
__global__ void __launch_bounds__(kThreads)
    gla_bwd_dv(const T* __restrict__ k, const T* __restrict__ g, const T* __restrict__ dO,
               const T* __restrict__ dS, const float* __restrict__ A, T* __restrict__ dv, Dims d) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int C = d.chunk, j0 = blockIdx.x * kTile, n = blockIdx.y, bh = blockIdx.z, t0 = n * C, te = C * kLd;
  const int wv = min(kTile, d.dv - j0);
  const int warp = threadIdx.x >> 5;
  const bool active = warp * 16 < C;
  float* b = reinterpret_cast<float*>(smem);  // [C][kLd]
  T* kr = reinterpret_cast<T*>(b + te);       // [C][kLd]: k, then k_τ ∘ e^{b_C − b_τ}; later Aᵀ
  T* gr = kr + te;                            // [C][kLd]; later dO
  T* dss = gr + te;                           // [kTile][kLd]: dS slice (dk row, dv column)
  float acc[8][4] = {};
  const T* dSn = dS + (std::size_t(bh) * d.chunks + n) * d.dk * d.dv + j0;
  for (int i0 = 0; i0 < d.dk; i0 += kTile) {
    const int wk = min(kTile, d.dk - i0);
    __syncthreads();  // the previous slice is read
    if (g) {
      async_tile(
          kr, [&](int r) { return k + d.row(bh, t0 + r) * d.dk + i0; }, C, wk);
      async_tile(
          gr, [&](int r) { return g + d.row(bh, t0 + r) * d.dk + i0; }, C, wk);
    } else {  // k̃'s layout: [batch·heads, seq, dk]
      async_tile(
          kr, [&](int r) { return k + (std::size_t(bh) * d.seq + t0 + r) * d.dk + i0; }, C, wk);
    }
    async_tile(
        dss, [&](int r) { return dSn + std::size_t(i0 + r) * d.dv; }, wk, wv);
    dev::cp_async_commit();
    zero_rows(dss, wk);
    dev::cp_async_wait<0>();
    __syncthreads();
    if (g) {
      cumulative_gates(gr, b, C);
      const float* last = b + (C - 1) * kLd;
      for (int idx = threadIdx.x; idx < C * kTile; idx += blockDim.x) {
        const int t = idx / kTile, i = idx % kTile;
        kr[t * kLd + i] = from_f<T>(to_f(kr[t * kLd + i]) * gate_exp<T>(last[i] - b[t * kLd + i]));
      }
      __syncthreads();
    }
    if (active) mma_rows_x64(acc, kr + warp * 16 * kLd, dss, 0, wk);
  }
  __syncthreads();
  async_tile(
      gr, [&](int r) { return dO + d.row(bh, t0 + r) * d.dv + j0; }, C, wv);
  dev::cp_async_commit();
  const float* An = A + (std::size_t(bh) * d.chunks + n) * C * C;
  for (int idx = threadIdx.x; idx < C * C; idx += blockDim.x) {  // Aᵀ: row τ, column t
    const int t = idx / C, tau = idx % C;
    kr[tau * kLd + t] = from_f<T>(An[idx]);
  }
  dev::cp_async_wait<0>();
  __syncthreads();
  if (!active) return;
  mma_rows_x64(acc, kr + warp * 16 * kLd, gr, warp * 16, C);  // causal: A_tτ = 0 for t < τ
  store_rows_x64<T>(acc, [&](int r) { return dv + d.row(bh, t0 + r) * d.dv + j0; }, C, wv);
}

// ---- dg ------------------------------------------------------------------------------------------
// The chunk totals of p turned, in place, into the sums over all later chunks: thread per (b·h, i).
__global__ void gla_bwd_dg_scan(float* __restrict__ ptot, int chunks, int dk, int columns) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= columns) return;
  float* p = ptot + std::size_t(col / dk) * chunks * dk + col % dk;
  float run = 0.f;
  for (int n = chunks - 1; n >= 0; --n) {
    const float x = p[std::size_t(n) * dk];
    p[std::size_t(n) * dk] = run;
    run += x;
  }
}

// dg = the in-chunk reverse sum + the later chunks' sum, rounded once: thread per element.
template <class T>
__global__ void gla_bwd_dg(const float* __restrict__ psum, const float* __restrict__ ptot, T* __restrict__ dg,
                           Dims d, std::size_t elements) {
  const std::size_t at = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (at >= elements) return;
  const int i = int(at % d.dk);
  const std::size_t row = at / d.dk;  // (b·h)·seq + t
  const int t = int(row % d.seq), bh = int(row / d.seq);
  const float x = psum[at] + ptot[(std::size_t(bh) * d.chunks + t / d.chunk) * d.dk + i];
  dg[d.row(bh, t) * d.dk + i] = from_f<T>(x);
}

int dstates_smem_bytes(int C, int elem) { return C * kLd * (4 + 6 * elem) + kTile * kLd * elem; }
int dqk_smem_bytes(int C, int elem) {  // the products' operands; or q, k, g, b, dA, p, K̃ and Q̃
  const int nsub = C / kSub;
  return std::max((2 * C + 2 * kTile) * kLd * elem,
                  C * kLd * (3 * elem + 12) + 16 * nsub * (nsub - 1) * kLd * elem);
}
int dv_smem_bytes(int C, int elem) { return C * kLd * (4 + 2 * elem) + kTile * kLd * elem; }

struct BwdScratch {
  float* A;
  void* h;
  void* k_decayed;  // the forward's K∘e^{b_C−b} (16-bit storage; empty for FP32)
  void* dS;
  float *psum, *ptot;
};
BwdScratch carve(void* scratch, const GlaShape& s, GlaType t) {
  const std::size_t bh = std::size_t(s.batch * s.heads), chunks = std::size_t(s.seq / s.chunk);
  const std::size_t states = bh * chunks * std::size_t(s.dk * s.dv) * (t == GlaType::F32 ? 4 : 2);
  auto* base = static_cast<unsigned char*>(scratch);
  const GlaFwdScratchLayout fwd = gla_fwd_scratch_layout(s, t);
  BwdScratch r{};
  r.A = reinterpret_cast<float*>(base + fwd.scores);
  r.h = base + fwd.states;
  r.k_decayed = base + fwd.k_decayed;
  r.dS = base + fwd.end;  // after the forward's scratch
  r.psum = reinterpret_cast<float*>(static_cast<unsigned char*>(r.dS) + states);
  r.ptot = r.psum + bh * std::size_t(s.seq * s.dk);
  return r;
}

template <class T>
void chunked_bwd(GlaType type, const T* q, const T* k, const T* v, const T* g, const T* dO, T* dq, T* dk, T* dv,
                 T* dg, void* scratch, const GlaShape& s, cudaStream_t stream) {
  const BwdScratch w = carve(scratch, s, type);
  const Dims d{int(s.seq), int(s.heads), int(s.dk), int(s.dv), int(s.chunk), int(s.seq / s.chunk)};
  const int C = d.chunk, e = int(sizeof(T));
  const unsigned bh = unsigned(s.batch * s.heads);
  const unsigned v_tiles = unsigned((s.dv + kTile - 1) / kTile),
                 k_tiles = unsigned((s.dk + kTile - 1) / kTile);
  const T* h = static_cast<const T*>(w.h);
  T* dS = static_cast<T*>(w.dS);
  if constexpr (sizeof(T) == 2) {
    // The state gradients by the forward's states kernel walking backwards over its q∘e^b and dO,
    // beside the forward's states walk (both a block per 64×64 state tile, under one wave at
    // batch 1).
    gla_chunked_scores_states(type, q, k, v, g, scratch, s, stream, dO, dS);
  } else {
    // FP32: the state gradients need nothing from the forward's launches; the two sequential
    // walks run side by side.
    const SideStream side = side_stream(SideStreamUse::BackwardStates);
    allow_smem<gla_bwd_dstates<T>>(dstates_smem_bytes(64, e));
    side.fork_from(stream);
    gla_bwd_dstates<T>
        <<<dim3(v_tiles, k_tiles, bh), kThreads, dstates_smem_bytes(C, e), side.stream>>>(q, g, dO, dS, d);
    RAFTER_CUDA_LAUNCH_CHECK("gla_bwd_dstates");
    gla_chunked_scores_states(type, q, k, v, g, scratch, s, stream);
    side.join_into(stream);
  }
  allow_smem<gla_bwd_dqk<T>>(dqk_smem_bytes(64, e));
  gla_bwd_dqk<T><<<dim3(k_tiles, unsigned(d.chunks), bh), kThreads, dqk_smem_bytes(C, e), stream>>>(
      q, k, v, g, dO, h, dS, dq, dk, w.psum, w.ptot, d);
  RAFTER_CUDA_LAUNCH_CHECK("gla_bwd_dqk");
  allow_smem<gla_bwd_dv<T>>(dv_smem_bytes(64, e));
  // 16-bit: dv's K∘e^{b_C−b} is the forward's gla_prepare's (scratch).
  const T* kd = sizeof(T) == 2 ? static_cast<const T*>(w.k_decayed) : k;
  gla_bwd_dv<T><<<dim3(v_tiles, unsigned(d.chunks), bh), kThreads, dv_smem_bytes(C, e), stream>>>(
      kd, sizeof(T) == 2 ? nullptr : g, dO, dS, w.A, dv, d);
  RAFTER_CUDA_LAUNCH_CHECK("gla_bwd_dv");
  const int columns = int(bh) * d.dk;
  gla_bwd_dg_scan<<<unsigned((columns + 127) / 128), 128, 0, stream>>>(w.ptot, d.chunks, d.dk, columns);
  RAFTER_CUDA_LAUNCH_CHECK("gla_bwd_dg_scan");
  const std::size_t elements = std::size_t(bh) * std::size_t(s.seq * s.dk);
  gla_bwd_dg<T><<<unsigned((elements + 255) / 256), 256, 0, stream>>>(w.psum, w.ptot, dg, d, elements);
  RAFTER_CUDA_LAUNCH_CHECK("gla_bwd_dg");
}

}  // namespace

std::size_t gla_chunked_bwd_scratch_bytes(const GlaShape& s, GlaType t) {
  const std::size_t bh = std::size_t(s.batch * s.heads), chunks = std::size_t(s.seq / s.chunk);
  const std::size_t states = bh * chunks * std::size_t(s.dk * s.dv) * (t == GlaType::F32 ? 4 : 2);
  return gla_chunked_scratch_bytes(s, t) + states + bh * std::size_t(s.seq * s.dk) * 4 +
         bh * chunks * std::size_t(s.dk) * 4;
}

void gla_chunked_bwd(GlaType t, const void* q, const void* k, const void* v, const void* g, const void* dO,
                     void* dq, void* dk, void* dv, void* dg, void* scratch, const GlaShape& s,
                     cudaStream_t stream) {
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    chunked_bwd<T>(t, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
                   static_cast<const T*>(g), static_cast<const T*>(dO), static_cast<T*>(dq), static_cast<T*>(dk),
                   static_cast<T*>(dv), static_cast<T*>(dg), scratch, s, stream);
  };
  switch (t) {
    case GlaType::BF16:
      return run(__nv_bfloat16{});
    case GlaType::F16:
      return run(__half{});
    default:
      return run(0.f);
  }
}

}  // namespace rafter::workloads::cuda
