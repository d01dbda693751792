// The hot-channel patch's matmul, Y[t,n] += R[t,h]·W_hot[n,h]ᵀ on BF16 operands with Y in BF16 in
// place, through oneDNN (its sum post-op); where oneDNN has no BF16 matmul (onednn_matmul.hpp) the
// run widens R and W_hot, runs the FP32 matmul and adds the product into Y, rounding to BF16. Used
// by the hot_channel_patch operator and by the FP4 GEMM's `hot` patch (gemm_onednn.cpp).
#pragma once
#include <nlohmann/json.hpp>

#include "cpu_kernel.hpp"
#include "onednn_matmul.hpp"

namespace rafter::workloads::cpu {

class HotPatchMatmul {
 public:
  // Builds the primitive on these buffers (they must outlive run()); notes the path in `details`
  // ("path" where emulated via FP32, "algorithm").
  void prepare(std::int64_t t, std::int64_t n, std::int64_t h, const void* r, const void* w, void* y,
               nlohmann::json& details);
  void run();
  bool via_fp32() const { return via_fp32_; }

 private:
  std::int64_t t_ = 0, n_ = 0, h_ = 0;
  const void *r_ = nullptr, *w_ = nullptr;
  bf16* y_ = nullptr;
  bool via_fp32_ = false;
  Buffer r32_, w32_, y32_;
  dnnl::matmul prim_;
  dnnl::memory mem_a_, mem_b_, mem_c_;
};

}  // namespace rafter::workloads::cpu
