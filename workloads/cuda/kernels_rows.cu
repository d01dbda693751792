// Row-wise kernels: RMSNorm forward/backward and softmax (scale + causal mask). One block per row;
// each thread holds CPT chunks of VEC elements in registers (VEC = 8: one 16-byte access per
// chunk; VEC = 1 when the row length is not a multiple of 8), so the row is read from HBM once.
// RMSNorm rows of up to 1024 elements (multiples of 8) take a warp a row instead.
#include "kernel_common.cuh"
#include "kernels.hpp"
#include "cuda_util.hpp"

namespace rafter::workloads::cuda {
namespace {

using namespace dev;

template <int VEC>
__device__ __forceinline__ void load_chunk(const bf16* __restrict__ p, float (&f)[VEC]) {
  if constexpr (VEC == 8) {
    float t[8];
    to_float8(load8(p), t);
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = t[i];
  } else {
    f[0] = __bfloat162float(p[0]);
  }
}
template <int VEC>
__device__ __forceinline__ void store_chunk(bf16* __restrict__ p, const float (&f)[VEC]) {
  if constexpr (VEC == 8) {
    float t[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) t[i] = f[i];
    store8(p, from_float8(t));
  } else {
    p[0] = __float2bfloat16_rn(f[0]);
  }
}

// Threads per block so that each holds at most CPT chunks (CPT picked by the launcher).
struct RowLaunch {
  int vec = 8, cpt = 1, threads = 32;
};
// `wide`: prefer one chunk per thread up to 1024 threads (fewer registers per thread, for kernels
// whose per-thread state grows with the chunks held, like the RMSNorm backward).
RowLaunch plan_row(std::int64_t cols, bool wide = false) {
  RowLaunch l;
  l.vec = cols % 8 == 0 ? 8 : 1;
  std::int64_t chunks = cols / l.vec;
  const std::int64_t per = wide ? 1024 : 256;
  l.cpt = chunks <= per ? 1 : chunks <= 2 * per ? 2 : 4;
  if (std::string why = row_kernel_limit(cols); !why.empty()) throw InputError(why);
  std::int64_t threads = (chunks + l.cpt - 1) / l.cpt;  // at most 1024 within the limit
  threads = (threads + 31) / 32 * 32;
  l.threads = static_cast<int>(threads);
  return l;
}

// A chunk as stored (8 BF16 in one 16-byte register quad, or one BF16): rows held packed take a
// quarter of the registers of FP32 copies, which lets the backward keep more rows in flight.
template <int VEC>
struct Packed {
  uint4 raw;
};
template <>
struct Packed<1> {
  __nv_bfloat16 raw;
};
// kStream: read once (evict-first); else a plain read-only load.
template <int VEC, bool kStream = true>
__device__ __forceinline__ void load_packed(const bf16* __restrict__ p, Packed<VEC>& out) {
  if constexpr (VEC == 8)
    out.raw = kStream ? __ldcs(reinterpret_cast<const uint4*>(p)) : __ldg(reinterpret_cast<const uint4*>(p));
  else
    out.raw = p[0];
}
template <int VEC>
__device__ __forceinline__ void unpack(const Packed<VEC>& in, float (&f)[VEC]) {
  if constexpr (VEC == 8) {
    float t[8];
    to_float8(*reinterpret_cast<const Bf16x8*>(&in.raw), t);
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = t[i];
  } else {
    f[0] = __bfloat162float(in.raw);
  }
}

// The threads of one row. BlockRow: a block a row, blockDim.x threads, reductions through shared
// memory. WarpRow: rows of at most kWarpRowChunks 16-byte chunks (1024 elements), a warp a row and
// kRowWarps rows a block, reductions by shuffles and no block barrier. With a block of cols/8
// threads a row (GLA-1.3B's head norm: 512 elements, 64 threads) a block barrier per reduction and
// two warps a block left the SMs short of warps: 14.5 µs forward and 44.6 µs backward at 16384 ×
// 512 on an H200, against 11.1 and 24.6 µs at 4096 × 2048, the same bytes.
// kRowsPastEnd: the grid's last row group may lie past the last row.
constexpr int kRowWarps = 8, kWarpRowChunks = 128;
struct BlockRow {
  static constexpr bool kRowsPastEnd = false;  // a block a row, as many blocks as rows
  __device__ static int lane() { return threadIdx.x; }
  __device__ static int width() { return blockDim.x; }
  __device__ static std::int64_t first() { return blockIdx.x; }
  __device__ static std::int64_t stride() { return gridDim.x; }
  __device__ static float sum(float v) {
    __shared__ float scratch[32];
    return block_reduce<false>(v, scratch);
  }
  // The block's partial dw row: each thread's columns as it holds them.
  template <int VEC, int CPT>
  __device__ static void store_dw(const float (&dw)[CPT][VEC], float* __restrict__ partials, int cols) {
#pragma unroll
    for (int c = 0; c < CPT; ++c) {
      const int idx = lane() + c * width();
      if (idx < cols / VEC)
#pragma unroll
        for (int i = 0; i < VEC; ++i) partials[std::int64_t(blockIdx.x) * cols + idx * VEC + i] = dw[c][i];
    }
  }
};
struct WarpRow {
  static constexpr bool kRowsPastEnd = true;
  __device__ static int lane() { return threadIdx.x % 32; }
  __device__ static int width() { return 32; }
  __device__ static std::int64_t first() { return std::int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32; }
  __device__ static std::int64_t stride() { return std::int64_t(gridDim.x) * kRowWarps; }
  __device__ static float sum(float v) { return warp_sum(v); }
  // The block's warps sum their dw in shared memory into the block's partial row.
  template <int VEC, int CPT>
  __device__ static void store_dw(const float (&dw)[CPT][VEC], float* __restrict__ partials, int cols) {
    static_assert(VEC == 8, "a warp a row takes rows of 16-byte chunks");
    __shared__ float dw_warps[kRowWarps][kWarpRowChunks * 8];
#pragma unroll
    for (int c = 0; c < CPT; ++c)
      if (lane() + 32 * c < cols / 8)
#pragma unroll
        for (int i = 0; i < 8; ++i) dw_warps[threadIdx.x / 32][(lane() + 32 * c) * 8 + i] = dw[c][i];
    __syncthreads();
    for (int col = threadIdx.x; col < cols; col += blockDim.x) {
      float t = 0.f;
#pragma unroll
      for (int k = 0; k < kRowWarps; ++k) t += dw_warps[k][col];
      partials[std::int64_t(blockIdx.x) * cols + col] = t;
    }
  }
};
bool warp_rows(std::int64_t cols) { return cols % 8 == 0 && cols / 8 <= kWarpRowChunks; }
int warp_row_cpt(std::int64_t cols) { return cols / 8 <= 32 ? 1 : cols / 8 <= 64 ? 2 : 4; }

// x and the weight are held packed (a quarter of the registers of FP32 copies) and loaded
// together, so the weight's latency hides behind the reduction. (Loading the weight after the
// reduction: 90.6 us at 16384 x 4096 on the H100, torch.compile 89.7; holding both in FP32 cost
// occupancy: 98.6 us.)
template <class G, int VEC, int CPT>
__device__ __forceinline__ void rmsnorm_fwd_rows(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                 bf16* __restrict__ y, float* __restrict__ rstd,
                                                 std::int64_t rows, int cols, float eps) {
  const std::int64_t row = G::first();
  if (G::kRowsPastEnd && row >= rows) return;  // a whole row's threads return together
  const int chunks = cols / VEC;
  const bf16* xr = x + row * cols;
  Packed<VEC> xp[CPT], wp[CPT];
  float ss = 0.f;
#pragma unroll
  for (int c = 0; c < CPT; ++c) {
    const int idx = G::lane() + c * G::width();
    if (idx < chunks) {
      load_packed<VEC, false>(xr + idx * VEC, xp[c]);  // plain loads: evict-first ran slower in the streams
      load_packed<VEC, false>(w + idx * VEC, wp[c]);
    }
  }
#pragma unroll
  for (int c = 0; c < CPT; ++c)
    if (G::lane() + c * G::width() < chunks) {
      float v[VEC];
      unpack<VEC>(xp[c], v);
#pragma unroll
      for (int i = 0; i < VEC; ++i) ss += v[i] * v[i];
    }
  const float r = rsqrtf(G::sum(ss) / cols + eps);
  if (rstd && G::lane() == 0) rstd[row] = r;
#pragma unroll
  for (int c = 0; c < CPT; ++c) {
    const int idx = G::lane() + c * G::width();
    if (idx < chunks) {
      float v[VEC], wf[VEC];
      unpack<VEC>(xp[c], v);
      unpack<VEC>(wp[c], wf);
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[i] = v[i] * r * wf[i];
      store_chunk<VEC>(y + row * cols + idx * VEC, v);
    }
  }
}

// Row groups (blocks or warps) loop over rows so that each thread's dw partial (its chunks'
// columns) stays in registers; the next row's x and dy are loaded before this row's reductions, so
// loads overlap the reductions. Each block then writes its partial dw row.
template <class G, int VEC, int CPT>
__device__ __forceinline__ void rmsnorm_bwd_rows(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                 const bf16* __restrict__ dy, bf16* __restrict__ dx,
                                                 float* __restrict__ partials, std::int64_t rows, int cols,
                                                 float eps) {
  const int chunks = cols / VEC;
  float dw[CPT][VEC] = {};
  Packed<VEC> wp[CPT], xp[CPT], gp[CPT];
  auto load_row = [&](std::int64_t row, Packed<VEC> (&xr)[CPT], Packed<VEC> (&gr)[CPT]) {
#pragma unroll
    for (int c = 0; c < CPT; ++c) {
      const int idx = G::lane() + c * G::width();
      if (idx < chunks && row < rows) {
        load_packed<VEC>(x + row * cols + idx * VEC, xr[c]);
        load_packed<VEC>(dy + row * cols + idx * VEC, gr[c]);
      }
    }
  };
#pragma unroll
  for (int c = 0; c < CPT; ++c) {
    const int idx = G::lane() + c * G::width();
    if (idx < chunks) load_packed<VEC, false>(w + idx * VEC, wp[c]);
  }
  const std::int64_t first = G::first(), stride = G::stride();
  load_row(first, xp, gp);
  for (std::int64_t row = first; row < rows; row += stride) {
    Packed<VEC> xn[CPT], gn[CPT];
    load_row(row + stride, xn, gn);  // prefetch
    float ss = 0.f, dot = 0.f;
#pragma unroll
    for (int c = 0; c < CPT; ++c) {
      if (G::lane() + c * G::width() < chunks) {
        float xv[VEC], gv[VEC], wv[VEC];
        unpack<VEC>(xp[c], xv), unpack<VEC>(gp[c], gv), unpack<VEC>(wp[c], wv);
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          ss += xv[i] * xv[i];
          dot += gv[i] * wv[i] * xv[i];
        }
      }
    }
    const float r = rsqrtf(G::sum(ss) / cols + eps);
    const float coef = r * r * r * (G::sum(dot) / cols);
#pragma unroll
    for (int c = 0; c < CPT; ++c) {
      const int idx = G::lane() + c * G::width();
      if (idx < chunks) {
        float xv[VEC], gv[VEC], wv[VEC], out[VEC];
        unpack<VEC>(xp[c], xv), unpack<VEC>(gp[c], gv), unpack<VEC>(wp[c], wv);
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          out[i] = r * gv[i] * wv[i] - xv[i] * coef;
          dw[c][i] += gv[i] * xv[i] * r;
        }
        store_chunk<VEC>(dx + row * cols + idx * VEC, out);
      }
      xp[c] = xn[c], gp[c] = gn[c];
    }
  }
  G::template store_dw<VEC, CPT>(dw, partials, cols);
}

