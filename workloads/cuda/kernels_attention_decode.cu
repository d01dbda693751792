// Split-KV decode attention: one query token per sequence against a BF16 KV cache. Decode reads
// the whole cache once and does little arithmetic per byte, so the kernel is built to keep HBM
// busy: the KV cache is cut into chunks so that there are several blocks per SM even at batch 1,
// each block streams its chunk with several 16-byte loads in flight per lane, and the query heads
// that share a KV head (GQA) are served by the same block, so the cache is read once per group.
// Each block leaves an unnormalised partial (running max, sum, FP32 accumulator); a second kernel
// merges the chunks of each (sequence, head) in log-sum-exp form.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "cuda_util.hpp"
#include "kernel_common.cuh"
#include "kernels.hpp"

namespace rafter::workloads::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // tokens whose K and V rows each lane group has in flight at once
constexpr float kLog2e = 1.4426950408889634f;

// Lanes of a group of L lanes that holds one D-long row (8 values a lane) sum their partial dots.
template <int L>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int o = L / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Where a partials kernel leaves its result: per split, the unnormalised FP32 sums (part_o) and
// (running max, sum) pairs (part_ml) for decode_merge; or, with one split, the output itself (o).
struct DecodeOut {
  float* part_o;
  float2* part_ml;
  bf16* o;  // non-null exactly when the launch has one split
};

// Block (split, head group, sequence): G query heads h0..h0+G-1 sharing KV head hk, keys
// [split·chunk, min(kv_len, (split+1)·chunk)). Groups of D/8 lanes take one token each.
template <int D, int G>
__global__ void __launch_bounds__(kThreads)
    decode_partials(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                    DecodeOut out, int kv_len, int heads, int kv_heads, int chunk, float scale_log2) {
  constexpr int L = D / 8, NG = kThreads / L;
  __shared__ float s_m[NG][G];
  __shared__ float s_acc[G][D];
  __shared__ float s_l[G];
  const int split = blockIdx.x, splits = gridDim.x, b = blockIdx.z;
  const int h0 = blockIdx.y * G, hk = h0 / (heads / kv_heads);
  const int lane = threadIdx.x % L, gi = threadIdx.x / L;
  const int t0 = split * chunk, t1 = min(kv_len, t0 + chunk);
  for (int i = threadIdx.x; i < G * D; i += kThreads) s_acc[i / D][i % D] = 0.f;
  if (threadIdx.x < G) s_l[threadIdx.x] = 0.f;

  float qf[G][8], acc[G][8], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    dev::to_float8(dev::load8(q + (std::size_t(b) * heads + h0 + g) * D + lane * 8), qf[g]);
#pragma unroll
    for (int i = 0; i < 8; ++i) qf[g][i] *= scale_log2, acc[g][i] = 0.f;
    m[g] = -INFINITY, l[g] = 0.f;
  }
  const std::size_t row = std::size_t(kv_heads) * D;  // elements from one token to the next
  const std::size_t base = (std::size_t(b) * kv_len * kv_heads + hk) * D + lane * 8;
  const bf16* kb = k + base;
  const bf16* vb = v + base;
  // The trip count is the same for every lane: the groups of a warp meet in the shuffles below.
  for (int first = t0; first < t1; first += NG * kUnroll) {
    const int t = first + gi;
    dev::Bf16x8 kk[kUnroll], vv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int tu = t + u * NG;
      if (tu < t1) {
        kk[u] = dev::load8_stream(kb + tu * row);
        vv[u] = dev::load8_stream(vb + tu * row);
      } else {
        kk[u] = vv[u] = dev::Bf16x8{};
      }
    }
    // Every lane of the warp takes part in the shuffles; tokens past the chunk are masked after.
    float s[kUnroll][G];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[8];
      dev::to_float8(kk[u], kf);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) dot = fmaf(qf[g][i], kf[i], dot);
        s[u][g] = group_sum<L>(dot);
        if (t + u * NG >= t1) s[u][g] = -INFINITY;
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float mx = m[g];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) mx = fmaxf(mx, s[u][g]);
      if (mx == -INFINITY) continue;  // nothing seen yet by this group
      const float corr = exp2f(m[g] - mx);
      m[g] = mx;
      l[g] *= corr;
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[g][i] *= corr;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const float p = exp2f(s[u][g] - mx);
        float vf[8];
        dev::to_float8(vv[u], vf);
        l[g] += p;
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[g][i] = fmaf(p, vf[i], acc[g][i]);
      }
    }
  }
  // Merge the block's token groups: rescale each to the block's max, then add in shared memory.
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) s_m[gi][g] = m[g];
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float mx = -INFINITY;
    for (int j = 0; j < NG; ++j) mx = fmaxf(mx, s_m[j][g]);
    const float f = m[g] == -INFINITY ? 0.f : exp2f(m[g] - mx);
