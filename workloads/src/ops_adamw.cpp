// AdamW optimizer step with FP32 master weights, FP32 moments and a low-precision (the instance's
// precision, normally BF16) gradient in and weight copy out, in place:
//   m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²;  p −= lr·( m/(1−β1^s) / (sqrt(v/(1−β2^s)) + ε) + wd·p );
//   copy = round(p).   lr 1e-3, β1 0.9, β2 0.95, ε 1e-8, wd 0.1, step s = 10.
// FLOPs 16·n (fp32); bytes: p, m, v read and written (24·n) + g read and copy written (2·e·n).
#include <cmath>

#include "op_common.hpp"
#include "rafter/workloads/adamw.hpp"

namespace rafter::workloads {
namespace {

class AdamwOp : public detail::CatalogueOp {
 public:
  AdamwOp()
      : CatalogueOp("adamw", "AdamW step: FP32 master weights and moments, BF16 gradient and weight copy",
                    {{"params", 1 << 24, "parameters updated by this rank"}}, {"bf16", "fp32", "fp16"}, {"step"}) {}

  std::string slice_axis(const OpInstance&) const override { return "params"; }
  // p, m and v are updated in place: one FP32 copy each, plus the gradient and the weight copy.
  double footprint_bytes(const OpInstance& inst, const Cost&) const override {
    return (12 + 2 * detail::element_bytes(inst)) * detail::dimension(inst, "params");
  }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const double n = detail::dimension(inst, "params");
    Cost c;
    c.flops["fp32"] = 16 * n;
    c.compulsory_bytes = 24 * n + 2 * detail::element_bytes(inst) * n;
    c.compulsory_write_bytes = 12 * n + detail::element_bytes(inst) * n;  // p, m, v and the copy
    c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes);
    return c;
  }
  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    s.shape["params"] = detail::check_dim(full.shape.at("params"), 1000);
    return s;
  }
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    const auto n = shape_value(inst, "params");
    Problem p;
    p.inputs.push_back(detail::random_tensor("p", {n}, rng));
    p.inputs.push_back(detail::random_tensor("m", {n}, rng, -1e-2, 1e-2));
    p.inputs.push_back(detail::random_tensor("v", {n}, rng, 1e-6, 1e-4));
    p.inputs.push_back(detail::random_tensor("g", {n}, rng, -1e-2, 1e-2));
    for (const char* name : {"p_out", "m_out", "v_out", "copy"}) p.outputs.push_back(detail::empty_tensor(name, {n}));
    return p;
  }
  void reference(const OpInstance&, Problem& p) const override {
    const AdamwHyper hp;
    const double c1 = 1 - std::pow(hp.beta1, hp.step), c2 = 1 - std::pow(hp.beta2, hp.step);
    for (std::size_t i = 0; i < p.inputs[0].data.size(); ++i) {
      const double g = p.inputs[3].data[i];
      const double m = hp.beta1 * p.inputs[1].data[i] + (1 - hp.beta1) * g;
      const double v = hp.beta2 * p.inputs[2].data[i] + (1 - hp.beta2) * g * g;
      double w = p.inputs[0].data[i];
      w -= hp.lr * ((m / c1) / (std::sqrt(v / c2) + hp.eps) + hp.weight_decay * w);
      p.outputs[0].data[i] = w;
      p.outputs[1].data[i] = m;
      p.outputs[2].data[i] = v;
      p.outputs[3].data[i] = w;
    }
  }
};

RAFTER_REGISTER_OPERATOR(AdamwOp);

}  // namespace
}  // namespace rafter::workloads
