// FP4 GEMM kernels for sm_90 (see fp4_gemm.hpp): a dequantizer to BF16 (prefill path, ahead of the
// cuBLASLt BF16 GEMM) and a fused decode GEMM that streams FP4 weights into mma.sync.
#include <cuda_fp8.h>

#include <algorithm>

#include "cuda_util.hpp"
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

// One thread per 16 values (8 bytes in, 32 bytes out): memory-bound, in natural order.
template <Fp4Kind K>
__global__ void dequantize_kernel(Fp4Matrix in, bf16* out, std::int64_t groups) {
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
    uint4* dst = reinterpret_cast<uint4*>(out + g * 16);
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
// variant with twice the warps per SM (16 per CTA, each half the chunks, halves summed in shared
// memory) took the same 16.0 µs at 18 cycles per issue, so occupancy is not the limit; where the
// time goes (the split-K atomics and the last CTA's finish are the suspects) is still open.
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
  bf16* c;
  float alpha;
  std::int64_t m, n, k;
  float* partial;  // [batch, n, 8·MT], zero between calls
  int* arrivals;   // [batch, row groups], zero between calls
};

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
      p.c[(batch * p.m + token) * p.n + row] = __float2bfloat16(p.alpha * (sums[i] * kWeightUnfold<K>));
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
  static const bool configured = [smem] {
    RAFTER_CUDA_CHECK(cudaFuncSetAttribute(decode_gemm_kernel<MT, K>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return true;
  }();
  (void)configured;
  const dim3 grid(unsigned((args.n + kRowsPerCta - 1) / kRowsPerCta),
                  unsigned((args.k / kChunk + kChunks - 1) / kChunks), unsigned(batch));
  decode_gemm_kernel<MT, K><<<grid, kWarps * 32, smem, stream>>>(args);
  RAFTER_CUDA_LAUNCH_CHECK("fp4 decode gemm");
}

template <Fp4Kind K>
void decode_for_kind(const DecodeArgs& args, std::int64_t batch, cudaStream_t stream) {
  switch (tiles_for(args.m)) {
    case 1: return launch_decode<1, K>(args, batch, stream);
    case 2: return launch_decode<2, K>(args, batch, stream);
    case 4: return launch_decode<4, K>(args, batch, stream);
    default: return launch_decode<8, K>(args, batch, stream);
  }
}

}  // namespace

void fp4_dequantize_bf16(Fp4Matrix in, bf16* out, std::int64_t rows, std::int64_t k, Fp4Kind kind,
                         cudaStream_t stream) {
  const std::int64_t groups = rows * k / 16;
  const int threads = 256;
  const unsigned blocks = unsigned(std::min<std::int64_t>((groups + threads - 1) / threads, 132 * 16));
  if (kind == Fp4Kind::Nvfp4)
    dequantize_kernel<Fp4Kind::Nvfp4><<<blocks, threads, 0, stream>>>(in, out, groups);
  else
    dequantize_kernel<Fp4Kind::Mxfp4><<<blocks, threads, 0, stream>>>(in, out, groups);
  RAFTER_CUDA_LAUNCH_CHECK("fp4 dequantize");
}

bool fp4_decode_gemm_fits(std::int64_t m, std::int64_t n, std::int64_t k) {
  return m >= 1 && m <= 64 && n % 16 == 0 && k % kChunk == 0;
}

std::size_t fp4_decode_gemm_workspace_bytes(std::int64_t m, std::int64_t n, std::int64_t batch) {
  const std::int64_t groups = (n + kRowsPerCta - 1) / kRowsPerCta;
  return std::size_t(batch * n * tiles_for(m) * 8) * sizeof(float) + std::size_t(batch * groups) * sizeof(int);
}

void fp4_decode_gemm(Fp4Matrix a, Fp4Matrix b, bf16* c, float alpha, std::int64_t m, std::int64_t n, std::int64_t k,
                     std::int64_t batch, Fp4Kind kind, void* workspace, cudaStream_t stream) {
  DecodeArgs args{a, b, c, alpha, m, n, k, static_cast<float*>(workspace), nullptr};
  args.arrivals = reinterpret_cast<int*>(args.partial + batch * n * tiles_for(m) * 8);
  if (kind == Fp4Kind::Nvfp4)
    decode_for_kind<Fp4Kind::Nvfp4>(args, batch, stream);
  else
    decode_for_kind<Fp4Kind::Mxfp4>(args, batch, stream);
}

}  // namespace rafter::workloads::cuda
