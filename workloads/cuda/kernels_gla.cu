// Gated linear attention kernels (gla.hpp). The chunked forward follows flash-linear-attention's
// structure, per (sequence, head) and chunk n of C tokens with in-chunk cumulative log-gates b_t:
//   A_tτ = Σ_i q_ti k_τi e^{b_ti − b_τi}  (τ ≤ t)                       gla_scores
//   h_{n+1} = diag(e^{b_C})·h_n + (K ∘ e^{b_C − b})ᵀ·V,  h_0 = 0          gla_states (sequential)
//   o_t = (q_t ∘ e^{b_t})·h_n + Σ_τ A_tτ v_τ                              gla_output
// The products are m16n8k16 tiles (gla_device.cuh): BF16/FP16 operands on tensor cores (mma.sync,
// FP32 accumulation); for FP32 storage the same tiles run as FMAs on CUDA cores. The scores split
// the chunk into sub-chunks of 16 tokens as the CPU kernel does: a pair in different sub-chunks
// factors through r, the first token of t's sub-chunk, as (q_t∘e^{b_t−b_r})·(k_τ∘e^{b_r−b_τ}) with
// both exponents ≤ 0; pairs within one sub-chunk take e^{b_t−b_τ} term by term. The states between
// chunks are stored (storage type) so that the output kernel runs over all chunks at once.
// BF16/FP16 storage: gla_prepare computes the gates' terms once (q∘e^b, K∘e^{b_C−b}, e^{b_C}), and
// gla_states_tc / gla_output_tc take their fragments straight from them by ldmatrix; the scores run
// on a side stream beside the states walk. FP32 storage keeps gla_states / gla_output, which scan
// the gates themselves.
// Tiles reach shared memory by 16-byte cp.async; the scores' dk slices and the states' chunks are
// double-buffered (the next one in flight while this one is used); the cumulative gates take two
// threads per column.
#include <algorithm>

#include "gla.hpp"
#include "gla_device.cuh"

