// Gated linear attention (Yang et al. 2023, "Gated Linear Attention Transformers with
// Hardware-Efficient Training", arXiv:2312.06635) in its chunked form. Per head, with a state
// S ∈ R^{dk×dv} and data-dependent forget gates α_t = exp(g_t) ∈ (0,1)^{dk}:
//   S_t = diag(α_t)·S_{t-1} + k_tᵀ v_t,   o_t = q_t·S_t.
// The chunked form splits the sequence into chunks of C tokens: inside a chunk a masked C×C
// "attention" with gate-decayed scores, across chunks the state carries the past.
// FLOPs per head and chunk (dense chunk blocks, as the GPU kernels compute them):
//   2·C²·dk (scores) + 2·C²·dv (scores·V) + 2·C·dk·dv (Q·S) + 2·C·dk·dv (state update Kᵀ·V),
// in the precision's class, plus 4·s·dk fp32 per head for the gates (cumsum, exp, two multiplies).
// Layouts: q, k, g [batch, seq, heads, dk]; v, o [batch, seq, heads, dv].
#include <cmath>
#include <fmt/format.h>

#include "op_common.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::workloads {
namespace {

class GlaChunkedOp : public detail::CatalogueOp {
 public:
  GlaChunkedOp()
      : CatalogueOp("gla_chunked", "gated linear attention, chunked form (GLA)",
                    {{"batch", 1, "sequences"}, {"seq", 2048, "tokens"}, {"heads", 4, "heads"},
                     {"head_dim_k", 256, "key dimension per head"}, {"head_dim_v", 512, "value dimension per head"},
                     {"chunk", 64, "chunk length C"}},
                    {"bf16", "fp16", "fp32"}, {"fwd", "bwd"}) {}

  void validate(const OpInstance& inst) const override {
    OperatorDef::validate(inst);
    if (shape_value(inst, "seq") % shape_value(inst, "chunk") != 0)
      throw InputError(fmt::format("gla_chunked: seq={} is not a multiple of chunk={}", shape_value(inst, "seq"),
                                   shape_value(inst, "chunk")));
  }

  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const double b = detail::dimension(inst, "batch"), s = detail::dimension(inst, "seq"),
                 h = detail::dimension(inst, "heads"), dk = detail::dimension(inst, "head_dim_k"),
                 dv = detail::dimension(inst, "head_dim_v"), C = detail::dimension(inst, "chunk");
    const double e = detail::element_bytes(inst);
    const double per_chunk = 2 * C * C * dk + 2 * C * C * dv + 4 * C * dk * dv;
    // bwd: every forward product has two gradient products of the same size (2x the matmul
    // FLOPs); it reads q, k, v, g, dO and writes dq, dk, dv, dg.
    const double passes = inst.phase == "bwd" ? 2.0 : 1.0;
    Cost c;
    c.flops[std::string(precision_info(inst.precision).compute_class)] = passes * b * h * (s / C) * per_chunk;
    c.flops["fp32"] += passes * 4.0 * b * h * s * dk;
    c.compulsory_bytes = e * b * s * h * (inst.phase == "bwd" ? 6 * dk + 3 * dv : 3 * dk + 2 * dv);
    // The state (dk·dv fp32) and one chunk stay in the inner levels when they fit; otherwise the
    // state is read and written once per chunk.
    const double state_bytes = dk * dv * 4.0;
    c.bytes = detail::level_traffic(levels, [&](double inner) {
      const double chunk_ws = state_bytes + C * (3 * dk + 2 * dv) * 4.0 + C * C * 4.0;
      if (inner > 0 && chunk_ws <= inner) return c.compulsory_bytes;
      return c.compulsory_bytes + b * h * (s / C) * 2.0 * state_bytes;
    });
    return c;
  }

  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    s.shape["batch"] = detail::check_dim(full.shape.at("batch"), 2);
    s.shape["heads"] = detail::check_dim(full.shape.at("heads"), 2);
    s.shape["chunk"] = detail::check_dim(full.shape.at("chunk"), 16);
    s.shape["seq"] = s.shape["chunk"] * 3;
    s.shape["head_dim_k"] = detail::check_dim(full.shape.at("head_dim_k"), 32);
    s.shape["head_dim_v"] = detail::check_dim(full.shape.at("head_dim_v"), 48);
    return s;
  }

  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    const auto b = shape_value(inst, "batch"), s = shape_value(inst, "seq"), h = shape_value(inst, "heads"),
               dk = shape_value(inst, "head_dim_k"), dv = shape_value(inst, "head_dim_v");
    std::mt19937_64 rng(seed);
    Problem p;
    p.inputs.push_back(detail::random_tensor("q", {b, s, h, dk}, rng));
    p.inputs.push_back(detail::random_tensor("k", {b, s, h, dk}, rng));
    p.inputs.push_back(detail::random_tensor("v", {b, s, h, dv}, rng));
    // log forget gates: α = exp(g) in (0.6, 0.99): the range GLA's logsigmoid(·)/16 gates take.
    p.inputs.push_back(detail::random_tensor("g", {b, s, h, dk}, rng, std::log(0.6), std::log(0.99)));
    p.outputs.push_back(detail::empty_tensor("o", {b, s, h, dv}));
    return p;
  }

  // The recurrent form in FP64: the definition the chunked kernels must reproduce.
  void reference(const OpInstance& inst, Problem& p) const override {
    if (inst.phase == "bwd") throw InputError("gla_chunked bwd: no FP64 reference yet (planned only)");
    const auto B = shape_value(inst, "batch"), s = shape_value(inst, "seq"), H = shape_value(inst, "heads"),
               dk = shape_value(inst, "head_dim_k"), dv = shape_value(inst, "head_dim_v");
    const auto &q = p.inputs[0].data, &k = p.inputs[1].data, &v = p.inputs[2].data, &g = p.inputs[3].data;
    auto& o = p.outputs[0].data;
    std::vector<double> S(static_cast<std::size_t>(dk * dv));
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h) {
        std::fill(S.begin(), S.end(), 0.0);
        for (std::int64_t t = 0; t < s; ++t) {
          const auto kq = ((b * s + t) * H + h) * dk, kv = ((b * s + t) * H + h) * dv;
          for (std::int64_t i = 0; i < dk; ++i) {
            const double alpha = std::exp(g[kq + i]);
            for (std::int64_t j = 0; j < dv; ++j) S[i * dv + j] = alpha * S[i * dv + j] + k[kq + i] * v[kv + j];
          }
          for (std::int64_t j = 0; j < dv; ++j) {
            double acc = 0;
            for (std::int64_t i = 0; i < dk; ++i) acc += q[kq + i] * S[i * dv + j];
            o[kv + j] = acc;
          }
        }
      }
  }
};

RAFTER_REGISTER_OPERATOR(GlaChunkedOp);

}  // namespace
}  // namespace rafter::workloads
