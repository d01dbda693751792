// What the oneDNN-backed kernels share: the engine (held to RAFTER_CPU_ISA unless
// ONEDNN_MAX_CPU_ISA says otherwise), strided matmul descriptors, and what oneDNN's matmul can do on
// this CPU, asked of oneDNN itself and remembered. Where it has no matmul for a storage type (BF16
// without AVX-512 in oneDNN 2.6; INT8 without VNNI, whose sums saturate), the kernels widen their
// operands to FP32 in the timed call and run the FP32 matmul: widen() and narrow() below. Private
// to workloads/cpu.
#pragma once
#include <dnnl.hpp>

#include <string>

#include "cpu_kernel.hpp"

namespace rafter::workloads::cpu {

using dt = dnnl::memory::data_type;

dnnl::engine& onednn_engine();
std::string onednn_version();  // "2.6.3"

// [batch, rows, cols] stored row-major, or transposed ([batch, cols, rows] in memory).
dnnl::memory::desc matmul_md(std::int64_t b, std::int64_t rows, std::int64_t cols, dt type, bool transposed);

// Whether oneDNN has a matmul with these source, weights and destination types (and a sum
// post-op) on this CPU: found by creating a primitive descriptor of a small instance (catching
// dnnl::error), not by reading CPUID, once per combination; for s8·s8 → s32 also by running it
// on sums that an int16-saturating kernel (no VNNI) gets wrong.
bool onednn_has_matmul(dt src, dt weights, dt dst, bool sum_post_op = false);

// Whether rafter runs its BF16 matmuls on oneDNN's BF16 matmul: oneDNN has one here and the CPU
// has BF16 dot products (AVX512_BF16, which AMX-BF16 CPUs have too; not held below AVX-512 by
// RAFTER_CPU_ISA).
// Without them oneDNN 2.6's BF16 matmul on AVX-512 emulates them (gemm:jit), 3.5 times slower than
// its FP32 matmul on the widened operands (2048³ on an Ice Lake VM: 640 against 181 ms), so the
// FP32 path runs instead. sum_post_op as for onednn_has_matmul.
bool onednn_native_bf16_matmul(bool sum_post_op = false);
// Why not, for details["path"]: ": oneDNN 2.6.3 has no bf16 matmul on this CPU" or the CPU's lack.
std::string onednn_no_bf16_note();

// n values of bf16 or s8 storage as fp32 (exact), and fp32 values into bf16 (round to nearest
// even) or s32 (rounded to the nearest integer) storage; split across the pool.
void widen(const void* from, dt type, float* to, std::int64_t n);
void narrow(const float* from, dt type, void* to, std::int64_t n);

}  // namespace rafter::workloads::cpu
