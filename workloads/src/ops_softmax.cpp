// Row softmax: y = exp(x − max) / Σ exp(x − max) over the last dimension.
// FLOPs 5·rows·cols (fp32: max, subtract, exp, sum, divide); bytes: x read, y written; the
// kernel makes three passes over a row, the two re-reads served by the innermost level.
#include <algorithm>
#include <cmath>

#include "op_common.hpp"

namespace rafter::workloads {
namespace {

class SoftmaxOp : public detail::CatalogueOp {
 public:
  SoftmaxOp()
      : CatalogueOp("softmax", "row softmax over the last dimension",
                    {{"rows", 4096, "rows"}, {"cols", 4096, "row length"}}, detail::activation_precisions()) {}

  std::string slice_axis(const OpInstance&) const override { return "rows"; }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const double r = detail::dimension(inst, "rows"), n = detail::dimension(inst, "cols");
    const double e = detail::element_bytes(inst);
    Cost c;
    c.flops["fp32"] = 5 * r * n;
    c.compulsory_bytes = 2 * r * n * e;
    c.compulsory_write_bytes = r * n * e;
    c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes, 2 * r * n * e);
    return c;
  }

  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    s.shape["rows"] = detail::check_dim(full.shape.at("rows"), 16);
    s.shape["cols"] = detail::check_dim(full.shape.at("cols"), 300);
    return s;
  }

  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    Problem p;
    const auto r = shape_value(inst, "rows"), n = shape_value(inst, "cols");
    p.inputs.push_back(detail::random_tensor("x", {r, n}, rng, -4.0, 4.0));
    p.outputs.push_back(detail::empty_tensor("y", {r, n}));
    return p;
  }

  void reference(const OpInstance& inst, Problem& p) const override {
    const auto r = shape_value(inst, "rows"), n = shape_value(inst, "cols");
    for (std::int64_t i = 0; i < r; ++i) {
      const double* x = &p.inputs[0].data[i * n];
      double* y = &p.outputs[0].data[i * n];
      const double mx = *std::max_element(x, x + n);
      double sum = 0;
      for (std::int64_t j = 0; j < n; ++j) sum += std::exp(x[j] - mx);
      for (std::int64_t j = 0; j < n; ++j) y[j] = std::exp(x[j] - mx) / sum;
    }
  }
};

RAFTER_REGISTER_OPERATOR(SoftmaxOp);

}  // namespace
}  // namespace rafter::workloads
