// Bandwidth kernels of cuda.bandwidth. Every access is 16 bytes and coalesced; each thread keeps
// kUnroll independent accesses in flight.
//
// L1 sweep (working set W, a power of two): every block walks the whole buffer from its own
// offset through L1 (ld.global.nc), so W <= L1 hits each SM's L1. Blocks convoy (a block behind
// another hits the lines it just brought in), so past L1 this sweep shows L2, never HBM.
// Device sweeps: the grid strides over W (thread g reads g, g + T, ... modulo W) with L2-only
// loads (ld.global.cg): W <= L2 hits L2, W > L2 streams from HBM.
// Bytes per launch: threads x trips x unroll x 16 (x2 for copy, read + write; x3 for triad).
//
// Stream kernels: one pass of the grid over buffers far larger than L2 (the HBM ceilings), each
// 16-byte vector touched once. Bytes per launch: the buffer size (x2 for copy).
#pragma once
#include <cstdint>

namespace rafter::probes::cuda {

constexpr int kUnroll = 4;
constexpr int kSweepThreads = 1024;

__device__ __forceinline__ void xor_into(int4& acc, const int4& v) {
  acc.x ^= v.x;
  acc.y ^= v.y;
  acc.z ^= v.z;
  acc.w ^= v.w;
}

// A value no XOR of the random data can be known to produce: keeps the loads live.
__device__ __forceinline__ void keep(const int4& acc, int* sink) {
  if ((acc.x & acc.y & acc.z & acc.w) == 0x7fffffff) *sink = acc.x;
}

// 32-bit indices (working sets below 64 GiB) keep the sweep kernels within 32 registers, so that
// two blocks of 1024 threads fit each SM.
__device__ __forceinline__ unsigned sweep_start(unsigned mask) {
  return unsigned((unsigned long long)blockIdx.x * (mask + 1ull) / gridDim.x) & ~31u;
}

__global__ void __launch_bounds__(kSweepThreads)
    sweep_l1_read(const int4* __restrict__ buf, unsigned mask, int trips, int* sink) {
  unsigned i = sweep_start(mask) + threadIdx.x;
  int4 acc = make_int4(0, 0, 0, 0);
  for (int t = 0; t < trips; ++t) {
    int4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldg(&buf[(i + u * blockDim.x) & mask]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) xor_into(acc, v[u]);
    i += kUnroll * blockDim.x;
  }
  keep(acc, sink);
}

__device__ __forceinline__ int4 load_cg(const int4* p) {
  int4 v;
  asm volatile("ld.global.cg.v4.s32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

__device__ __forceinline__ unsigned grid_thread() { return blockIdx.x * blockDim.x + threadIdx.x; }

// U vectors in flight per thread, blocks of B threads (the read sweep tries several shapes).
template <int U = kUnroll, int B = kSweepThreads>
__global__ void __launch_bounds__(B)
    grid_read(const int4* __restrict__ buf, unsigned mask, int trips, int* sink) {
  const unsigned stride = gridDim.x * blockDim.x;
  unsigned i = grid_thread();
  int4 acc = make_int4(0, 0, 0, 0);
  for (int t = 0; t < trips; ++t) {
    int4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = load_cg(&buf[(i + u * stride) & mask]);
#pragma unroll
    for (int u = 0; u < U; ++u) xor_into(acc, v[u]);
    i += U * stride;
  }
  keep(acc, sink);
}

__global__ void __launch_bounds__(kSweepThreads) grid_write(int4* __restrict__ buf, unsigned mask, int trips) {
  const unsigned stride = gridDim.x * blockDim.x;
  unsigned i = grid_thread();
  const int4 v = make_int4(int(i) | 1, blockIdx.x | 1, trips | 1, 0x5a5a5a5a);
  for (int t = 0; t < trips; ++t) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) buf[(i + u * stride) & mask] = v;
    i += kUnroll * stride;
  }
}

// Copy keeps 2 vectors per thread in flight (4 would need more than 32 registers).
constexpr int kCopyUnroll = 2;
__global__ void __launch_bounds__(kSweepThreads)
    grid_copy(const int4* __restrict__ src, int4* __restrict__ dst, unsigned mask, int trips) {
  const unsigned stride = gridDim.x * blockDim.x;
  unsigned i = grid_thread();
  for (int t = 0; t < trips; ++t) {
    int4 v[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) v[u] = load_cg(&src[(i + u * stride) & mask]);
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) dst[(i + u * stride) & mask] = v[u];
    i += kCopyUnroll * stride;
  }
}

