// Token embedding. fwd: gather rows of the table [vocab, hidden] for int32 ids → y [t, h]
// (0 FLOPs; bytes 4·t + 2·t·h·e). bwd: scatter-add of dy rows into the fp32 gradient table dW,
// accumulated in place (dW_out = dW_in + scatter), t·h FLOPs (fp32); bytes 4·t + t·h·e (dy)
// + 2·t·h·4 (read-modify-write of the touched rows, an upper bound: at most t distinct rows).
#include <cmath>

#include "op_common.hpp"

namespace rafter::workloads {
namespace {

class EmbeddingOp : public detail::CatalogueOp {
 public:
  EmbeddingOp()
      : CatalogueOp("embedding", "token embedding: gather (fwd) / scatter-add into the gradient (bwd)",
                    {{"tokens", 4096, "token ids"}, {"hidden", 4096, "hidden size"}, {"vocab", 32000, "table rows"}},
                    detail::activation_precisions(), {"fwd", "bwd"}) {}

  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const double t = detail::dimension(inst, "tokens"), h = detail::dimension(inst, "hidden");
    const double e = detail::element_bytes(inst);
    Cost c;
    if (inst.phase == "bwd") {
      c.flops["fp32"] = t * h;
      c.compulsory_bytes = 4 * t + t * h * e + 2 * t * h * 4;
      c.compulsory_write_bytes = t * h * 4;  // the gradient rows, accumulated in place
    } else {
      c.compulsory_bytes = 4 * t + 2 * t * h * e;
      c.compulsory_write_bytes = t * h * e;
    }
    c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes);
    return c;
  }
  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    s.shape["tokens"] = detail::check_dim(full.shape.at("tokens"), 24);
    s.shape["hidden"] = detail::check_dim(full.shape.at("hidden"), 64);
    s.shape["vocab"] = detail::check_dim(full.shape.at("vocab"), 20);
    return s;
  }
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    const auto t = shape_value(inst, "tokens"), h = shape_value(inst, "hidden"), v = shape_value(inst, "vocab");
    Problem p;
    auto ids = detail::random_tensor("ids", {t}, rng, 0.0, double(v));
    for (auto& x : ids.data) x = std::floor(x);
    p.inputs.push_back(std::move(ids));
    if (inst.phase == "bwd") {
      p.inputs.push_back(detail::random_tensor("dy", {t, h}, rng));
      p.inputs.push_back(detail::random_tensor("dW_in", {v, h}, rng));
      p.outputs.push_back(detail::empty_tensor("dW", {v, h}));
    } else {
      p.inputs.push_back(detail::random_tensor("table", {v, h}, rng));
      p.outputs.push_back(detail::empty_tensor("y", {t, h}));
    }
    return p;
  }
  void reference(const OpInstance& inst, Problem& p) const override {
    const auto t = shape_value(inst, "tokens"), h = shape_value(inst, "hidden");
    const auto& ids = p.inputs[0].data;
    if (inst.phase == "bwd") {
      p.outputs[0].data = p.inputs[2].data;
      for (std::int64_t r = 0; r < t; ++r)
        for (std::int64_t i = 0; i < h; ++i)
          p.outputs[0].data[std::int64_t(ids[r]) * h + i] += p.inputs[1].data[r * h + i];
      return;
    }
    for (std::int64_t r = 0; r < t; ++r)
      for (std::int64_t i = 0; i < h; ++i)
        p.outputs[0].data[r * h + i] = p.inputs[1].data[std::int64_t(ids[r]) * h + i];
  }
};

RAFTER_REGISTER_OPERATOR(EmbeddingOp);

}  // namespace
}  // namespace rafter::workloads
