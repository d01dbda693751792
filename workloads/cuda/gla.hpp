// Gated linear attention on the GPU (kernels_gla.cu, backend gla_backend.cpp): the chunked forward
// (gla_chunked, phase fwd) and the recurrent decode step (gla_decode). Layouts as the catalogue's
// (workloads/src/ops_gla.cpp, ops_gla_decode.cpp): q, k, g [batch, seq, heads, dk], v, o
// [batch, seq, heads, dv]; decode drops seq and carries an fp32 state [batch, heads, dk, dv].
// Storage in BF16, FP16 or FP32; arithmetic and the carried state in FP32 (BF16/FP16 products on
// tensor cores with FP32 accumulation; FP32 products on CUDA cores, so the FP32 check stays tight).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "device_problem.hpp"

namespace rafter::workloads::cuda {

enum class GlaType { F32, BF16, F16 };

struct GlaShape {
  std::int64_t batch = 1, seq = 0, heads = 1, dk = 0, dv = 0, chunk = 64;
};

// dk and dv multiples of 16, chunk one of 16, 32, 48, 64, seq a multiple of chunk.
bool gla_chunked_supports(const GlaShape& s);
// Scratch of the forward: the intra-chunk gate-decayed scores [batch·heads, chunks, C, C] (FP32),
// the chunk-entry states [batch·heads, chunks, dk, dv] (storage type; FP32 for FP32), then
// q∘e^b and K∘e^{b_C−b} [batch·heads, seq, dk] (storage type) and the chunks' decays
// [batch·heads, chunks, dk] (FP32), which only the 16-bit path has (empty for FP32).
std::size_t gla_chunked_scratch_bytes(const GlaShape& s, GlaType t);
// Byte offsets of those parts in that order (each 16-byte aligned for the shapes
// gla_chunked_supports accepts); `end` is gla_chunked_scratch_bytes, where the backward's own
// parts begin.
struct GlaFwdScratchLayout {
  std::size_t scores, states, q_decayed, k_decayed, decays, end;
};
GlaFwdScratchLayout gla_fwd_scratch_layout(const GlaShape& s, GlaType t);
// Launches: the gates' terms (16-bit storage; parallel over chunks), scores (parallel over chunks,
// on a side stream), states (sequential over chunks, parallel over 64×64 state tiles), outputs
// (parallel over chunks and 64-wide dv tiles).
void gla_chunked_fwd(GlaType t, const void* q, const void* k, const void* v, const void* g, void* o,
                     void* scratch, const GlaShape& s, cudaStream_t stream);

// The forward's launches before the outputs (scores and chunk-entry states into the scratch
// above): the backward recomputes the states rather than storing them from a forward call. With
// 16-bit storage and dO given, also the state gradients dS (the backward's layout, below) by the
// states kernel walking backwards over q∘e^b and dO, beside the states on a second side stream;
// FP32 takes no dO (its backward has its own walk).
void gla_chunked_scores_states(GlaType t, const void* q, const void* k, const void* v, const void* g,
                               void* scratch, const GlaShape& s, cudaStream_t stream,
                               const void* dO = nullptr, void* dS = nullptr);
// Backward (kernels_gla_bwd.cu): inputs q, k, v, g, dO; outputs dq, dk, dv, dg (the forward's
// layouts). Scratch: the forward's, then the state gradients at each chunk's end
// (same type and layout as the states), the in-chunk reverse sums of q∘dq − k∘dk [batch·heads,
// seq, dk] and their per-chunk suffixes [batch·heads, chunks, dk] (FP32).
std::size_t gla_chunked_bwd_scratch_bytes(const GlaShape& s, GlaType t);
void gla_chunked_bwd(GlaType t, const void* q, const void* k, const void* v, const void* g, const void* dO,
                     void* dq, void* dk, void* dv, void* dg, void* scratch, const GlaShape& s,
                     cudaStream_t stream);

// Decode: one launch; a block owns 32 dv columns of one (sequence, head) over all dk rows, the
// output's partial sums meet in shared memory. dv a multiple of 4.
bool gla_decode_supports(std::int64_t dk, std::int64_t dv);
void gla_decode(GlaType t, const void* q, const void* k, const void* v, const void* g, const float* state_in,
                void* o, float* state_out, std::int64_t batch_heads, std::int64_t dk, std::int64_t dv,
                cudaStream_t stream);

// The backend's bindings (gla_backend.cpp), also used by tests/workloads/test_gla_cuda.cpp to check
// shapes that the catalogue's capped check shape does not reach.
StreamFn bind_gla_chunked(const OpInstance& inst, DeviceProblem& d);
StreamFn bind_gla_decode(const OpInstance& inst, DeviceProblem& d);

}  // namespace rafter::workloads::cuda
