// Cross-entropy over the vocabulary with a fused log-softmax, sum reduction.
// fwd: loss_t = logsumexp(z_t) − z_t[label_t]; FLOPs 4·t·V (fp32: max, subtract, exp, sum);
//      bytes t·V·e (logits) + 4·t (labels) + 4·t (loss); two passes over a row (innermost re-read).
// bwd: dz = softmax(z) − onehot(label); FLOPs 5·t·V; bytes 2·t·V·e + 4·t; three passes.
#include <algorithm>
#include <cmath>

#include "op_common.hpp"

namespace rafter::workloads {
namespace {

class CrossEntropyOp : public detail::CatalogueOp {
 public:
  CrossEntropyOp()
      : CatalogueOp("cross_entropy", "cross-entropy loss with fused log-softmax (forward and backward)",
                    {{"tokens", 4096, "rows"}, {"vocab", 32000, "vocabulary (row length)"}},
                    detail::activation_precisions(), {"fwd", "bwd"}) {}

  std::string slice_axis(const OpInstance&) const override { return "tokens"; }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const double t = detail::dimension(inst, "tokens"), v = detail::dimension(inst, "vocab");
    const double e = detail::element_bytes(inst);
    Cost c;
    if (inst.phase == "bwd") {
      c.flops["fp32"] = 5 * t * v;
      c.compulsory_bytes = 2 * t * v * e + 4 * t;
      c.compulsory_write_bytes = t * v * e;  // dz
      c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes, 2 * t * v * e);
    } else {
      c.flops["fp32"] = 4 * t * v;
      c.compulsory_bytes = t * v * e + 8 * t;
      c.compulsory_write_bytes = 4 * t;  // the loss
      c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes, t * v * e);
    }
    return c;
  }
  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    s.shape["tokens"] = detail::check_dim(full.shape.at("tokens"), 8);
    s.shape["vocab"] = detail::check_dim(full.shape.at("vocab"), 500);
    return s;
  }
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    const auto t = shape_value(inst, "tokens"), v = shape_value(inst, "vocab");
    Problem p;
    p.inputs.push_back(detail::random_tensor("logits", {t, v}, rng, -5.0, 5.0));
    auto labels = detail::random_tensor("labels", {t}, rng, 0.0, double(v));
    for (auto& x : labels.data) x = std::floor(x);
    p.inputs.push_back(std::move(labels));
    p.outputs.push_back(detail::empty_tensor(inst.phase == "bwd" ? "dlogits" : "loss",
                                             inst.phase == "bwd" ? std::vector<std::int64_t>{t, v}
                                                                 : std::vector<std::int64_t>{t}));
    return p;
  }
  void reference(const OpInstance& inst, Problem& p) const override {
    const auto t = shape_value(inst, "tokens"), v = shape_value(inst, "vocab");
    for (std::int64_t r = 0; r < t; ++r) {
      const double* z = &p.inputs[0].data[r * v];
      const auto label = std::int64_t(p.inputs[1].data[r]);
      const double mx = *std::max_element(z, z + v);
      double sum = 0;
      for (std::int64_t j = 0; j < v; ++j) sum += std::exp(z[j] - mx);
      if (inst.phase != "bwd") {
        p.outputs[0].data[r] = std::log(sum) + mx - z[label];
        continue;
      }
      for (std::int64_t j = 0; j < v; ++j)
        p.outputs[0].data[r * v + j] = std::exp(z[j] - mx) / sum - (j == label ? 1.0 : 0.0);
    }
  }
};

RAFTER_REGISTER_OPERATOR(CrossEntropyOp);

}  // namespace
}  // namespace rafter::workloads
