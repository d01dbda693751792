// Hot loops of the CPU backend written for AVX-512 (F/BW/VL/DQ/BF16; Zen 4, Sapphire Rapids and
// later): one exp per element, bf16 converted by vpmovzxwd/vcvtneps2bf16 and fp16 by
// vcvtph2ps/vcvtps2ph, large outputs streamed
// past the caches. Implemented in the *_avx512.cpp files; the AVX2 kernels call them when
// avx512::available() and keep their own loops otherwise. Row functions work on one thread's rows.
#pragma once
#include <cstdint>

#include "cpu_kernel.hpp"

namespace rafter::workloads::cpu::avx512 {

bool available();  // the CPU has AVX-512 F, BW, VL, DQ and BF16

// y = softmax(x) for `rows` rows of `cols`; scratch holds `cols` floats.
void softmax_rows(const float* x, float* y, std::int64_t rows, std::int64_t cols, float* scratch);
void softmax_rows(const bf16* x, bf16* y, std::int64_t rows, std::int64_t cols, float* scratch);
void softmax_rows(const f16* x, f16* y, std::int64_t rows, std::int64_t cols, float* scratch);
// log Σ exp(z_j) of one row; *mx receives the reference the sum was taken against (the row's max
// or a value below it, never more than ~88 below); `next` (or null): the row to prefetch.
float logsumexp(const float* z, std::int64_t n, float* mx, const float* next);
float logsumexp(const bf16* z, std::int64_t n, float* mx, const bf16* next);
float logsumexp(const f16* z, std::int64_t n, float* mx, const f16* next);
// d_j = exp(z_j − mx) · scale, streamed: the caller fences (_mm_sfence) before reading d back.
void scaled_exp(const float* z, float* d, std::int64_t n, float mx, float scale);
void scaled_exp(const bf16* z, bf16* d, std::int64_t n, float mx, float scale);
void scaled_exp(const f16* z, f16* d, std::int64_t n, float mx, float scale);
// SwiGLU: o = silu(g) · u, and its backward; outputs streamed, the caller fences once per block.
void swiglu_fwd(const float* g, const float* u, float* o, std::int64_t n);
void swiglu_fwd(const bf16* g, const bf16* u, bf16* o, std::int64_t n);
void swiglu_fwd(const f16* g, const f16* u, f16* o, std::int64_t n);
void swiglu_bwd(const float* g, const float* u, const float* dy, float* dg, float* du, std::int64_t n);
void swiglu_bwd(const bf16* g, const bf16* u, const bf16* dy, bf16* dg, bf16* du, std::int64_t n);
void swiglu_bwd(const f16* g, const f16* u, const f16* dy, f16* dg, f16* du, std::int64_t n);
// RMSNorm of one row (eps 1e-5); the backward adds this row's share of dw into dw. With `more`,
// both prefetch the next row of x (and dy), n further on, during their second pass: it runs from
// L1, and DRAM would otherwise idle meanwhile (prefetching during the first pass too was slower).
void rmsnorm_fwd(const float* x, const float* w, float* y, std::int64_t n, bool more);
void rmsnorm_fwd(const bf16* x, const bf16* w, bf16* y, std::int64_t n, bool more);
void rmsnorm_fwd(const f16* x, const f16* w, f16* y, std::int64_t n, bool more);
void rmsnorm_bwd(const float* x, const float* w, const float* dy, float* dx, float* dw, std::int64_t n, bool more);
void rmsnorm_bwd(const bf16* x, const bf16* w, const bf16* dy, bf16* dx, float* dw, std::int64_t n, bool more);
void rmsnorm_bwd(const f16* x, const f16* w, const f16* dy, f16* dx, float* dw, std::int64_t n, bool more);
// The bf16 forward and backward of a thread's whole block of `rows` rows (n % 32 == 0); the
// backward adds the rows' share of dw into dw (n floats, natural order).
void rmsnorm_fwd_rows(const bf16* x, const bf16* w, bf16* y, std::int64_t rows, std::int64_t n);
void rmsnorm_bwd_rows(const bf16* x, const bf16* w, const bf16* dy, bf16* dx, float* dw, std::int64_t rows, std::int64_t n);
// RoPE of one token's `heads` heads of d (d/2 % 16 == 0): y = x·cos ± rotate(x)·sin (sin signed).
void rope_token(const float* x, float* y, const float* cos, const float* sin, std::int64_t heads, std::int64_t d);
void rope_token(const bf16* x, bf16* y, const float* cos, const float* sin, std::int64_t heads, std::int64_t d);
void rope_token(const f16* x, f16* y, const float* cos, const float* sin, std::int64_t heads, std::int64_t d);
// memcpy whose destination is streamed past the caches; `next` (or null): the source of the next
// copy (a gather's next row, which the hardware prefetcher cannot guess), prefetched meanwhile.
void copy_stream(void* dst, const void* src, std::size_t bytes, const void* next = nullptr);
// y = a + b over n elements.
void add(const float* a, const float* b, float* y, std::int64_t n);
void add(const bf16* a, const bf16* b, bf16* y, std::int64_t n);
void add(const f16* a, const f16* b, f16* y, std::int64_t n);

// Decode attention for batch b, heads [h0, h1) of a bf16 KV cache laid out [batch, kv_len,
// kv_heads, d] (d % 32 == 0): scores by vdpbf16ps on the unscaled bf16 q, softmax in fp32, P·V in
// fp32. sc holds (h1 − h0)·kv_len floats, acc (h1 − h0)·d floats.
struct DecodeArgs {
  const bf16 *Q, *K, *V;
  bf16* O;
  std::int64_t kv_len, heads, kv_heads, d;
  float scale;
};
void attention_decode(const DecodeArgs& a, std::int64_t b, std::int64_t h0, std::int64_t h1, float* sc, float* acc);

// FP4 (E2M1) blocks → bf16 for rows [r0, r1): codes two per byte (low nibble first), one scale
// byte per block of bc columns × br rows, decoded through scale_lut (256 entries, tensor scale
// already applied).
void dequantize_fp4(const std::uint8_t* codes, const std::uint8_t* scales, const float* scale_lut, bf16* out,
                    std::int64_t r0, std::int64_t r1, std::int64_t cols, std::int64_t bc, std::int64_t br);

// AdamW on parameters [lo, hi): m, v, p updated in place, `copy` = the new p in the storage type.
// c1, c2: the bias corrections 1 / (1 − β^step).
struct AdamwConsts {
  float b1, b2, lr, eps, wd, c1, c2;
};
void adamw_step(const AdamwConsts& k, float* p, float* m, float* v, const float* g, float* copy, std::int64_t lo,
                std::int64_t hi);
void adamw_step(const AdamwConsts& k, float* p, float* m, float* v, const bf16* g, bf16* copy, std::int64_t lo,
                std::int64_t hi);
void adamw_step(const AdamwConsts& k, float* p, float* m, float* v, const f16* g, f16* copy, std::int64_t lo,
                std::int64_t hi);

// max |x| over n bf16 values.
float abs_max(const bf16* x, std::int64_t n);
// NVFP4 with 1×16 blocks of bf16 rows [r0, r1) (cols % 32 == 0): per block the E4M3 scale byte
// encode_e4m3(amax / 6 / tensor_scale), decoded through e4m3_lut (256 entries), then the codes
// rounded to nearest even by thresholds on |x| / scale, exactly as the scalar encoder.
// block_amax (or null: computed on the fly): the blocks' |x| maxima as abs_max_blocks wrote them.
void quantize_nvfp4(const bf16* x, std::uint8_t* codes, std::uint8_t* scales, std::int64_t r0, std::int64_t r1,
                    std::int64_t cols, float tensor_scale, const float* e4m3_lut, std::uint8_t (*encode_e4m3)(float),
                    const bf16* block_amax = nullptr);
// max |x| of rows [r0, r1) (cols % 256 == 0), writing each 1×16 block's |x| max (bf16 bits) to
// block_amax[(r·cols + c) / 16]: the amax pass that NVFP4 needs anyway (for the tensor scale) has
// the compute to spare, and the coding pass then reads 1/8 of the input's bytes instead of
// re-deriving them.
float abs_max_blocks(const bf16* x, std::int64_t r0, std::int64_t r1, std::int64_t cols, bf16* block_amax);

}  // namespace rafter::workloads::cpu::avx512