// The kernels, each with the launch bounds of its launches: the block kernels none (ptxas's own
// register choice, which ran fastest), except the backward at 2 and 4 chunks a thread (rows over
// 8192 elements, 1024 threads: 64 registers a thread at most, or the launch does not fit an SM;
// unbounded they took 95 and 160); the warp-a-row kernels blocks of kRowWarps warps.
#define RAFTER_RMSNORM_FWD_ARGS                                                                           \
  const bf16 *__restrict__ x, const bf16 *__restrict__ w, bf16 *__restrict__ y, float *__restrict__ rstd, \
      std::int64_t rows, int cols, float eps
#define RAFTER_RMSNORM_BWD_ARGS                                                        \
  const bf16 *__restrict__ x, const bf16 *__restrict__ w, const bf16 *__restrict__ dy, \
      bf16 *__restrict__ dx, float *__restrict__ partials, std::int64_t rows, int cols, float eps
template <int VEC, int CPT>
__global__ void rmsnorm_fwd_kernel(RAFTER_RMSNORM_FWD_ARGS) {
  rmsnorm_fwd_rows<BlockRow, VEC, CPT>(x, w, y, rstd, rows, cols, eps);
}
template <int CPT>
__global__ void __launch_bounds__(kRowWarps * 32) rmsnorm_fwd_warp_kernel(RAFTER_RMSNORM_FWD_ARGS) {
  rmsnorm_fwd_rows<WarpRow, 8, CPT>(x, w, y, rstd, rows, cols, eps);
}
template <int VEC>
__global__ void rmsnorm_bwd_kernel(RAFTER_RMSNORM_BWD_ARGS) {
  rmsnorm_bwd_rows<BlockRow, VEC, 1>(x, w, dy, dx, partials, rows, cols, eps);
}
template <int VEC, int CPT>
__global__ void __launch_bounds__(1024) rmsnorm_bwd_wide_kernel(RAFTER_RMSNORM_BWD_ARGS) {
  rmsnorm_bwd_rows<BlockRow, VEC, CPT>(x, w, dy, dx, partials, rows, cols, eps);
}
template <int CPT>
__global__ void __launch_bounds__(kRowWarps * 32) rmsnorm_bwd_warp_kernel(RAFTER_RMSNORM_BWD_ARGS) {
  rmsnorm_bwd_rows<WarpRow, 8, CPT>(x, w, dy, dx, partials, rows, cols, eps);
}
#undef RAFTER_RMSNORM_FWD_ARGS
#undef RAFTER_RMSNORM_BWD_ARGS

