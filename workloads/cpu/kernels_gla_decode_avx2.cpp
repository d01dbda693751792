// Native CPU kernel of the gated linear attention decode step: per (sequence, head), one pass over
// the fp32 state, row by row: S'_i = e^{g_i}·S_i + k_i·v, o += q_i·S'_i. The state (dk·dv·4 bytes
// read and written) dominates the traffic, so the pass reads each state row once and the output
// accumulates while the new row is still in registers / L1. Rows vectorize over dv.
#ifndef __clang__  // a GCC pragma clang does not know; the clang build (RAFTER_FUZZ) needs no speed
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#endif
#include <cmath>

#include "cpu_kernel.hpp"

RAFTER_CPU_KERNELS_BEGIN
namespace rafter::workloads::cpu {
namespace {

template <class T>
class GlaDecodeKernel : public Kernel {
 public:
  explicit GlaDecodeKernel(const OpInstance& inst)
      : B_(shape_value(inst, "batch")),
        H_(shape_value(inst, "heads")),
        dk_(shape_value(inst, "head_dim_k")),
        dv_(shape_value(inst, "head_dim_v")) {
    inputs.push_back(make_tensor("q", dtype_of<T>(), {B_, H_, dk_}));
    inputs.push_back(make_tensor("k", dtype_of<T>(), {B_, H_, dk_}));
    inputs.push_back(make_tensor("v", dtype_of<T>(), {B_, H_, dv_}));
    inputs.push_back(make_tensor("g", dtype_of<T>(), {B_, H_, dk_}, std::log(0.6), std::log(0.99)));
    inputs.push_back(make_tensor("state_in", DType::F32, {B_, H_, dk_, dv_}));
    outputs.push_back(make_tensor("o", dtype_of<T>(), {B_, H_, dv_}));
    outputs.push_back(make_tensor("state_out", DType::F32, {B_, H_, dk_, dv_}));
    details["algorithm"] = "native recurrent GLA step (fp32 state, one pass per head)";
  }
  void run() override {
    parallel_for(B_ * H_, [&](std::int64_t lo, std::int64_t hi, int) {
      std::vector<float> v(static_cast<std::size_t>(dv_)), o(static_cast<std::size_t>(dv_));
      for (std::int64_t bh = lo; bh < hi; ++bh) step(bh, v.data(), o.data());
    });
  }

 private:
  void step(std::int64_t bh, float* v, float* o) const {
    const T *q = inputs[0].template as<T>(), *k = inputs[1].template as<T>(), *vs = inputs[2].template as<T>(), *g = inputs[3].template as<T>();
    const float* S = inputs[4].template as<float>() + bh * dk_ * dv_;
    float* S_out = outputs[1].template as<float>() + bh * dk_ * dv_;
    for (std::int64_t j = 0; j < dv_; ++j) {
      v[j] = ld(vs, bh * dv_ + j);
      o[j] = 0.0f;
    }
    for (std::int64_t i = 0; i < dk_; ++i) {
      const float alpha = fast_exp(ld(g, bh * dk_ + i)), ki = ld(k, bh * dk_ + i), qi = ld(q, bh * dk_ + i);
      const float* Si = S + i * dv_;
      float* Oi = S_out + i * dv_;
      for (std::int64_t j = 0; j < dv_; ++j) {
        const float s = alpha * Si[j] + ki * v[j];
        Oi[j] = s;
        o[j] += qi * s;
      }
    }
    T* out = outputs[0].template as<T>();
    for (std::int64_t j = 0; j < dv_; ++j) st(out, bh * dv_ + j, o[j]);
  }
  std::int64_t B_, H_, dk_, dv_;
};

}  // namespace
}  // namespace rafter::workloads::cpu
RAFTER_CPU_KERNELS_END

namespace rafter::workloads::cpu {
namespace {

RAFTER_REGISTER_CPU_KERNEL({"gla_decode", "cpu.native",
                            [](const OpInstance& i) { return kernel_build_runs_here() && is_activation_precision(i); },
                            make_typed<GlaDecodeKernel>});

}  // namespace
}  // namespace rafter::workloads::cpu
