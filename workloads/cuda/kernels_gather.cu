// RoPE, embedding gather, cross-entropy (fused log-softmax) and AdamW.
#include "kernel_common.cuh"
#include "kernels.hpp"
#include "cuda_util.hpp"

namespace rafter::workloads::cuda {
namespace {

using namespace dev;

int blocks_for(std::int64_t items, int threads = 256) {
  std::int64_t b = (items + threads - 1) / threads;
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(b, 1 << 20)));
}

// One thread per (token, group of heads, 8-value vector of the first half of the head): its 8
// angles' sin/cos are computed once and applied to every head of its group in q, then in k
// (rotate-half pairing with the vector d/2 further), four heads' loads in flight at a time. Groups
// span all heads when there are tokens enough to fill the GPU (prefill: sin/cos once per token);
// with few tokens (decode, batch 8: 64 threads for 32 heads walked serially took 38 µs) the heads
// are split across threads so that the launch has parallelism at all.
__device__ __forceinline__ void rope_heads(const bf16* __restrict__ src, bf16* __restrict__ dst, int h_begin,
                                           int h_end, int d, const float (&c)[8], const float (&s)[8]) {
  constexpr int kUnroll = 4;
  for (int h0 = h_begin; h0 < h_end; h0 += kUnroll) {
    float lo[kUnroll][8], hi[kUnroll][8];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (h0 + u < h_end) {
        to_float8(load8(src + (h0 + u) * d), lo[u]);
        to_float8(load8(src + (h0 + u) * d + d / 2), hi[u]);
      }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (h0 + u < h_end) {
        float olo[8], ohi[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          olo[e] = lo[u][e] * c[e] - hi[u][e] * s[e];
          ohi[e] = hi[u][e] * c[e] + lo[u][e] * s[e];
        }
        store8(dst + (h0 + u) * d, from_float8(olo));
        store8(dst + (h0 + u) * d + d / 2, from_float8(ohi));
      }
  }
}

__global__ void rope_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k, bf16* __restrict__ qo,
                            bf16* __restrict__ ko, std::int64_t tokens, std::int64_t seq, int q_heads,
                            int kv_heads, int d, int heads_per_group, float log2_base, float sign) {
  const int half_vecs = d / 16;
  const int groups = (max(q_heads, kv_heads) + heads_per_group - 1) / heads_per_group;
  const std::int64_t items = tokens * groups * half_vecs;
  for (std::int64_t it = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; it < items;
       it += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t token = it / (std::int64_t(groups) * half_vecs);
    const int rest = static_cast<int>(it % (std::int64_t(groups) * half_vecs));
    const int h_begin = (rest / half_vecs) * heads_per_group;
    const int j = (rest % half_vecs) * 8;
    const float pos = static_cast<float>(token % seq);
    float c[8], s[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float inv_freq = exp2f(-log2_base * (2.f * (j + e)) / d);
      sincosf(pos * inv_freq, &s[e], &c[e]);
      s[e] *= sign;
    }
    rope_heads(q + token * q_heads * d + j, qo + token * q_heads * d + j, h_begin,
               min(q_heads, h_begin + heads_per_group), d, c, s);
    if (k)
      rope_heads(k + token * kv_heads * d + j, ko + token * kv_heads * d + j, h_begin,
                 min(kv_heads, h_begin + heads_per_group), d, c, s);
  }
}

__global__ void embedding_fwd_kernel(const std::int32_t* __restrict__ ids, const bf16* __restrict__ table,
                                     bf16* __restrict__ out, std::int64_t tokens, int hidden) {
  const int vecs = hidden / 8;
  for (std::int64_t it = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; it < tokens * vecs;
       it += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t t = it / vecs;
    int v = static_cast<int>(it % vecs);
    store8(out + t * hidden + v * 8, load8(table + std::int64_t(ids[t]) * hidden + v * 8));
  }
}