// dw[c] = Σ_p partials[p, c]: 32 columns per block (coalesced 128-byte rows), 8 warps splitting
// the partial rows, combined in shared memory.
__global__ void column_sum_kernel(const float* __restrict__ partials, float* __restrict__ out, int parts,
                                  int cols) {
  __shared__ float acc[8][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.f;
  if (c < cols)
    for (int p = threadIdx.y; p < parts; p += 8) s += partials[std::int64_t(p) * cols + c];
  acc[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float t = 0.f;
#pragma unroll
    for (int y = 0; y < 8; ++y) t += acc[y][threadIdx.x];
    out[c] = t;
  }
}

// Softmax of scale·x per row; causal rows see keys ≤ q_pos + (cols − q_len). Masked chunks are
// neither read nor exponentiated: they are written as zeros.
template <int VEC, int CPT>
__global__ void softmax_kernel(const bf16* __restrict__ x, bf16* __restrict__ y, int cols, int q_len,
                               float scale_log2, bool causal) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const int chunks = cols / VEC;
  const int limit = causal ? int(row % q_len) + (cols - q_len) : cols - 1;  // last visible column
  if (limit < 0) {  // more queries than keys: the first q_len - cols see none, and get zeros
    for (int idx = threadIdx.x; idx < chunks; idx += blockDim.x) {
      float z[VEC] = {};
      store_chunk<VEC>(y + row * cols + idx * VEC, z);
    }
    return;
  }
  float v[CPT][VEC];
  float mx = -INFINITY;
#pragma unroll
  for (int c = 0; c < CPT; ++c) {
    int idx = threadIdx.x + c * blockDim.x;
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[c][i] = -INFINITY;
    if (idx < chunks && idx * VEC <= limit) {
      load_chunk<VEC>(x + row * cols + idx * VEC, v[c]);
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        v[c][i] = idx * VEC + i <= limit ? v[c][i] * scale_log2 : -INFINITY;
        mx = fmaxf(mx, v[c][i]);
      }
    }
  }
  mx = block_reduce<true>(mx, scratch);
  float sum = 0.f;