namespace rafter::workloads::cuda {
namespace {

using namespace gla_dev;

// The l-th pair (row, column) of a 16×16 lower triangle, row-major.
__device__ __forceinline__ void triangle_pair(int l, int& row, int& col) {
  row = 0;
  while (l > row) l -= ++row;
  col = l;
}

// Off-diagonal score tile `tile` (8 columns) → sub-chunks I > J and its half of J's 16 columns.
__device__ __forceinline__ void tile_blocks(int tile, int& I, int& J) {
  I = 1;
  J = tile / 2;
  while (J >= I) J -= I, ++I;
}

// ---- scores: grid (chunks, batch·heads), 8 warps ------------------------------------------------
// Eight warps rather than the other kernels' four: with 16-bit storage two blocks fit an SM by
// shared memory either way (FP32: one), and the diagonal's exp-per-term loop, a chain of shared
// loads, exps and FMAs, waits on latency with two warps a scheduler (ncu at batch 8: 275 µs against
// fla's intra-chunk kernel's 217). Its 544 pairs take 3 rounds of 256 threads instead of 5 of 128.
// The launch bound's 2 blocks an SM allow 128 registers (without it ptxas took 64 and spilled FP32).
constexpr int kScoreWarps = 8, kScoreThreads = 32 * kScoreWarps;
template <class T>
__global__ void __launch_bounds__(kScoreThreads, 2)
    gla_scores(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ g,
               float* __restrict__ A, Dims d) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int C = d.chunk, nsub = C / kSub, n = blockIdx.x, bh = blockIdx.y, t0 = n * C, te = C * kLd;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  T* raw = reinterpret_cast<T*>(smem);                // [2][q, k, g][C][kLd]
  float* b = reinterpret_cast<float*>(raw + 6 * te);  // [C][kLd]
  T* qd = reinterpret_cast<T*>(b + te);               // [C][kLd]: q_t ∘ e^{b_t − b_r(t)}
  T* kd = qd + te;  // sub-chunk I ≥ 1: rows 8·I·(I−1) …, 16·I rows of k_τ ∘ e^{b_r − b_τ}
  const int slices = (d.dk + kTile - 1) / kTile;
  const auto stage = [&](int s) {
    T* base = raw + (s & 1) * 3 * te;
    const int i0 = s * kTile, w = min(kTile, d.dk - i0);
    async_tile(
        base, [&](int r) { return q + d.row(bh, t0 + r) * d.dk + i0; }, C, w);
    async_tile(
        base + te, [&](int r) { return k + d.row(bh, t0 + r) * d.dk + i0; }, C, w);
    async_tile(
        base + 2 * te, [&](int r) { return g + d.row(bh, t0 + r) * d.dk + i0; }, C, w);
  };
  // Off-diagonal tiles (I > J, 8 columns each): at most 12 for C = 64, two per warp.
  const int tiles = nsub * (nsub - 1);
  constexpr int kTilesPerWarp = (12 + kScoreWarps - 1) / kScoreWarps;
  float acc[kTilesPerWarp][4] = {};
  // Diagonal pairs (t ≥ τ in one sub-chunk): 136 per sub-chunk, at most three per thread.
  constexpr int kPairs = kSub * (kSub + 1) / 2,
                kPairRounds = (4 * kPairs + kScoreThreads - 1) / kScoreThreads;
  float dacc[kPairRounds] = {};
  stage(0);
  dev::cp_async_commit();
  for (int s = 0; s < slices; ++s) {
    const int w = min(kTile, d.dk - s * kTile);
    if (s + 1 < slices) stage(s + 1);
    dev::cp_async_commit();
    dev::cp_async_wait<1>();
    __syncthreads();
    const T* qr = raw + (s & 1) * 3 * te;
    const T *kr = qr + te, *gr = kr + te;
    cumulative_gates<kScoreWarps / 2>(gr, b, C);
    for (int idx = threadIdx.x; idx < C * kTile; idx += blockDim.x) {
      const int t = idx / kTile, i = idx % kTile, r = t / kSub * kSub;
      qd[t * kLd + i] = from_f<T>(to_f(qr[t * kLd + i]) * gate_exp<T>(b[t * kLd + i] - b[r * kLd + i]));
    }
    earlier_key_factors(kr, b, kd, nsub);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTilesPerWarp; ++j) {
      const int tile = warp + kScoreWarps * j;
      if (tile >= tiles) break;
      int I, J;
      tile_blocks(tile, I, J);
      const T* a = qd + I * kSub * kLd;
      const T* bm = kd + (8 * I * (I - 1) + J * kSub + (tile % 2) * 8) * kLd;
      for (int kk = 0; kk < w; kk += 16) mma16(acc[j], a + kk, kLd, 1, bm + kk, 1, kLd);
    }
#pragma unroll
    for (int j = 0; j < kPairRounds; ++j) {
      const int p = threadIdx.x + j * kScoreThreads;
      if (p >= nsub * kPairs) break;
      const int I = p / kPairs;
      int tl, l;
      triangle_pair(p % kPairs, tl, l);
      const T *qt = qr + (I * kSub + tl) * kLd, *kt = kr + (I * kSub + l) * kLd;
      const float *bt = b + (I * kSub + tl) * kLd, *bk = b + (I * kSub + l) * kLd;
      float s0 = 0.f, s1 = 0.f;  // even and odd columns: pairs of loads, two chains
#pragma unroll 4
      for (int i = 0; i < w; i += 2) {
        const float2 qv = load2(qt + i), kv = load2(kt + i);
        const float2 bq = *reinterpret_cast<const float2*>(bt + i),
                     bkv = *reinterpret_cast<const float2*>(bk + i);
        s0 += qv.x * kv.x * gate_exp<T>(bq.x - bkv.x);
        s1 += qv.y * kv.y * gate_exp<T>(bq.y - bkv.y);
      }
      dacc[j] += s0 + s1;
    }
    __syncthreads();  // this slice's buffers are free for slice s + 2
  }
  float* An = A + (std::size_t(bh) * d.chunks + n) * C * C;
  for (int idx = threadIdx.x; idx < C * C; idx += blockDim.x)
    if (idx % C > idx / C) An[idx] = 0.f;
#pragma unroll
  for (int j = 0; j < kPairRounds; ++j) {
    const int p = threadIdx.x + j * kScoreThreads;
    if (p >= nsub * kPairs) break;
    const int I = p / kPairs;
    int tl, l;
    triangle_pair(p % kPairs, tl, l);
    An[(I * kSub + tl) * C + I * kSub + l] = dacc[j];
  }
  const int gq = lane >> 2, qq = lane & 3;
#pragma unroll
  for (int j = 0; j < kTilesPerWarp; ++j) {
    const int tile = warp + kScoreWarps * j;
    if (tile >= tiles) break;
    int I, J;
    tile_blocks(tile, I, J);
    const int row = I * kSub + gq, col = J * kSub + (tile % 2) * 8 + 2 * qq;
    *reinterpret_cast<float2*>(An + row * C + col) = make_float2(acc[j][0], acc[j][1]);  // col even
    *reinterpret_cast<float2*>(An + (row + 8) * C + col) = make_float2(acc[j][2], acc[j][3]);
  }
}

