// FP4 GEMM kernels for sm_90 (see fp4_gemm.hpp): a dequantizer to BF16 (prefill path, ahead of the
// cuBLASLt BF16 GEMM) and a fused decode GEMM that streams FP4 weights into mma.sync.
#include <cooperative_groups.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <tuple>

#include "cuda_util.hpp"
#include "e2m1_f16_bits.hpp"
#include "fp4_gemm.hpp"
#include "kernel_common.cuh"

namespace rafter::workloads::cuda {
namespace {

using bf16 = __nv_bfloat16;

// Two E2M1 codes, at bits 3:0 and 19:16 of w, as a BF16 pair whose values are the codes' values ×
// 2^-126: the 3 magnitude bits land on BF16's two low exponent bits and top mantissa bit (code 1,
// 0.5, becomes the subnormal 2^-127), the sign on bit 15. One multiply by 2^126 restores them.
__device__ __forceinline__ unsigned e2m1_pair_bits(unsigned w) {
  return ((w << 6) & 0x01C001C0u) | ((w << 12) & 0x80008000u);
}

__device__ __forceinline__ __nv_bfloat162 as_bf162(unsigned u) { return *reinterpret_cast<__nv_bfloat162*>(&u); }
__device__ __forceinline__ unsigned as_u32(__nv_bfloat162 h) { return *reinterpret_cast<unsigned*>(&h); }

// code pair × block scale, exact in BF16.
__device__ __forceinline__ unsigned decode_pair(unsigned w, __nv_bfloat162 scale) {
  const __nv_bfloat162 two126 = as_bf162(0x7E807E80u);
  return as_u32(__hmul2(__hmul2(as_bf162(e2m1_pair_bits(w)), two126), scale));
}

template <Fp4Kind K>
__device__ __forceinline__ __nv_bfloat162 scale_pair(std::uint8_t s) {
  if constexpr (K == Fp4Kind::Mxfp4) {
    const unsigned bits = unsigned(s) << 7;  // E8M0 is BF16's exponent field
    return as_bf162(bits | (bits << 16));
  } else {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(s, __NV_E4M3);
    return __bfloat162bfloat162(__float2bfloat16(__half2float(__half(h))));
  }
}

template <Fp4Kind K>
constexpr int block_values() {
  return K == Fp4Kind::Nvfp4 ? 16 : 32;
}

// One thread per 16 values (8 bytes in, 32 bytes out): memory-bound, in natural order. Output rows
// `stride` elements apart when `groups_per_row` > 0 (the hot patch's extra columns), else packed.
template <Fp4Kind K>
__global__ void dequantize_kernel(Fp4Matrix in, bf16* out, std::int64_t groups, std::int64_t groups_per_row,
                                  std::int64_t stride) {
  for (std::int64_t g = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; g < groups;
       g += std::int64_t(gridDim.x) * blockDim.x) {
    const uint2 codes = __ldcs(reinterpret_cast<const uint2*>(in.codes) + g);
    const __nv_bfloat162 s = scale_pair<K>(in.scales[g * 16 / block_values<K>()]);
    unsigned o[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const unsigned t = (i < 4 ? codes.x : codes.y) >> (8 * (i % 4));
      o[i] = decode_pair((t & 0xFu) | ((t << 12) & 0xF0000u), s);
    }
    const std::int64_t row = groups_per_row > 0 ? g / groups_per_row : 0;
    uint4* dst = reinterpret_cast<uint4*>(
        out + (groups_per_row > 0 ? row * stride + (g - row * groups_per_row) * 16 : g * 16));
    __stcs(dst, make_uint4(o[0], o[1], o[2], o[3]));
    __stcs(dst + 1, make_uint4(o[4], o[5], o[6], o[7]));
  }
}

// ---- decode GEMM ----------------------------------------------------------------------------
// A warp owns 16 weight rows (the mma's M), the tokens are the mma's N (MT tiles of 8), and a CTA
// of 8 warps owns 128 rows over a K slice of kChunks chunks of 128 values. The order of K inside an
// mma is free as long as both operands agree, so each thread takes 16 contiguous bytes (32 values,
// one or two scale blocks) per row and chunk, and word j of them feeds mma steps 2j and 2j+1:
// step 2j+t gets values (8j+2t, 8j+2t+4) as its k pair {2q, 2q+1} and (8j+2t+1, 8j+2t+5) as
// {2q+8, 2q+9}, which is what e2m1_pair_bits(w >> 4·(2t)) and (w >> 4·(2t+1)) decode. The
// activations are decoded once per CTA into shared memory in that same order.
// Measured on an H100 (Nsight Compute, 16×4096×4096, one wave of 256 CTAs): 15.8 µs, DRAM 18 %
// busy, SMs issuing 30 % of the time, ~10 cycles per issued instruction at 4 warps per scheduler. A
// variant with twice the warps per SM took the same 16.0 µs. It now runs only the shapes the
// streaming kernel below does not fit (bench/fp4_gemm_results.md has both kernels' rows).
constexpr int kWarps = 8;
constexpr int kRowsPerCta = 16 * kWarps;
constexpr int kChunk = 128;
constexpr int kChunks = 4;  // per CTA: 16 bytes × 2 rows × 4 chunks in flight per thread
constexpr int kSmemStride = kChunks * kChunk + 16;  // BF16 elements per token; +32 B: no bank conflicts

int tiles_for(std::int64_t m) { return m <= 8 ? 1 : m <= 16 ? 2 : m <= 32 ? 4 : 8; }

// The 32 values of one thread's 16 bytes as 8 mma steps × {pair for k 2q.., pair for k 2q+8..}.
template <Fp4Kind K>
__device__ __forceinline__ void decode_group(uint4 v, __nv_bfloat162 s0, __nv_bfloat162 s1, unsigned (&out)[8][2]) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const __nv_bfloat162 s = (K == Fp4Kind::Nvfp4 && j >= 2) ? s1 : s0;
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      out[2 * j + t][0] = decode_pair(w[j] >> (8 * t), s);
      out[2 * j + t][1] = decode_pair(w[j] >> (8 * t + 4), s);
    }
  }
}

struct DecodeArgs {
  Fp4Matrix a, b;
  Fp4Matrix b_packed;  // B in the streaming kernel's order (fp4_pack_decode_weights); null: none
  bf16* c;
  float alpha;
  std::int64_t m, n, k;
  float* partial;  // [batch, n, 8·MT], zero between calls
  int* arrivals;   // [batch, row groups], zero between calls
  Fp4HotPatch hot;
};

// One output's hot-channel term, R[token_row, :]·W_hot[out_row, :] in FP32 (both kernels' epilogue).
__device__ __forceinline__ float hot_term(const Fp4HotPatch& h, std::int64_t token_row,
                                          std::int64_t out_row) {
  float s = 0.0f;  // h.ld set by fp4_decode_gemm
  for (std::int64_t j = 0; j < h.hot; ++j)
    s = fmaf(__bfloat162float(h.r[token_row * h.ld + j]), __bfloat162float(h.w[out_row * h.ld + j]), s);
  return s;
}

template <int MT, Fp4Kind K>
__device__ __forceinline__ void stage_activations(const DecodeArgs& p, std::int64_t batch, int chunk0, int chunks,
                                                  bf16* act) {
  const std::int64_t bytes_per_row = p.k / 2, scales_per_row = p.k / block_values<K>();
  for (int idx = threadIdx.x; idx < MT * 8 * chunks * 4; idx += blockDim.x) {
    const int token = idx / (chunks * 4), c = (idx / 4) % chunks, q = idx % 4;
    unsigned d[8][2] = {};
    if (token < p.m) {
      const std::int64_t row = batch * p.m + token, chunk = chunk0 + c;
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(p.a.codes + row * bytes_per_row + chunk * 64 + q * 16));
      const std::uint8_t* sc = p.a.scales + row * scales_per_row;
      if constexpr (K == Fp4Kind::Nvfp4)
        decode_group<K>(v, scale_pair<K>(sc[chunk * 8 + q * 2]), scale_pair<K>(sc[chunk * 8 + q * 2 + 1]), d);
      else
        decode_group<K>(v, scale_pair<K>(sc[chunk * 4 + q]), scale_pair<K>(sc[chunk * 4 + q]), d);
    }
    uint2* dst = reinterpret_cast<uint2*>(act + token * kSmemStride + c * kChunk + q * 4);
#pragma unroll
    for (int s = 0; s < 8; ++s) dst[s * 4] = make_uint2(d[s][0], d[s][1]);  // step s at element s·16 + q·4
  }
}

