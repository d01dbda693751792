// Residual add: y = a + b. FLOPs t·h (fp32); bytes 3·t·h·e (two reads, one write).
#include "op_common.hpp"

namespace rafter::workloads {
namespace {

class ResidualAddOp : public detail::CatalogueOp {
 public:
  ResidualAddOp()
      : CatalogueOp("residual_add", "residual connection y = a + b",
                    {{"tokens", 4096, "rows"}, {"hidden", 4096, "hidden size"}}, detail::activation_precisions(),
                    {"fwd", "bwd"}) {}

  std::string slice_axis(const OpInstance&) const override { return "tokens"; }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const double n = detail::dimension(inst, "tokens") * detail::dimension(inst, "hidden");
    Cost c;
    c.flops["fp32"] = n;
    c.compulsory_bytes = 3 * n * detail::element_bytes(inst);
    c.compulsory_write_bytes = n * detail::element_bytes(inst);
    c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes);
    return c;
  }
  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    s.shape["tokens"] = detail::check_dim(full.shape.at("tokens"), 8);
    s.shape["hidden"] = detail::check_dim(full.shape.at("hidden"), 300);
    return s;
  }
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    const auto t = shape_value(inst, "tokens"), h = shape_value(inst, "hidden");
    Problem p;
    p.inputs.push_back(detail::random_tensor("a", {t, h}, rng));
    p.inputs.push_back(detail::random_tensor("b", {t, h}, rng));
    p.outputs.push_back(detail::empty_tensor("y", {t, h}));
    return p;
  }
  void reference(const OpInstance&, Problem& p) const override {
    for (std::size_t i = 0; i < p.outputs[0].data.size(); ++i)
      p.outputs[0].data[i] = p.inputs[0].data[i] + p.inputs[1].data[i];
  }
};

RAFTER_REGISTER_OPERATOR(ResidualAddOp);

}  // namespace
}  // namespace rafter::workloads
