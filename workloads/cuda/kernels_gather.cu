// RoPE, embedding gather, cross-entropy (fused log-softmax) and AdamW.
#include <algorithm>

#include "cuda_util.hpp"
#include "kernel_common.cuh"
#include "kernels.hpp"
#include "row_divider.hpp"

namespace rafter::workloads::cuda {
namespace {

using namespace dev;

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
    store8(slot.dst, from_float8(ol));
    store8(slot.dst + d / 2, from_float8(oh));
    // Past 1024 vectors a token only: the next vector is loaded after this one's stores, so no
    // register holds two vectors (43 registers, 5 blocks of 256 an SM, when the next loads went
    // out first; 32 and 8 blocks now). H200, 16384 tokens × 32 heads: 72.5 → 65.2–65.8 µs,
    // torch.compile 65.7–66.6 in the same calls.
    item += blockDim.x;
    if (item < items) {
      slot = rope_slot(item, q_items, half_vecs, d, q, k, qo, ko, token, q_heads, kv_heads);
      lo = load8(slot.src);
      hi = load8(slot.src + d / 2);
    }
  }
}

// Inductor's layout: blocks of 128 threads over the flat output, one 16-byte vector a thread; the
// row comes from a 32-bit multiply-high division (row_divider.hpp; exact below 2^31). The id,
// read by every vector of its row, is kept in L1 and L2 (evict-last), as Inductor loads it. On
// the H200 at 16384 x 4096, timed by one harness on the same tensors (4 rounds, medians): 65.5-65.9
// us against torch.compile's 65.8-66.1. In an earlier call, one block per token with a plain id
// load took 66.6-67.0 and this layout with a plain id load 69.0-69.9 (bench/true_roofs_results.md).
constexpr int kEmbeddingThreads = 128;

__device__ __forceinline__ std::int32_t load_id_keep(const std::int32_t* p) {
  std::int32_t v;
  asm volatile(
      "{ .reg .b64 pol; createpolicy.fractional.L2::evict_last.b64 pol, 1.0;\n"
      "  ld.global.L1::evict_last.L2::cache_hint.u32 %0, [%1], pol; }"
      : "=r"(v)
      : "l"(p));
  return v;
}