// NVFP4 weights fold the 2^126 of e2m1_pair_bits into the block scale as far as BF16's range
// allows (scale·2^64 ≤ 448·2^64): one multiply per pair instead of two, giving the weight × 2^-62,
// still exact and normal (≥ 0.5·2^-9·2^-62); the sums are scaled back by 2^62 at the end. MXFP4's
// E8M0 scales reach 2^127, so its weights keep both multiplies.
template <Fp4Kind K>
constexpr float kWeightUnfold = K == Fp4Kind::Nvfp4 ? 0x1p62f : 1.0f;

template <Fp4Kind K>
__device__ __forceinline__ __nv_bfloat162 weight_scale_pair(std::uint8_t s) {
  if constexpr (K == Fp4Kind::Nvfp4) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(s, __NV_E4M3);
    return __bfloat162bfloat162(__float2bfloat16(__half2float(__half(h)) * 0x1p64f));
  } else {
    return scale_pair<K>(s);
  }
}

template <Fp4Kind K>
__device__ __forceinline__ void decode_weights(uint4 v, __nv_bfloat162 s0, __nv_bfloat162 s1, unsigned (&out)[8][2]) {
  if constexpr (K == Fp4Kind::Nvfp4) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        out[2 * j + t][0] = as_u32(__hmul2(as_bf162(e2m1_pair_bits(w[j] >> (8 * t))), j >= 2 ? s1 : s0));
        out[2 * j + t][1] = as_u32(__hmul2(as_bf162(e2m1_pair_bits(w[j] >> (8 * t + 4))), j >= 2 ? s1 : s0));
      }
  } else {
    decode_group<K>(v, s0, s1, out);
  }
}

// The last CTA to finish a row group turns its FP32 sums into C and zeroes them for the next call;
// each thread's loads are issued together (one L2 round trip, not one per element).
template <int MT, Fp4Kind K>
__device__ void finish_row_group(const DecodeArgs& p, std::int64_t batch, int* arrival) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(arrival, 1) == int(gridDim.y) - 1;
    if (last) *arrival = 0;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  constexpr int kPerThread = kRowsPerCta * MT * 8 / (kWarps * 32), kBatch = kPerThread < 8 ? kPerThread : 8;
  const std::int64_t row0 = std::int64_t(blockIdx.x) * kRowsPerCta;
  for (int i0 = 0; i0 < kPerThread; i0 += kBatch) {
    float sums[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int idx = threadIdx.x + (i0 + i) * kWarps * 32;
      const std::int64_t row = row0 + idx % kRowsPerCta, token = idx / kRowsPerCta;
      sums[i] = row < p.n && token < p.m ? __ldcg(p.partial + (batch * p.n + row) * (MT * 8) + token) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int idx = threadIdx.x + (i0 + i) * kWarps * 32;
      const std::int64_t row = row0 + idx % kRowsPerCta, token = idx / kRowsPerCta;
      if (row >= p.n || token >= p.m) continue;
      p.c[(batch * p.m + token) * p.n + row] = __float2bfloat16(
          p.alpha * (sums[i] * kWeightUnfold<K>)+hot_term(p.hot, batch * p.m + token, batch * p.n + row));
      __stcg(p.partial + (batch * p.n + row) * (MT * 8) + token, 0.0f);
    }
  }
}

template <int MT, Fp4Kind K>
__global__ void __launch_bounds__(kWarps * 32, 2) decode_gemm_kernel(DecodeArgs p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* act = reinterpret_cast<bf16*>(smem_raw);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const std::int64_t batch = blockIdx.z;
  const int total_chunks = int(p.k / kChunk);
  const int chunk0 = blockIdx.y * kChunks, chunks = min(kChunks, total_chunks - chunk0);
  const std::int64_t row0 = std::int64_t(blockIdx.x) * kRowsPerCta + warp * 16;
  const bool rows_valid = row0 < p.n;  // n is a multiple of 16: a warp's rows are all in or all out
  const std::int64_t bytes_per_row = p.k / 2, scales_per_row = p.k / block_values<K>();

  // Weights first, so that their HBM reads are in flight while the activations are staged.
  uint4 wv[kChunks][2];
  std::uint8_t ws[kChunks][2][2];
#pragma unroll
  for (int c = 0; c < kChunks; ++c)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      wv[c][r] = make_uint4(0, 0, 0, 0);
      ws[c][r][0] = ws[c][r][1] = 0;
      if (rows_valid && c < chunks) {
        const std::int64_t row = batch * p.n + row0 + g + 8 * r, chunk = chunk0 + c;
        wv[c][r] = __ldcs(reinterpret_cast<const uint4*>(p.b.codes + row * bytes_per_row + chunk * 64 + q * 16));
        const std::uint8_t* sc = p.b.scales + row * scales_per_row;
        if constexpr (K == Fp4Kind::Nvfp4) {  // this thread's two blocks: one 2-byte load
          const unsigned short pair = __ldcs(reinterpret_cast<const unsigned short*>(sc + chunk * 8 + q * 2));
          ws[c][r][0] = std::uint8_t(pair & 0xFF);
          ws[c][r][1] = std::uint8_t(pair >> 8);
        } else {
          ws[c][r][0] = ws[c][r][1] = sc[chunk * 4 + q];
        }
      }
    }
  stage_activations<MT, K>(p, batch, chunk0, chunks, act);
  __syncthreads();

  float acc[MT][4] = {};
  if (rows_valid) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (c >= chunks) break;
      unsigned w0[8][2], w1[8][2];
      decode_weights<K>(wv[c][0], weight_scale_pair<K>(ws[c][0][0]), weight_scale_pair<K>(ws[c][0][1]), w0);
      decode_weights<K>(wv[c][1], weight_scale_pair<K>(ws[c][1][0]), weight_scale_pair<K>(ws[c][1][1]), w1);
#pragma unroll
      for (int s = 0; s < 8; ++s)
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          const uint2 b = *reinterpret_cast<const uint2*>(act + (t * 8 + g) * kSmemStride + c * kChunk + s * 16 + q * 4);
          dev::mma_bf16(acc[t], w0[s][0], w1[s][0], w0[s][1], w1[s][1], b.x, b.y);
        }
    }
    // c0, c1: row g, tokens 2q, 2q+1; c2, c3: row g+8.
#pragma unroll
    for (int t = 0; t < MT; ++t)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float* dst = p.partial + (batch * p.n + row0 + g + 8 * r) * (MT * 8) + t * 8 + 2 * q;
        atomicAdd(reinterpret_cast<float2*>(dst), make_float2(acc[t][2 * r], acc[t][2 * r + 1]));
      }
  }
  finish_row_group<MT, K>(p, batch, p.arrivals + batch * gridDim.x + blockIdx.x);
}