// Triad (2 reads : 1 write, as in STREAM and the CPU's triad): c = a ^ b, 2 vectors of each source
// per thread in flight (as copy, within 32 registers).
__global__ void __launch_bounds__(kSweepThreads) grid_triad(const int4* __restrict__ a, const int4* __restrict__ b,
                                                           int4* __restrict__ c, unsigned mask, int trips) {
  const unsigned stride = gridDim.x * blockDim.x;
  unsigned i = grid_thread();
  for (int t = 0; t < trips; ++t) {
    int4 x[kCopyUnroll], y[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) x[u] = load_cg(&a[(i + u * stride) & mask]);
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) y[u] = load_cg(&b[(i + u * stride) & mask]);
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) {
      xor_into(x[u], y[u]);
      c[(i + u * stride) & mask] = x[u];
    }
    i += kCopyUnroll * stride;
  }
}

// Streaming loads/stores that do not keep lines in L1 (.nc, no_allocate) and mark stores as used
// once (.cs), so that L2 stays free for the lines in flight.
__device__ __forceinline__ int4 load_stream(const int4* p) {
  int4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.s32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ void store_stream(int4* p, const int4& v) {
  asm volatile("st.global.cs.v4.s32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// n16: vectors in the buffer, a multiple of gridDim.x * blockDim.x * kUnroll.
template <bool kHints>
__global__ void stream_copy(const int4* __restrict__ src, int4* __restrict__ dst, std::size_t n16) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += stride * kUnroll) {
    int4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = kHints ? load_stream(&src[i + u * stride]) : src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if constexpr (kHints)
        store_stream(&dst[i + u * stride], v[u]);
      else
        dst[i + u * stride] = v[u];
    }
  }
}

template <bool kHints>
__global__ void stream_triad(const int4* __restrict__ a, const int4* __restrict__ b, int4* __restrict__ c,
                             std::size_t n16) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += stride * kUnroll) {
    int4 x[kUnroll], y[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) x[u] = kHints ? load_stream(&a[i + u * stride]) : a[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) y[u] = kHints ? load_stream(&b[i + u * stride]) : b[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      xor_into(x[u], y[u]);
      if constexpr (kHints)
        store_stream(&c[i + u * stride], x[u]);
      else
        c[i + u * stride] = x[u];
    }
  }
}

template <bool kHints>
__global__ void stream_read(const int4* __restrict__ src, std::size_t n16, int* sink) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  int4 acc = make_int4(0, 0, 0, 0);
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += stride * kUnroll) {
    int4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = kHints ? load_stream(&src[i + u * stride]) : src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) xor_into(acc, v[u]);
  }
  keep(acc, sink);
}

template <bool kHints>
__global__ void stream_write(int4* __restrict__ dst, std::size_t n16) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += stride * kUnroll) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int4 v = make_int4(int(i) | 1, u + 1, 0x5a5a5a5a, int(i >> 7) | 1);
      if constexpr (kHints)
        store_stream(&dst[i + u * stride], v);
      else
        dst[i + u * stride] = v;
    }
  }
}

// One pass without a grid stride: block b handles vectors [b * B * U, (b + 1) * B * U), U per
// thread, all loads issued before the first store (as PyTorch's elementwise copy does).
template <int U, int B>
__global__ void __launch_bounds__(B) onepass_copy(const int4* __restrict__ src, int4* __restrict__ dst) {
  const std::size_t base = std::size_t(blockIdx.x) * B * U + threadIdx.x;
  int4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) v[u] = src[base + u * B];
#pragma unroll
  for (int u = 0; u < U; ++u) dst[base + u * B] = v[u];
}

template <int U, int B>
__global__ void __launch_bounds__(B) onepass_triad(const int4* __restrict__ a, const int4* __restrict__ b,
                                                  int4* __restrict__ c) {
  const std::size_t base = std::size_t(blockIdx.x) * B * U + threadIdx.x;
  int4 x[U], y[U];
#pragma unroll
  for (int u = 0; u < U; ++u) x[u] = a[base + u * B];
#pragma unroll
  for (int u = 0; u < U; ++u) y[u] = b[base + u * B];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    xor_into(x[u], y[u]);
    c[base + u * B] = x[u];
  }
}

template <int U, int B>
__global__ void __launch_bounds__(B) onepass_read(const int4* __restrict__ src, int* sink) {
  const std::size_t base = std::size_t(blockIdx.x) * B * U + threadIdx.x;
  int4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) v[u] = src[base + u * B];
  int4 acc = make_int4(0, 0, 0, 0);
#pragma unroll
  for (int u = 0; u < U; ++u) xor_into(acc, v[u]);
  keep(acc, sink);
}

template <int U, int B>
__global__ void __launch_bounds__(B) onepass_write(int4* __restrict__ dst) {
  const std::size_t base = std::size_t(blockIdx.x) * B * U + threadIdx.x;
  const int4 v = make_int4(int(base) | 1, 7, 0x5a5a5a5a, int(base >> 9) | 1);
#pragma unroll
  for (int u = 0; u < U; ++u) dst[base + u * B] = v;
}

}  // namespace rafter::probes::cuda