#pragma unroll
  for (int c = 0; c < CPT; ++c)
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      v[c][i] = exp2f(v[c][i] - mx);  // exp2(-inf) = 0 for masked entries
      sum += v[c][i];
    }
  float inv = 1.f / block_reduce<false>(sum, scratch);
#pragma unroll
  for (int c = 0; c < CPT; ++c) {
    int idx = threadIdx.x + c * blockDim.x;
    if (idx < chunks) {
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[c][i] *= inv;
      store_chunk<VEC>(y + row * cols + idx * VEC, v[c]);
    }
  }
}

// Calls f.template operator()<VEC, CPT>() for the launch plan's template arguments.
template <class F>
void dispatch_row(const RowLaunch& l, F&& f) {
  if (l.vec == 8) {
    if (l.cpt == 1) f.template operator()<8, 1>();
    else if (l.cpt == 2) f.template operator()<8, 2>();
    else f.template operator()<8, 4>();
  } else {
    if (l.cpt == 1) f.template operator()<1, 1>();
    else if (l.cpt == 2) f.template operator()<1, 2>();
    else f.template operator()<1, 4>();
  }
}

constexpr int kBwdBlocks = 264;  // 2 resident blocks of up to 1024 threads per SM on an H100; dw partials ~1% of the bytes

