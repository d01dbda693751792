// SwiGLU activation of the Llama MLP on the fused gate_up projection output [t, 2f] (gate in the
// first f columns, up in the last f): y = silu(gate) · up, silu(g) = g·σ(g).
// fwd FLOPs 5·t·f (fp32: negate, exp, add, divide, multiply); bytes 2·t·f·e read, t·f·e written.
// bwd: d_up = dy·silu(g), d_gate = dy·up·σ(g)·(1 + g·(1 − σ(g))); FLOPs 10·t·f; reads gate_up and
// dy (3·t·f·e), writes d_gate_up (2·t·f·e).
#include <cmath>

#include "op_common.hpp"

namespace rafter::workloads {
namespace {

class SwigluOp : public detail::CatalogueOp {
 public:
  SwigluOp()
      : CatalogueOp("swiglu", "SwiGLU: silu(gate)·up (forward and backward)",
                    {{"tokens", 4096, "rows"}, {"ffn", 11008, "intermediate size f"}}, detail::activation_precisions(),
                    {"fwd", "bwd"}) {}

  std::string slice_axis(const OpInstance&) const override { return "tokens"; }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const double t = detail::dimension(inst, "tokens"), f = detail::dimension(inst, "ffn");
    const double e = detail::element_bytes(inst);
    Cost c;
    const bool bwd = inst.phase == "bwd";
    c.flops["fp32"] = (bwd ? 10 : 5) * t * f;
    c.compulsory_bytes = (bwd ? 5 : 3) * t * f * e;
    c.compulsory_write_bytes = (bwd ? 2 : 1) * t * f * e;
    c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes);
    return c;
  }

  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    s.shape["tokens"] = detail::check_dim(full.shape.at("tokens"), 8);
    s.shape["ffn"] = detail::check_dim(full.shape.at("ffn"), 200);
    return s;
  }

  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    const auto t = shape_value(inst, "tokens"), f = shape_value(inst, "ffn");
    std::mt19937_64 rng(seed);
    Problem p;
    p.inputs.push_back(detail::random_tensor("gate_up", {t, 2 * f}, rng, -4.0, 4.0));
    if (inst.phase == "bwd") {
      p.inputs.push_back(detail::random_tensor("dy", {t, f}, rng));
      p.outputs.push_back(detail::empty_tensor("d_gate_up", {t, 2 * f}));
    } else {
      p.outputs.push_back(detail::empty_tensor("y", {t, f}));
    }
    return p;
  }

  void reference(const OpInstance& inst, Problem& p) const override {
    const auto t = shape_value(inst, "tokens"), f = shape_value(inst, "ffn");
    const auto& gu = p.inputs[0].data;
    for (std::int64_t r = 0; r < t; ++r)
      for (std::int64_t i = 0; i < f; ++i) {
        const double g = gu[r * 2 * f + i], u = gu[r * 2 * f + f + i];
        const double sig = 1.0 / (1.0 + std::exp(-g));
        if (inst.phase != "bwd") {
          p.outputs[0].data[r * f + i] = g * sig * u;
          continue;
        }
        const double dy = p.inputs[1].data[r * f + i];
        p.outputs[0].data[r * 2 * f + i] = dy * u * sig * (1 + g * (1 - sig));
        p.outputs[0].data[r * 2 * f + f + i] = dy * g * sig;
      }
  }
};

RAFTER_REGISTER_OPERATOR(SwigluOp);

}  // namespace
}  // namespace rafter::workloads
