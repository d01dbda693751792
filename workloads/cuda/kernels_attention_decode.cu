// Split-KV decode attention: one query token per sequence against a BF16 KV cache. Decode reads
// the whole cache once and does little arithmetic per byte, so the kernel is built to keep HBM
// busy: the KV cache is cut into chunks so that there are several blocks per SM even at batch 1,
// each block streams its chunk with several 16-byte loads in flight per lane, and the query heads
// that share a KV head (GQA) are served by the same block, so the cache is read once per group.
// Each block leaves an unnormalised partial (running max, sum, FP32 accumulator); a second kernel
// merges the chunks of each (sequence, head) in log-sum-exp form.
#include <algorithm>

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

// Block (split, head group, sequence): G query heads h0..h0+G-1 sharing KV head hk, keys
// [split·chunk, min(kv_len, (split+1)·chunk)). Groups of D/8 lanes take one token each.
template <int D, int G>
__global__ void __launch_bounds__(kThreads) decode_partials(const bf16* __restrict__ q, const bf16* __restrict__ k,
                                                            const bf16* __restrict__ v, float* __restrict__ part_o,
                                                            float2* __restrict__ part_ml, int kv_len, int heads,
                                                            int kv_heads, int chunk, float scale_log2) {
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
    part_o[(bh * splits + split) * D + i % D] = s_acc[i / D][i % D];
    if (i % D == 0) part_ml[bh * splits + split] = make_float2(m[i / D], s_l[i / D]);
  }
}

// One block per (sequence, head), one thread per element of the head: O = Σ_s acc_s·2^(m_s−M) / Σ_s l_s·2^(m_s−M).
__global__ void decode_merge(const float* __restrict__ part_o, const float2* __restrict__ part_ml, bf16* __restrict__ o,
                             int splits, int d) {
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

template <int D, int G>
void launch_partials(const bf16* q, const bf16* k, const bf16* v, float* part_o, float2* part_ml,
                     const DecodePlan& p, std::int64_t batch, std::int64_t kv_len, std::int64_t heads,
                     std::int64_t kv_heads, cudaStream_t stream) {
  const dim3 grid(unsigned(p.splits), unsigned(heads / G), unsigned(batch));
  const float scale_log2 = kLog2e / sqrtf(float(D));
  decode_partials<D, G><<<grid, kThreads, 0, stream>>>(q, k, v, part_o, part_ml, int(kv_len), int(heads),
                                                       int(kv_heads), int(p.chunk), scale_log2);
}

template <int D>
void launch_for_dim(const bf16* q, const bf16* k, const bf16* v, float* part_o, float2* part_ml, const DecodePlan& p,
                    std::int64_t batch, std::int64_t kv_len, std::int64_t heads, std::int64_t kv_heads,
                    cudaStream_t stream) {
  switch (p.heads_per_block) {
    case 8: return launch_partials<D, 8>(q, k, v, part_o, part_ml, p, batch, kv_len, heads, kv_heads, stream);
    case 4: return launch_partials<D, 4>(q, k, v, part_o, part_ml, p, batch, kv_len, heads, kv_heads, stream);
    case 2: return launch_partials<D, 2>(q, k, v, part_o, part_ml, p, batch, kv_len, heads, kv_heads, stream);
    default: return launch_partials<D, 1>(q, k, v, part_o, part_ml, p, batch, kv_len, heads, kv_heads, stream);
  }
}

}  // namespace

bool decode_attention_supports(std::int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

DecodePlan decode_attention_plan(std::int64_t batch, std::int64_t kv_len, std::int64_t heads, std::int64_t kv_heads,
                                 std::int64_t head_dim, int sms) {
  DecodePlan p;
  const std::int64_t group = heads / kv_heads;
  for (int g : {8, 4, 2, 1})
    if (group % g == 0) {
      p.heads_per_block = g;
      break;
    }
  // Four blocks per SM hide the HBM latency; a chunk shorter than one pass of the block's token
  // groups would leave lanes idle.
  const std::int64_t min_chunk = std::int64_t(kThreads / (head_dim / 8)) * kUnroll;
  const std::int64_t blocks = batch * (heads / p.heads_per_block);
  const std::int64_t want = (4 * std::int64_t(sms) + blocks - 1) / blocks;
  const std::int64_t most = std::max<std::int64_t>(1, kv_len / min_chunk);
  p.splits = std::clamp<std::int64_t>(want, 1, most);
  p.chunk = (kv_len + p.splits - 1) / p.splits;
  p.splits = (kv_len + p.chunk - 1) / p.chunk;  // no empty chunk
  return p;
}

std::int64_t decode_attention_partial_floats(const DecodePlan& p, std::int64_t batch, std::int64_t heads,
                                             std::int64_t head_dim) {
  return batch * heads * p.splits * (head_dim + 2);
}

void decode_attention(const bf16* q, const bf16* k, const bf16* v, bf16* o, float* partials, const DecodePlan& p,
                      std::int64_t batch, std::int64_t kv_len, std::int64_t heads, std::int64_t kv_heads,
                      std::int64_t head_dim, cudaStream_t stream) {
  float* part_o = partials;
  auto* part_ml = reinterpret_cast<float2*>(partials + batch * heads * p.splits * head_dim);
  if (head_dim == 64)
    launch_for_dim<64>(q, k, v, part_o, part_ml, p, batch, kv_len, heads, kv_heads, stream);
  else
    launch_for_dim<128>(q, k, v, part_o, part_ml, p, batch, kv_len, heads, kv_heads, stream);
  RAFTER_CUDA_LAUNCH_CHECK("decode_partials");
  decode_merge<<<unsigned(batch * heads), unsigned(head_dim), 0, stream>>>(part_o, part_ml, o, int(p.splits),
                                                                           int(head_dim));
  RAFTER_CUDA_LAUNCH_CHECK("decode_merge");
}

}  // namespace rafter::workloads::cuda
