// One GEMM through cuBLASLt: descriptors for a GemmSpec (row-major problem mapped onto cuBLAS's
// column-major one), the heuristic's candidates, the timed choice among them, and the launch.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <functional>
#include <vector>

#include "cuda_util.hpp"
#include "gemm_spec.hpp"

namespace rafter::workloads::cuda {

inline constexpr std::size_t kGemmWorkspaceBytes = std::size_t{32} << 20;  // as PyTorch on sm_90
inline constexpr int kGemmCandidates = 16;

DType dtype_from_name(const std::string& name);  // "bf16" → DType::BF16 (gemm_types spelling)

class LtGemm {
 public:
  explicit LtGemm(const GemmSpec& spec);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  const GemmSpec& spec() const { return spec_; }
  const GemmTypes& types() const { return types_; }
  // Element counts of the stored operands (all batches).
  std::size_t a_count() const { return std::size_t(spec_.m * spec_.k) * spec_.batch; }
  std::size_t b_count() const { return std::size_t(spec_.k * spec_.n) * spec_.batch; }
  std::size_t c_count() const { return std::size_t(spec_.m * spec_.n) * spec_.batch; }

  // Operands (device pointers, laid out as the spec says) and FP8 per-tensor scales (device
  // floats, dequantization factors: real = stored × scale); null scales for other precisions.
  void bind(const void* a, const void* b, void* c, const float* scale_a = nullptr,
            const float* scale_b = nullptr);
  // Block-scaled FP4 (types().block_scale set): E2M1 operands and their block scales (device
  // bytes, E4M3 or E8M0, in cuBLASLt's tiled layout: workloads/src/block_scale_layout.hpp).
  void bind_block_scaled(const void* a, const void* b, void* c, const void* scales_a, const void* scales_b);
  // Asks the heuristic for up to `max_candidates`; with `time_all`, adds variants of its first
  // results (other cluster shapes; split-K for small M), times each (cold L2, a few launches),
  // then re-times the three fastest and the heuristic's first with `refine` (seconds of
  // launch() with the algorithm set) and keeps the fastest; with `contest` (the same, under the
  // record's conditions), a fastest other than the heuristic's first meets it in ABBA rounds
  // (fastest_wins_contest). Without `time_all` keeps the first. Throws InputError when cuBLASLt
  // offers none.
  using RefineFn = std::function<double()>;
  GemmAlgoRecord choose(bool time_all, int max_candidates = kGemmCandidates, const RefineFn& refine = {},
                        const RefineFn& contest = {});
  void launch(cudaStream_t stream) const;
  // The output scale, cuBLASLt's alpha (1 unless set): the FP4 paths' product of the tensor scales.
  void set_alpha(double alpha);
  // cuBLASLt's beta (0 unless set): 1 accumulates into C, which is read before it is written.
  void set_beta(double beta);
  // How many of choose()'s candidates came from the heuristic (the rest are variants of them).
  int heuristic_candidates() const { return heuristic_count_; }
  // The same GEMM on other operands of the same layout (attention's per-group calls).
  void launch_with(cudaStream_t stream, const void* a, const void* b, void* c) const;

 private:
  GemmSpec spec_;
  GemmTypes types_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_layout_ = nullptr, b_layout_ = nullptr, c_layout_ = nullptr;
  const void* a_ = nullptr;
  const void* b_ = nullptr;
  void* c_ = nullptr;
  DeviceBuffer workspace_;
  cublasLtHandle_t handle_ = nullptr;  // the handle of the device the GEMM was made on, as its workspace
  cublasLtMatmulAlgo_t algo_{};
  std::size_t algo_workspace_ = 0;
  bool have_algo_ = false;
  int heuristic_count_ = 0;
  double alpha_f64_ = 1, beta_f64_ = 0;
  float alpha_f32_ = 1, beta_f32_ = 0;
  int alpha_i32_ = 1, beta_i32_ = 0;

  const void* alpha() const;
  const void* beta() const;
  GemmAlgoRecord describe(const cublasLtMatmulHeuristicResult_t& r) const;
  void add_variants(std::vector<cublasLtMatmulHeuristicResult_t>& results) const;
};

cublasLtHandle_t lt_handle();

// Whether to time the heuristic's candidates: ExecContext.algo ("best" | "heuristic"); while the
// CLI has no --algo, the environment variable RAFTER_CUBLASLT_ALGO=heuristic asks for the first.
bool time_all_candidates(const std::string& ctx_algo);

}  // namespace rafter::workloads::cuda