__global__ void __launch_bounds__(kEmbeddingThreads)
    embedding_fwd_kernel(const std::int32_t* __restrict__ ids, const uint4* __restrict__ table,
                         uint4* __restrict__ out, unsigned vecs, unsigned row_vecs, RowDivider div) {
  const unsigned j = blockIdx.x * kEmbeddingThreads + threadIdx.x;
  if (j >= vecs) return;
  const unsigned t = div.divide(j);
  const unsigned c = j - t * row_vecs;
  out[j] = __ldg(table + std::size_t(load_id_keep(ids + t)) * row_vecs + c);
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

// AdamW's update of one element in place (FP32 master, moments; the gradient in FP32).
__device__ __forceinline__ void adamw_element(float& w, float& mm, float& vv, float g, const AdamWParams& p,
                                              float bc1, float bc2) {
  mm = p.beta1 * mm + (1.f - p.beta1) * g;
  vv = p.beta2 * vv + (1.f - p.beta2) * g * g;
  w -= p.lr * ((mm / bc1) / (sqrtf(vv / bc2) + p.eps) + p.weight_decay * w);
}

// The same update in the arithmetic of Inductor's kernel for it (adamw_wide_kernel): the bias
// corrections as reciprocals rb1 = 1/bc1, rb2 = 1/bc2 taken on the host, the moments as FMAs, a
// correctly rounded square root and the fast division (div.full, within 2 ulp), then
// w − lr·(q + wd·w) as two FMAs. 48 registers in that kernel against 54 with adamw_element.
__device__ __forceinline__ void adamw_element_rcp(float& w, float& mm, float& vv, float g,
                                                  const AdamWParams& p, float rb1, float rb2) {
  mm = fmaf(mm, p.beta1, g * (1.f - p.beta1));
  vv = fmaf(vv, p.beta2, (g * g) * (1.f - p.beta2));
  const float q = __fdividef(mm * rb1, __fsqrt_rn(vv * rb2) + p.eps);
  w = fmaf(fmaf(w, p.weight_decay, q), -p.lr, w);
}

// One 4-element chunk at `at`: update, then the stores in torch.compile's order.
template <class Index>
__device__ __forceinline__ void adamw_chunk(float* master, float* m, float* v, bf16* out, Index at, float4 w,
                                            float4 mm, float4 vv, uint2 raw, const AdamWParams& p, float bc1,
                                            float bc2) {
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  const float g[4] = {lo.x, lo.y, hi.x, hi.y};
  float* ww = &w.x;
  float* wm = &mm.x;
  float* wv = &vv.x;
#pragma unroll
  for (int e = 0; e < 4; ++e) adamw_element(ww[e], wm[e], wv[e], g[e], p, bc1, bc2);
  __nv_bfloat162 pair[2] = {__floats2bfloat162_rn(ww[0], ww[1]), __floats2bfloat162_rn(ww[2], ww[3])};
  *reinterpret_cast<uint2*>(out + at) = *reinterpret_cast<const uint2*>(pair);
  *reinterpret_cast<float4*>(v + at) = vv;
  *reinterpret_cast<float4*>(m + at) = mm;
  *reinterpret_cast<float4*>(master + at) = w;
}

// Elements at, at + step, … below n one by one (an array's last elements), each through
// update(w, m, v, g).
template <class Index, class Update>
__device__ __forceinline__ void adamw_tail(float* master, const bf16* grad, float* m, float* v, bf16* out,
                                           Index at, Index n, Index step, Update update) {
  for (Index i = at; i < n; i += step) {
    float x = master[i], m1 = m[i], v1 = v[i];
    update(x, m1, v1, __bfloat162float(grad[i]));
    master[i] = x, m[i] = m1, v[i] = v1;
    out[i] = __float2bfloat16_rn(x);
  }
}

// 4 elements a thread (every warp-wide access one contiguous span), loads and stores in the order
// torch.compile's kernel issues them (master, m, grad, v; out, v, m, master), 32-bit indices where
// n allows. Plain (coherent) loads: the kernel writes the arrays in place; cuda.bandwidth's streams
// with evict-first hints (.cs) ran slower on the H100. The launch shape follows the DRAM bandwidth
// an SM serves (adamw_step): this kernel on the H100, adamw_wide_kernel on the H200. Median µs at
// 2^28 parameters, each against torch.compile in the same call:
// - H100 (about 25 GB/s an SM): 1024 threads × 1 chunk 2509.6 against 2507.5–2510.1 (compile's
//   faster mode; it also runs at 2531.8–2533.5); 32-bit indices with 512 threads 2520.4, with 128
//   threads 2524.5; 2 or 4 chunks 2517.2–2522.8; a grid of 8 blocks an SM walking the array 2729.1.
// - H200 (about 37 GB/s an SM), three machines. First: 1024 × 1 1842.8–1844.0, 256 × 1
//   1806.0–1806.5, 128 × 2 1804.5–1804.8, 256 × 2 1828.3, 128 × 4 1844.7–1845.2; compile
//   1796.0–1796.7. Second: 128 × 2 1797.1–1798.0, 256 × 1 1796.4–1797.0, 1024 × 1 1818.0–1818.4;
//   compile 1808.0–1808.8; reciprocal bias corrections or loads grouped by array gained nothing.
//   Third: 128 × 2 1804.8–1804.9, compile 1791.6–1791.9 (0.7 % ahead of this kernel). With 40
//   registers a 1024-thread block holds an SM alone: 57 KB of loads in flight, enough for the
//   H100's bandwidth and not for the H200's; 128 × 2 (56 registers, 9 blocks) kept 126 KB, and
//   adamw_wide_kernel's layout is faster again.
// No __launch_bounds__: with (1024) ptxas fit 32 registers and spilled (H100, 2970 us).
template <class Index>
__global__ void adamw_kernel(float* __restrict__ master, const bf16* __restrict__ grad, float* __restrict__ m,
                             float* __restrict__ v, bf16* __restrict__ out, Index n, AdamWParams p, float bc1,
                             float bc2) {
  const Index at = (Index(blockIdx.x) * Index(blockDim.x) + Index(threadIdx.x)) * 4;
  if (at + 4 <= n) {
    const float4 w = *reinterpret_cast<const float4*>(master + at);
    const float4 mm = *reinterpret_cast<const float4*>(m + at);
    const uint2 raw = __ldg(reinterpret_cast<const uint2*>(grad + at));
    const float4 vv = *reinterpret_cast<const float4*>(v + at);
    adamw_chunk(master, m, v, out, at, w, mm, vv, raw, p, bc1, bc2);
  } else {
    adamw_tail(master, grad, m, v, out, at, n, Index(1),
               [&](float& x, float& m1, float& v1, float g) { adamw_element(x, m1, v1, g, p, bc1, bc2); });
  }
}

// The H200's form (adamw_step): Inductor's layout for this update (its XBLOCK 1024 × 4 warps
// configuration, PTX read from its cache). A thread loads 8 consecutive elements (two adjacent
// 16-byte loads an FP32 array, one of the BF16 gradient), writes its 8 BF16 weights in one 16-byte
// store, and passes each FP32 array through shared memory so that it stores 4 elements twice, 512
// apart (every warp-wide store one contiguous 512 bytes), in Inductor's arithmetic
// (adamw_element_rcp). Median µs at 2^28 parameters on the H200 (bench/true_roofs_results.md).
// One call, 5 rounds: this kernel 1789.1–1789.9; with adamw_element's IEEE divisions and 2-way
// bank conflicts in the staging 1791.1–1791.9; the gradient by a plain load (as Inductor) instead
// of ld.global.nc 1788.5–1789.8; each warp staging its own 1 KB behind __syncwarp 1795.9–1796.7;
// torch.compile 1787.3–1788.4 (XBLOCK 1024 × 4 warps), 1802.2 (XBLOCK 512 × 8 warps). Earlier
// calls: 128 threads × 2 chunks of 4 (the form before) 1797.8–1798.0 beside 1790.0–1790.2 for
// this layout; the same 8 elements stored from registers (32-byte strides) 1850.6–1851.5; 2
// elements a thread, as Inductor's XBLOCK 512, 1817.9–1818.0 with 128 threads and 1823.8–1824.0
// with 256, against 128 × 2's 1804.7–1805.0.
constexpr int kAdamWideThreads = 128, kAdamWideBlock = kAdamWideThreads * 8;
template <class Index>
__global__ void __launch_bounds__(kAdamWideThreads)
    adamw_wide_kernel(float* __restrict__ master, const bf16* __restrict__ grad, float* __restrict__ m,
                      float* __restrict__ v, bf16* __restrict__ out, Index n, AdamWParams p, float rb1,
                      float rb2) {
  __shared__ float4 stage[kAdamWideBlock / 4];
  const Index base = Index(blockIdx.x) * kAdamWideBlock, at = base + Index(threadIdx.x) * 8;
  const auto update = [&](float& x, float& m1, float& v1, float g) {
    adamw_element_rcp(x, m1, v1, g, p, rb1, rb2);
  };
  if (base + kAdamWideBlock > n) {  // the last block of an array that is not whole blocks
    adamw_tail(master, grad, m, v, out, base + Index(threadIdx.x), n, Index(kAdamWideThreads), update);
    return;
  }
  float4 w[2], mm[2], vv[2];
  w[0] = *reinterpret_cast<const float4*>(master + at);
  w[1] = *reinterpret_cast<const float4*>(master + at + 4);
  mm[0] = *reinterpret_cast<const float4*>(m + at);
  mm[1] = *reinterpret_cast<const float4*>(m + at + 4);
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(grad + at));
  vv[0] = *reinterpret_cast<const float4*>(v + at);
  vv[1] = *reinterpret_cast<const float4*>(v + at + 4);
  const unsigned gw[4] = {raw.x, raw.y, raw.z, raw.w};
  unsigned wb[4];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float* ww = &w[h].x;
    float* wm = &mm[h].x;
    float* wv = &vv[h].x;
#pragma unroll
    for (int e = 0; e < 4; e += 2) {
      const float2 g = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&gw[2 * h + e / 2]));
      update(ww[e], wm[e], wv[e], g.x);
      update(ww[e + 1], wm[e + 1], wv[e + 1], g.y);
      const __nv_bfloat162 pair = __floats2bfloat162_rn(ww[e], ww[e + 1]);
      wb[2 * h + e / 2] = *reinterpret_cast<const unsigned*>(&pair);
    }
  }
  *reinterpret_cast<uint4*>(out + at) = make_uint4(wb[0], wb[1], wb[2], wb[3]);
  // Float4 j of the block sits in slot j ^ ((j >> 3) & 1): the 8 threads of a store's phase
  // (16 bytes each) then write 8 distinct 16-byte bank groups, as do the 8 of a read.
  const auto slot = [](unsigned j) { return j ^ ((j >> 3) & 1u); };
  float4* const arrays[3] = {reinterpret_cast<float4*>(v + base), reinterpret_cast<float4*>(m + base),
                             reinterpret_cast<float4*>(master + base)};
  const float4* const values[3] = {vv, mm, w};
