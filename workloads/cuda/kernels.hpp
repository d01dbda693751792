// Our memory-bound CUDA kernels (BF16 data, FP32 arithmetic, 16-byte accesses where the row length
// allows, one block per row with the row held in registers for the row-wise ones). Each launcher
// enqueues on `stream` and checks the launch; the caller checks results against the catalogue's
// FP64 reference (native_backend.cpp).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace rafter::workloads::cuda {

using bf16 = __nv_bfloat16;

// The shapes the kernels below take, as their launchers check them: "" when they take it, else why
// not (the backend then reports the shape as having no backend, naming this).
// The row kernels (RMSNorm, softmax) hold a row in registers: 32768 values (a multiple of 8), 4096
// otherwise.
std::string row_kernel_limit(std::int64_t cols);
std::string rope_limit(std::int64_t head_dim);     // head dims that are multiples of 16
std::string embedding_limit(std::int64_t hidden);  // rows of 16-byte vectors

// y = x · rsqrt(mean(x²) + eps) · w, rows of `cols`; rstd (nullable) receives the per-row factor.
void rmsnorm_fwd(const bf16* x, const bf16* w, bf16* y, float* rstd, std::int64_t rows,
                 std::int64_t cols, float eps, cudaStream_t stream);
// dx = r·(dy·w) − x·r³·mean(dy·w·x); dw = Σ_rows dy·x·r (FP32, through per-block partials in
// `partials`, which must hold rmsnorm_bwd_partials(rows, cols) floats).
std::int64_t rmsnorm_bwd_partials(std::int64_t rows, std::int64_t cols);
void rmsnorm_bwd(const bf16* x, const bf16* w, const bf16* dy, bf16* dx, float* dw, float* partials,
                 std::int64_t rows, std::int64_t cols, float eps, cudaStream_t stream);

// On the fused projection output gate_up [tokens, 2·ffn] (gate first): y = silu(gate)·up [tokens, ffn];
// backward writes d_gate_up [tokens, 2·ffn] from dy.
void swiglu_fwd(const bf16* gate_up, bf16* y, std::int64_t tokens, std::int64_t ffn, cudaStream_t stream);
void swiglu_bwd(const bf16* gate_up, const bf16* dy, bf16* d_gate_up, std::int64_t tokens, std::int64_t ffn,
                cudaStream_t stream);

// y = softmax(scale · x) along rows of `cols`; with causal, row r is query (r mod q_len) at key
// position (r mod q_len) + cols − q_len and sees keys ≤ that; masked entries are written as 0.
void softmax_fwd(const bf16* x, bf16* y, std::int64_t rows, std::int64_t cols, std::int64_t q_len,
                 float scale, bool causal, cudaStream_t stream);

// Rotary embedding (rotate-half pairing i ↔ i + d/2, as Llama's reference code) on q [tokens,
// q_heads, d] and k [tokens, kv_heads, d] (k may be null with kv_heads = 0); token t has position
// t mod seq; θ_i = base^(−2i/d); `inverse` rotates by −θ (the backward).
void rope_fwd(const bf16* q, const bf16* k, bf16* q_out, bf16* k_out, std::int64_t tokens,
              std::int64_t seq, std::int64_t q_heads, std::int64_t kv_heads, std::int64_t head_dim,
              float base, bool inverse, cudaStream_t stream);

void residual_add(const bf16* a, const bf16* b, bf16* out, std::int64_t n, cudaStream_t stream);

// out[t, :] = table[ids[t], :].
void embedding_fwd(const std::int32_t* ids, const bf16* table, bf16* out, std::int64_t tokens,
                   std::int64_t hidden, cudaStream_t stream);
// dtable[ids[t], :] += dout[t, :] (FP32) without atomics: ids radix-sorted with their positions,
// then one writer per distinct id (kernels_embedding.cu; an atomic version measured 1.96 TB/s
// against 2.87 for this one). `workspace` holds embedding_bwd_workspace_bytes(tokens).
std::size_t embedding_bwd_workspace_bytes(std::int64_t tokens);
void embedding_bwd_sorted(const std::int32_t* ids, const bf16* dout, float* dtable, std::int64_t tokens,
                          std::int64_t hidden, std::int64_t vocab, void* workspace, cudaStream_t stream);

// Cross-entropy over the vocabulary fused with its log-softmax: loss[t] = lse_t − logit[t, y_t];
// lse (nullable) is saved too.
void cross_entropy_fwd(const bf16* logits, const std::int32_t* targets, float* loss, float* lse,
                       std::int64_t tokens, std::int64_t vocab, cudaStream_t stream);
// dlogits = (softmax − onehot) · dloss_scale from the logits alone: an online max/sum pass, then a
// re-read of the row from L2; one HBM read and one write per logit, any vocabulary size.
void cross_entropy_bwd_online(const bf16* logits, const std::int32_t* targets, bf16* dlogits, std::int64_t tokens,
                              std::int64_t vocab, float dloss_scale, cudaStream_t stream);

// AdamW on FP32 master weights with a BF16 gradient; writes the BF16 copy of the new weights.
struct AdamWParams {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  int step = 1;
};
// One AdamW step in place over n parameters; every array 16-byte aligned (else InputError).
void adamw_step(float* master, const bf16* grad, float* m, float* v, bf16* weight_bf16, std::int64_t n,
                const AdamWParams& p, cudaStream_t stream);

// Decode attention (one query token per sequence) on q [batch, heads, d] against a KV cache
// k, v [batch, kv_len, kv_heads, d] into o [batch, heads, d], split over the cache
// (kernels_attention_decode.cu). The plan fixes the chunking (`splits` > 0: that many chunks, else
// chosen from the blocks per SM, decode_attention_plan's comment); `partials` holds
// decode_attention_partial_floats(plan, ...) floats. Head dims 64 and 128.
struct DecodePlan {
  std::int64_t splits = 1, chunk = 0;  // KV chunks per (sequence, head) and tokens per chunk
  int heads_per_block = 1;             // query heads of one GQA group served per block
  bool tensor_cores = false;           // groups of 8 query heads: S = Q·Kᵀ and P·V on mma.sync
};
bool decode_attention_supports(std::int64_t head_dim);
DecodePlan decode_attention_plan(std::int64_t batch, std::int64_t kv_len, std::int64_t heads,
                                 std::int64_t kv_heads, std::int64_t head_dim, int sms,
                                 std::int64_t splits = 0);
std::int64_t decode_attention_partial_floats(const DecodePlan& p, std::int64_t batch, std::int64_t heads,
                                             std::int64_t head_dim);
void decode_attention(const bf16* q, const bf16* k, const bf16* v, bf16* o, float* partials, const DecodePlan& p,
                      std::int64_t batch, std::int64_t kv_len, std::int64_t heads, std::int64_t kv_heads,
                      std::int64_t head_dim, cudaStream_t stream);

}  // namespace rafter::workloads::cuda
