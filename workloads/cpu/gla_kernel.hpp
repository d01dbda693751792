// What the chunked GLA kernels (forward and backward) share: the shape and the four inputs q, k, v,
// g ([batch, seq, heads, dk|dv], g the log forget gates in GLA's range). Private to workloads/cpu.
#pragma once
#include <cmath>

#include "cpu_kernel.hpp"

namespace rafter::workloads::cpu {

class GlaKernelBase : public Kernel {
 protected:
  GlaKernelBase(const OpInstance& inst, DType t)
      : B_(shape_value(inst, "batch")),
        s_(shape_value(inst, "seq")),
        H_(shape_value(inst, "heads")),
        dk_(shape_value(inst, "head_dim_k")),
        dv_(shape_value(inst, "head_dim_v")),
        C_(shape_value(inst, "chunk")) {
    inputs.push_back(make_tensor("q", t, {B_, s_, H_, dk_}));
    inputs.push_back(make_tensor("k", t, {B_, s_, H_, dk_}));
    inputs.push_back(make_tensor("v", t, {B_, s_, H_, dv_}));
    inputs.push_back(make_tensor("g", t, {B_, s_, H_, dk_}, std::log(0.6), std::log(0.99)));
  }
  std::int64_t kidx(std::int64_t b, std::int64_t t, std::int64_t h) const { return ((b * s_ + t) * H_ + h) * dk_; }
  std::int64_t vidx(std::int64_t b, std::int64_t t, std::int64_t h) const { return ((b * s_ + t) * H_ + h) * dv_; }

  // Converts the chunk of head (b, h) starting at t0 to fp32 — q, k, v as [C, dk|dv] — and forms
  // its cumulative log-gates cum[t] = Σ_{τ≤t} g_τ.
  template <class T>
  void stage_chunk(std::int64_t b, std::int64_t h, std::int64_t t0, float* q, float* k, float* cum, float* v) const {
    const T *qs = inputs[0].as<T>(), *ks = inputs[1].as<T>(), *vs = inputs[2].as<T>(), *gs = inputs[3].as<T>();
    for (std::int64_t t = 0; t < C_; ++t) {
      const auto kq = kidx(b, t0 + t, h), kv = vidx(b, t0 + t, h);
      float *qt = q + t * dk_, *kt = k + t * dk_, *ct = cum + t * dk_;
      for (std::int64_t i = 0; i < dk_; ++i) {
        qt[i] = ld(qs, kq + i);
        kt[i] = ld(ks, kq + i);
        ct[i] = ld(gs, kq + i);
      }
      // A loop of its own rather than `(t ? ct[i - dk] : 0) + g`: GCC turns that select into an
      // AVX2 masked load from a null pointer (mask all zero for t = 0), which hardware never faults
      // on but QEMU 7.2 does, and QEMU is how the AVX2 kernels get run on a CPU model without AVX-512.
      if (t)
        for (std::int64_t i = 0; i < dk_; ++i) ct[i] += ct[i - dk_];
      for (std::int64_t j = 0; j < dv_; ++j) v[t * dv_ + j] = ld(vs, kv + j);
    }
  }

  std::int64_t B_, s_, H_, dk_, dv_, C_;
};

}  // namespace rafter::workloads::cpu