#pragma unroll
    for (int i = 0; i < 8; ++i) atomicAdd(&s_acc[g][lane * 8 + i], acc[g][i] * f);
    if (lane == 0) atomicAdd(&s_l[g], l[g] * f);
    m[g] = mx;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < G * D; i += kThreads) {
    const std::size_t bh = std::size_t(b) * heads + h0 + i / D;
    if (out.o) {  // one split: this block's sums are the whole softmax
      out.o[bh * D + i % D] = __float2bfloat16(s_acc[i / D][i % D] / s_l[i / D]);
      continue;
    }
    out.part_o[(bh * splits + split) * D + i % D] = s_acc[i / D][i % D];
    if (i % D == 0) out.part_ml[bh * splits + split] = make_float2(m[i / D], s_l[i / D]);
  }
}

// One block per (sequence, head), one thread per element of the head: O = Σ_s acc_s·2^(m_s−M) / Σ_s
// l_s·2^(m_s−M).
__global__ void decode_merge(const float* __restrict__ part_o, const float2* __restrict__ part_ml,
                             bf16* __restrict__ o, int splits, int d) {
  const std::size_t bh = blockIdx.x;
  const float2* ml = part_ml + bh * splits;
  float mx = -INFINITY;
  for (int s = 0; s < splits; ++s) mx = fmaxf(mx, ml[s].x);
  float num = 0.f, den = 0.f;
  for (int s = 0; s < splits; ++s) {
    const float w = exp2f(ml[s].x - mx);
    den += ml[s].y * w;
    num += part_o[(bh * splits + s) * d + threadIdx.x] * w;
  }
  o[bh * d + threadIdx.x] = __float2bfloat16(num / den);
}

// Tensor-core path for GQA groups of 8 query heads per KV head (Llama-2 70B: 64 query heads, 8 KV
// heads). With 8 heads per KV row the CUDA-core kernel above does 8 dot products and 8 FMA rows per
// row it loads, plus their shuffles, and stops being memory-bound. Here the 8 heads are the rows of
// mma.sync m16n8k16 tiles (rows 8..15 zero): S = Q·Kᵀ over 16 tokens, then O += P·V, FP32
// accumulate, as flash attention does for query rows. One block per (split, KV head, sequence),
// kTcWarps warps; warp w streams tiles w, w + kTcWarps, … of 16 tokens through its own
// kTcStages-deep cp.async ring in shared memory (rows swizzled: 16-byte chunk c of row r sits at
// c ^ (r mod 8), so ldmatrix reads 8 rows without bank conflicts). The warps' partials are merged
// in shared memory into the same per-split partial as above.
constexpr int kTcWarps = 4, kTcStages = 3, kTile = 16, kTcGroup = 8;

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&v);
}
// Element offset of 16-byte chunk c of row r in a swizzled [rows][D] tile.
template <int D>
__device__ __forceinline__ int swz(int r, int c) {
  return r * D + ((c ^ (r & 7)) << 3);
}

template <int D>
constexpr int tc_smem_bytes() {
  return kTcWarps * kTcStages * 2 * kTile * D * int(sizeof(bf16));
}