// ---- states: grid (dv tiles, dk tiles, batch·heads), sequential over chunks --------------------
// Warp w owns state rows [16w, 16w+16) of the block's 64×64 tile: eight 16×8 accumulators. Chunk
// n+1's k, v, g are in flight while chunk n updates the state.
template <class T>
__global__ void __launch_bounds__(kThreads) gla_states(const T* __restrict__ k, const T* __restrict__ v,
                                                       const T* __restrict__ g, T* __restrict__ h, Dims d) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int C = d.chunk, bh = blockIdx.z, j0 = blockIdx.x * kTile, i0 = blockIdx.y * kTile, te = C * kLd;
  const int wv = min(kTile, d.dv - j0), wk = min(kTile, d.dk - i0);
  const int warp = threadIdx.x >> 5, gq = (threadIdx.x & 31) >> 2;
  T* raw = reinterpret_cast<T*>(smem);                // [2][k, v, g][C][kLd]
  float* b = reinterpret_cast<float*>(raw + 6 * te);  // [C][kLd]
  T* kdT = reinterpret_cast<T*>(b + te);              // [kTile][kLd]: (k_τ ∘ e^{b_C − b_τ})ᵀ
  const auto stage = [&](int n) {
    T* base = raw + (n & 1) * 3 * te;
    const int t0 = n * C;
    async_tile(
        base, [&](int r) { return k + d.row(bh, t0 + r) * d.dk + i0; }, C, wk);
    async_tile(
        base + te, [&](int r) { return v + d.row(bh, t0 + r) * d.dv + j0; }, C, wv);
    async_tile(
        base + 2 * te, [&](int r) { return g + d.row(bh, t0 + r) * d.dk + i0; }, C, wk);
  };
  float acc[8][4] = {};
  const int r0 = warp * 16 + gq;  // this lane's state rows r0, r0 + 8 (tile-local)
  if (d.chunks > 1) stage(0);
  dev::cp_async_commit();
  for (int n = 0; n < d.chunks; ++n) {
    T* hn = h + ((std::size_t(bh) * d.chunks + n) * d.dk + i0) * d.dv + j0;
    store_rows_x64<T>(acc, [&](int r) { return hn + std::size_t(r) * d.dv; }, wk, wv);
    if (n + 1 == d.chunks) break;
    if (n + 2 < d.chunks) stage(n + 1);  // the last chunk's inputs update no stored state
    dev::cp_async_commit();
    dev::cp_async_wait<1>();
    __syncthreads();
    const T* kr = raw + (n & 1) * 3 * te;
    const T *vr = kr + te, *gr = vr + te;
    cumulative_gates(gr, b, C);
    const float* last = b + (C - 1) * kLd;
    for (int idx = threadIdx.x; idx < C * kTile; idx += blockDim.x) {
      const int i = idx / C, t = idx % C;
      kdT[i * kLd + t] = from_f<T>(to_f(kr[t * kLd + i]) * gate_exp<T>(last[i] - b[t * kLd + i]));
    }
    __syncthreads();
    scale_rows(acc, gate_exp<T>(last[r0]), gate_exp<T>(last[r0 + 8]));
    mma_rows_x64(acc, kdT + warp * 16 * kLd, vr, 0, C);
    __syncthreads();  // this chunk's buffers and kdT are free
  }
}

// ---- outputs: grid (dv tiles, chunks, batch·heads) ---------------------------------------------
// Warp w owns chunk rows [16w, 16w+16) (idle past C) and the block's 64 dv columns. V and the
// scores are fetched with the first dk slice.
template <class T>
__global__ void __launch_bounds__(kThreads)
    gla_output(const T* __restrict__ q, const T* __restrict__ v, const T* __restrict__ g,
               const T* __restrict__ h, const float* __restrict__ A, T* __restrict__ o, Dims d) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int C = d.chunk, j0 = blockIdx.x * kTile, n = blockIdx.y, bh = blockIdx.z, t0 = n * C, te = C * kLd;
  const int wv = min(kTile, d.dv - j0);
  const int warp = threadIdx.x >> 5;
  float* b = reinterpret_cast<float*>(smem);  // [C][kLd]
  float* As = b + te;                         // [C][kLd]: the chunk's scores
  T* qr = reinterpret_cast<T*>(As + te);      // [C][kLd]: q, then q_t ∘ e^{b_t}, then the scores
  T* gr = qr + te;                            // [C][kLd]
  T* vr = gr + te;                            // [C][kLd]
  T* hs = vr + te;                            // [kTile][kLd]: state slice
  const bool active = warp * 16 < C;
  float acc[8][4] = {};
  const T* hn = h + (std::size_t(bh) * d.chunks + n) * d.dk * d.dv + j0;
  const float* An = A + (std::size_t(bh) * d.chunks + n) * C * C;
  async_tile(
      As, [&](int r) { return An + r * C; }, C, C);
  async_tile(
      vr, [&](int r) { return v + d.row(bh, t0 + r) * d.dv + j0; }, C, wv);
  for (int i0 = 0; i0 < d.dk; i0 += kTile) {
    const int wk = min(kTile, d.dk - i0);
    async_tile(
        qr, [&](int r) { return q + d.row(bh, t0 + r) * d.dk + i0; }, C, wk);
    async_tile(
        gr, [&](int r) { return g + d.row(bh, t0 + r) * d.dk + i0; }, C, wk);
    async_tile(
        hs, [&](int r) { return hn + std::size_t(i0 + r) * d.dv; }, wk, wv);
    dev::cp_async_commit();
    dev::cp_async_wait<0>();
    __syncthreads();
    cumulative_gates(gr, b, C);
    for (int idx = threadIdx.x; idx < C * kTile; idx += blockDim.x) {
      const int t = idx / kTile, i = idx % kTile;
      qr[t * kLd + i] = from_f<T>(to_f(qr[t * kLd + i]) * gate_exp<T>(b[t * kLd + i]));
    }
    __syncthreads();
    if (active) mma_rows_x64(acc, qr + warp * 16 * kLd, hs, 0, wk);
    __syncthreads();  // q, g and the state slice are free for the next slice
  }
  for (int idx = threadIdx.x; idx < C * C; idx += blockDim.x) {
    const int t = idx / C, tau = idx % C;
    qr[t * kLd + tau] = from_f<T>(As[t * kLd + tau]);
  }
  __syncthreads();
  if (!active) return;
  mma_rows_x64(acc, qr + warp * 16 * kLd, vr, 0, warp * 16 + 16);  // causal: later scores are zero
  store_rows_x64<T>(acc, [&](int r) { return o + d.row(bh, t0 + r) * d.dv + j0; }, C, wv);
}