template <int MT, Fp4Kind K>
void launch_decode(const DecodeArgs& args, std::int64_t batch, cudaStream_t stream) {
  const int smem = MT * 8 * kSmemStride * int(sizeof(bf16));
  static PerDevice<bool> opted_in;
  opted_in.get([smem] {
    RAFTER_CUDA_CHECK(cudaFuncSetAttribute(decode_gemm_kernel<MT, K>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  });
  const dim3 grid(unsigned((args.n + kRowsPerCta - 1) / kRowsPerCta),
                  unsigned((args.k / kChunk + kChunks - 1) / kChunks), unsigned(batch));
  decode_gemm_kernel<MT, K><<<grid, kWarps * 32, smem, stream>>>(args);
  RAFTER_CUDA_LAUNCH_CHECK("fp4 decode gemm");
}

// ---- streaming decode GEMM (thread-block clusters) ------------------------------------------
// The kernel above reads each CTA's 32 KB of weights in one shot and finishes through global
// atomics, a fence and a last-CTA pass: on an H100 it reached 20 % to 40 % of the HBM read ceiling.
// This one keeps the weight stream going: a cluster of S CTAs owns the same 128-row groups, each
// CTA one 1/S slice of K (its activations decoded once into shared memory); every CTA walks its
// row groups one item (256 values, 128 bytes a row) at a time with kStages items of loads in
// flight per thread, and at the end of a row group the S partial sums meet in distributed shared
// memory (double-buffered, one cluster barrier per row group), each CTA writing 128/S of the
// group's rows for every token.
// The weights come packed in the order the lanes load them (below; fp4_pack_decode_weights, once,
// as a serving engine stores its weights), so that each load is one 512-byte run: read in place,
// 64 bytes in each of 8 rows a load, the same kernel was 5-12 % slower on every 16-token Llama-2
// row of the H100 (70B gate_up 127.0 against 114.6 µs; one token 114.9 against 97.9;
// bench/fp4_gemm_results.md, 2026-11-28, fourth session). With the packed weights, three items in
// flight (230 registers at m 9–16) ran 4-7 % slower than two on every 16-token row.
// A warp owns 32 rows (two mma M tiles sharing each activation fragment). Shapes it does not fit
// (K not a multiple of 256, or shared memory over budget: m > 32 mostly) take the kernel above.
// Tried on the H100 and dropped: the weights in a per-warp ring in shared memory (cp.async or
// cp.async.bulk, 8 warps a CTA, 2 CTAs an SM, no weight in registers) ran 6-69 % slower on every
// 16-token row; each row group's weights prefetched into L2 a group ahead, 7-20 % slower; four
// weight slots in two pairs (no slot copied, one scoreboard wait per two items), up to 14 % slower
// (bench/fp4_gemm_results.md, 2026-11-28). This kernel's speed follows ptxas's schedule: the same
// source without the hot patch's (then dead) code ran up to 11 % slower at 194 registers.
constexpr int kStreamWarps = 4;
constexpr int kStreamRows = 32 * kStreamWarps;
constexpr int kItem = 256;
constexpr int kStages = 2;
constexpr int kRedStride = kStreamRows + 4;  // floats per token: the acc stores hit 32 banks
constexpr int kMaxCluster = 16;
// The packed order of B (fp4_pack_decode_weights): per batch, row group, item and warp, the warp's
// 32 rows × 128 code bytes in the order its lanes load them (16 bytes a lane: chunk (2r + h)·32 +
// lane holds bytes q·32 + h·16 … of row g + 8r), then the lanes' scale words (a lane's 4 rows, 4
// bytes each for NVFP4, 2 for MXFP4). Rows past n are zero. NVFP4 code words are stored as
// packed_f16_word rearranges them (e2m1_f16_bits.hpp); MXFP4 ones as they are.
constexpr int kPackedCodeBytes = 32 * kItem / 2;
__host__ __device__ constexpr int packed_scale_bytes(Fp4Kind k) { return 32 * 4 * (k == Fp4Kind::Nvfp4 ? 4 : 2); }
// Shared memory per CTA: first try a budget that leaves room for 4 CTAs an SM, then a larger one.
constexpr int kBudgets[] = {56 * 1024, 100 * 1024};

struct StreamArgs {
  Fp4Matrix a, b;  // b in the packed order (fp4_pack_decode_weights)
  bf16* c;
  float alpha;
  std::int64_t m, n, k;
  int items;       // k / kItem
  int act_stride;  // BF16 elements per token in shared memory
  Fp4HotPatch hot;
  int hot_stride;  // BF16 elements per row of the hot patch's shared rows (0: no patch)
};

// The hot-channel patch in the streaming kernel: R's m rows once, and the 128/S rows of W_hot that
// a CTA finishes in each row group, staged at the end of the group before (cp.async, 16 bytes a copy
// where hot % 8 = 0; two buffers, about 2 KB at hot 32, so the cluster size stays what it is
// without), into shared rows of hot_stride elements (hot rounded up to 8, zeros after hot, + 8:
// 16-byte reads by consecutive rows hit distinct banks); the epilogue sums R·W_hotᵀ from there.
// Tried on the H100 and dropped (2026-11-28): R·W_hotᵀ by BF16 mma in the warps that own each
// 16-row tile, W_hot fetched per warp by cp.async or into registers. The patched GEMM was no faster,
// and the register form cost the patch-free path registers. In a kernel of its own: by mma on a
// fifth warp (168 registers a thread, patched GEMM 2-20 % slower), or each thread's W_hot row
// held in registers with no CTA barrier (patched times equal to these; in this kernel itself, both
// paths 1-4 % slower) (bench/fp4_gemm_results.md).
int hot_stride(std::int64_t hot) { return hot > 0 ? int((hot + 7) / 8 * 8 + 8) : 0; }

// Rows [first, first + rows) of src (hot values, rows ld apart; none past `end`) into dst.
__device__ void stage_hot_rows(const bf16* src, std::int64_t hot, std::int64_t ld, std::int64_t first, int rows,
                               std::int64_t end, int stride, bf16* dst) {
  const int chunks = int((hot + 7) / 8);
  for (int idx = threadIdx.x; idx < rows * chunks; idx += blockDim.x) {
    const int r = idx / chunks, c = idx % chunks;
    const std::int64_t row = first + r;
    bf16* d = dst + r * stride + c * 8;
    if (ld % 8 == 0) {
      dev::cp_async16(d, src + (row < end ? row * ld + c * 8 : 0), row < end ? 16 : 0);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const std::int64_t col = c * 8 + e;
        d[e] = row < end && col < hot ? src[row * ld + col] : __float2bfloat16(0.0f);
      }
    }
  }
  dev::cp_async_commit();
}

// Eight independent sums, the shared loads of four chunks issued together: the epilogue sits on
// every row group's critical path (between two cluster barriers), so its latency counts, not its
// instructions (one chain of FMAs cost up to 7 % of a 70B decode GEMM on the H100).
__device__ __forceinline__ float hot_dot(const bf16* r, const bf16* w, std::int64_t hot) {
  float s[8] = {};
  const int chunks = int((hot + 7) / 8);
#pragma unroll 4
  for (int c = 0; c < chunks; ++c) {
    const uint4 a = *reinterpret_cast<const uint4*>(r + c * 8);
    const uint4 b = *reinterpret_cast<const uint4*>(w + c * 8);
    const unsigned av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 x = __bfloat1622float2(as_bf162(av[i])), y = __bfloat1622float2(as_bf162(bv[i]));
      s[2 * i] = fmaf(x.x, y.x, s[2 * i]);
      s[2 * i + 1] = fmaf(x.y, y.y, s[2 * i + 1]);
    }
  }
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// NVFP4 runs this kernel on FP16 operands, MXFP4 on BF16 (E8M0 scales reach 2^127, beyond
// FP16). The codes become FP16 × 2^-14 bytes (e2m1_f16_bits.hpp: the packed weights by
// packed_f16_bytes, the activations by e2m1_f16_bytes) and each FP16 pair is one byte permute, then
// one multiply by the E4M3 block scale (exact: 2 + 4 significant bits, the product's last bit ≥
// 2^-24, FP16's smallest subnormal). Both operands carry 2^-14, so the sums are scaled back by
// 2^28. The BF16 decode of e2m1_pair_bits takes 4 instructions a pair before its multiply. The
// kernel is bound by its instruction issue: on the H200 (ncu, 70B gate_up at 16 tokens) it ran 868
// instructions an item of 8192 values, issued at 2.1 a cycle an SM, DRAM 50 % busy. The packed
// layout, the slot rotation below and the paired scale conversion (item_scales) took that to 716
// (41.1 M instructions against 49.8 M; 101.3 µs under ncu against 111.2, DRAM 55 % busy), and the
// 16-token Llama-2 rows from 15.1–110.6 µs to 14.3–97.0 (5–13 % faster; 1 token 70B gate_up 86.0 →
// 73.4, 4 tokens 8192² 24.2 → 21.3; 32 tokens unchanged; same call, bench/fp4_gemm_results.md).

// The pair of e2m1_pair_bits(w >> 8t) (from lo) or (w >> (8t + 4)) (from hi), as FP16 × 2^-14.
__device__ __forceinline__ unsigned f16_pair(unsigned bytes, int t) {
  return __byte_perm(bytes, 0u, t ? 0x3414u : 0x2404u);
}

template <Fp4Kind K>
constexpr float kStreamUnfold = K == Fp4Kind::Nvfp4 ? 0x1p28f : 1.0f;

template <Fp4Kind K>
__device__ __forceinline__ unsigned mul2(unsigned a, unsigned s) {
  if constexpr (K == Fp4Kind::Nvfp4) {
    const __half2 r = __hmul2(*reinterpret_cast<__half2*>(&a), *reinterpret_cast<__half2*>(&s));
    return *reinterpret_cast<const unsigned*>(&r);
  } else {
    return as_u32(__hmul2(as_bf162(a), as_bf162(s)));
  }
}

// A block scale byte as the pair this kernel multiplies by: E4M3 → FP16 (exact), E8M0 → BF16.
template <Fp4Kind K>
__device__ __forceinline__ unsigned stream_scale(std::uint8_t s) {
  if constexpr (K == Fp4Kind::Nvfp4) {
    const unsigned h = __nv_cvt_fp8_to_halfraw(s, __NV_E4M3).x;
    return h | (h << 16);
  } else {
    return as_u32(scale_pair<K>(s));
  }
}

// The 32 values of 16 bytes in decode_group's order, in this kernel's operand type.
template <Fp4Kind K>
__device__ __forceinline__ void stream_decode_group(uint4 v, unsigned s0, unsigned s1,
                                                    unsigned (&out)[8][2]) {
  if constexpr (K == Fp4Kind::Nvfp4) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      unsigned lo, hi;
      e2m1_f16_bytes(w[j], lo, hi);
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        out[2 * j + t][0] = mul2<K>(f16_pair(lo, t), j >= 2 ? s1 : s0);
        out[2 * j + t][1] = mul2<K>(f16_pair(hi, t), j >= 2 ? s1 : s0);
      }
    }
  } else {
    decode_group<K>(v, as_bf162(s0), as_bf162(s1), out);
  }
}