// A chunk of VEC logits as floats (VEC = 8: one 16-byte load; 1 when rows are not 16-byte aligned).
template <int VEC>
__device__ __forceinline__ void load_logits(const bf16* p, float (&f)[VEC]) {
  if constexpr (VEC == 8) {
    to_float8(load8_stream(p), f);
  } else {
    f[0] = __bfloat162float(p[0]);
  }
}

// Forward: one pass with an online max/sum (log2 domain), the target logit picked on the way.
template <int VEC>
__global__ void cross_entropy_fwd_kernel(const bf16* __restrict__ logits, const std::int32_t* __restrict__ targets,
                                         float* __restrict__ loss, float* __restrict__ lse_out, int vocab) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const bf16* x = logits + row * vocab;
  const int chunks = vocab / VEC;
  constexpr float kLog2e = 1.4426950408889634f;
  float mx = -INFINITY, sum = 0.f;
  for (int v = threadIdx.x; v < chunks; v += blockDim.x) {
    float f[VEC];
    load_logits<VEC>(x + v * VEC, f);
    float local = f[0];
#pragma unroll
    for (int e = 1; e < VEC; ++e) local = fmaxf(local, f[e]);
    float nm = fmaxf(mx, local * kLog2e);
    sum *= exp2f(mx - nm);
#pragma unroll
    for (int e = 0; e < VEC; ++e) sum += exp2f(f[e] * kLog2e - nm);
    mx = nm;
  }
  float gmx = block_reduce<true>(mx, scratch);
  float gsum = block_reduce<false>(mx == -INFINITY ? 0.f : sum * exp2f(mx - gmx), scratch);
  if (threadIdx.x == 0) {
    float lse = (gmx + log2f(gsum)) / kLog2e;
    loss[row] = lse - __bfloat162float(x[targets[row]]);
    if (lse_out) lse_out[row] = lse;
  }
}

// Backward from the logits alone, one block per row: an online max/sum pass that leaves the row in
// L2 (plain loads), then a second pass that re-reads it from L2 (last use) and writes the gradient.
// HBM sees one read and one write per logit; the row is never held in registers, so many rows are
// in flight per SM.
template <int VEC>
__global__ void cross_entropy_bwd_online_kernel(const bf16* __restrict__ logits, const std::int32_t* __restrict__ targets,
                                                bf16* __restrict__ dlogits, int vocab, float scale) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const bf16* x = logits + row * vocab;
  const int chunks = vocab / VEC;
  constexpr float kLog2e = 1.4426950408889634f;
  float mx = -INFINITY, sum = 0.f;
  for (int v = threadIdx.x; v < chunks; v += blockDim.x) {
    float f[VEC];
    if constexpr (VEC == 8) to_float8(load8(x + v * 8), f);
    else f[0] = __bfloat162float(x[v]);
    float local = f[0];
#pragma unroll
    for (int e = 1; e < VEC; ++e) local = fmaxf(local, f[e]);
    float nm = fmaxf(mx, local * kLog2e);
    sum *= exp2f(mx - nm);
#pragma unroll
    for (int e = 0; e < VEC; ++e) sum += exp2f(f[e] * kLog2e - nm);
    mx = nm;
  }
  const float gmx = block_reduce<true>(mx, scratch);
  const float gsum = block_reduce<false>(mx == -INFINITY ? 0.f : sum * exp2f(mx - gmx), scratch);
  const float lse2 = gmx + log2f(gsum);  // log2-domain log-sum-exp
  const int target = targets[row];
  for (int v = threadIdx.x; v < chunks; v += blockDim.x) {
    float f[VEC];
    load_logits<VEC>(x + v * VEC, f);
#pragma unroll
    for (int e = 0; e < VEC; ++e) f[e] = (exp2f(f[e] * kLog2e - lse2) - (v * VEC + e == target ? 1.f : 0.f)) * scale;
    if constexpr (VEC == 8) {
      store8(dlogits + row * vocab + v * 8, from_float8(f));
    } else {
      dlogits[row * vocab + v] = __float2bfloat16_rn(f[0]);
    }
  }
}