// ---- 16-bit storage: the gates' terms once, then states and outputs from ldmatrix + mma.sync ----
// gla_prepare, grid (chunks, batch·heads, 64-column slices of dk), 256 threads: warp w takes the
// chunk's w-th eighth of tokens, lane l columns 2l, 2l+1 of the slice (a warp reads 128-byte row
// segments). The chunk's cumulative gates b_t in FP32: each warp's running sums, offset by the
// earlier eighths' totals met in shared memory. Out: q̃_t = q_t ∘ e^{b_t} and k̃_t = k_t ∘
// e^{b_C − b_t} (storage type, the rounding the products' operands get anyway) into [batch·heads,
// seq, dk], and the chunk's decay e^{b_C} (FP32) into [batch·heads, chunks, dk]. The states and
// output kernels then read operands ready for the tensor cores: no scan, no exp, no extra barrier.
constexpr int kPrepareGroups = 8;
template <class T>
__global__ void __launch_bounds__(32 * kPrepareGroups, 4)
    gla_prepare(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ g, T* __restrict__ qe,
                T* __restrict__ ke, float* __restrict__ decay, Dims d) {
  __shared__ float2 totals[kPrepareGroups][32];
  const int n = blockIdx.x, bh = blockIdx.y, per = d.chunk / kPrepareGroups;  // C a multiple of 16
  const int lane = threadIdx.x & 31, grp = threadIdx.x >> 5, i = blockIdx.z * kTile + 2 * lane;
  const bool live = i < d.dk;
  const int t0 = n * d.chunk + grp * per;
  constexpr int kMaxPer = 64 / kPrepareGroups;
  // Every load first, unconditionally (rows past `per` repeat the first row, unused), then the
  // sums: with the running sum in the same guarded step as its loads, each step's loads waited for
  // the last step's (the compiler made a branch a step and recomputed the row's division in each).
  float2 b[kMaxPer], qv[kMaxPer], kv[kMaxPer];  // b: g's values, then their running sums
  if (live) {
    const std::size_t in0 = d.row(bh, t0) * d.dk + i,
                      step = std::size_t(d.heads) * d.dk;  // token t0 + 1: + step
#pragma unroll
    for (int j = 0; j < kMaxPer; ++j) {
      const std::size_t in = in0 + std::size_t(j < per ? j : 0) * step;
      qv[j] = load2(q + in), kv[j] = load2(k + in), b[j] = load2(g + in);
    }
  }
  float2 run = make_float2(0.f, 0.f);
#pragma unroll
  for (int j = 0; j < kMaxPer; ++j)
    if (j < per && live) {
      run.x += b[j].x, run.y += b[j].y;
      b[j] = run;
    }
  totals[grp][lane] = run;
  __syncthreads();
  float2 base = make_float2(0.f, 0.f), last = make_float2(0.f, 0.f);
#pragma unroll
  for (int u = 0; u < kPrepareGroups; ++u) {
    const float2 p = totals[u][lane];
    if (u < grp) base.x += p.x, base.y += p.y;
    last.x += p.x, last.y += p.y;
  }
  if (!live) return;
  const std::size_t out0 = (std::size_t(bh) * d.seq + t0) * d.dk + i;
#pragma unroll
  for (int j = 0; j < kMaxPer; ++j)
    if (j < per) {
      const std::size_t out = out0 + std::size_t(j) * d.dk;
      const float bx = b[j].x + base.x, by = b[j].y + base.y;
      store2(qe + out, qv[j].x * gate_exp<T>(bx), qv[j].y * gate_exp<T>(by));
      store2(ke + out, kv[j].x * gate_exp<T>(last.x - bx), kv[j].y * gate_exp<T>(last.y - by));
    }
  if (grp == 0)
    *reinterpret_cast<float2*>(decay + (std::size_t(bh) * d.chunks + n) * d.dk + i) =
        make_float2(gate_exp<T>(last.x), gate_exp<T>(last.y));
}