template <Fp4Kind K>
__device__ __forceinline__ void stream_mma(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                           unsigned b0, unsigned b1) {
  if constexpr (K == Fp4Kind::Nvfp4)
    dev::mma_f16(c, a0, a1, a2, a3, b0, b1);
  else
    dev::mma_bf16(c, a0, a1, a2, a3, b0, b1);
}

// The block scales of one thread's 16 bytes h (0, 1) of a row's item, from the scale word loaded
// with it (NVFP4: 4 bytes, blocks 2h and 2h+1; MXFP4: 2 bytes, block h for all 32 values).
// NVFP4: both bytes of half h converted together (one cvt of an E4M3 pair), each then doubled.
template <Fp4Kind K>
__device__ __forceinline__ void item_scales(unsigned word, int h, unsigned& s0, unsigned& s1) {
  if constexpr (K == Fp4Kind::Nvfp4) {
    const __half2_raw pair = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(word >> (16 * h)), __NV_E4M3);
    const unsigned both = unsigned(pair.x) | (unsigned(pair.y) << 16);
    s0 = __byte_perm(both, 0u, 0x1010u);
    s1 = __byte_perm(both, 0u, 0x3232u);
  } else {
    s0 = s1 = stream_scale<K>(std::uint8_t(word >> (8 * h)));
  }
}

// Activations of items [it0, it0 + nl) decoded to the kernel's operand type in the per-thread
// order of its weights: the 16 bytes h of thread q in item i (values i·256 + q·64 + h·32 …) become
// sub-chunk 2i + h. Entries idx = token·nl·8 + li·8 + h·4 + q of the CTA's MT·8·nl·8, in batches of
// kActBatch a thread whose loads are issued together (one memory round trip a batch), then decoded
// into shared memory. The kernel issues its first batch ahead of its weights' loads (H100, 16
// tokens: 1 µs of 124 on 70B gate_up, 2 % of 7B's rows with the split barrier below). Two for
// MT = 1, which keeps that kernel at 3 CTAs an SM.
template <int MT>
constexpr int kActBatch = MT == 1 ? 2 : 4;
template <int MT>
struct ActBatch {
  uint4 v[kActBatch<MT>];
  unsigned sc[kActBatch<MT>];  // NVFP4: the two block scale bytes of the 16 bytes; MXFP4: one
};

template <int MT, Fp4Kind K>
__device__ __forceinline__ void load_act_batch(const StreamArgs& p, std::int64_t batch, int it0, int nl,
                                               int first, ActBatch<MT>& a) {
  const std::int64_t bytes_per_row = p.k / 2, scales_per_row = p.k / block_values<K>();
#pragma unroll
  for (int i = 0; i < kActBatch<MT>; ++i) {
    const int idx = first + i * kStreamWarps * 32;
    const int token = idx / (nl * 8), li = (idx / 8) % nl, h = (idx / 4) % 2, q = idx % 4;
    a.v[i] = make_uint4(0, 0, 0, 0);
    a.sc[i] = 0;
    if (idx >= MT * 8 * nl * 8 || token >= p.m) continue;
    const std::int64_t row = batch * p.m + token, item = it0 + li;
    a.v[i] =
        __ldg(reinterpret_cast<const uint4*>(p.a.codes + row * bytes_per_row + item * 128 + q * 32 + h * 16));
    const std::uint8_t* sc = p.a.scales + row * scales_per_row;
    if constexpr (K == Fp4Kind::Nvfp4)  // blocks 2h, 2h + 1 of the thread's 64 values: an even offset
      a.sc[i] = __ldg(reinterpret_cast<const unsigned short*>(sc + item * 16 + q * 4 + h * 2));
    else
      a.sc[i] = __ldg(sc + item * 8 + q * 2 + h);
  }
}

template <int MT, Fp4Kind K>
__device__ __forceinline__ void store_act_batch(const StreamArgs& p, int nl, int first, const ActBatch<MT>& a,
                                                bf16* act) {
#pragma unroll
  for (int i = 0; i < kActBatch<MT>; ++i) {
    const int idx = first + i * kStreamWarps * 32;
    if (idx >= MT * 8 * nl * 8) continue;
    const int token = idx / (nl * 8), li = (idx / 8) % nl, h = (idx / 4) % 2, q = idx % 4;
    unsigned d[8][2] = {};
    if (token < p.m) {
      if constexpr (K == Fp4Kind::Nvfp4) {
        stream_decode_group<K>(a.v[i], stream_scale<K>(std::uint8_t(a.sc[i])),
                               stream_scale<K>(std::uint8_t(a.sc[i] >> 8)), d);
      } else {
        const unsigned s = stream_scale<K>(std::uint8_t(a.sc[i]));
        stream_decode_group<K>(a.v[i], s, s, d);
      }
    }
    uint2* dst = reinterpret_cast<uint2*>(act + token * p.act_stride + (2 * li + h) * kChunk + q * 4);
#pragma unroll
    for (int s = 0; s < 8; ++s) dst[s * 4] = make_uint2(d[s][0], d[s][1]);
  }
}

// Split cluster barrier: arrive (releasing this thread's shared-memory writes), wait (acquiring
// the other CTAs'). The streaming kernel splits it for MT ≥ 2: on the H100 at 16 tokens that saved
// 1–3 % (70B gate_up 125.5 → 123.0 µs, 7B down 28.0 → 27.1); at 1 token it cost 4 % (70B gate_up
// 115.7 → 120.9 µs) and at 4 and 8 tokens nothing.
template <int MT>
constexpr bool kSplitBarrier = MT >= 2;
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

struct WeightSlot {
  uint4 v[4][2];   // rows g, g+8, g+16, g+24 of the warp; bytes q·32 … q·32+31 of the item
  unsigned sc[4];  // their scale bytes
};