template <int D>
__global__ void __launch_bounds__(kTcWarps * 32)
    decode_partials_tc(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                       DecodeOut out, int kv_len, int heads, int kv_heads, int chunk, float scale_log2) {
  constexpr int C = D / 8;               // 16-byte chunks per row
  constexpr int kStage = 2 * kTile * D;  // elements of one stage: K tile, then V tile
  constexpr int kNt = D / 8;             // n-tiles of 8 output columns
  extern __shared__ __align__(16) unsigned char tc_smem[];
  bf16* ring = reinterpret_cast<bf16*>(tc_smem) + (threadIdx.x / 32) * kTcStages * kStage;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 4, c = lane % 4;
  const int split = blockIdx.x, splits = gridDim.x, hk = blockIdx.y, b = blockIdx.z;
  const int h0 = hk * kTcGroup;
  const int t0 = split * chunk, t1 = min(kv_len, t0 + chunk), ntiles = (t1 - t0 + kTile - 1) / kTile;
  const std::size_t row = std::size_t(kv_heads) * D;
  const bf16* kb = k + (std::size_t(b) * kv_len * kv_heads + hk) * D;
  const bf16* vb = v + (std::size_t(b) * kv_len * kv_heads + hk) * D;

  // Q as the A operand: row r is head h0 + r; rows 8..15 (a1, a3) are zero.
  unsigned qa[D / 16][2];
  const bf16* qr = q + (std::size_t(b) * heads + h0 + r) * D + 2 * c;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    qa[ks][0] = *reinterpret_cast<const unsigned*>(qr + 16 * ks);
    qa[ks][1] = *reinterpret_cast<const unsigned*>(qr + 16 * ks + 8);
  }
  auto load_tile = [&](int tile, int stage) {
    bf16* ks_ = ring + stage * kStage;
    bf16* vs_ = ks_ + kTile * D;
    const int first = t0 + tile * kTile;
#pragma unroll
    for (int i = lane; i < kTile * C; i += 32) {
      const int rr = i / C, cc = i % C, t = first + rr;
      const bool valid = t < t1;
      const std::size_t off = std::size_t(valid ? t : t0) * row + cc * 8;
      dev::cp_async16(ks_ + swz<D>(rr, cc), kb + off, valid ? 16 : 0);
      dev::cp_async16(vs_ + swz<D>(rr, cc), vb + off, valid ? 16 : 0);
    }
  };

  float acc[kNt][4] = {};
  float m = -INFINITY, l = 0.f;  // for head r, over this warp's tokens (l: this lane's part)
  int next = warp;
#pragma unroll
  for (int s = 0; s < kTcStages - 1; ++s) {
    if (next < ntiles) load_tile(next, s);
    dev::cp_async_commit();
    next += kTcWarps;
  }
  int stage = 0;
  for (int tile = warp; tile < ntiles; tile += kTcWarps) {
    if (next < ntiles) load_tile(next, (stage + kTcStages - 1) % kTcStages);
    dev::cp_async_commit();
    next += kTcWarps;
    dev::cp_async_wait<kTcStages - 1>();
    __syncwarp();
    const bf16* ks_ = ring + stage * kStage;
    const bf16* vs_ = ks_ + kTile * D;
    // S = Q·Kᵀ: n-tile 0 holds tokens 0..7 of the tile, n-tile 1 tokens 8..15. ldmatrix's matrix j
    // (lanes 8j..8j+7 give its rows) is chunk 4·kp + j of those 8 tokens: b0, b1 of k-step 2·kp,
    // then of 2·kp + 1.
    float s0[4] = {}, s1[4] = {};
#pragma unroll
    for (int kp = 0; kp < D / 32; ++kp) {
      unsigned kf[4];
      dev::ldmatrix_x4(kf, ks_ + swz<D>(lane % 8, 4 * kp + lane / 8));
      dev::mma_bf16(s0, qa[2 * kp][0], 0u, qa[2 * kp][1], 0u, kf[0], kf[1]);
      dev::mma_bf16(s0, qa[2 * kp + 1][0], 0u, qa[2 * kp + 1][1], 0u, kf[2], kf[3]);
      dev::ldmatrix_x4(kf, ks_ + swz<D>(8 + lane % 8, 4 * kp + lane / 8));
      dev::mma_bf16(s1, qa[2 * kp][0], 0u, qa[2 * kp][1], 0u, kf[0], kf[1]);
      dev::mma_bf16(s1, qa[2 * kp + 1][0], 0u, qa[2 * kp + 1][1], 0u, kf[2], kf[3]);
    }
    // This lane holds head r's scores of tokens 2c, 2c+1, 8+2c, 9+2c; the 4 lanes of row r hold all 16.
    const int first = t0 + tile * kTile;
    float x[4] = {s0[0] * scale_log2, s0[1] * scale_log2, s1[0] * scale_log2, s1[1] * scale_log2};
    const int tok[4] = {2 * c, 2 * c + 1, 8 + 2 * c, 9 + 2 * c};
    float mx = m;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (first + tok[i] >= t1) x[i] = -INFINITY;
      mx = fmaxf(mx, x[i]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));  // finite: a tile has at least one token
    const float corr = exp2f(m - mx);
    m = mx;
    float p[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) p[i] = exp2f(x[i] - mx);
    l = l * corr + (p[0] + p[1]) + (p[2] + p[3]);
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) acc[nt][0] *= corr, acc[nt][1] *= corr;
    const unsigned pa0 = pack_bf16(p[0], p[1]), pa2 = pack_bf16(p[2], p[3]);
    // O += P·V: matrix j of ldmatrix.trans is tokens 8·(j mod 2).. of chunk 2·jd + j/2, transposed:
    // b0, b1 of output columns 16·jd.., then of 16·jd + 8...
