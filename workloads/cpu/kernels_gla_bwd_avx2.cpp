// Native CPU kernel of the gated linear attention backward in chunked form. Per (batch, head),
// two walks over the chunks (no state is stored):
//   forward  (carries S, the state before the chunk): dq_t = e^{b_t}∘(S·do_tᵀ) + Σ_{τ≤t}
//   dA_tτ·k_τ∘e^{b_t−b_τ} backward (carries dS, the gradient of the state after the chunk):
//     dk_τ = Σ_{t≥τ} dA_tτ·q_t∘e^{b_t−b_τ} + e^{b_C−b_τ}∘(dS·v_τᵀ)
//     dv_τ = Σ_{t≥τ} A_tτ·do_t + (k_τ∘e^{b_C−b_τ})·dS
//     dS  ← diag(e^{b_C})·dS + Σ_t (q_t∘e^{b_t})ᵀ do_t
// with b_t the in-chunk cumulative log-gates, A_tτ = Σ_i q_ti k_τi e^{b_ti−b_τi}, dA_tτ = do_t·v_τ,
// and dg_t = Σ_{τ≥t} (q_τ∘dq_τ − k_τ∘dk_τ) summed in fp32 from the unrounded gradients (q∘dq of
// the head kept in an fp32 buffer between the walks). Every exponent is ≤ 0: no overflow however
// small the gates. Derivation and the FP64 reference it is checked against: workloads/src/ops_gla.cpp.
#ifndef __clang__  // a GCC pragma clang does not know; the clang build (RAFTER_FUZZ) needs no speed
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#endif
#include <cmath>

#include "gla_kernel.hpp"

RAFTER_CPU_KERNELS_BEGIN
namespace rafter::workloads::cpu {
namespace {

// fp32 working set of one thread: the chunk's rows converted once, the carried state.
struct GlaBwdScratch {
  std::vector<float> S, q, k, v, dO, cum, w, acc_k, acc_v, qdq, run;
  GlaBwdScratch(std::int64_t s, std::int64_t C, std::int64_t dk, std::int64_t dv)
      : S(std::size_t(dk * dv)),
        q(std::size_t(C * dk)),
        k(std::size_t(C * dk)),
        v(std::size_t(C * dv)),
        dO(std::size_t(C * dv)),
        cum(std::size_t(C * dk)),
        w(std::size_t(dk)),
        acc_k(std::size_t(dk)),
        acc_v(std::size_t(dv)),
        qdq(std::size_t(s * dk)),
        run(std::size_t(dk)) {}
};

template <class T>
class GlaBwdKernel : public GlaKernelBase {
 public:
  explicit GlaBwdKernel(const OpInstance& inst) : GlaKernelBase(inst, dtype_of<T>()) {
    inputs.push_back(make_tensor("dO", dtype_of<T>(), {B_, s_, H_, dv_}));
    outputs.push_back(make_tensor("dq", dtype_of<T>(), {B_, s_, H_, dk_}));
    outputs.push_back(make_tensor("dk", dtype_of<T>(), {B_, s_, H_, dk_}));
    outputs.push_back(make_tensor("dv", dtype_of<T>(), {B_, s_, H_, dv_}));
    outputs.push_back(make_tensor("dg", dtype_of<T>(), {B_, s_, H_, dk_}));
    details["algorithm"] =
        "native chunked GLA backward (fp32 state; states recomputed chunk by chunk forward, state gradients "
        "backward; dg as reverse cumsum of q*dq - k*dk)";
  }
  void run() override {
    parallel_for(B_ * H_, [&](std::int64_t lo, std::int64_t hi, int) {
      GlaBwdScratch w(s_, C_, dk_, dv_);
      for (std::int64_t item = lo; item < hi; ++item) {
        forward_walk(item / H_, item % H_, w);
        backward_walk(item / H_, item % H_, w);
      }
    });
  }

 private:
  const T* in(int i) const { return inputs[std::size_t(i)].template as<T>(); }
  T* out(int i) const { return outputs[std::size_t(i)].template as<T>(); }