// gla_states_tc, grid (dv tiles, dk tiles, batch·heads), sequential over chunks: h_{n+1} =
// diag(decay_n)·h_n + k̃_nᵀ·v_n. Warp w owns state rows [16w, 16w+16): k̃ᵀ's fragments by
// ldmatrix.trans from the [t][i] tile, v's likewise; the next chunk's tiles in flight meanwhile.
// `reverse` walks the chunks from the last: with q̃ = q∘e^b for k̃ and dO for v it is the
// backward's state gradients, dS_{n−1} = diag(decay_n)·dS_n + q̃_nᵀ·dO_n, dS_n stored at chunk n
// (the same recurrence; kernels_gla_bwd.cu).
// (128-wide dv tiles with 8 warps, one wave at batch 8, ran slower on the H100: 81-84 against 57 µs
// at batch 1 × 2048, 457-465 against 428 at batch 8 × 2048.)
template <class T>
__global__ void __launch_bounds__(kThreads)
    gla_states_tc(const T* __restrict__ ke, const T* __restrict__ v, const float* __restrict__ decay,
                  T* __restrict__ h, Dims d, bool reverse) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int C = d.chunk, bh = blockIdx.z, j0 = blockIdx.x * kTile, i0 = blockIdx.y * kTile, te = C * kLd;
  const int wv = min(kTile, d.dv - j0), wk = min(kTile, d.dk - i0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, m = lane >> 3, r = lane & 7;
  T* buf = reinterpret_cast<T*>(smem);                  // [2][k̃, v][C][kLd], by step parity
  float* dec = reinterpret_cast<float*>(buf + 4 * te);  // [2][kTile]
  const auto chunk_at = [&](int step) { return reverse ? d.chunks - 1 - step : step; };
  const auto stage = [&](int step) {
    const int n = chunk_at(step);
    T* base = buf + (step & 1) * 2 * te;
    const std::size_t row0 = std::size_t(bh) * d.seq + std::size_t(n) * C;
    async_tile(
        base, [&](int rr) { return ke + (row0 + rr) * d.dk + i0; }, C, wk);
    async_tile(
        base + te, [&](int rr) { return v + d.row(bh, n * C + rr) * d.dv + j0; }, C, wv);
    if (threadIdx.x < kTile / 4) {
      const int c = 4 * threadIdx.x;
      dev::cp_async16(dec + (step & 1) * kTile + c,
                      decay + (std::size_t(bh) * d.chunks + n) * d.dk + i0 + (c < wk ? c : 0),
                      c < wk ? 16 : 0);
    }
  };
  float acc[8][4] = {};
  const int r0 = warp * 16 + (lane >> 2);  // this lane's state rows r0, r0 + 8 (tile-local)
  if (d.chunks > 1) stage(0);
  dev::cp_async_commit();
  for (int step = 0; step < d.chunks; ++step) {
    T* hn = h + ((std::size_t(bh) * d.chunks + chunk_at(step)) * d.dk + i0) * d.dv + j0;
    store_rows_x64<T>(acc, [&](int rr) { return hn + std::size_t(rr) * d.dv; }, wk, wv);
    if (step + 1 == d.chunks) break;
    if (step + 2 < d.chunks) stage(step + 1);  // the walk's last chunk's inputs update no stored state
    dev::cp_async_commit();
    dev::cp_async_wait<1>();
    __syncthreads();
    const T* ks = buf + (step & 1) * 2 * te;
    const float* dn = dec + (step & 1) * kTile;
    scale_rows(acc, dn[r0], dn[r0 + 8]);
    for (int kk = 0; kk < C; kk += 16) {
      unsigned a[4];  // A(i, t) = k̃[t][i]: matrices (t, i) = (0, 0), (0, 8), (8, 0), (8, 8), transposed
      dev::ldmatrix_x4_trans(a, ks + (kk + (m >> 1) * 8 + r) * kLd + warp * 16 + (m & 1) * 8);
      mma_x64_ldmatrix<T>(acc, a, ks + te, kk);
    }
    __syncthreads();  // this step's buffers are free for step + 2
  }
}