#pragma unroll
    for (int jd = 0; jd < D / 16; ++jd) {
      unsigned vf[4];
      dev::ldmatrix_x4_trans(vf, vs_ + swz<D>((lane / 8 % 2) * 8 + lane % 8, 2 * jd + lane / 16));
      dev::mma_bf16(acc[2 * jd], pa0, 0u, pa2, 0u, vf[0], vf[1]);
      dev::mma_bf16(acc[2 * jd + 1], pa0, 0u, pa2, 0u, vf[2], vf[3]);
    }
    __syncwarp();  // every lane is done with this stage before it is refilled
    stage = (stage + 1) % kTcStages;
  }
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  dev::cp_async_wait<0>();
  __syncthreads();
  // Merge the warps in shared memory (the rings are free now): [warp][head][D] accumulators.
  float* s_acc = reinterpret_cast<float*>(tc_smem);
  float* s_m = s_acc + kTcWarps * kTcGroup * D;
  float* s_l = s_m + kTcWarps * kTcGroup;
#pragma unroll
  for (int nt = 0; nt < kNt; ++nt) {
    s_acc[(warp * kTcGroup + r) * D + 8 * nt + 2 * c] = acc[nt][0];
    s_acc[(warp * kTcGroup + r) * D + 8 * nt + 2 * c + 1] = acc[nt][1];
  }
  if (c == 0) s_m[warp * kTcGroup + r] = m, s_l[warp * kTcGroup + r] = l;
  __syncthreads();
  for (int i = threadIdx.x; i < kTcGroup * D; i += kTcWarps * 32) {
    const int h = i / D, d = i % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kTcWarps; ++w) mx = fmaxf(mx, s_m[w * kTcGroup + h]);
    float num = 0.f, den = 0.f;
#pragma unroll
    for (int w = 0; w < kTcWarps; ++w) {
      const float mw = s_m[w * kTcGroup + h];
      const float f = mw == -INFINITY ? 0.f : exp2f(mw - mx);  // a warp with no tile has nothing
      num += s_acc[(w * kTcGroup + h) * D + d] * f;
      den += s_l[w * kTcGroup + h] * f;
    }
    const std::size_t bh = std::size_t(b) * heads + h0 + h;
    if (out.o) {  // one split: this block's sums are the whole softmax
      out.o[bh * D + d] = __float2bfloat16(num / den);
      continue;
    }
    out.part_o[(bh * splits + split) * D + d] = num;
    if (d == 0) out.part_ml[bh * splits + split] = make_float2(mx, den);
  }
}

// Sets the tensor-core kernel's shared-memory limit (once per device) and returns how many of its blocks an
// SM holds.
template <int D>
int tc_blocks_per_sm() {
  static PerDevice<int> blocks;
  return blocks.get([] {
    RAFTER_CUDA_CHECK(cudaFuncSetAttribute(decode_partials_tc<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           tc_smem_bytes<D>()));
    int n = 0;
    RAFTER_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_partials_tc<D>, kTcWarps * 32, tc_smem_bytes<D>()));
    return std::max(n, 1);
  });
}

