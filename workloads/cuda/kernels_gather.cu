// RoPE, embedding gather, cross-entropy (fused log-softmax) and AdamW.
#include <algorithm>

#include "cuda_util.hpp"
#include "kernel_common.cuh"
#include "kernels.hpp"

namespace rafter::workloads::cuda {
namespace {

using namespace dev;

int blocks_for(std::int64_t items, int threads = 256) {
  std::int64_t b = (items + threads - 1) / threads;
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(b, 1 << 20)));
}

// One block per token; its threads walk the token's q heads, then its k heads, one 8-value
// vector of the first half of a head each (rotate-half pairing with the vector d/2 further):
// thread i reads bytes [16 i, 16 i + 16) of each half, so a warp covers four whole heads and the
// grid streams q and k in address order (walking every head of a token per thread, with threads
// spread over all tokens at once, reached 2.67 TB/s on the H100 at 16384 tokens: 16384 open 8 KB
// rows at a time). The token's d/2 angles are computed once, by d/2 threads into shared memory,
// while the first vectors' loads are in flight.
struct RopeSlot {
  const bf16* src = nullptr;
  bf16* dst = nullptr;
  int j = 0;  // first angle of the vector
};

__device__ __forceinline__ RopeSlot rope_slot(int item, int q_items, int half_vecs, int d, const bf16* q,
                                              const bf16* k, bf16* qo, bf16* ko, std::int64_t token,
                                              int q_heads, int kv_heads) {
  const bool in_q = item < q_items;
  const int rest = in_q ? item : item - q_items;
  const int head = rest / half_vecs;
  RopeSlot s;
  s.j = (rest % half_vecs) * 8;
  const std::int64_t at = (token * (in_q ? q_heads : kv_heads) + head) * d + s.j;
  s.src = (in_q ? q : k) + at;
  s.dst = (in_q ? qo : ko) + at;
  return s;
}

__global__ void rope_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k, bf16* __restrict__ qo,
                            bf16* __restrict__ ko, std::int64_t seq, int q_heads, int kv_heads, int d,
                            float log2_base, float sign) {
  extern __shared__ float2 cos_sin[];  // d/2 angles of this token
  const std::int64_t token = blockIdx.x;
  const int half_vecs = d / 16;
  const int q_items = q_heads * half_vecs;
  const int items = q_items + (k ? kv_heads * half_vecs : 0);
  int item = threadIdx.x;
  RopeSlot slot;
  Bf16x8 lo, hi;
  if (item < items) {
    slot = rope_slot(item, q_items, half_vecs, d, q, k, qo, ko, token, q_heads, kv_heads);
    lo = load8(slot.src);
    hi = load8(slot.src + d / 2);
  }
  const float pos = static_cast<float>(token % seq);
  for (int i = threadIdx.x; i < d / 2; i += blockDim.x) {
    float s, c;
    sincosf(pos * exp2f(-log2_base * (2.f * i) / d), &s, &c);
    cos_sin[i] = make_float2(c, s * sign);
  }
  __syncthreads();
  while (item < items) {
    float l[8], h[8], ol[8], oh[8];
    to_float8(lo, l);
    to_float8(hi, h);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float2 cs = cos_sin[slot.j + e];
      ol[e] = l[e] * cs.x - h[e] * cs.y;
      oh[e] = h[e] * cs.x + l[e] * cs.y;
    }
    bf16* dst = slot.dst;
    item += blockDim.x;
    if (item < items) {  // the next vector's loads go out before this one's stores
      slot = rope_slot(item, q_items, half_vecs, d, q, k, qo, ko, token, q_heads, kv_heads);
      lo = load8(slot.src);
      hi = load8(slot.src + d / 2);
    }
    store8(dst, from_float8(ol));
    store8(dst + d / 2, from_float8(oh));
  }
}

// One block per token: its id is read once (one broadcast load), then the table row is copied
// in address order, two 16-byte vectors per thread in flight. (A flat loop over token x vector
// computed a 64-bit division and re-read the id per vector: 91.1 us at 16384 x 4096 on the H100
// against torch.compile's 88.4.)
__global__ void __launch_bounds__(256)
    embedding_fwd_kernel(const std::int32_t* __restrict__ ids, const bf16* __restrict__ table,
                         bf16* __restrict__ out, int hidden) {
  const std::int64_t t = blockIdx.x;
  const bf16* row = table + std::int64_t(ids[t]) * hidden;
  bf16* o = out + t * hidden;
  const int vecs = hidden / 8;
  for (int v = threadIdx.x; v < vecs; v += 2 * blockDim.x) {
    const int w = v + blockDim.x;
    const Bf16x8 a = load8(row + v * 8);
    Bf16x8 b;
    if (w < vecs) b = load8(row + w * 8);
    store8(o + v * 8, a);
    if (w < vecs) store8(o + w * 8, b);
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

void rope_fwd(const bf16* q, const bf16* k, bf16* q_out, bf16* k_out, std::int64_t tokens, std::int64_t seq,
              std::int64_t q_heads, std::int64_t kv_heads, std::int64_t head_dim, float base, bool inverse,
              cudaStream_t stream) {
  require(head_dim % 16 == 0, "rope: head_dim must be a multiple of 16");
  require(tokens < (std::int64_t(1) << 31), "rope: more than 2^31 - 1 tokens");
  const std::int64_t items = (q_heads + (k ? kv_heads : 0)) * (head_dim / 16);
  require(items <= (std::int64_t(1) << 30), "rope: more than 2^30 vectors per token");
  // One vector per thread up to 1024 threads (decode's few tokens still get every head in flight).
  const int threads = static_cast<int>(std::clamp<std::int64_t>((items + 31) / 32 * 32, 32, 1024));
  if (tokens == 0) return;
  rope_kernel<<<static_cast<unsigned>(tokens), threads, head_dim / 2 * sizeof(float2), stream>>>(
      q, k, q_out, k_out, seq, int(q_heads), int(k ? kv_heads : 0), int(head_dim), std::log2(base),
      inverse ? -1.f : 1.f);
  RAFTER_CUDA_LAUNCH_CHECK("rope_kernel");
}

void embedding_fwd(const std::int32_t* ids, const bf16* table, bf16* out, std::int64_t tokens,
                   std::int64_t hidden, cudaStream_t stream) {
  require(hidden % 8 == 0, "embedding: hidden must be a multiple of 8");
  require(tokens < (std::int64_t(1) << 31), "embedding: more than 2^31 - 1 tokens");
  if (tokens == 0) return;
  const int threads = static_cast<int>(std::clamp<std::int64_t>((hidden / 16 + 31) / 32 * 32, 32, 256));
  embedding_fwd_kernel<<<static_cast<unsigned>(tokens), threads, 0, stream>>>(ids, table, out, int(hidden));
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