// 8 elements per thread: FP32 master, m, v as two float4 each, BF16 gradient and copy as one vector.
__global__ void adamw_kernel(float* __restrict__ master, const bf16* __restrict__ grad, float* __restrict__ m,
                             float* __restrict__ v, bf16* __restrict__ out, std::int64_t n, AdamWParams p,
                             float bc1, float bc2) {
  const std::int64_t vecs = n / 8;
  for (std::int64_t it = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; it < vecs;
       it += std::int64_t(gridDim.x) * blockDim.x) {
    float g[8], w[8], mm[8], vv[8];
    // Plain loads and stores: cuda.bandwidth's streams with evict-first hints (.cs) ran slower on the
    // H100 than without (3.02 vs 3.06 TB/s reading, 3.19 vs 3.30 writing).
    to_float8(load8(grad + it * 8), g);
    auto ld = [&](const float* src, float (&dst)[8]) {
      // Plain (coherent) loads: the kernel writes these arrays in place.
      float4 a = *reinterpret_cast<const float4*>(src + it * 8);
      float4 b = *reinterpret_cast<const float4*>(src + it * 8 + 4);
      dst[0] = a.x, dst[1] = a.y, dst[2] = a.z, dst[3] = a.w, dst[4] = b.x, dst[5] = b.y, dst[6] = b.z, dst[7] = b.w;
    };
    ld(master, w), ld(m, mm), ld(v, vv);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      mm[e] = p.beta1 * mm[e] + (1.f - p.beta1) * g[e];
      vv[e] = p.beta2 * vv[e] + (1.f - p.beta2) * g[e] * g[e];
      float update = (mm[e] / bc1) / (sqrtf(vv[e] / bc2) + p.eps);
      w[e] = w[e] - p.lr * (update + p.weight_decay * w[e]);
    }
    auto st = [&](float* dst, const float (&src)[8]) {
      *reinterpret_cast<float4*>(dst + it * 8) = make_float4(src[0], src[1], src[2], src[3]);
      *reinterpret_cast<float4*>(dst + it * 8 + 4) = make_float4(src[4], src[5], src[6], src[7]);
    };
    st(master, w), st(m, mm), st(v, vv);
    store8(out + it * 8, from_float8(w));
  }
  if (blockIdx.x == 0)  // n not a multiple of 8: the last few elements one by one
    for (std::int64_t i = vecs * 8 + threadIdx.x; i < n; i += blockDim.x) {
      float g = __bfloat162float(grad[i]);
      float mm = p.beta1 * m[i] + (1.f - p.beta1) * g, vv = p.beta2 * v[i] + (1.f - p.beta2) * g * g;
      float w = master[i];
      w -= p.lr * ((mm / bc1) / (sqrtf(vv / bc2) + p.eps) + p.weight_decay * w);
      master[i] = w, m[i] = mm, v[i] = vv;
      out[i] = __float2bfloat16_rn(w);
    }
}

void require(bool ok, const char* what) {
  if (!ok) throw InputError(what);
}

}  // namespace

// Heads per thread: all of them while the launch still has >= kRopeMinThreads threads (sin/cos
// once per token and vector), else halved until it has (or one head per thread).
constexpr std::int64_t kRopeMinThreads = 64 * 1024;

static int rope_heads_per_group(std::int64_t tokens, std::int64_t heads, std::int64_t head_dim) {
  std::int64_t per_group = heads;
  const auto threads = [&](std::int64_t g) { return tokens * ((heads + g - 1) / g) * (head_dim / 16); };
  while (per_group > 1 && threads(per_group) < kRopeMinThreads) per_group = (per_group + 1) / 2;
  return static_cast<int>(per_group);
}