#pragma unroll
  for (int a = 0; a < 3; ++a) {
    if (a > 0) __syncthreads();  // the previous array's reads of stage are done
    stage[slot(2 * threadIdx.x)] = values[a][0];
    stage[slot(2 * threadIdx.x + 1)] = values[a][1];
    __syncthreads();
    arrays[a][threadIdx.x] = stage[slot(threadIdx.x)];
    arrays[a][kAdamWideThreads + threadIdx.x] = stage[slot(kAdamWideThreads + threadIdx.x)];
  }
}

void require(bool ok, const char* what) {
  if (!ok) throw InputError(what);
}

}  // namespace

std::string rope_limit(std::int64_t head_dim) {
  return head_dim % 16 == 0 ? std::string()
                            : "RoPE needs head_dim a multiple of 16, got " + std::to_string(head_dim);
}
std::string embedding_limit(std::int64_t hidden) {
  return hidden % 8 == 0 ? std::string()
                         : "the embedding needs hidden a multiple of 8, got " + std::to_string(hidden);
}

void rope_fwd(const bf16* q, const bf16* k, bf16* q_out, bf16* k_out, std::int64_t tokens, std::int64_t seq,
              std::int64_t q_heads, std::int64_t kv_heads, std::int64_t head_dim, float base, bool inverse,
              cudaStream_t stream) {
  if (std::string why = rope_limit(head_dim); !why.empty()) throw InputError(why);
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
  if (std::string why = embedding_limit(hidden); !why.empty()) throw InputError(why);
  const std::int64_t row_vecs = hidden / 8, most = (std::int64_t(1) << 31) - 1;
  require(row_vecs == 0 || tokens <= most / row_vecs,
          "embedding: the output must hold fewer than 2^31 16-byte vectors (32 GiB)");
  const std::int64_t vecs = tokens * row_vecs;
  if (vecs == 0) return;
  embedding_fwd_kernel<<<static_cast<unsigned>((vecs + kEmbeddingThreads - 1) / kEmbeddingThreads),
                         kEmbeddingThreads, 0, stream>>>(ids, reinterpret_cast<const uint4*>(table),
                                                         reinterpret_cast<uint4*>(out), unsigned(vecs),
                                                         unsigned(row_vecs), row_divider(unsigned(row_vecs)));
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
  const auto at16 = [](const void* q) { return reinterpret_cast<std::uintptr_t>(q) % 16 == 0; };
  require(at16(master) && at16(grad) && at16(m) && at16(v) && at16(weight_bf16),
          "adamw: every array must be 16-byte aligned (16-byte loads and stores)");
  // Above 30 GB/s of DRAM bandwidth an SM (the H200's 37; the H100's 25 stays below), blocks of
  // 128 threads × 8 consecutive elements in Inductor's layout (adamw_wide_kernel); below it, 1024
  // threads × 4 (adamw_kernel).
  const bool deep = datasheet_dram_bytes_per_sm() > 30e9;
  const int threads = deep ? kAdamWideThreads : 1024;
  const std::int64_t per_block = deep ? kAdamWideBlock : 1024 * 4;
  const auto blocks = static_cast<unsigned>((n + per_block - 1) / per_block);
  const bool narrow = n < (std::int64_t(1) << 31) - per_block;
  auto launch = [&](auto kernel, auto count, float c1, float c2) {
    kernel<<<blocks, threads, 0, stream>>>(master, grad, m, v, weight_bf16, count, p, c1, c2);
  };
  if (deep)  // the wide kernel takes the corrections' reciprocals
    narrow ? launch(adamw_wide_kernel<int>, int(n), 1.f / bc1, 1.f / bc2)
           : launch(adamw_wide_kernel<std::int64_t>, n, 1.f / bc1, 1.f / bc2);
  else
    narrow ? launch(adamw_kernel<int>, int(n), bc1, bc2) : launch(adamw_kernel<std::int64_t>, n, bc1, bc2);
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