// Calls f.template operator()<CPT>() for a warp-a-row launch's chunks a lane.
template <class F>
void dispatch_warp_row(std::int64_t cols, F&& f) {
  const int cpt = warp_row_cpt(cols);
  if (cpt == 1)
    f.template operator()<1>();
  else if (cpt == 2)
    f.template operator()<2>();
  else
    f.template operator()<4>();
}

// Blocks of the warp-a-row backward: 4 blocks of 8 warps an SM on a 132-SM GPU; dw partials ~1 MB at 512.
constexpr std::int64_t kWarpBwdBlocks = 528;

std::int64_t warp_bwd_blocks(std::int64_t rows) {
  return std::min<std::int64_t>((rows + kRowWarps - 1) / kRowWarps, kWarpBwdBlocks);
}

}  // namespace

std::string row_kernel_limit(std::int64_t cols) {
  if (cols <= (cols % 8 == 0 ? 32768 : 4096)) return {};
  return "a row of " + std::to_string(cols) + " values is longer than the row kernels hold in registers " +
         "(32768 values when a multiple of 8, 4096 otherwise)";
}

void rmsnorm_fwd(const bf16* x, const bf16* w, bf16* y, float* rstd, std::int64_t rows, std::int64_t cols,
                 float eps, cudaStream_t stream) {
  if (warp_rows(cols)) {
    dispatch_warp_row(cols, [&]<int CPT>() {
      rmsnorm_fwd_warp_kernel<CPT>
          <<<unsigned((rows + kRowWarps - 1) / kRowWarps), kRowWarps * 32, 0, stream>>>(x, w, y, rstd, rows,
                                                                                        int(cols), eps);
    });
  } else {
    RowLaunch l = plan_row(cols);
    dispatch_row(l, [&]<int VEC, int CPT>() {
      rmsnorm_fwd_kernel<VEC, CPT><<<rows, l.threads, 0, stream>>>(x, w, y, rstd, rows, int(cols), eps);
    });
  }
  RAFTER_CUDA_LAUNCH_CHECK("rmsnorm_fwd_kernel");
}

std::int64_t rmsnorm_bwd_partials(std::int64_t rows, std::int64_t cols) {
  return (warp_rows(cols) ? warp_bwd_blocks(rows) : std::min<std::int64_t>(rows, kBwdBlocks)) * cols;
}

void rmsnorm_bwd(const bf16* x, const bf16* w, const bf16* dy, bf16* dx, float* dw, float* partials,
                 std::int64_t rows, std::int64_t cols, float eps, cudaStream_t stream) {
  int blocks = 0;
  if (warp_rows(cols)) {
    blocks = int(warp_bwd_blocks(rows));
    dispatch_warp_row(cols, [&]<int CPT>() {
      rmsnorm_bwd_warp_kernel<CPT>
          <<<blocks, kRowWarps * 32, 0, stream>>>(x, w, dy, dx, partials, rows, int(cols), eps);
    });
  } else {
    RowLaunch l = plan_row(cols, /*wide=*/true);
    blocks = static_cast<int>(std::min<std::int64_t>(rows, kBwdBlocks));
    dispatch_row(l, [&]<int VEC, int CPT>() {
      if constexpr (CPT == 1)
        rmsnorm_bwd_kernel<VEC>
            <<<blocks, l.threads, 0, stream>>>(x, w, dy, dx, partials, rows, int(cols), eps);
      else
        rmsnorm_bwd_wide_kernel<VEC, CPT>
            <<<blocks, l.threads, 0, stream>>>(x, w, dy, dx, partials, rows, int(cols), eps);
    });
  }
  RAFTER_CUDA_LAUNCH_CHECK("rmsnorm_bwd_kernel");
  column_sum_kernel<<<(cols + 31) / 32, dim3(32, 8), 0, stream>>>(partials, dw, blocks, int(cols));
  RAFTER_CUDA_LAUNCH_CHECK("column_sum_kernel");
}

void softmax_fwd(const bf16* x, bf16* y, std::int64_t rows, std::int64_t cols, std::int64_t q_len, float scale,
                 bool causal, cudaStream_t stream) {
  if (causal && q_len <= 0) throw InputError("causal softmax needs q_len > 0");
  RowLaunch l = plan_row(cols);
  float scale_log2 = scale * 1.4426950408889634f;
  dispatch_row(l, [&]<int VEC, int CPT>() {
    softmax_kernel<VEC, CPT><<<rows, l.threads, 0, stream>>>(x, y, int(cols), int(causal ? q_len : 1),
                                                             scale_log2, causal);
  });
  RAFTER_CUDA_LAUNCH_CHECK("softmax_kernel");
}

}  // namespace rafter::workloads::cuda
