// What a GEMM on the GPU is, without CUDA headers: the row-major problem (C = op(A)·op(B), with
// batches), its precision and the layout each training pass uses, the shape rules cuBLASLt sets
// per precision, and the record of the algorithm chosen (JSON in record.details). Unit-tested
// without a GPU (tests/workloads/test_gemm_spec_cuda.cpp).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace rafter::workloads::cuda {

// Row-major, as the model sees it: C[m×n] = A'[m×k] · B'[k×n] where A' = A (stored m×k) or Aᵀ
// (A stored k×m, trans_a), likewise B' = B (k×n) or Bᵀ (B stored n×k, trans_b).
struct GemmSpec {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t batch = 1;  // strided batches (attention's unfused path)
  bool trans_a = false;
  bool trans_b = false;
  std::string precision;   // precision.hpp name: "bf16", "fp8_e4m3", "fp8_e4m3_e5m2", "int8", ...
  bool out_fp32 = false;   // FP8: FP32 output instead of BF16
  bool fast_accum = false; // FP8: cuBLASLt's fast accumulation (off, as torch._scaled_mm's default)
  // Batch strides in elements; 0 = packed (m*k, k*n, m*n).
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  // Row strides in elements of the stored matrices; 0 = packed (attention reads heads in place).
  std::int64_t lda = 0, ldb = 0, ldc = 0;
};

// The layout that a linear layer's pass uses, for Y[T×N] = X[T×K]·W[N×K]ᵀ with W stored N×K:
// fwd: C=Y (m=T,n=N,k=K), A=X, B=W transposed; bwd_input: C=dX (m=T,n=K,k=N), A=dY, B=W;
// bwd_weight: C=dW (m=N,n=K,k=T), A=dY transposed, B=X.
GemmSpec linear_pass_spec(std::string_view pass, std::int64_t tokens, std::int64_t in_features,
                          std::int64_t out_features, std::string precision);

// Element type names (cuda_util DType spelling) of the operands and output for a precision.
struct GemmTypes {
  std::string a, b, c;     // "bf16", "f16", "f32", "f64", "e4m3", "e5m2", "i8", "i32"
  std::string compute;     // "32F", "32F_FAST_TF32", "64F", "32I"
  bool scaled = false;     // per-tensor scales (FP8)
  // Block scales (FP4, "e2m1" operands; cuBLASLt runs them on sm_100+ only): "vec16_ue4m3" (NVFP4,
  // an E4M3 scale per 16 along K) or "vec32_ue8m0" (MXFP4); "" otherwise.
  std::string block_scale;
};
// Throws InputError for a precision cuBLASLt has no GEMM for.
GemmTypes gemm_types(const GemmSpec& spec);

// cuBLASLt's rules on sm_90 as documented: FP8 needs the TN layout in cuBLAS's column-major terms
// (here: B transposed, A not) and k, lda, ldb multiples of 16; E5M2×E5M2 does not exist; INT8 needs
// TN and dimensions multiple of 4; block-scaled FP4 (sm_100+) needs TN, k a multiple of 32 (rows of
// 16 bytes) and, as rafter asks conservatively, m and n multiples of 16. Returns "" when fine, else
// the one-line reason.
std::string gemm_shape_problem(const GemmSpec& spec);
// For FP8/INT8 passes whose natural layout is not TN, the operands are stored pre-transposed
// (as Transformer Engine does); returns the TN spec computing the same product and says so.
GemmSpec to_tn_layout(const GemmSpec& spec, std::string* note);

// The algorithm cuBLASLt ran, as recorded in details.algorithm.
struct GemmAlgoRecord {
  int algo_id = -1;
  int tile_id = 0;
  std::string tile;        // "128x256" (from cublasLtMatmulTile_t)
  int stages_id = 0;
  std::string stages;      // "64x4" (from cublasLtMatmulStages_t)
  int split_k = 1;
  int reduction_scheme = 0;
  int swizzle = 0;
  int custom_option = 0;
  int cluster_shape_id = 0;
  std::string cluster;     // "2x1x1"
  std::size_t workspace_bytes = 0;
  int candidate_rank = 0;  // 0 = the heuristic's first
  int candidates = 0;      // how many the heuristic offered
  double candidate_seconds = 0;  // its time in the search (median of a few launches)
  std::string choice;      // "best" (timed all) or "heuristic" (kept the first)
  // The contest between the search's fastest and the heuristic's first (choose_by_contest), the
  // medians of its rounds in seconds; empty when there was none (the fastest was the first).
  std::vector<double> contest_fastest, contest_heuristic;
};

// A candidate that won the search by a hair can lose once the GPU is at its power cap: the search
// times each finalist once, and the fastest of a few noisy timings is flattered (the winner's
// curse). So the search's fastest meets the heuristic's first (what cuBLAS, and so PyTorch,
// runs) again, in rounds ordered ABBA under the record's conditions, and stays only when the sum
// of its medians is lower by more than `margin` (a fraction): otherwise the heuristic's first is
// kept. Throws std::invalid_argument when the rounds differ in number or are empty.
constexpr double kContestMargin = 0.01;
bool fastest_wins_contest(const std::vector<double>& fastest, const std::vector<double>& heuristic,
                          double margin = kContestMargin);

nlohmann::json to_json(const GemmAlgoRecord& r);
// Throws FormatError naming the field when a record is malformed.
GemmAlgoRecord gemm_algo_from_json(const nlohmann::json& j);
// "CUBLASLT_MATMUL_TILE_128x256" style enum names → "128x256"; "undefined" for 0/unknown.
std::string tile_name(int tile_id);
std::string stages_name(int stages_id);
std::string cluster_name(int cluster_id);

}  // namespace rafter::workloads::cuda