// MT = 1 held to 3 CTAs an SM (at most 170 registers; 163 used, no spills), as before the batched
// activation loads, which asked for 192.
template <int MT, Fp4Kind K>
__global__ void __launch_bounds__(kStreamWarps * 32, MT == 1 ? 3 : 1) stream_decode_kernel(StreamArgs p) {
  namespace cg = cooperative_groups;
  // A kernel launched after this one as its programmatic dependent (fp4_hot_patch_after) may start
  // now: every CTA of this grid is resident at once, so its CTAs take what room is left.
  asm volatile("griddepcontrol.launch_dependents;");
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* red = reinterpret_cast<float*>(smem_raw);                     // [2][MT·8][kRedStride]
  bf16* act =
      reinterpret_cast<bf16*>(red + 2 * MT * 8 * kRedStride);  // [MT·8][act_stride]: FP16 bits for NVFP4
  bf16* hot_r = act + MT * 8 * p.act_stride;                   // [MT·8][hot_stride]
  bf16* hot_w = hot_r + MT * 8 * p.hot_stride;  // [2][this CTA's rows of a group][hot_stride]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int S = int(cluster.num_blocks()), rank = int(cluster.block_rank());
  const std::int64_t batch = blockIdx.z;
  const int it0 = int(std::int64_t(p.items) * rank / S),
            nl = int(std::int64_t(p.items) * (rank + 1) / S) - it0;
  const std::int64_t row_groups = (p.n + kStreamRows - 1) / kStreamRows;
  const int nrg = int((row_groups - 1 - blockIdx.x) / gridDim.x) + 1;  // grid.x ≤ row_groups
  const std::int64_t total = std::int64_t(nrg) * nl;

  ActBatch<MT> act0;  // the first batch of activations, loaded ahead of the weights
  load_act_batch<MT, K>(p, batch, it0, nl, threadIdx.x, act0);
  // kStages + 1 slots in rotation: the item kStages ahead loads into the slot last multiplied, so
  // no slot is copied (a copy of the slot being multiplied cost 36 moves an item, H200 ncu).
  constexpr int kSlots = kStages + 1;
  WeightSlot slot[kSlots] = {};
  int load_rg = 0, load_it = 0;
  auto load = [&](WeightSlot& w) {
    const std::int64_t rg = blockIdx.x + std::int64_t(load_rg) * gridDim.x, item = it0 + load_it;
    if (load_rg < nrg) {  // past the end the slot keeps what it held: it is never multiplied
      const std::int64_t at = ((batch * row_groups + rg) * p.items + item) * kStreamWarps + warp;
      const uint4* src = reinterpret_cast<const uint4*>(p.b.codes + at * kPackedCodeBytes) + lane;
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        w.v[r][0] = __ldcs(src + 64 * r);
        w.v[r][1] = __ldcs(src + 64 * r + 32);
      }
      if constexpr (K == Fp4Kind::Nvfp4) {
        const uint4 sc = __ldcs(reinterpret_cast<const uint4*>(p.b.scales + at * packed_scale_bytes(K)) + lane);
        w.sc[0] = sc.x, w.sc[1] = sc.y, w.sc[2] = sc.z, w.sc[3] = sc.w;
      } else {
        const uint2 sc = __ldcs(reinterpret_cast<const uint2*>(p.b.scales + at * packed_scale_bytes(K)) + lane);
        w.sc[0] = sc.x & 0xFFFFu, w.sc[1] = sc.x >> 16, w.sc[2] = sc.y & 0xFFFFu, w.sc[3] = sc.y >> 16;
      }
    }
    if (++load_it == nl) load_it = 0, ++load_rg;
  };

#pragma unroll
  for (int s = 0; s < kStages; ++s) load(slot[s]);
  // Each CTA finishes rows [r0, r1) of every row group, for all m tokens.
  const int r0 = kStreamRows * rank / S, r1 = kStreamRows * (rank + 1) / S;
  // W_hot rows of the CTA's j-th row group, in buffer j % 2 (rows_per_cta rows apart).
  const int rows_per_cta = (kStreamRows + S - 1) / S;
  auto hot_w_rows = [&](int j) { return hot_w + (j % 2) * rows_per_cta * p.hot_stride; };
  auto stage_hot_weights = [&](int j) {
    const std::int64_t row0 = (blockIdx.x + std::int64_t(j) * gridDim.x) * kStreamRows;
    stage_hot_rows(p.hot.w, p.hot.hot, p.hot.ld, batch * p.n + row0 + r0, r1 - r0, batch * p.n + p.n, p.hot_stride,
                   hot_w_rows(j));
  };
  if (p.hot_stride > 0) {
    stage_hot_rows(p.hot.r, p.hot.hot, p.hot.ld, batch * p.m, int(p.m), batch * p.m + p.m, p.hot_stride, hot_r);
    stage_hot_weights(0);
  }
  store_act_batch<MT, K>(p, nl, threadIdx.x, act0, act);
  for (int first = threadIdx.x + kActBatch<MT> * kStreamWarps * 32; first < MT * 8 * nl * 8;
       first += kActBatch<MT> * kStreamWarps * 32) {
    ActBatch<MT> more;
    load_act_batch<MT, K>(p, batch, it0, nl, first, more);
    store_act_batch<MT, K>(p, nl, first, more, act);
  }
  __syncthreads();

  float acc[2][MT][4] = {};
  int rg_done = 0, item = 0, buf = 0;
  auto red_buffer = [&](int b) { return red + b * MT * 8 * kRedStride; };
  auto write_partials = [&](float* rb) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          rb[(t * 8 + 2 * q + e % 2) * kRedStride + warp * 32 + mt * 16 + g + 8 * (e / 2)] = acc[mt][t][e];
          acc[mt][t][e] = 0.0f;
        }
  };
  // This CTA's 1/S of row group rg's rows (the CTA's rg-th), summed over the S buffers rb, written.
  auto reduce_group = [&](int rg, const float* rb) {
    const std::int64_t row0 = (blockIdx.x + std::int64_t(rg) * gridDim.x) * kStreamRows;
    for (int e = threadIdx.x; e < int(p.m) * (r1 - r0); e += blockDim.x) {
      const int token = e / (r1 - r0), row = r0 + e % (r1 - r0);
      if (row0 + row >= p.n) continue;
      // The S partial sums loaded eight at a time (distributed shared memory: a round trip per
      // eight ranks, not per rank), added in rank order.
      float sum = 0.0f;
      for (int rk = 0; rk < S; rk += 8) {
        float part[8];
#pragma unroll
        for (int r = 0; r < 8; ++r)
          part[r] = rk + r < S ? cluster.map_shared_rank(rb, rk + r)[token * kRedStride + row] : 0.0f;
#pragma unroll
        for (int r = 0; r < 8; ++r)
          if (rk + r < S) sum += part[r];
      }
      float v = p.alpha * (sum * kStreamUnfold<K>);
      if (p.hot_stride > 0)
        v += hot_dot(hot_r + token * p.hot_stride, hot_w_rows(rg) + (row - r0) * p.hot_stride, p.hot.hot);
      p.c[(batch * p.m + token) * p.n + row0 + row] = __float2bfloat16(v);
    }
  };
  // Row group end: partial sums into this CTA's buffer red[buf], then the cluster barrier before
  // the S buffers are summed. For MT = 1 (kSplitBarrier false) the barrier is whole and the group is
  // summed at once. Otherwise it is split: the CTA arrives and goes on with the next group, and
  // waits only at that group's end, where it sums the previous group (the other buffer) before
  // writing this one. The buffer written at group g was last read in group g − 2's sum, which
  // every CTA finished before arriving at g − 1's barrier, whose wait comes before the write.
  // The hot patch's W_hot rows of group g + 1 are staged (cp.async, one commit group per row
  // group end, empty after the last) into buffer (g + 1) % 2 once group g − 1's sum, which read
  // that buffer, is done; group g's rows are awaited (all but the newest commit group) where
  // group g is summed.
  const bool split = kSplitBarrier<MT>;
  auto hot_rows_landed = [&] {
    if (p.hot_stride > 0) {
      dev::cp_async_wait<1>();
      __syncthreads();  // every thread's copies, visible to all
    }
  };
  auto finish_group = [&] {
    float* rb = red_buffer(buf);
    if (split) {
      if (rg_done > 0) {
        hot_rows_landed();
        cluster_wait();
        reduce_group(rg_done - 1, red_buffer(buf ^ 1));
      }
      write_partials(rb);
      cluster_arrive();
    } else {
      write_partials(rb);
      if (p.hot_stride > 0) dev::cp_async_wait<0>();  // this group's W_hot rows; the barrier shares them
      cluster.sync();
      reduce_group(rg_done, rb);
    }
    buf ^= 1;
    ++rg_done;
    if (p.hot_stride > 0) {
      if (rg_done < nrg) {  // the next group's W_hot rows, once every thread read the buffer's last
        __syncthreads();
        stage_hot_weights(rg_done);
      } else {
        dev::cp_async_commit();
      }
    }
  };

  for (std::int64_t base = 0; base < total; base += kSlots) {
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      if (base + s >= total) break;
      load(slot[(s + kStages) % kSlots]);  // the item kStages ahead, in flight while this one is multiplied
      const WeightSlot& w = slot[s];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        unsigned sl[4], sh[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) item_scales<K>(w.sc[r], h, sl[r], sh[r]);
        const bf16* a_sub = act + (2 * item + h) * kChunk + q * 4;
#pragma unroll
        for (int st = 0; st < 8; ++st) {
          const int j = st / 2, t = st % 2;
          unsigned lo[4], hi[4];
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const unsigned word = (&w.v[r][h].x)[j];
            const unsigned sc = j >= 2 ? sh[r] : sl[r];
            if constexpr (K == Fp4Kind::Nvfp4) {
              unsigned lb, hb;
              packed_f16_bytes(word, lb, hb);
              lo[r] = mul2<K>(f16_pair(lb, t), sc);
              hi[r] = mul2<K>(f16_pair(hb, t), sc);
            } else {
              lo[r] = decode_pair(word >> (8 * t), as_bf162(sc));
              hi[r] = decode_pair(word >> (8 * t + 4), as_bf162(sc));
            }
          }
#pragma unroll
          for (int t2 = 0; t2 < MT; ++t2) {
            const uint2 b = *reinterpret_cast<const uint2*>(a_sub + (t2 * 8 + g) * p.act_stride + st * 16);
            stream_mma<K>(acc[0][t2], lo[0], lo[1], hi[0], hi[1], b.x, b.y);
            stream_mma<K>(acc[1][t2], lo[2], lo[3], hi[2], hi[3], b.x, b.y);
          }
        }
      }
      if (++item == nl) {
        item = 0;
        finish_group();
      }
    }
  }
  if (split) {  // the last group
    hot_rows_landed();
    cluster_wait();
    reduce_group(rg_done - 1, red_buffer(buf ^ 1));
  }
  cluster.sync();  // no CTA leaves while another may still read its buffers
}