// gla_output_tc, grid (dv tiles, chunks, batch·heads): o_t = q̃_t·h_n + Σ_τ A_tτ v_τ. Warp w owns
// chunk rows [16w, 16w+16) (idle past C); the dk slices of q̃ and h double-buffered.
template <class T>
__global__ void __launch_bounds__(kThreads)
    gla_output_tc(const T* __restrict__ qe, const T* __restrict__ v, const T* __restrict__ h,
                  const float* __restrict__ A, T* __restrict__ o, Dims d) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int C = d.chunk, j0 = blockIdx.x * kTile, n = blockIdx.y, bh = blockIdx.z, te = C * kLd, he = kTile * kLd;
  const int wv = min(kTile, d.dv - j0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, qq = lane & 3, m = lane >> 3,
            r = lane & 7;
  float* As = reinterpret_cast<float*>(smem);   // [C][kLdF]: the chunk's scores
  T* vs = reinterpret_cast<T*>(As + C * kLdF);  // [C][kLd]
  T* buf = vs + te;                             // [2][q̃ C×kLd, h slice kTile×kLd]
  const std::size_t row0 = std::size_t(bh) * d.seq + std::size_t(n) * C;
  const T* hn = h + (std::size_t(bh) * d.chunks + n) * d.dk * d.dv + j0;
  const float* An = A + (std::size_t(bh) * d.chunks + n) * C * C;
  const auto stage = [&](int s) {
    const int i0 = s * kTile, wk = min(kTile, d.dk - i0);
    T* base = buf + (s & 1) * (te + he);
    async_tile(
        base, [&](int rr) { return qe + (row0 + rr) * d.dk + i0; }, C, wk);
    async_tile(
        base + te, [&](int rr) { return hn + std::size_t(i0 + rr) * d.dv; }, wk, wv);
  };
  async_tile(
      As, [&](int rr) { return An + rr * C; }, C, C, kLdF);
  async_tile(
      vs, [&](int rr) { return v + d.row(bh, n * C + rr) * d.dv + j0; }, C, wv);
  stage(0);
  dev::cp_async_commit();
  const bool active = warp * 16 < C;
  const int slices = (d.dk + kTile - 1) / kTile;
  float acc[8][4] = {};
  for (int s = 0; s < slices; ++s) {
    if (s + 1 < slices) stage(s + 1);
    dev::cp_async_commit();
    dev::cp_async_wait<1>();
    __syncthreads();
    const T* qs = buf + (s & 1) * (te + he);
    const int wk = min(kTile, d.dk - s * kTile);
    if (active)
      for (int kk = 0; kk < wk; kk += 16) {
        unsigned a[4];  // A(t, i) = q̃[t][i]: matrices (t, i) = (0, 0), (8, 0), (0, 8), (8, 8)
        dev::ldmatrix_x4(a, qs + (warp * 16 + (m & 1) * 8 + r) * kLd + kk + (m >> 1) * 8);
        mma_x64_ldmatrix<T>(acc, a, qs + te, kk);
      }
    __syncthreads();  // this slice's buffers are free for slice s + 2
  }
  if (!active) return;
  for (int kk = 0; kk < warp * 16 + 16; kk += 16) {  // causal: later scores are zero
    const float* s0 = As + (warp * 16 + gq) * kLdF + kk + 2 * qq;
    const float* s1 = s0 + 8 * kLdF;
    const float2 x0 = *reinterpret_cast<const float2*>(s0), x1 = *reinterpret_cast<const float2*>(s1),
                 x2 = *reinterpret_cast<const float2*>(s0 + 8), x3 = *reinterpret_cast<const float2*>(s1 + 8);
    const unsigned a[4] = {pack2(from_f<T>(x0.x), from_f<T>(x0.y)), pack2(from_f<T>(x1.x), from_f<T>(x1.y)),
                           pack2(from_f<T>(x2.x), from_f<T>(x2.y)), pack2(from_f<T>(x3.x), from_f<T>(x3.y))};
    mma_x64_ldmatrix<T>(acc, a, vs, kk);
  }
  store_rows_x64<T>(acc, [&](int rr) { return o + d.row(bh, n * C + rr) * d.dv + j0; }, C, wv);
}

int scores_smem_bytes(int C, int elem) {
  const int nsub = C / kSub;
  return C * kLd * (6 * elem + 4 + elem) + 8 * nsub * (nsub - 1) * kLd * elem;
}
int states_smem_bytes(int C, int elem) { return C * kLd * (6 * elem + 4) + kTile * kLd * elem; }
int output_smem_bytes(int C, int elem) { return C * kLd * (8 + 3 * elem) + kTile * kLd * elem; }
int states_tc_smem_bytes(int C, int elem) { return 4 * C * kLd * elem + 2 * kTile * 4; }
int output_tc_smem_bytes(int C, int elem) { return C * kLdF * 4 + C * kLd * elem + 2 * (C + kTile) * kLd * elem; }

// The forward's scratch (gla_chunked_scratch_bytes): scores, chunk-entry states, then q̃, k̃ and the
// decays of gla_prepare (16-bit storage only).
template <class T>
struct FwdScratch {
  float* A;
  T *h, *qe, *ke;
  float* decay;
  FwdScratch(void* scratch, const GlaShape& s) {
    const GlaFwdScratchLayout l =
        gla_fwd_scratch_layout(s, sizeof(T) == 4 ? GlaType::F32 : GlaType::BF16);  // BF16 and FP16 alike
    auto* base = static_cast<unsigned char*>(scratch);
    A = reinterpret_cast<float*>(base + l.scores);
    h = reinterpret_cast<T*>(base + l.states);
    qe = reinterpret_cast<T*>(base + l.q_decayed);
    ke = reinterpret_cast<T*>(base + l.k_decayed);
    decay = reinterpret_cast<float*>(base + l.decays);
  }
};

