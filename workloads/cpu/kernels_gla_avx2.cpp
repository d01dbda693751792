// Native CPU kernel of gated linear attention in chunked form (forward). Per (batch, head):
// a dk×dv fp32 state; per chunk of C tokens with in-chunk cumulative log-gates b_t:
//   o_t = (q_t ∘ e^{b_t})·S + Σ_{τ≤t} (Σ_i q_ti k_τi e^{b_ti − b_τi}) v_τ
//   S ← diag(e^{b_C})·S + Σ_τ (k_τ ∘ e^{b_C − b_τ})ᵀ v_τ
// which equals the recurrence S_t = diag(e^{g_t}) S_{t−1} + k_tᵀ v_t, o_t = q_t S_t.
// Comparisons may not trap and sqrt sets no errno: lets the compiler if-convert and vectorize.
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#include <cmath>

#include "cpu_kernel.hpp"

namespace rafter::workloads::cpu {
namespace {

template <class T>
class GlaKernel : public Kernel {
 public:
  explicit GlaKernel(const OpInstance& inst)
      : B_(shape_value(inst, "batch")), s_(shape_value(inst, "seq")), H_(shape_value(inst, "heads")),
        dk_(shape_value(inst, "head_dim_k")), dv_(shape_value(inst, "head_dim_v")), C_(shape_value(inst, "chunk")) {
    inputs.push_back(make_tensor("q", dtype_of<T>(), {B_, s_, H_, dk_}));
    inputs.push_back(make_tensor("k", dtype_of<T>(), {B_, s_, H_, dk_}));
    inputs.push_back(make_tensor("v", dtype_of<T>(), {B_, s_, H_, dv_}));
    inputs.push_back(make_tensor("g", dtype_of<T>(), {B_, s_, H_, dk_}, std::log(0.6), std::log(0.99)));
    outputs.push_back(make_tensor("o", dtype_of<T>(), {B_, s_, H_, dv_}));
    details["algorithm"] = "native chunked GLA (fp32 state)";
  }
  void run() override {
    parallel_for(B_ * H_, [&](std::int64_t lo, std::int64_t hi, int) {
      std::vector<float> S(static_cast<std::size_t>(dk_ * dv_)), cum(static_cast<std::size_t>(C_ * dk_)),
          o(static_cast<std::size_t>(dv_)), qe(static_cast<std::size_t>(dk_));
      for (std::int64_t item = lo; item < hi; ++item) head(item / H_, item % H_, S, cum, o, qe);
    });
  }

 private:
  std::int64_t kidx(std::int64_t b, std::int64_t t, std::int64_t h) const { return ((b * s_ + t) * H_ + h) * dk_; }
  std::int64_t vidx(std::int64_t b, std::int64_t t, std::int64_t h) const { return ((b * s_ + t) * H_ + h) * dv_; }

  void head(std::int64_t b, std::int64_t h, std::vector<float>& S, std::vector<float>& cum, std::vector<float>& o,
            std::vector<float>& qe) {
    const T *q = inputs[0].as<T>(), *k = inputs[1].as<T>(), *v = inputs[2].as<T>(), *g = inputs[3].as<T>();
    T* out = outputs[0].as<T>();
    std::fill(S.begin(), S.end(), 0.0f);
    for (std::int64_t t0 = 0; t0 < s_; t0 += C_) {
      for (std::int64_t t = 0; t < C_; ++t)
        for (std::int64_t i = 0; i < dk_; ++i)
          cum[std::size_t(t * dk_ + i)] = (t ? cum[std::size_t((t - 1) * dk_ + i)] : 0.0f) + ld(g, kidx(b, t0 + t, h) + i);
      for (std::int64_t t = 0; t < C_; ++t) {
        const float* bt = &cum[std::size_t(t * dk_)];
        for (std::int64_t i = 0; i < dk_; ++i) qe[std::size_t(i)] = ld(q, kidx(b, t0 + t, h) + i) * fast_exp(bt[i]);
        std::fill(o.begin(), o.end(), 0.0f);
        for (std::int64_t i = 0; i < dk_; ++i)
          for (std::int64_t j = 0; j < dv_; ++j) o[std::size_t(j)] += qe[std::size_t(i)] * S[std::size_t(i * dv_ + j)];
        for (std::int64_t tau = 0; tau <= t; ++tau) {
          const float* bs = &cum[std::size_t(tau * dk_)];
          float a = 0;
          for (std::int64_t i = 0; i < dk_; ++i)
            a += ld(q, kidx(b, t0 + t, h) + i) * ld(k, kidx(b, t0 + tau, h) + i) * fast_exp(bt[i] - bs[i]);
          for (std::int64_t j = 0; j < dv_; ++j) o[std::size_t(j)] += a * ld(v, vidx(b, t0 + tau, h) + j);
        }
        for (std::int64_t j = 0; j < dv_; ++j) st(out, vidx(b, t0 + t, h) + j, o[std::size_t(j)]);
      }
      const float* last = &cum[std::size_t((C_ - 1) * dk_)];
      for (std::int64_t i = 0; i < dk_; ++i) {
        const float decay = fast_exp(last[i]);
        for (std::int64_t j = 0; j < dv_; ++j) S[std::size_t(i * dv_ + j)] *= decay;
      }
      for (std::int64_t tau = 0; tau < C_; ++tau)
        for (std::int64_t i = 0; i < dk_; ++i) {
          const float kd = ld(k, kidx(b, t0 + tau, h) + i) * fast_exp(last[i] - cum[std::size_t(tau * dk_ + i)]);
          for (std::int64_t j = 0; j < dv_; ++j) S[std::size_t(i * dv_ + j)] += kd * ld(v, vidx(b, t0 + tau, h) + j);
        }
    }
  }
  std::int64_t B_, s_, H_, dk_, dv_, C_;
};

RAFTER_REGISTER_CPU_KERNEL({"gla_chunked", "cpu.native",
                            [](const OpInstance& i) { return cpu_has_avx2() && is_activation_precision(i) && i.phase == "fwd"; },
                            make_typed<GlaKernel>});

}  // namespace
}  // namespace rafter::workloads::cpu