void rope_fwd(const bf16* q, const bf16* k, bf16* q_out, bf16* k_out, std::int64_t tokens, std::int64_t seq,
              std::int64_t q_heads, std::int64_t kv_heads, std::int64_t head_dim, float base, bool inverse,
              cudaStream_t stream) {
  require(head_dim % 16 == 0, "rope: head_dim must be a multiple of 16");
  const std::int64_t heads = std::max(q_heads, k ? kv_heads : 0);
  const int per_group = rope_heads_per_group(tokens, heads, head_dim);
  const std::int64_t items = tokens * ((heads + per_group - 1) / per_group) * (head_dim / 16);
  rope_kernel<<<blocks_for(items), 256, 0, stream>>>(q, k, q_out, k_out, tokens, seq, int(q_heads),
                                                     int(k ? kv_heads : 0), int(head_dim), per_group,
                                                     std::log2(base), inverse ? -1.f : 1.f);
  RAFTER_CUDA_LAUNCH_CHECK("rope_kernel");
}

void embedding_fwd(const std::int32_t* ids, const bf16* table, bf16* out, std::int64_t tokens, std::int64_t hidden,
                   cudaStream_t stream) {
  require(hidden % 8 == 0, "embedding: hidden must be a multiple of 8");
  embedding_fwd_kernel<<<blocks_for(tokens * hidden / 8), 256, 0, stream>>>(ids, table, out, tokens, int(hidden));
  RAFTER_CUDA_LAUNCH_CHECK("embedding_fwd_kernel");
}

void cross_entropy_fwd(const bf16* logits, const std::int32_t* targets, float* loss, float* lse, std::int64_t tokens,
                       std::int64_t vocab, cudaStream_t stream) {
  if (vocab % 8 == 0)
    cross_entropy_fwd_kernel<8><<<tokens, 512, 0, stream>>>(logits, targets, loss, lse, int(vocab));
  else
    cross_entropy_fwd_kernel<1><<<tokens, 512, 0, stream>>>(logits, targets, loss, lse, int(vocab));
  RAFTER_CUDA_LAUNCH_CHECK("cross_entropy_fwd_kernel");
}

void adamw_step(float* master, const bf16* grad, float* m, float* v, bf16* weight_bf16, std::int64_t n,
                const AdamWParams& p, cudaStream_t stream) {
  float bc1 = 1.f - std::pow(p.beta1, float(p.step)), bc2 = 1.f - std::pow(p.beta2, float(p.step));
  adamw_kernel<<<blocks_for(n / 8 + 1), 256, 0, stream>>>(master, grad, m, v, weight_bf16, n, p, bc1, bc2);
  RAFTER_CUDA_LAUNCH_CHECK("adamw_kernel");
}

// 1024 threads per row: two rows per SM in flight (2 × 64 KB at vocab 32000), so the second pass
// finds its row in L1/L2. With 256 threads (8 rows per SM, 67 MB over the chip, more than the L2)
// rows were evicted before their second pass and read twice from HBM (measured: 1.96 TB/s).
constexpr int kCeBwdThreads = 1024;

void cross_entropy_bwd_online(const bf16* logits, const std::int32_t* targets, bf16* dlogits, std::int64_t tokens,
                              std::int64_t vocab, float dloss_scale, cudaStream_t stream) {
  if (vocab % 8 == 0)
    cross_entropy_bwd_online_kernel<8><<<tokens, kCeBwdThreads, 0, stream>>>(logits, targets, dlogits, int(vocab),
                                                                             dloss_scale);
  else
    cross_entropy_bwd_online_kernel<1><<<tokens, kCeBwdThreads, 0, stream>>>(logits, targets, dlogits, int(vocab),
                                                                             dloss_scale);
  RAFTER_CUDA_LAUNCH_CHECK("cross_entropy_bwd_online_kernel");
}

}  // namespace rafter::workloads::cuda
