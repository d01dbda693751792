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
//
// Backward (phase bwd): inputs q, k, v, g, dO; outputs dq, dk, dv, dg (same layouts). Reverse
// mode through the recurrence, with dS_t the gradient of the loss with respect to the state S_t
// (everything that reads S_t: o_t and S_{t+1}), carried backwards from dS_{s} = 0:
//   dS_t  = q_tᵀ·do_t + diag(α_{t+1})·dS_{t+1}
//   dq_t  = do_t·S_tᵀ                       (o_t = q_t·S_t)
//   dk_t  = v_t·dS_tᵀ,   dv_t = k_t·dS_t     (S_t ∋ k_tᵀ v_t)
//   dα_t  = rowsum(dS_t ∘ S_{t−1}),  dg_t = α_t ∘ dα_t   (S_t ∋ diag(α_t)·S_{t−1}, α = e^g)
// The FP64 reference evaluates exactly these (keeping every S_t). The kernels use the equivalent
// chunk form and dg_t = Σ_{τ≥t} (q_τ∘dq_τ − k_τ∘dk_τ) (o depends on q, k, g only through
// q_t∘e^{b_t} and k_t∘e^{−b_t}, b_t = Σ_{τ≤t} g_τ), so the test of a kernel against this
// reference also checks that identity.
// Backward FLOPs per head and chunk: the two gradient products of each forward product
// (2× forward: 4·C²·dk + 4·C²·dv + 8·C·dk·dv) plus what a chunked backward recomputes instead of
// storing, as in flash attention's backward: the gate-decayed scores (2·C²·dk) and the chunk
// states (2·C·dk·dv); fp32: the recomputed gate work (4·s·dk) and dg's products, difference and
// reverse cumulative sum (4·s·dk).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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
    const bool bwd = inst.phase == "bwd";
    const double per_chunk = bwd ? 6 * C * C * dk + 4 * C * C * dv + 10 * C * dk * dv
                                 : 2 * C * C * dk + 2 * C * C * dv + 4 * C * dk * dv;
    Cost c;
    c.flops[std::string(precision_info(inst.precision).compute_class)] = b * h * (s / C) * per_chunk;
    c.flops["fp32"] += (bwd ? 8.0 : 4.0) * b * h * s * dk;
    // fwd reads q, k, v, g and writes o; bwd reads q, k, v, g, dO and writes dq, dk, dv, dg.
    c.compulsory_bytes = e * b * s * h * (bwd ? 6 * dk + 3 * dv : 3 * dk + 2 * dv);
    c.compulsory_write_bytes = e * b * s * h * (bwd ? 3 * dk + dv : dv);
    // The state (dk·dv fp32) and one chunk stay in the inner levels when they fit; otherwise the
    // state is read and written once per chunk (bwd: the state forward, its gradient backward).
    // The backward walks the sequence twice (states forward, state gradients backward): its
    // second pass re-reads q, k, v, g, dO unless one head's inputs fit the inner level.
    const double state_bytes = dk * dv * 4.0, passes = bwd ? 2.0 : 1.0;
    const double head_inputs_bytes = e * s * (3 * dk + 2 * dv);
    c.bytes = detail::level_traffic(levels, [&](double inner) {
      const double chunk_ws = passes * state_bytes + C * (3 * dk + 2 * dv) * 4.0 * passes + C * C * 4.0;
      double bytes = c.compulsory_bytes;
      if (!(inner > 0 && chunk_ws <= inner)) bytes += passes * b * h * (s / C) * 2.0 * state_bytes;
      if (bwd && !(inner > 0 && head_inputs_bytes <= inner)) bytes += b * h * head_inputs_bytes;
      return bytes;
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
    if (inst.phase == "bwd") {
      p.inputs.push_back(detail::random_tensor("dO", {b, s, h, dv}, rng));
      p.outputs.push_back(detail::empty_tensor("dq", {b, s, h, dk}));
      p.outputs.push_back(detail::empty_tensor("dk", {b, s, h, dk}));
      p.outputs.push_back(detail::empty_tensor("dv", {b, s, h, dv}));
      p.outputs.push_back(detail::empty_tensor("dg", {b, s, h, dk}));
    } else {
      p.outputs.push_back(detail::empty_tensor("o", {b, s, h, dv}));
    }
    return p;
  }

  // The recurrent form in FP64: the definition the chunked kernels must reproduce.
  void reference(const OpInstance& inst, Problem& p) const override {
    const RecurrentShape r{shape_value(inst, "seq"), shape_value(inst, "heads"),
                           shape_value(inst, "head_dim_k"), shape_value(inst, "head_dim_v")};
    for (std::int64_t b = 0; b < shape_value(inst, "batch"); ++b)
      for (std::int64_t h = 0; h < r.H; ++h) {
        if (inst.phase == "bwd")
          reference_backward(r, b, h, p);
        else
          reference_forward(r, b, h, p);
      }
  }

 private:
  struct RecurrentShape {
    std::int64_t s, H, dk, dv;
    std::size_t kidx(std::int64_t b, std::int64_t t, std::int64_t h) const {
      return std::size_t(((b * s + t) * H + h) * dk);
    }
    std::size_t vidx(std::int64_t b, std::int64_t t, std::int64_t h) const {
      return std::size_t(((b * s + t) * H + h) * dv);
    }
  };

  // S ← diag(e^{g_t})·S + k_tᵀ v_t for one token.
  static void advance_state(const RecurrentShape& r, const Problem& p, std::size_t kq, std::size_t kv,
                            double* S) {
    const auto &k = p.inputs[1].data, &v = p.inputs[2].data, &g = p.inputs[3].data;
    for (std::int64_t i = 0; i < r.dk; ++i) {
      const double alpha = std::exp(g[kq + std::size_t(i)]);
      for (std::int64_t j = 0; j < r.dv; ++j)
        S[i * r.dv + j] = alpha * S[i * r.dv + j] + k[kq + std::size_t(i)] * v[kv + std::size_t(j)];
    }
  }

  static void reference_forward(const RecurrentShape& r, std::int64_t b, std::int64_t h, Problem& p) {
    const auto& q = p.inputs[0].data;
    auto& o = p.outputs[0].data;
    std::vector<double> S(std::size_t(r.dk * r.dv), 0.0);
    for (std::int64_t t = 0; t < r.s; ++t) {
      const auto kq = r.kidx(b, t, h), kv = r.vidx(b, t, h);
      advance_state(r, p, kq, kv, S.data());
      for (std::int64_t j = 0; j < r.dv; ++j) {
        double acc = 0;
        for (std::int64_t i = 0; i < r.dk; ++i) acc += q[kq + std::size_t(i)] * S[std::size_t(i * r.dv + j)];
        o[kv + std::size_t(j)] = acc;
      }
    }
  }

  // Reverse mode through the recurrence (see the top of the file): every S_t kept, dS carried back.
  static void reference_backward(const RecurrentShape& r, std::int64_t b, std::int64_t h, Problem& p) {
    const auto &q = p.inputs[0].data, &k = p.inputs[1].data, &v = p.inputs[2].data, &g = p.inputs[3].data,
               &dO = p.inputs[4].data;
    auto &dq = p.outputs[0].data, &dk = p.outputs[1].data, &dv = p.outputs[2].data, &dg = p.outputs[3].data;
    const auto n = std::size_t(r.dk * r.dv);
    std::vector<double> states(n * std::size_t(r.s + 1), 0.0),
        dS(n, 0.0);  // states[t+1] = S_t, states[0] = 0
    for (std::int64_t t = 0; t < r.s; ++t) {
      std::copy_n(&states[n * std::size_t(t)], n, &states[n * std::size_t(t + 1)]);
      advance_state(r, p, r.kidx(b, t, h), r.vidx(b, t, h), &states[n * std::size_t(t + 1)]);
    }
    for (std::int64_t t = r.s - 1; t >= 0; --t) {
      const auto kq = r.kidx(b, t, h), kv = r.vidx(b, t, h);
      const double *S = &states[n * std::size_t(t + 1)], *S_prev = &states[n * std::size_t(t)];
      for (std::int64_t i = 0; i < r.dk; ++i) {  // dS_t = q_tᵀ do_t + diag(α_{t+1}) dS_{t+1}
        const double alpha_next = t + 1 < r.s ? std::exp(g[r.kidx(b, t + 1, h) + std::size_t(i)]) : 0.0;
        for (std::int64_t j = 0; j < r.dv; ++j)
          dS[std::size_t(i * r.dv + j)] =
              q[kq + std::size_t(i)] * dO[kv + std::size_t(j)] + alpha_next * dS[std::size_t(i * r.dv + j)];
      }
      for (std::int64_t i = 0; i < r.dk; ++i) {
        double q_grad = 0, k_grad = 0, alpha_grad = 0;
        for (std::int64_t j = 0; j < r.dv; ++j) {
          const auto ij = std::size_t(i * r.dv + j);
          q_grad += dO[kv + std::size_t(j)] * S[ij];
          k_grad += dS[ij] * v[kv + std::size_t(j)];
          alpha_grad += dS[ij] * S_prev[ij];
        }
        dq[kq + std::size_t(i)] = q_grad;
        dk[kq + std::size_t(i)] = k_grad;
        dg[kq + std::size_t(i)] = std::exp(g[kq + std::size_t(i)]) * alpha_grad;
      }
      for (std::int64_t j = 0; j < r.dv; ++j) {
        double acc = 0;
        for (std::int64_t i = 0; i < r.dk; ++i) acc += k[kq + std::size_t(i)] * dS[std::size_t(i * r.dv + j)];
        dv[kv + std::size_t(j)] = acc;
      }
    }
  }
};

RAFTER_REGISTER_OPERATOR(GlaChunkedOp);

}  // namespace
}  // namespace rafter::workloads
