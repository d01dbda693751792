// The hot-channel patch on the CPU (hot_patch_onednn.hpp): Y = Y_in + R·W_hotᵀ in BF16 through
// oneDNN's matmul, its sum post-op accumulating into Y in place, or emulated via FP32 where oneDNN
// has no BF16 matmul.
#include "hot_patch_onednn.hpp"

#include <cstring>

namespace rafter::workloads::cpu {

void HotPatchMatmul::prepare(std::int64_t t, std::int64_t n, std::int64_t h, const void* r, const void* w,
                             void* y, nlohmann::json& details) {
  t_ = t, n_ = n, h_ = h, r_ = r, w_ = w, y_ = static_cast<bf16*>(y);
  via_fp32_ = !onednn_native_bf16_matmul(true);
  const dt type = via_fp32_ ? dt::f32 : dt::bf16;
  const auto a = matmul_md(1, t_, h_, type, false), b = matmul_md(1, h_, n_, type, true),
             c = matmul_md(1, t_, n_, type, false);
  dnnl::primitive_attr attr;
  if (via_fp32_) {
    details["path"] =
        "bf16 operands converted to fp32 in the timed call, oneDNN fp32 matmul, product added into "
        "Y in bf16" +
        onednn_no_bf16_note();
    r32_ = Buffer(std::size_t(t_ * h_) * 4);
    w32_ = Buffer(std::size_t(n_ * h_) * 4);
    y32_ = Buffer(std::size_t(t_ * n_) * 4);
  } else {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, onednn_engine());
  prim_ = dnnl::matmul(pd);
  mem_a_ = dnnl::memory(a, onednn_engine(), via_fp32_ ? r32_.data() : const_cast<void*>(r_));
  mem_b_ = dnnl::memory(b, onednn_engine(), via_fp32_ ? w32_.data() : const_cast<void*>(w_));
  mem_c_ = dnnl::memory(c, onednn_engine(), via_fp32_ ? y32_.data() : static_cast<void*>(y_));
  details["algorithm"] =
      std::string("onednn matmul") + (via_fp32_ ? " " : " + sum post-op ") + pd.impl_info_str();
}

void HotPatchMatmul::run() {
  if (via_fp32_) {
    widen(r_, dt::bf16, static_cast<float*>(r32_.data()), t_ * h_);
    widen(w_, dt::bf16, static_cast<float*>(w32_.data()), n_ * h_);
  }
  dnnl::stream s(onednn_engine());
  prim_.execute(s, {{DNNL_ARG_SRC, mem_a_}, {DNNL_ARG_WEIGHTS, mem_b_}, {DNNL_ARG_DST, mem_c_}});
  s.wait();
  if (!via_fp32_) return;
  const auto* p = static_cast<const float*>(y32_.data());
  parallel_for(
      t_ * n_,
      [&](std::int64_t lo, std::int64_t hi, int) {
        for (std::int64_t i = lo; i < hi; ++i) st(y_, i, ld(y_, i) + p[i]);
      },
      16384);
}

namespace {

class HotPatchKernel : public Kernel {
 public:
  explicit HotPatchKernel(const OpInstance& inst)
      : t_(shape_value(inst, "tokens")), n_(shape_value(inst, "out")), h_(shape_value(inst, "hot")) {
    inputs.push_back(make_tensor("R", DType::BF16, {t_, h_}));
    inputs.push_back(make_tensor("W_hot", DType::BF16, {n_, h_}));
    inputs.push_back(make_tensor("Y_in", DType::BF16, {t_, n_}));
    outputs.push_back(make_tensor("Y", DType::BF16, {t_, n_}));
    details["library"] = "oneDNN " + onednn_version();
  }
  void prepare() override {
    std::memcpy(outputs[0].buffer.data(), inputs[2].buffer.data(), outputs[0].size() * 2);
    patch_.prepare(t_, n_, h_, inputs[0].buffer.data(), inputs[1].buffer.data(), outputs[0].buffer.data(),
                   details);
    if (patch_.via_fp32()) emulated_via = "fp32";
  }
  void run() override { patch_.run(); }

 private:
  std::int64_t t_, n_, h_;
  HotPatchMatmul patch_;
};

RAFTER_REGISTER_CPU_KERNEL({"hot_channel_patch", "cpu.onednn", [](const OpInstance& i) { return i.precision == "bf16"; },
                            [](const OpInstance& i) -> std::unique_ptr<Kernel> { return std::make_unique<HotPatchKernel>(i); }});

}  // namespace
}  // namespace rafter::workloads::cpu