// Shared memory a CTA of the streaming kernel needs for nl items per CTA.
int stream_smem_bytes(int mt, int nl, std::int64_t hot, int cluster) {
  return 2 * mt * 8 * kRedStride * int(sizeof(float)) + mt * 8 * (nl * kItem + 16) * int(sizeof(bf16)) +
         (mt * 8 + 2 * ((kStreamRows + cluster - 1) / cluster)) * hot_stride(hot) * int(sizeof(bf16));
}

// The smallest power-of-two cluster whose K slice fits the shared-memory budget and that gives
// about 1.5 CTAs per SM; 0: the shape does not fit (K not a multiple of 256, or m > 32 mostly).
int stream_cluster(int mt, std::int64_t n, std::int64_t k, std::int64_t batch, std::int64_t hot, int sms) {
  if (k % kItem != 0 || mt > 4) return 0;
  const int items = int(k / kItem);
  const std::int64_t row_groups = (n + kStreamRows - 1) / kStreamRows;
  for (int budget : kBudgets) {
    int cluster = 0;
    for (int s = 1; s <= std::min(kMaxCluster, items); s *= 2) {
      if (stream_smem_bytes(mt, (items + s - 1) / s, hot, s) > budget) continue;
      cluster = s;
      if (row_groups * s * batch * 2 >= 3 * std::int64_t(sms)) break;
    }
    if (cluster != 0) return cluster;
  }
  return 0;
}

// Launches the streaming kernel with as many row-group columns as the GPU holds clusters at once,
// balanced so that every column walks the same number of row groups. False: the shape does not
// fit, or no cluster of it fits on the GPU (the caller takes the one-shot kernel).
template <int MT, Fp4Kind K>
bool launch_stream(const DecodeArgs& d, std::int64_t batch, cudaStream_t stream) {
  if (d.b_packed.codes == nullptr || d.b_packed.scales == nullptr) return false;
  const int cluster = stream_cluster(MT, d.n, d.k, batch, d.hot.hot, sm_count());
  if (cluster == 0) return false;
  const int items = int(d.k / kItem);
  const std::int64_t row_groups = (d.n + kStreamRows - 1) / kStreamRows;
  static PerDevice<bool> opted_in;
  opted_in.get([] {
    RAFTER_CUDA_CHECK(cudaFuncSetAttribute(stream_decode_kernel<MT, K>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, kBudgets[1]));
    RAFTER_CUDA_CHECK(
        cudaFuncSetAttribute(stream_decode_kernel<MT, K>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    return true;
  });
  const int nl = (items + cluster - 1) / cluster;
  StreamArgs args{
      d.a, d.b_packed, d.c, d.alpha, d.m, d.n, d.k, items, nl * kItem + 16, d.hot, hot_stride(d.hot.hot)};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = unsigned(cluster);
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t launch = {};
  launch.gridDim = dim3(1, unsigned(cluster), 1);
  launch.blockDim = dim3(kStreamWarps * 32);
  launch.dynamicSmemBytes = std::size_t(stream_smem_bytes(MT, nl, d.hot.hot, cluster));
  launch.stream = stream;
  launch.attrs = attr;
  launch.numAttrs = 1;
  // Clusters the GPU holds at once, asked once per device and launch shape (not inside a capture).
  static std::mutex mutex;
  static std::map<std::tuple<int, int, std::size_t>, int> resident_for;
  int device = 0;
  RAFTER_CUDA_CHECK(cudaGetDevice(&device));
  int resident = 0;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto key = std::make_tuple(device, cluster, launch.dynamicSmemBytes);
    auto it = resident_for.find(key);
    if (it == resident_for.end()) {
      if (cudaOccupancyMaxActiveClusters(&resident, stream_decode_kernel<MT, K>, &launch) != cudaSuccess) {
        (void)cudaGetLastError();
        resident = 0;
      }
      it = resident_for.emplace(key, resident).first;
    }
    resident = it->second;
  }
  if (resident < 1) return false;
  const std::int64_t columns = std::min(row_groups, std::max<std::int64_t>(1, resident / batch));
  const std::int64_t rounds = (row_groups + columns - 1) / columns;
  launch.gridDim = dim3(unsigned((row_groups + rounds - 1) / rounds), unsigned(cluster), unsigned(batch));
  RAFTER_CUDA_CHECK(cudaLaunchKernelEx(&launch, stream_decode_kernel<MT, K>, args));
  RAFTER_CUDA_LAUNCH_CHECK("fp4 streaming decode gemm");
  return true;
}

template <Fp4Kind K>
void decode_for_kind(const DecodeArgs& args, std::int64_t batch, cudaStream_t stream) {
  switch (tiles_for(args.m)) {
    case 1:
      return launch_stream<1, K>(args, batch, stream) ? void() : launch_decode<1, K>(args, batch, stream);
    case 2:
      return launch_stream<2, K>(args, batch, stream) ? void() : launch_decode<2, K>(args, batch, stream);
    case 4:
      return launch_stream<4, K>(args, batch, stream) ? void() : launch_decode<4, K>(args, batch, stream);
    default: return launch_decode<8, K>(args, batch, stream);
  }
}

// One thread per 16 bytes of the packed codes; threads of chunks 0…127 of a slot also write the
// scale word of lane chunk % 32, row chunk / 32. Rows past n are zero.
template <Fp4Kind K>
__global__ void pack_decode_weights_kernel(Fp4Matrix in, std::uint8_t* codes, std::uint8_t* scales, std::int64_t n,
                                           std::int64_t k, std::int64_t batch) {
  const std::int64_t items = k / kItem, row_groups = (n + kStreamRows - 1) / kStreamRows;
  const std::int64_t slots = batch * row_groups * items * kStreamWarps;
  const std::int64_t bytes_per_row = k / 2, scales_per_row = k / block_values<K>();
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < slots * 256;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t at = i / 256;
    const int chunk = int(i % 256), lane = chunk % 32, r = chunk / 64, h = (chunk / 32) % 2, g = lane / 4, q = lane % 4;
    const int warp = int(at % kStreamWarps);
    const std::int64_t item = (at / kStreamWarps) % items, rg = (at / kStreamWarps / items) % row_groups,
                       z = at / kStreamWarps / items / row_groups;
    const std::int64_t row = rg * kStreamRows + warp * 32 + g + 8 * r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row < n)
      v = *reinterpret_cast<const uint4*>(in.codes + (z * n + row) * bytes_per_row + item * 128 + q * 32 + h * 16);
    if constexpr (K == Fp4Kind::Nvfp4)
      v = make_uint4(packed_f16_word(v.x), packed_f16_word(v.y), packed_f16_word(v.z), packed_f16_word(v.w));
    reinterpret_cast<uint4*>(codes + at * kPackedCodeBytes)[chunk] = v;
    if (chunk >= 128) continue;  // chunks 0…127: the scale word of (lane, r) = (chunk % 32, chunk / 32)
    const int sl = chunk % 32, sr = chunk / 32;
    const std::int64_t srow = rg * kStreamRows + warp * 32 + sl / 4 + 8 * sr;
    const std::uint8_t* src = in.scales + (z * n + srow) * scales_per_row;
    if constexpr (K == Fp4Kind::Nvfp4) {
      unsigned word = 0;
      if (srow < n) word = *reinterpret_cast<const unsigned*>(src + item * 16 + (sl % 4) * 4);
      reinterpret_cast<unsigned*>(scales + at * packed_scale_bytes(K))[sl * 4 + sr] = word;
    } else {
      unsigned short word = 0;
      if (srow < n) word = *reinterpret_cast<const unsigned short*>(src + item * 8 + (sl % 4) * 2);
      reinterpret_cast<unsigned short*>(scales + at * packed_scale_bytes(K))[sl * 4 + sr] = word;
    }
  }
}

}  // namespace

