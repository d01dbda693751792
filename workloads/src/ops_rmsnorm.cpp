// RMSNorm (Llama): y = x / sqrt(mean(x²) + eps) · w over the hidden dimension, eps = 1e-5.
// fwd FLOPs 4·t·h + 3·t (fp32); bwd 10·t·h + 4·t:
//   dx = r·w·dy − x·r³/h·Σ_j(w_j·dy_j·x_j),  dw = Σ_t dy·x·r   (r = 1/rms of the row).
// Bytes fwd: x, w read, y written; bwd: x, dy, w read, dx, dw (fp32) written. The second pass over
// a row re-reads it from the innermost level.
#include <cmath>

#include "op_common.hpp"

namespace rafter::workloads {
namespace {

constexpr double kEps = 1e-5;

class RmsNormOp : public detail::CatalogueOp {
 public:
  RmsNormOp()
      : CatalogueOp("rmsnorm", "RMSNorm over the hidden dimension (forward and backward)",
                    {{"tokens", 4096, "rows"}, {"hidden", 4096, "hidden size"}}, detail::activation_precisions(),
                    {"fwd", "bwd"}) {}

  std::string slice_axis(const OpInstance&) const override { return "tokens"; }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const double t = detail::dimension(inst, "tokens"), h = detail::dimension(inst, "hidden");
    const double e = detail::element_bytes(inst);
    Cost c;
    if (inst.phase == "bwd") {
      c.flops["fp32"] = 10 * t * h + 4 * t;
      c.compulsory_bytes = 3 * t * h * e + h * e + h * 4;
      c.compulsory_write_bytes = t * h * e + h * 4;  // dx and dw
      c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes, 2 * t * h * e);
    } else {
      c.flops["fp32"] = 4 * t * h + 3 * t;
      c.compulsory_bytes = 2 * t * h * e + h * e;
      c.compulsory_write_bytes = t * h * e;
      c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes, t * h * e);
    }
    return c;
  }

  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    s.shape["tokens"] = detail::check_dim(full.shape.at("tokens"), 16);
    // The row length is kept: it picks each backend's kernel (a GPU row a warp up to 1024 values,
    // a block beyond), so the check runs the kernel that is timed; 16 rows cost 16 × hidden.
    s.shape["hidden"] = full.shape.at("hidden");
    return s;
  }

  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    const auto t = shape_value(inst, "tokens"), h = shape_value(inst, "hidden");
    std::mt19937_64 rng(seed);
    Problem p;
    p.inputs.push_back(detail::random_tensor("x", {t, h}, rng));
    p.inputs.push_back(detail::random_tensor("w", {h}, rng, 0.5, 1.5));
    if (inst.phase == "bwd") {
      p.inputs.push_back(detail::random_tensor("dy", {t, h}, rng));
      p.outputs.push_back(detail::empty_tensor("dx", {t, h}));
      p.outputs.push_back(detail::empty_tensor("dw", {h}));
    } else {
      p.outputs.push_back(detail::empty_tensor("y", {t, h}));
    }
    return p;
  }

  void reference(const OpInstance& inst, Problem& p) const override {
    const auto t = shape_value(inst, "tokens"), h = shape_value(inst, "hidden");
    const auto &x = p.inputs[0].data, &w = p.inputs[1].data;
    for (std::int64_t r = 0; r < t; ++r) {
      double ss = 0;
      for (std::int64_t i = 0; i < h; ++i) ss += x[r * h + i] * x[r * h + i];
      const double rs = 1.0 / std::sqrt(ss / h + kEps);
      if (inst.phase != "bwd") {
        for (std::int64_t i = 0; i < h; ++i) p.outputs[0].data[r * h + i] = x[r * h + i] * rs * w[i];
        continue;
      }
      const auto& dy = p.inputs[2].data;
      double dot = 0;
      for (std::int64_t i = 0; i < h; ++i) dot += w[i] * dy[r * h + i] * x[r * h + i];
      for (std::int64_t i = 0; i < h; ++i) {
        p.outputs[0].data[r * h + i] = rs * w[i] * dy[r * h + i] - x[r * h + i] * rs * rs * rs / h * dot;
        p.outputs[1].data[i] += dy[r * h + i] * x[r * h + i] * rs;
      }
    }
  }
};

RAFTER_REGISTER_OPERATOR(RmsNormOp);

}  // namespace
}  // namespace rafter::workloads