// The forward's scores and chunk-entry states into the forward's scratch layout (gla.hpp), for the
// backward (kernels_gla_bwd.cu); with dO and dS (16-bit storage) also the state gradients.
template <class T>
void scores_and_states(const T* q, const T* k, const T* v, const T* g, void* scratch, const GlaShape& s,
                       cudaStream_t stream, const T* dO = nullptr, T* dS = nullptr) {
  const Dims d{int(s.seq), int(s.heads), int(s.dk), int(s.dv), int(s.chunk), int(s.seq / s.chunk)};
  const int C = d.chunk, e = int(sizeof(T));
  const unsigned bh = unsigned(s.batch * s.heads);
  const FwdScratch<T> w(scratch, s);
  const unsigned v_tiles = unsigned((s.dv + kTile - 1) / kTile),
                 k_tiles = unsigned((s.dk + kTile - 1) / kTile);
  if constexpr (sizeof(T) == 2) {
    gla_prepare<T><<<dim3(unsigned(d.chunks), bh, k_tiles), 32 * kPrepareGroups, 0, stream>>>(q, k, g, w.qe, w.ke,
                                                                                              w.decay, d);
    RAFTER_CUDA_LAUNCH_CHECK("gla_prepare");
  }
  // The scores need nothing from the states walk, which fills one wave or less at batch 1: they
  // run beside it on a side stream while the walk has no more blocks than the GPU has SMs. Past
  // that they run after it: at batch 8 × 16384 on the H100 (1024 walk blocks) the two side by
  // side took 5879 µs against their kernels' 5328 in series (ncu), at 8 × 2048 653 against 660.
  // The state gradients' walk (the same kernel backwards over q∘e^b and dO) runs beside on a
  // second side stream.
  const SideStream side = side_stream(SideStreamUse::ForwardScores),
                   grads = side_stream(SideStreamUse::BackwardStates);
  const bool scores_beside = v_tiles * k_tiles * bh <= unsigned(sm_count());
  if constexpr (sizeof(T) == 2) {
    allow_smem<gla_states_tc<T>>(states_tc_smem_bytes(64, e));
    if (dO) {
      grads.fork_from(stream);
      gla_states_tc<T><<<dim3(v_tiles, k_tiles, bh), kThreads, states_tc_smem_bytes(C, e), grads.stream>>>(
          w.qe, dO, w.decay, dS, d, true);
      RAFTER_CUDA_LAUNCH_CHECK("gla_states_tc (state gradients)");
    }
  }
  allow_smem<gla_scores<T>>(scores_smem_bytes(64, e));
  if (scores_beside) side.fork_from(stream);
  gla_scores<T><<<dim3(unsigned(d.chunks), bh), kScoreThreads, scores_smem_bytes(C, e),
                  scores_beside ? side.stream : stream>>>(q, k, g, w.A, d);
  RAFTER_CUDA_LAUNCH_CHECK("gla_scores");
  if constexpr (sizeof(T) == 2) {
    gla_states_tc<T><<<dim3(v_tiles, k_tiles, bh), kThreads, states_tc_smem_bytes(C, e), stream>>>(
        w.ke, v, w.decay, w.h, d, false);
    RAFTER_CUDA_LAUNCH_CHECK("gla_states_tc");
    if (dO) grads.join_into(stream);
  } else {
    allow_smem<gla_states<T>>(states_smem_bytes(64, e));
    gla_states<T><<<dim3(v_tiles, k_tiles, bh), kThreads, states_smem_bytes(C, e), stream>>>(k, v, g, w.h, d);
    RAFTER_CUDA_LAUNCH_CHECK("gla_states");
  }
  if (scores_beside) side.join_into(stream);
}

template <class T>
void chunked_fwd(const T* q, const T* k, const T* v, const T* g, T* o, void* scratch, const GlaShape& s,
                 cudaStream_t stream) {
  scores_and_states(q, k, v, g, scratch, s, stream);
  const Dims d{int(s.seq), int(s.heads), int(s.dk), int(s.dv), int(s.chunk), int(s.seq / s.chunk)};
  const int C = d.chunk, e = int(sizeof(T));
  const unsigned bh = unsigned(s.batch * s.heads);
  const FwdScratch<T> w(scratch, s);
  const dim3 grid(unsigned((s.dv + kTile - 1) / kTile), unsigned(d.chunks), bh);
  if constexpr (sizeof(T) == 2) {
    allow_smem<gla_output_tc<T>>(output_tc_smem_bytes(64, e));
    gla_output_tc<T><<<grid, kThreads, output_tc_smem_bytes(C, e), stream>>>(w.qe, v, w.h, w.A, o, d);
    RAFTER_CUDA_LAUNCH_CHECK("gla_output_tc");
  } else {
    allow_smem<gla_output<T>>(output_smem_bytes(64, e));
    gla_output<T><<<grid, kThreads, output_smem_bytes(C, e), stream>>>(q, v, g, w.h, w.A, o, d);
    RAFTER_CUDA_LAUNCH_CHECK("gla_output");
  }
}

// ---- decode --------------------------------------------------------------------------------------
// Block (32 dv columns, sequence·head) over all dk rows: thread (row group r, column quad c) takes
// rows r, r + 32, … of its four columns, so a warp reads four 128-byte row segments per step and a
// thread has its rows' loads in flight together; the state streams through once (read, decayed and
// updated, written), o's 32 row-group partial sums meet in shared memory. One launch, no partials.
// (Rows in batches of 8, every load of a batch before its stores, took 128 registers and 2 blocks an
// SM and ran slower on the H100: bench/gla_results.md.)
constexpr int kDecodeQuads = 8, kDecodeRowGroups = 32;  // 256 threads