void fp4_dequantize_bf16(Fp4Matrix in, bf16* out, std::int64_t rows, std::int64_t k, Fp4Kind kind,
                         cudaStream_t stream, std::int64_t out_stride) {
  const std::int64_t groups = rows * k / 16, per_row = out_stride > 0 && out_stride != k ? k / 16 : 0;
  const int threads = 256;
  const unsigned blocks = unsigned(std::min<std::int64_t>((groups + threads - 1) / threads, 132 * 16));
  if (kind == Fp4Kind::Nvfp4)
    dequantize_kernel<Fp4Kind::Nvfp4><<<blocks, threads, 0, stream>>>(in, out, groups, per_row, out_stride);
  else
    dequantize_kernel<Fp4Kind::Mxfp4><<<blocks, threads, 0, stream>>>(in, out, groups, per_row, out_stride);
  RAFTER_CUDA_LAUNCH_CHECK("fp4 dequantize");
}

namespace {
// One thread per extra column entry of A16's m rows, then B16's n rows.
__global__ void hot_columns_kernel(const bf16* r, const bf16* w, float r_scale, bf16* a16, bf16* b16,
                                   std::int64_t m, std::int64_t n, std::int64_t hot, std::int64_t pad,
                                   std::int64_t k, std::int64_t stride) {
  const std::int64_t total = (m + n) * pad;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / pad, col = i % pad;
    const bool a = row < m;
    const std::int64_t rr = a ? row : row - m;
    bf16 v = __float2bfloat16(0.0f);
    if (col < hot)
      v = a ? __float2bfloat16(__bfloat162float(r[rr * hot + col]) * r_scale) : w[rr * hot + col];
    (a ? a16 : b16)[rr * stride + k + col] = v;
  }
}
}  // namespace

void fp4_hot_columns(const bf16* r, const bf16* w_hot, float r_scale, bf16* a16, bf16* b16, std::int64_t m,
                     std::int64_t n, std::int64_t hot, std::int64_t pad, std::int64_t k, std::int64_t stride,
                     cudaStream_t stream) {
  const std::int64_t total = (m + n) * pad;
  const int threads = 256;
  const unsigned blocks = unsigned(std::min<std::int64_t>((total + threads - 1) / threads, 132 * 8));
  hot_columns_kernel<<<blocks, threads, 0, stream>>>(r, w_hot, r_scale, a16, b16, m, n, hot, pad, k, stride);
  RAFTER_CUDA_LAUNCH_CHECK("fp4 hot columns");
}

namespace {
// fp4_hot_patch_after: while the kernel before it runs, each warp multiplies up to kMaxTiles 16-row
// tiles of W_hot (mma m16n8k16, R's 16 tokens as A, the tile's rows as B in two 8-row halves; the
// loads of up to kAfterChunks k-chunks issued together, one round trip each) and keeps each tile's
// sums in registers, rounded to BF16 and transposed within each quad so that a lane holds 8
// adjacent outputs (4 words a tile); then it waits for that kernel (griddepcontrol.wait: its grid
// complete, its C visible) and adds them into C by one 16-byte reduction a tile
// (red.global.add.noftz.v4.bf16x2): nothing after the wait is waited for. C gets the BF16-rounded
// sum and is rounded once (three BF16 roundings in all, counting the GEMM's).
// Four warps a CTA (one an SM sub-partition) at most 96 registers a thread, no shared memory: a
// sub-partition holds 16384 registers, and two CTAs of the streaming kernel at 208 registers left
// 3072 of them, a warp of 96. At its 214 (since 2026-11-28) they leave 2560, a warp of 80: held to
// 80 (`__launch_bounds__(128, 6)`), this kernel gained only where a warp has 7 tiles (70B gate_up,
// 110.8 -> 103.9 µs, where the separate GEMM's 102.6 still wins) and moved the other rows by less
// than 0.4 µs either way, their cost being the tail after the GEMM (H200, bench/fp4_gemm_results.md).
// History, H200 (bench/fp4_gemm_results.md, 2026-11-28): a %globaltimer timeline showed the CTAs
// starting 0.5-1 µs after the GEMM's first and their multiply done long before its end. The sums in
// shared memory (1 KB a tile) kept 70B gate_up's CTAs (28 KB each) out until the GEMM ended; C read
// and rewritten after the wait cost 0.5-1 µs a tile a warp. Over the GEMM alone, on 7B gate_up and
// 70B gate_up: C stored by four 32-bit STG.E a lane +5.8 and +24 µs; one STG.E.128 +2.9 and +18
// (same call); the reduction with the sums in registers +2.4 and +5.5 (same call); six chunks in
// flight where a warp has at most 3 tiles, +2.0 on 7B gate_up and +0.65 on 7B down against +1.2
// (same call; 8 tiles with 4 chunks spilled 48 bytes, 3 tiles with 6 chunks fit in 92 registers).
// Where the remaining cost goes (2026-11-28, eighth session, same call, 7B gate_up over the GEMM):
// the kernel with neither multiply nor reductions +0.5-0.75 µs, the multiply alone +1.3-1.6, the
// reductions alone +1.9, both +1.8-2.7. Tried and dropped: each tile waiting for a word the decode
// kernel sets once the tile's row group is written, instead of griddepcontrol.wait (a release per
// row group in the GEMM, +0.6-3.4 µs over this kernel; with a relaxed add it won only 70B gate_up,
// by 0.4 µs, and relied on the cluster barrier for GPU-wide visibility); and the GEMM letting this
// kernel in after its first row group instead of at its start (no difference beyond the spread).
constexpr int kAfterWarps = 4;
constexpr int kAfterMaxTiles = 8;  // tiles a warp at most (70B gate_up, 57344 rows: 7 on 132 SMs)
__device__ __forceinline__ unsigned pick4(const unsigned (&v)[4], int i) {
  return i == 0 ? v[0] : i == 1 ? v[1] : i == 2 ? v[2] : v[3];
}
// Whether t is past a warp's last tile (tile = warp + t·warps).
__device__ __forceinline__ bool past_last_tile(int t, int tile, int tiles_per_warp, int tiles) {
  return t >= tiles_per_warp || tile >= tiles;
}
template <int kAfterChunks, int kMaxTiles>
__global__ void __launch_bounds__(kAfterWarps * 32, 5)  // 96 registers
    hot_patch_after_kernel(const bf16* r, const bf16* w, int ld, bf16* c, int m, int n, int tiles_per_warp) {
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int warp = blockIdx.x * kAfterWarps + threadIdx.x / 32, warps = gridDim.x * kAfterWarps, tiles = n / 16;
  const int chunks = (ld + 15) / 16;
  const auto pair = [&](const bf16* base, int row, int col, bool ok) -> unsigned {
    return ok && col < ld ? __ldg(reinterpret_cast<const unsigned*>(base + std::size_t(row) * ld + col)) : 0u;
  };
  // sums[t][x]: after the quad's transpose below, this lane's 8 outputs of tile t (token
  // g + 8·(q / 2), rows 8·(q % 2) … + 7 of the tile) as 4 BF16 pairs.
  unsigned sums[kMaxTiles][4];
#pragma unroll
  for (int t = 0; t < kMaxTiles; ++t) {
    const int tile = warp + t * warps;
    if (past_last_tile(t, tile, tiles_per_warp, tiles)) break;
    const int row = tile * 16 + g;
    float acc[2][4] = {};  // acc[h]: R's 16 tokens (A) × the tile's rows 8h … 8h + 7 (B)
    for (int ch0 = 0; ch0 < chunks; ch0 += kAfterChunks) {
      unsigned wa[kAfterChunks][4], rb[kAfterChunks][4];
#pragma unroll
      for (int i = 0; i < kAfterChunks; ++i) {  // past the last chunk col >= ld: zeros, no load
        const int col = (ch0 + i) * 16 + 2 * q;
        wa[i][0] = pair(w, row, col, true), wa[i][1] = pair(w, row + 8, col, true);
        wa[i][2] = pair(w, row, col + 8, true), wa[i][3] = pair(w, row + 8, col + 8, true);
        rb[i][0] = pair(r, g, col, g < m), rb[i][1] = pair(r, g, col + 8, g < m);
        rb[i][2] = pair(r, 8 + g, col, 8 + g < m), rb[i][3] = pair(r, 8 + g, col + 8, 8 + g < m);
      }
#pragma unroll
      for (int i = 0; i < kAfterChunks; ++i) {
        if (ch0 + i >= chunks) break;
        dev::mma_bf16(acc[0], rb[i][0], rb[i][2], rb[i][1], rb[i][3], wa[i][0], wa[i][2]);
        dev::mma_bf16(acc[1], rb[i][0], rb[i][2], rb[i][1], rb[i][3], wa[i][1], wa[i][3]);
      }
    }
    // acc[h][2·tt + e]: token g + 8·tt, row 8h + 2q + e. Word h + 2·tt of the quad's lane j holds
    // rows 8h + 2j, 2j + 1; lane q gathers word q of all four lanes (a 4×4 transpose in the quad).
    const unsigned words[4] = {as_u32(__floats2bfloat162_rn(acc[0][0], acc[0][1])),
                               as_u32(__floats2bfloat162_rn(acc[1][0], acc[1][1])),
                               as_u32(__floats2bfloat162_rn(acc[0][2], acc[0][3])),
                               as_u32(__floats2bfloat162_rn(acc[1][2], acc[1][3]))};
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const unsigned v = s == 0 ? words[q] : __shfl_xor_sync(0xffffffffu, pick4(words, q ^ s), s);
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if ((q ^ s) == j) sums[t][j] = v;
    }
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  // The add: one 16-byte reduction a tile (red.global.add.noftz.v4.bf16x2, no load of C, nothing
  // waited for): C + the BF16-rounded sum, rounded once.
  const int token = g + 8 * (q / 2);
  if (token >= m) return;
#pragma unroll
  for (int t = 0; t < kMaxTiles; ++t) {
    const int tile = warp + t * warps;
    if (past_last_tile(t, tile, tiles_per_warp, tiles)) break;
    bf16* p = c + std::size_t(token) * n + tile * 16 + 8 * (q % 2);
    asm volatile("red.global.add.noftz.v4.bf16x2 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(sums[t][0]),
                 "r"(sums[t][1]), "r"(sums[t][2]), "r"(sums[t][3])
                 : "memory");
  }
}

// Tiles a warp of fp4_hot_patch_after multiplies, with one CTA an SM; 0 where their sums would not
// fit the shared-memory budget.
std::int64_t after_tiles_per_warp(std::int64_t n) {
  const std::int64_t warps = std::int64_t(sm_count()) * kAfterWarps;
  const std::int64_t per_warp = std::max<std::int64_t>(1, (n / 16 + warps - 1) / warps);
  return per_warp <= kAfterMaxTiles ? per_warp : 0;
}
}  // namespace