  // Converts the chunk starting at t0 to fp32 (q, k, v, the cumulative log-gates, and dO).
  void load_chunk(std::int64_t b, std::int64_t h, std::int64_t t0, GlaBwdScratch& w) const {
    stage_chunk<T>(b, h, t0, w.q.data(), w.k.data(), w.cum.data(), w.v.data());
    for (std::int64_t t = 0; t < C_; ++t) {
      const auto kv = vidx(b, t0 + t, h);
      for (std::int64_t j = 0; j < dv_; ++j) w.dO[std::size_t(t * dv_ + j)] = ld(in(4), kv + j);
    }
  }

  // dq of every token, carrying the state S forward; keeps q∘dq (fp32) for dg.
  void forward_walk(std::int64_t b, std::int64_t h, GlaBwdScratch& w) const {
    std::fill(w.S.begin(), w.S.end(), 0.0f);
    for (std::int64_t t0 = 0; t0 < s_; t0 += C_) {
      load_chunk(b, h, t0, w);
      for (std::int64_t t = 0; t < C_; ++t) {
        const float *bt = &w.cum[std::size_t(t * dk_)], *dot_t = &w.dO[std::size_t(t * dv_)];
        for (std::int64_t i = 0; i < dk_; ++i)
          w.acc_k[std::size_t(i)] = fast_exp(bt[i]) * dot(&w.S[std::size_t(i * dv_)], dot_t, dv_);
        for (std::int64_t tau = 0; tau <= t; ++tau) {
          const float dA = dot(dot_t, &w.v[std::size_t(tau * dv_)], dv_);
          const float *bs = &w.cum[std::size_t(tau * dk_)], *kt = &w.k[std::size_t(tau * dk_)];
          for (std::int64_t i = 0; i < dk_; ++i)
            w.acc_k[std::size_t(i)] += dA * kt[i] * fast_exp(bt[i] - bs[i]);
        }
        const float* qt = &w.q[std::size_t(t * dk_)];
        float* qdq = &w.qdq[std::size_t((t0 + t) * dk_)];
        for (std::int64_t i = 0; i < dk_; ++i) {
          st(out(0), kidx(b, t0 + t, h) + i, w.acc_k[std::size_t(i)]);
          qdq[i] = qt[i] * w.acc_k[std::size_t(i)];
        }
      }
      advance_state(w);
    }
  }

  // S ← diag(e^{b_C})·S + Σ_τ (k_τ∘e^{b_C−b_τ})ᵀ v_τ
  void advance_state(GlaBwdScratch& w) const {
    const float* last = &w.cum[std::size_t((C_ - 1) * dk_)];
    for (std::int64_t i = 0; i < dk_; ++i) {
      float* Si = &w.S[std::size_t(i * dv_)];
      const float decay = fast_exp(last[i]);
      for (std::int64_t j = 0; j < dv_; ++j) Si[j] *= decay;
      for (std::int64_t tau = 0; tau < C_; ++tau) {
        const float kd =
            w.k[std::size_t(tau * dk_ + i)] * fast_exp(last[i] - w.cum[std::size_t(tau * dk_ + i)]);
        const float* vt = &w.v[std::size_t(tau * dv_)];
        for (std::int64_t j = 0; j < dv_; ++j) Si[j] += kd * vt[j];
      }
    }
  }

  // dk, dv and dg of every token, carrying the state gradient dS (in w.S) backward.
  void backward_walk(std::int64_t b, std::int64_t h, GlaBwdScratch& w) const {
    std::fill(w.S.begin(), w.S.end(), 0.0f);
    std::fill(w.run.begin(), w.run.end(), 0.0f);
    for (std::int64_t t0 = s_ - C_; t0 >= 0; t0 -= C_) {
      load_chunk(b, h, t0, w);
      for (std::int64_t tau = C_ - 1; tau >= 0; --tau) token_gradients(b, h, t0, tau, w);
      advance_state_gradient(w);
    }
  }