template <class T>
__global__ void __launch_bounds__(kDecodeQuads* kDecodeRowGroups)
    gla_decode_step(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                    const T* __restrict__ g, const float* __restrict__ S, float* __restrict__ S_out,
                    T* __restrict__ o, int dk, int dv) {
  __shared__ float4 part[kDecodeRowGroups][kDecodeQuads];
  const int bh = blockIdx.y, quad = threadIdx.x % kDecodeQuads, rg = threadIdx.x / kDecodeQuads;
  const int c4 = blockIdx.x * kDecodeQuads + quad;  // this thread's column quad
  const bool live = c4 < dv / 4;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  if (live) {
    const T* vv = v + std::size_t(bh) * dv + 4 * c4;
    const float v0 = to_f(vv[0]), v1 = to_f(vv[1]), v2 = to_f(vv[2]), v3 = to_f(vv[3]);
#pragma unroll 8
    for (int i = rg; i < dk; i += kDecodeRowGroups) {
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
  }
  part[rg][quad] = acc;
  __syncthreads();
  if (rg == 0 && live) {
    float4 sum = part[0][quad];
    for (int r = 1; r < kDecodeRowGroups; ++r) {
      const float4 p = part[r][quad];
      sum.x += p.x, sum.y += p.y, sum.z += p.z, sum.w += p.w;
    }
    T* out = o + std::size_t(bh) * dv + 4 * c4;
    store2(out, sum.x, sum.y);
    store2(out + 2, sum.z, sum.w);
  }
}

template <class T>
void decode_typed(const void* q, const void* k, const void* v, const void* g, const float* state_in, void* o,
                  float* state_out, std::int64_t bhs, std::int64_t dk, std::int64_t dv, cudaStream_t stream) {
  const dim3 grid(unsigned((dv / 4 + kDecodeQuads - 1) / kDecodeQuads), unsigned(bhs));
  gla_decode_step<T><<<grid, kDecodeQuads * kDecodeRowGroups, 0, stream>>>(
      static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), static_cast<const T*>(g),
      state_in, state_out, static_cast<T*>(o), int(dk), int(dv));
  RAFTER_CUDA_LAUNCH_CHECK("gla_decode_step");
}

}  // namespace

bool gla_chunked_supports(const GlaShape& s) {
  return s.dk > 0 && s.dk % 16 == 0 && s.dv > 0 && s.dv % 16 == 0 && s.chunk > 0 && s.chunk % kSub == 0 &&
         s.chunk <= 64 && s.seq > 0 && s.seq % s.chunk == 0;
}

GlaFwdScratchLayout gla_fwd_scratch_layout(const GlaShape& s, GlaType t) {
  const std::size_t chunks = std::size_t(s.batch * s.heads * (s.seq / s.chunk));
  const std::size_t elem = t == GlaType::F32 ? 4 : 2, rows = std::size_t(s.batch * s.heads * s.seq);
  const bool prepared = t != GlaType::F32;  // FP32 storage keeps the kernels that scan the gates
  GlaFwdScratchLayout l{};
  l.scores = 0;
  l.states = l.scores + chunks * std::size_t(s.chunk * s.chunk) * 4;
  l.q_decayed = l.states + chunks * std::size_t(s.dk * s.dv) * elem;
  l.k_decayed = l.q_decayed + (prepared ? rows * std::size_t(s.dk) * elem : 0);
  l.decays = l.k_decayed + (prepared ? rows * std::size_t(s.dk) * elem : 0);
  l.end = l.decays + (prepared ? chunks * std::size_t(s.dk) * 4 : 0);
  return l;
}

std::size_t gla_chunked_scratch_bytes(const GlaShape& s, GlaType t) {
  return gla_fwd_scratch_layout(s, t).end;
}

void gla_chunked_fwd(GlaType t, const void* q, const void* k, const void* v, const void* g, void* o,
                     void* scratch, const GlaShape& s, cudaStream_t stream) {
  switch (t) {
    case GlaType::BF16: {
      using T = __nv_bfloat16;
      return chunked_fwd<T>(static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
                            static_cast<const T*>(g), static_cast<T*>(o), scratch, s, stream);
    }
    case GlaType::F16: {
      using T = __half;
      return chunked_fwd<T>(static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
                            static_cast<const T*>(g), static_cast<T*>(o), scratch, s, stream);
    }
    default:
      return chunked_fwd<float>(static_cast<const float*>(q), static_cast<const float*>(k),
                                static_cast<const float*>(v), static_cast<const float*>(g),
                                static_cast<float*>(o), scratch, s, stream);
  }
}

void gla_chunked_scores_states(GlaType t, const void* q, const void* k, const void* v, const void* g,
                               void* scratch, const GlaShape& s, cudaStream_t stream, const void* dO,
                               void* dS) {
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    scores_and_states<T>(static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
                         static_cast<const T*>(g), scratch, s, stream, static_cast<const T*>(dO),
                         static_cast<T*>(dS));
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

bool gla_decode_supports(std::int64_t dk, std::int64_t dv) { return dk > 0 && dv > 0 && dv % 4 == 0; }

void gla_decode(GlaType t, const void* q, const void* k, const void* v, const void* g, const float* state_in,
                void* o, float* state_out, std::int64_t batch_heads, std::int64_t dk, std::int64_t dv,
                cudaStream_t stream) {
  switch (t) {
    case GlaType::BF16:
      return decode_typed<__nv_bfloat16>(q, k, v, g, state_in, o, state_out, batch_heads, dk, dv, stream);
    case GlaType::F16:
      return decode_typed<__half>(q, k, v, g, state_in, o, state_out, batch_heads, dk, dv, stream);
    default:
      return decode_typed<float>(q, k, v, g, state_in, o, state_out, batch_heads, dk, dv, stream);
  }
}

}  // namespace rafter::workloads::cuda