template <int D>
void launch_partials_tc(const bf16* q, const bf16* k, const bf16* v, DecodeOut out,
                        const DecodePlan& p, std::int64_t batch, std::int64_t kv_len, std::int64_t heads,
                        std::int64_t kv_heads, cudaStream_t stream) {
  static_assert(tc_smem_bytes<D>() >= (kTcWarps * kTcGroup * (D + 2)) * int(sizeof(float)),
                "merge fits the rings");
  tc_blocks_per_sm<D>();  // the shared-memory limit is set
  const dim3 grid(unsigned(p.splits), unsigned(kv_heads), unsigned(batch));
  const float scale_log2 = kLog2e / sqrtf(float(D));
  decode_partials_tc<D><<<grid, kTcWarps * 32, tc_smem_bytes<D>(), stream>>>(
      q, k, v, out, int(kv_len), int(heads), int(kv_heads), int(p.chunk), scale_log2);
}

// How many blocks of the CUDA-core kernel an SM holds (registers decide it).
template <int D, int G>
int cc_blocks_per_sm() {
  static const int blocks = [] {
    int n = 0;
    RAFTER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_partials<D, G>, kThreads, 0));
    return std::max(n, 1);
  }();
  return blocks;
}
template <int D>
int cc_blocks_per_sm(int heads_per_block) {
  switch (heads_per_block) {
    case 8: return cc_blocks_per_sm<D, 8>();
    case 4: return cc_blocks_per_sm<D, 4>();
    case 2: return cc_blocks_per_sm<D, 2>();
    default: return cc_blocks_per_sm<D, 1>();
  }
}

template <int D, int G>
void launch_partials(const bf16* q, const bf16* k, const bf16* v, DecodeOut out,
                     const DecodePlan& p, std::int64_t batch, std::int64_t kv_len, std::int64_t heads,
                     std::int64_t kv_heads, cudaStream_t stream) {
  const dim3 grid(unsigned(p.splits), unsigned(heads / G), unsigned(batch));
  const float scale_log2 = kLog2e / sqrtf(float(D));
  decode_partials<D, G><<<grid, kThreads, 0, stream>>>(q, k, v, out, int(kv_len), int(heads),
                                                       int(kv_heads), int(p.chunk), scale_log2);
}

template <int D>
void launch_for_dim(const bf16* q, const bf16* k, const bf16* v, DecodeOut out,
                    const DecodePlan& p, std::int64_t batch, std::int64_t kv_len, std::int64_t heads,
                    std::int64_t kv_heads, cudaStream_t stream) {
  switch (p.heads_per_block) {
    case 8:
      return launch_partials<D, 8>(q, k, v, out, p, batch, kv_len, heads, kv_heads, stream);
    case 4:
      return launch_partials<D, 4>(q, k, v, out, p, batch, kv_len, heads, kv_heads, stream);
    case 2:
      return launch_partials<D, 2>(q, k, v, out, p, batch, kv_len, heads, kv_heads, stream);
    default:
      return launch_partials<D, 1>(q, k, v, out, p, batch, kv_len, heads, kv_heads, stream);
  }
}

}  // namespace