  void token_gradients(std::int64_t b, std::int64_t h, std::int64_t t0, std::int64_t tau,
                       GlaBwdScratch& w) const {
    const float *bs = &w.cum[std::size_t(tau * dk_)], *kt = &w.k[std::size_t(tau * dk_)],
                *vt = &w.v[std::size_t(tau * dv_)], *last = &w.cum[std::size_t((C_ - 1) * dk_)];
    std::fill(w.acc_v.begin(), w.acc_v.end(), 0.0f);
    for (std::int64_t i = 0; i < dk_; ++i) {  // the state gradient's share (inter-chunk)
      const float decay = fast_exp(last[i] - bs[i]), kd = kt[i] * decay;
      const float* dSi = &w.S[std::size_t(i * dv_)];
      w.acc_k[std::size_t(i)] = decay * dot(dSi, vt, dv_);
      for (std::int64_t j = 0; j < dv_; ++j) w.acc_v[std::size_t(j)] += kd * dSi[j];
    }
    for (std::int64_t t = tau; t < C_; ++t) {  // later tokens of the chunk (intra-chunk)
      const float *bt = &w.cum[std::size_t(t * dk_)], *qt = &w.q[std::size_t(t * dk_)],
                  *dot_t = &w.dO[std::size_t(t * dv_)];
      const float dA = dot(dot_t, vt, dv_);
      float a_lanes[16] = {};
      std::int64_t i = 0;
      for (; i + 16 <= dk_; i += 16)
        for (int l = 0; l < 16; ++l) {
          const float decay = fast_exp(bt[i + l] - bs[i + l]);
          a_lanes[l] += qt[i + l] * kt[i + l] * decay;
          w.acc_k[std::size_t(i + l)] += dA * qt[i + l] * decay;
        }
      float A = 0;
      for (; i < dk_; ++i) {
        const float decay = fast_exp(bt[i] - bs[i]);
        A += qt[i] * kt[i] * decay;
        w.acc_k[std::size_t(i)] += dA * qt[i] * decay;
      }
      for (float a : a_lanes) A += a;
      for (std::int64_t j = 0; j < dv_; ++j) w.acc_v[std::size_t(j)] += A * dot_t[j];
    }
    const float* qdq = &w.qdq[std::size_t((t0 + tau) * dk_)];
    const auto kq = kidx(b, t0 + tau, h);
    for (std::int64_t i = 0; i < dk_; ++i) {
      w.run[std::size_t(i)] += qdq[i] - kt[i] * w.acc_k[std::size_t(i)];
      st(out(1), kq + i, w.acc_k[std::size_t(i)]);
      st(out(3), kq + i, w.run[std::size_t(i)]);
    }
    for (std::int64_t j = 0; j < dv_; ++j) st(out(2), vidx(b, t0 + tau, h) + j, w.acc_v[std::size_t(j)]);
  }

  // dS ← diag(e^{b_C})·dS + Σ_t (q_t∘e^{b_t})ᵀ do_t
  void advance_state_gradient(GlaBwdScratch& w) const {
    const float* last = &w.cum[std::size_t((C_ - 1) * dk_)];
    for (std::int64_t i = 0; i < dk_; ++i) {
      float* dSi = &w.S[std::size_t(i * dv_)];
      const float decay = fast_exp(last[i]);
      for (std::int64_t j = 0; j < dv_; ++j) dSi[j] *= decay;
      for (std::int64_t t = 0; t < C_; ++t) {
        const float qe = w.q[std::size_t(t * dk_ + i)] * fast_exp(w.cum[std::size_t(t * dk_ + i)]);
        const float* dot_t = &w.dO[std::size_t(t * dv_)];
        for (std::int64_t j = 0; j < dv_; ++j) dSi[j] += qe * dot_t[j];
      }
    }
  }

};

}  // namespace
}  // namespace rafter::workloads::cpu
RAFTER_CPU_KERNELS_END

namespace rafter::workloads::cpu {
namespace {

RAFTER_REGISTER_CPU_KERNEL({"gla_chunked", "cpu.native",
                            [](const OpInstance& i) {
                              return kernel_build_runs_here() && is_activation_precision(i) && i.phase == "bwd";
                            },
                            make_typed<GlaBwdKernel>});

}  // namespace
}  // namespace rafter::workloads::cpu