bool fp4_hot_patch_after_fits(std::int64_t m, std::int64_t n, std::int64_t ld) {
  return m >= 1 && m <= 16 && n % 16 == 0 && n <= INT_MAX && ld % 8 == 0 && ld > 0 && ld <= INT_MAX &&
         after_tiles_per_warp(n) > 0;
}

void fp4_hot_patch_after(const bf16* r, const bf16* w_hot, std::int64_t ld, bf16* c, std::int64_t m, std::int64_t n,
                         cudaStream_t stream) {
  if (!fp4_hot_patch_after_fits(m, n, ld))
    throw InputError("fp4 hot patch after: needs m <= 16, n % 16 == 0, ld % 8 == 0 and at most 8 tiles of 16 rows a warp");
  const std::int64_t per_warp = after_tiles_per_warp(n);
  const std::int64_t ctas = (n / 16 + per_warp * kAfterWarps - 1) / (per_warp * kAfterWarps);
  cudaLaunchConfig_t launch = {};
  launch.gridDim = dim3(unsigned(ctas));
  launch.blockDim = dim3(kAfterWarps * 32);
  launch.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  launch.attrs = attr;
  launch.numAttrs = 1;
  // Up to 3 tiles a warp, 6 k-chunks in flight (one round trip a tile up to hot 96); up to 8, 2.
  auto* kernel = per_warp <= 3 ? hot_patch_after_kernel<6, 3> : hot_patch_after_kernel<2, kAfterMaxTiles>;
  RAFTER_CUDA_CHECK(cudaLaunchKernelEx(&launch, kernel, r, w_hot, int(ld), c, int(m), int(n), int(per_warp)));
  RAFTER_CUDA_LAUNCH_CHECK("fp4 hot patch after");
}

bool fp4_decode_gemm_streams(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                             std::int64_t hot) {
  return fp4_decode_gemm_fits(m, n, k) && stream_cluster(tiles_for(m), n, k, batch, hot, sm_count()) != 0;
}

bool fp4_decode_gemm_fits(std::int64_t m, std::int64_t n, std::int64_t k) {
  return m >= 1 && m <= 64 && n % 16 == 0 && k % kChunk == 0;
}

std::size_t fp4_decode_gemm_workspace_bytes(std::int64_t m, std::int64_t n, std::int64_t batch) {
  const std::int64_t groups = (n + kRowsPerCta - 1) / kRowsPerCta;
  return std::size_t(batch * n * tiles_for(m) * 8) * sizeof(float) + std::size_t(batch * groups) * sizeof(int);
}

std::size_t fp4_decode_packed_bytes(std::int64_t n, std::int64_t k, std::int64_t batch, Fp4Kind kind,
                                    bool scales) {
  const std::int64_t slots = batch * ((n + kStreamRows - 1) / kStreamRows) * (k / kItem) * kStreamWarps;
  return std::size_t(slots) * std::size_t(scales ? packed_scale_bytes(kind) : kPackedCodeBytes);
}

void fp4_pack_decode_weights(Fp4Matrix b, std::uint8_t* codes, std::uint8_t* scales, std::int64_t n, std::int64_t k,
                             std::int64_t batch, Fp4Kind kind, cudaStream_t stream) {
  const std::int64_t chunks = std::int64_t(fp4_decode_packed_bytes(n, k, batch, kind, false)) / 16;
  const unsigned blocks = unsigned(std::min<std::int64_t>((chunks + 255) / 256, 132 * 16));
  if (kind == Fp4Kind::Nvfp4)
    pack_decode_weights_kernel<Fp4Kind::Nvfp4><<<blocks, 256, 0, stream>>>(b, codes, scales, n, k, batch);
  else
    pack_decode_weights_kernel<Fp4Kind::Mxfp4><<<blocks, 256, 0, stream>>>(b, codes, scales, n, k, batch);
  RAFTER_CUDA_LAUNCH_CHECK("fp4 pack decode weights");
}

void fp4_decode_gemm(Fp4Matrix a, Fp4Matrix b, bf16* c, float alpha, std::int64_t m, std::int64_t n,
                     std::int64_t k, std::int64_t batch, Fp4Kind kind, void* workspace, cudaStream_t stream,
                     Fp4HotPatch hot, Fp4Matrix b_packed) {
  if (hot.ld == 0) hot.ld = hot.hot;
  DecodeArgs args{a, b, b_packed, c, alpha, m, n, k, static_cast<float*>(workspace), nullptr, hot};
  args.arrivals = reinterpret_cast<int*>(args.partial + batch * n * tiles_for(m) * 8);
  if (kind == Fp4Kind::Nvfp4)
    decode_for_kind<Fp4Kind::Nvfp4>(args, batch, stream);
  else
    decode_for_kind<Fp4Kind::Mxfp4>(args, batch, stream);
}

}  // namespace rafter::workloads::cuda
