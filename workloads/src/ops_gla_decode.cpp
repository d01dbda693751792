// Gated linear attention decode: one recurrent step per sequence against its carried state
// (the serving form of GLA, Yang et al. 2023, arXiv:2312.06635; flash-linear-attention's
// fused_recurrent kernels). Per sequence and head, with the state S ∈ R^{dk×dv} in fp32:
//   S' = diag(e^{g})·S + kᵀ v,   o = q·S'.
// Unlike attention decode, the cost does not grow with the context: the state replaces the KV
// cache, so there is no kv_len parameter.
// FLOPs per head: decay and update of the state 3·dk·dv (a multiply, then a multiply-add), q·S'
// 2·dk·dv, the gates' exp dk. All fp32: the state is fp32 and the work is matrix-vector (no
// tensor-core class), whatever the storage of q, k, v, g, o.
// Layouts: q, k, g [batch, heads, dk]; v, o [batch, heads, dv]; state_in, state_out [batch, heads, dk, dv]
// fp32.
#include <cmath>

#include "op_common.hpp"

namespace rafter::workloads {
namespace {

class GlaDecodeOp : public detail::CatalogueOp {
 public:
  GlaDecodeOp()
      : CatalogueOp("gla_decode",
                    "gated linear attention, one recurrent decode step against a carried fp32 state",
                    {{"batch", 1, "sequences"},
                     {"heads", 4, "heads"},
                     {"head_dim_k", 256, "key dimension per head"},
                     {"head_dim_v", 512, "value dimension per head"}},
                    detail::activation_precisions()) {}

  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const double b = detail::dimension(inst, "batch"), h = detail::dimension(inst, "heads"),
                 dk = detail::dimension(inst, "head_dim_k"), dv = detail::dimension(inst, "head_dim_v");
    const double e = detail::element_bytes(inst);
    Cost c;
    c.flops["fp32"] = b * h * (5 * dk * dv + dk);
    // q, k, g, v read and o written in storage precision; the fp32 state read and written once.
    c.compulsory_bytes = e * b * h * (3 * dk + 2 * dv) + 2 * 4.0 * b * h * dk * dv;
    c.compulsory_write_bytes = e * b * h * dv + 4.0 * b * h * dk * dv;  // o and the state
    c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes);
    return c;
  }

  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    s.shape["batch"] = detail::check_dim(full.shape.at("batch"), 3);
    s.shape["heads"] = detail::check_dim(full.shape.at("heads"), 2);
    s.shape["head_dim_k"] = detail::check_dim(full.shape.at("head_dim_k"), 32);
    s.shape["head_dim_v"] = detail::check_dim(full.shape.at("head_dim_v"), 48);
    return s;
  }

  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    const auto b = shape_value(inst, "batch"), h = shape_value(inst, "heads"),
               dk = shape_value(inst, "head_dim_k"), dv = shape_value(inst, "head_dim_v");
    std::mt19937_64 rng(seed);
    Problem p;
    p.inputs.push_back(detail::random_tensor("q", {b, h, dk}, rng));
    p.inputs.push_back(detail::random_tensor("k", {b, h, dk}, rng));
    p.inputs.push_back(detail::random_tensor("v", {b, h, dv}, rng));
    // log forget gates: α = exp(g) in (0.6, 0.99), as for gla_chunked.
    p.inputs.push_back(detail::random_tensor("g", {b, h, dk}, rng, std::log(0.6), std::log(0.99)));
    p.inputs.push_back(detail::random_tensor("state_in", {b, h, dk, dv}, rng));
    p.outputs.push_back(detail::empty_tensor("o", {b, h, dv}));
    p.outputs.push_back(detail::empty_tensor("state_out", {b, h, dk, dv}));
    return p;
  }

  void reference(const OpInstance& inst, Problem& p) const override {
    const auto B = shape_value(inst, "batch"), H = shape_value(inst, "heads"),
               dk = shape_value(inst, "head_dim_k"), dv = shape_value(inst, "head_dim_v");
    const auto &q = p.inputs[0].data, &k = p.inputs[1].data, &v = p.inputs[2].data, &g = p.inputs[3].data,
               &S = p.inputs[4].data;
    auto &o = p.outputs[0].data, &S_out = p.outputs[1].data;
    for (std::int64_t bh = 0; bh < B * H; ++bh) {
      const auto kq = std::size_t(bh * dk), kv = std::size_t(bh * dv), ks = std::size_t(bh * dk * dv);
      for (std::int64_t i = 0; i < dk; ++i)
        for (std::int64_t j = 0; j < dv; ++j) {
          const auto ij = ks + std::size_t(i * dv + j);
          S_out[ij] =
              std::exp(g[kq + std::size_t(i)]) * S[ij] + k[kq + std::size_t(i)] * v[kv + std::size_t(j)];
        }
      for (std::int64_t j = 0; j < dv; ++j) {
        double acc = 0;
        for (std::int64_t i = 0; i < dk; ++i)
          acc += q[kq + std::size_t(i)] * S_out[ks + std::size_t(i * dv + j)];
        o[kv + std::size_t(j)] = acc;
      }
    }
  }
};

RAFTER_REGISTER_OPERATOR(GlaDecodeOp);

}  // namespace
}  // namespace rafter::workloads
