// Hot-channel patch (low-precision recipes with outlier channels): the quantization residual of
// the k hottest input channels, R = X[:, hot] − dequant(quant(X))[:, hot] ([tokens, hot], BF16),
// multiplied by the matching weight columns W[:, hot] ([out, hot], BF16) and added to the
// low-precision GEMM's output: Y += R·W_hotᵀ. A small BF16 GEMM with accumulation.
// FLOPs 2·t·n·hot (bf16) + t·n (fp32 add); bytes R + W_hot + Y read and written.
#include "op_common.hpp"

namespace rafter::workloads {
namespace {

class HotChannelPatchOp : public detail::CatalogueOp {
 public:
  HotChannelPatchOp()
      : CatalogueOp("hot_channel_patch", "Y += R_hot·W_hotᵀ: hottest channels' quantization residual in BF16",
                    {{"tokens", 4096, "rows of Y"}, {"out", 4096, "output features (columns of Y)"},
                     {"hot", 32, "hot channels patched"}},
                    {"bf16"}) {}

  static detail::GemmTrafficInput traffic_input(const OpInstance& inst) {
    return {detail::dimension(inst, "tokens"), detail::dimension(inst, "out"), detail::dimension(inst, "hot"),
            1, 2, 2, 2, true};
  }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const auto g = traffic_input(inst);
    Cost c;
    c.flops["bf16"] = 2 * g.m * g.n * g.k;
    c.flops["fp32"] = g.m * g.n;
    c.compulsory_bytes = detail::gemm_compulsory_bytes(g);
    c.compulsory_write_bytes = detail::gemm_written_bytes(g);
    c.bytes = detail::gemm_traffic(levels, g);
    return c;
  }
  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    s.shape["tokens"] = detail::check_dim(full.shape.at("tokens"), 40);
    s.shape["out"] = detail::check_dim(full.shape.at("out"), 48);
    s.shape["hot"] = detail::check_dim(full.shape.at("hot"), 32);
    return s;
  }
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    const auto t = shape_value(inst, "tokens"), n = shape_value(inst, "out"), h = shape_value(inst, "hot");
    Problem p;
    p.inputs.push_back(detail::random_tensor("R", {t, h}, rng));
    p.inputs.push_back(detail::random_tensor("W_hot", {n, h}, rng));
    p.inputs.push_back(detail::random_tensor("Y_in", {t, n}, rng));
    p.outputs.push_back(detail::empty_tensor("Y", {t, n}));
    return p;
  }
  void reference(const OpInstance& inst, Problem& p) const override {
    const auto t = shape_value(inst, "tokens"), n = shape_value(inst, "out"), h = shape_value(inst, "hot");
    const auto &R = p.inputs[0].data, &W = p.inputs[1].data, &Y = p.inputs[2].data;
    for (std::int64_t i = 0; i < t; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double acc = Y[i * n + j];
        for (std::int64_t l = 0; l < h; ++l) acc += R[i * h + l] * W[j * h + l];
        p.outputs[0].data[i * n + j] = acc;
      }
  }
};

RAFTER_REGISTER_OPERATOR(HotChannelPatchOp);

}  // namespace
}  // namespace rafter::workloads
