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
  std::int64_t B_, s_, H_, dk_, dv_, C_;
};

}  // namespace rafter::workloads::cpu