bool decode_attention_supports(std::int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

DecodePlan decode_attention_plan(std::int64_t batch, std::int64_t kv_len, std::int64_t heads,
                                 std::int64_t kv_heads, std::int64_t head_dim, int sms, std::int64_t splits) {
  DecodePlan p;
  const std::int64_t group = heads / kv_heads;
  // A group of exactly 8 query heads per KV head goes to the tensor cores (every KV row read once).
  p.tensor_cores = group == kTcGroup;
  for (int g : {8, 4, 2, 1})
    if (group % g == 0) {
      p.heads_per_block = g;
      break;
    }
  // A chunk shorter than one pass of the block's token groups (CUDA cores) or than one tile per
  // warp (tensor cores) would leave lanes idle. Otherwise the split count follows from how many
  // blocks one split gives against the SMs' resident slots (two tensor-core blocks fit an SM at head
  // dim 128, their rings taking 96 KiB; the CUDA-core kernel's registers decide its count):
  // - tensor cores, at least 0.9 blocks per SM: one split. Each block keeps 64 KiB of K/V in flight, so
  //   one per SM streams at the roof, and a split only adds the merge (H100, 70B, KV 4096: batch 16
  //   92.0 µs with 1 split, 96.1 with 2, 98–101 with 3–8; batch 64 353.1 µs with 1, 363–376 with 2–8);
  // - CUDA cores, more than one wave: enough splits for about 16 waves, so that the last, partial
  //   wave is a small part of the time (7B, batch 64, KV 4096, 3.9 waves with 1 split: 1398.8 µs; 4,
  //   6, 8 splits: 1387.0, 1386.8, 1384.8), in chunks of at least 512 tokens (at KV 512, 5 chunks of
  //   103 tokens took 229.5 µs against 187.7 with one);
  // - else (few blocks): the splits fill the slots in whole waves. These blocks are equally long and
  //   memory-bound, so a last wave a third full costs nearly a whole wave's time (70B at batch 16,
  //   KV 4096, before the rule above: 9 splits, 4.4 waves, 83 % of the read roof; 2 splits, 0.97 of
  //   a wave, 90.5 %).
  const std::int64_t min_chunk =
      p.tensor_cores ? std::int64_t(kTile) * kTcWarps : std::int64_t(kThreads / (head_dim / 8)) * kUnroll;
  const std::int64_t blocks = batch * (p.tensor_cores ? kv_heads : heads / p.heads_per_block);
  const std::int64_t most = std::max<std::int64_t>(1, kv_len / min_chunk);
  const int per_sm = p.tensor_cores ? (head_dim == 64 ? tc_blocks_per_sm<64>() : tc_blocks_per_sm<128>())
                                    : (head_dim == 64 ? cc_blocks_per_sm<64>(p.heads_per_block)
                                                      : cc_blocks_per_sm<128>(p.heads_per_block));
  const std::int64_t slots = std::int64_t(per_sm) * sms;
  if (splits > 0) {
    p.splits = std::min(splits, kv_len);  // the caller's, at most one token a chunk
  } else if (p.tensor_cores && 10 * blocks >= 9 * std::int64_t(sms)) {
    p.splits = 1;
  } else if (!p.tensor_cores && blocks > slots) {
    const std::int64_t waves16 = std::int64_t(std::ceil(16.0 * double(slots) / double(blocks)));
    p.splits = std::clamp<std::int64_t>(waves16, 1, std::max<std::int64_t>(1, std::min(most, kv_len / 512)));
  } else {
    double best = -1;
    for (std::int64_t s = 1; s <= most; ++s) {
      const double waves = double(blocks * s) / double(slots), fill = waves / std::ceil(waves);
      if (fill > best + 1e-9) best = fill, p.splits = s;
      if (blocks * s >= 4 * slots) break;
    }
  }
  p.chunk = (kv_len + p.splits - 1) / p.splits;
  p.splits = (kv_len + p.chunk - 1) / p.chunk;  // no empty chunk
  return p;
}

std::int64_t decode_attention_partial_floats(const DecodePlan& p, std::int64_t batch, std::int64_t heads,
                                             std::int64_t head_dim) {
  return batch * heads * p.splits * (head_dim + 2);
}

void decode_attention(const bf16* q, const bf16* k, const bf16* v, bf16* o, float* partials,
                      const DecodePlan& p, std::int64_t batch, std::int64_t kv_len, std::int64_t heads,
                      std::int64_t kv_heads, std::int64_t head_dim, cudaStream_t stream) {
  float* part_o = partials;
  auto* part_ml = reinterpret_cast<float2*>(partials + batch * heads * p.splits * head_dim);
  const DecodeOut out{part_o, part_ml, p.splits == 1 ? o : nullptr};
  if (p.tensor_cores && head_dim == 64)
    launch_partials_tc<64>(q, k, v, out, p, batch, kv_len, heads, kv_heads, stream);
  else if (p.tensor_cores)
    launch_partials_tc<128>(q, k, v, out, p, batch, kv_len, heads, kv_heads, stream);
  else if (head_dim == 64)
    launch_for_dim<64>(q, k, v, out, p, batch, kv_len, heads, kv_heads, stream);
  else
    launch_for_dim<128>(q, k, v, out, p, batch, kv_len, heads, kv_heads, stream);
  RAFTER_CUDA_LAUNCH_CHECK("decode_partials");
  if (p.splits == 1) return;
  decode_merge<<<unsigned(batch * heads), unsigned(head_dim), 0, stream>>>(part_o, part_ml, o, int(p.splits),
                                                                           int(head_dim));
  RAFTER_CUDA_LAUNCH_CHECK("decode_merge");
}

}  // namespace rafter::workloads::cuda
