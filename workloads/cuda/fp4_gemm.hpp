// Launchers of the FP4 GEMM kernels (kernels_fp4_gemm.cu) behind "cuda.fp4_emulated". sm_90 has no
// FP4 tensor cores: both paths decode E2M1 × block scale to BF16 (the streaming decode kernel: FP16
// for NVFP4, kernels_fp4_gemm.cu), which is exact (2 + 4 significant bits, E4M3/E8M0 exponents inside
// BF16's range), multiply on 16-bit tensor cores with FP32
// accumulation and apply the FP32 tensor scales (alpha) once at the end, so the result is the one
// FP32-accumulating FP4 hardware computes, up to the order of the FP32 sums.
// Operands are K-contiguous, as the recipe stores every FP4 copy: codes [rows, k/2] (two E2M1 per
// byte, low nibble first), scales [rows, k/block] (E4M3 per 16 for NVFP4, E8M0 per 32 for MXFP4).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace rafter::workloads::cuda {

enum class Fp4Kind { Nvfp4, Mxfp4 };

struct Fp4Matrix {
  const std::uint8_t* codes = nullptr;
  const std::uint8_t* scales = nullptr;
};

// out[rows, k] = code × block scale in BF16 (exact; the tensor scale is left to the GEMM's alpha),
// rows `out_stride` elements apart (0: k).
void fp4_dequantize_bf16(Fp4Matrix in, __nv_bfloat16* out, std::int64_t rows, std::int64_t k, Fp4Kind kind,
                         cudaStream_t stream, std::int64_t out_stride = 0);

// The hot-channel patch as extra K of the prefill path's BF16 GEMM (C = alpha·[A | R/alpha]·[B | W]ᵀ):
// columns k … k+pad of A16 [m, stride] get R [m, hot] × r_scale (1/alpha, rounded once to BF16) and
// those of B16 [n, stride] get W_hot [n, hot]; columns hot … pad−1 get zeros (the caller pads the
// rows to 128-byte multiples). One launch.
void fp4_hot_columns(const __nv_bfloat16* r, const __nv_bfloat16* w_hot, float r_scale, __nv_bfloat16* a16,
                     __nv_bfloat16* b16, std::int64_t m, std::int64_t n, std::int64_t hot, std::int64_t pad,
                     std::int64_t k, std::int64_t stride, cudaStream_t stream);

// Decode-shaped GEMM, C[b, m, n] = alpha · A[b, m, k] · B[b, n, k]ᵀ in BF16 for m ≤ 64: each weight
// byte is read from HBM once, decoded in registers and fed to mma.sync. Two kernels: the streaming
// one (below) sums its K slices in distributed shared memory; the one-shot one splits K over CTAs
// that add FP32 partials into `workspace` (the last CTA of a row group writes C and zeroes its part
// again, so the workspace stays zero between calls).
bool fp4_decode_gemm_fits(std::int64_t m, std::int64_t n, std::int64_t k);
// Whether fp4_decode_gemm takes its streaming kernel (K sliced over a thread-block cluster, the
// weights streamed with loads in flight; K a multiple of 256, m ≤ 32) rather than the one-shot one,
// given the weights packed for it (b_packed below; without them it takes the one-shot kernel).
bool fp4_decode_gemm_streams(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                             std::int64_t hot = 0);
// Bytes of the workspace, which must be zeroed once before the first call.
std::size_t fp4_decode_gemm_workspace_bytes(std::int64_t m, std::int64_t n, std::int64_t batch);
// The hot-channel patch the decode kernels add in their epilogue, C += R·W_hotᵀ summed in FP32:
// R [batch·m, hot] and W_hot [batch·n, hot] in BF16 (hot 0: none), rows `ld` elements apart (0:
// hot). The streaming kernel copies rows by 16-byte cp.async where ld is a multiple of 8 (columns
// hot … ld − 1 then zero); other widths are copied an element at a time, on every row group's
// critical path (H100, 70B down at hot 287: the patch took 21.7 µs so, 11.4 µs in rows of 288,
// two calls apart).
struct Fp4HotPatch {
  const __nv_bfloat16* r = nullptr;
  const __nv_bfloat16* w = nullptr;
  std::int64_t hot = 0;
  std::int64_t ld = 0;
};
// C [m, n] += R·W_hotᵀ (R [m, ld], W_hot [n, ld] in BF16, zeros past hot; FP32 sums rounded to
// BF16, added into C by a BF16 reduction), launched as a programmatic dependent of the kernel before
// it on `stream`: its CTAs may multiply W_hot while that kernel runs (the streaming decode kernel
// lets them start at once), wait for it, then add into C. m ≤ 16, n % 16 = 0, ld % 8 = 0, and at
// most 8 tiles of 16 rows a warp at one CTA of 4 warps an SM (fp4_hot_patch_after_fits, which asks
// the GPU for its SM count).
bool fp4_hot_patch_after_fits(std::int64_t m, std::int64_t n, std::int64_t ld);
void fp4_hot_patch_after(const __nv_bfloat16* r, const __nv_bfloat16* w_hot, std::int64_t ld, __nv_bfloat16* c,
                         std::int64_t m, std::int64_t n, cudaStream_t stream);
// b_packed: B in the streaming kernel's order (below), which that kernel reads instead of b; the
// one-shot kernel reads b.
void fp4_decode_gemm(Fp4Matrix a, Fp4Matrix b, __nv_bfloat16* c, float alpha, std::int64_t m, std::int64_t n,
                     std::int64_t k, std::int64_t batch, Fp4Kind kind, void* workspace, cudaStream_t stream,
                     Fp4HotPatch hot = {}, Fp4Matrix b_packed = {});
// The streaming kernel's own order of the weights B [batch·n, k] (K a multiple of 256): for each
// 128-row group, 256-value item and warp, the warp's 32 rows × 128 code bytes in the order its lanes
// load them, 16 bytes a lane, then their scale bytes. The same bytes (rows padded to 128; NVFP4's
// code bits rearranged within each byte, e2m1_f16_bits.hpp), read as whole 512-byte runs a load
// instead of 64 bytes in each of 8 rows. Packed once, as a serving engine
// stores its quantized weights; fp4_decode_packed_bytes gives the codes' (scales false) and the
// scales' (true) buffer sizes.
std::size_t fp4_decode_packed_bytes(std::int64_t n, std::int64_t k, std::int64_t batch, Fp4Kind kind, bool scales);
void fp4_pack_decode_weights(Fp4Matrix b, std::uint8_t* codes, std::uint8_t* scales, std::int64_t n, std::int64_t k,
                             std::int64_t batch, Fp4Kind kind, cudaStream_t stream);

}  // namespace rafter::workloads::cuda
