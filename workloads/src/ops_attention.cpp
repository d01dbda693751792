// Fused attention: prefill (causal or not, GQA, any head dim), decode (one query token against a
// KV cache) and the backward pass of prefill (flash form: recomputes the scores).
// FLOPs: with P the unmasked (query, key) pairs summed over batch and heads,
//   forward  4·P·d matmul FLOPs (QKᵀ and PV) in the precision's class + 5·P fp32 (scale, max,
//            subtract, exp, sum);
//   backward 10·P·d (recomputed QKᵀ, dO·Vᵀ, Pᵀ·dO, dS·K, dSᵀ·Q) + 8·P fp32.
// Traffic: flash model — a block of query rows and its accumulators stays in the inner level
// while K and V stream past; K/V are re-read once per query block unless one KV head fits.
#include <algorithm>
#include <fmt/format.h>

#include "attention_math.hpp"
#include "op_common.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::workloads {
namespace {

using detail::AttentionDims;

std::vector<std::string> attention_precisions() { return {"bf16", "fp16", "fp32", "fp8_e4m3"}; }

AttentionDims prefill_dims(const OpInstance& inst) {
  return {shape_value(inst, "batch"), shape_value(inst, "seq"),      shape_value(inst, "seq"),
          shape_value(inst, "heads"), shape_value(inst, "kv_heads"), shape_value(inst, "head_dim"),
          shape_value(inst, "causal") != 0};
}

AttentionDims decode_dims(const OpInstance& inst) {
  return {shape_value(inst, "batch"), 1, shape_value(inst, "kv_len"), shape_value(inst, "heads"),
          shape_value(inst, "kv_heads"), shape_value(inst, "head_dim"), true};
}

// Flash-attention traffic: query blocks of `rows` rows (Q tile + fp32 accumulator in the inner
// level); K/V re-read per block, halved for causal masks, unless one KV head fits inside. At a
// GPU's shared memory (the innermost level) a block is a warpgroup's 64 query rows, the M of the
// wgmma that reads the K/V tile from shared memory, as with_device_tile gives GEMMs (16-row
// blocks there put cuDNN's forward at 104 % of its shared floor on the H100); elsewhere 16 rows.
std::vector<LevelBytes> flash_traffic(const std::vector<MemoryLevel>& levels, const AttentionDims& a, double e,
                                      double passes_qo, double compulsory) {
  const double qo = passes_qo * a.batch * a.q_len * a.heads * a.d * e;
  const double kv_once = 2.0 * a.batch * a.kv_len * a.kv_heads * a.d * e;
  const double innermost_rows = detail::innermost_is_shared(levels) ? 64.0 : 16.0;
  return detail::level_traffic(levels, [&](double inner) {
    const double kv_head_bytes = 2.0 * a.kv_len * a.d * e;
    if (inner > 0 && kv_head_bytes <= inner) return compulsory;
    // At least a 16-row tile, at most the whole sequence (a sequence shorter than one tile is one block).
    const double rows = std::min(inner > 0 ? std::max(inner / (a.d * (e + 4.0) * 2.0), 16.0) : innermost_rows,
                                 double(a.q_len));
    const double blocks = std::ceil(a.q_len / rows) * (a.causal && a.q_len > rows ? 0.5 : 1.0);
    const double kv = kv_once * (a.heads / double(a.kv_heads)) * std::max(1.0, blocks);
    return std::max(compulsory, qo + kv);
  });
}

std::vector<ParamSpec> prefill_params() {
  return {{"batch", 1, "sequences"},        {"seq", 2048, "tokens per sequence"},
          {"heads", 32, "query heads"},     {"kv_heads", 32, "key/value heads (GQA when fewer)"},
          {"head_dim", 128, "head dimension"}, {"causal", 1, "causal mask", true}};
}

class AttentionPrefillOp : public detail::CatalogueOp {
 public:
  AttentionPrefillOp()
      : CatalogueOp("attention_prefill", "fused softmax(QKᵀ/√d + mask)·V over a whole sequence (flash form)",
                    prefill_params(), attention_precisions()) {}
  void validate(const OpInstance& inst) const override {
    OperatorDef::validate(inst);
    detail::check_head_groups(inst);
  }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const auto a = prefill_dims(inst);
    const double e = detail::element_bytes(inst), P = double(a.batch) * double(a.heads) * a.pairs_per_head();
    Cost c;
    c.flops[std::string(precision_info(inst.precision).compute_class)] = 4.0 * P * a.d;
    c.flops["fp32"] += 5.0 * P;
    c.compulsory_bytes = e * a.d * (2.0 * a.batch * a.q_len * a.heads + 2.0 * a.batch * a.kv_len * a.kv_heads);
    c.compulsory_write_bytes = e * a.d * a.batch * a.q_len * a.heads;  // O
    c.bytes = flash_traffic(levels, a, e, 2.0, c.compulsory_bytes);
    return c;
  }
  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    s.shape["batch"] = detail::check_dim(full.shape.at("batch"), 2);
    s.shape["seq"] = detail::check_dim(full.shape.at("seq"), 48);
    detail::check_gqa_heads(s, full, 2);
    return s;
  }
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    const auto a = prefill_dims(inst);
    std::mt19937_64 rng(seed);
    Problem p;
    p.inputs.push_back(detail::random_tensor("Q", {a.batch, a.q_len, a.heads, a.d}, rng));
    p.inputs.push_back(detail::random_tensor("K", {a.batch, a.kv_len, a.kv_heads, a.d}, rng));
    p.inputs.push_back(detail::random_tensor("V", {a.batch, a.kv_len, a.kv_heads, a.d}, rng));
    p.outputs.push_back(detail::empty_tensor("O", {a.batch, a.q_len, a.heads, a.d}));
    return p;
  }
  void reference(const OpInstance& inst, Problem& p) const override {
    detail::attention_forward_reference(prefill_dims(inst), p.inputs[0].data, p.inputs[1].data,
                                        p.inputs[2].data, p.outputs[0].data);
  }
};

class AttentionDecodeOp : public detail::CatalogueOp {
 public:
  AttentionDecodeOp()
      : CatalogueOp("attention_decode",
                    "one new query token per sequence against a KV cache of kv_len tokens",
                    {{"batch", 1, "sequences"},
                     {"kv_len", 2048, "cached tokens (including the new one)"},
                     {"heads", 32, "query heads"},
                     {"kv_heads", 32, "key/value heads"},
                     {"head_dim", 128, "head dimension"},
                     {"splits", 0, "KV chunks per sequence for a split-KV kernel (absent: its own choice)",
                      false, true}},
                    attention_precisions()) {}
  void validate(const OpInstance& inst) const override {
    OperatorDef::validate(inst);
    detail::check_head_groups(inst);
    const std::int64_t splits = shape_value(inst, "splits", 0);
    if (splits > shape_value(inst, "kv_len"))
      throw InputError(fmt::format("operator 'attention_decode': splits = {} is more than kv_len = {}",
                                   splits, shape_value(inst, "kv_len")));
  }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const auto a = decode_dims(inst);
    const double e = detail::element_bytes(inst), P = double(a.batch) * a.heads * a.kv_len;
    Cost c;
    c.flops[std::string(precision_info(inst.precision).compute_class)] = 4.0 * P * a.d;
    c.flops["fp32"] += 5.0 * P;
    c.compulsory_bytes = e * a.d * (2.0 * a.batch * a.heads + 2.0 * a.batch * a.kv_len * a.kv_heads);
    c.compulsory_write_bytes = e * a.d * a.batch * a.heads;  // O
    // On a CPU each query head of a GQA group reads its KV head from the innermost level (L1); the
    // group shares one pass over the cache beyond it. On a GPU (shared memory innermost) a group is
    // the rows of one tensor-core tile, as a prefill block of 64 query rows is (flash_traffic): the
    // KV tile goes through shared memory once for the whole group (cuDNN's decode kernel; rafter's
    // split-KV kernel on mma.sync for groups of 8). Counted 8 times there, Llama-2 70B's decode
    // attention (batch 16, KV 4096, cuDNN, H200) read 100.2 % of a shared-memory floor it never
    // meets, where its HBM traffic, 269 MB in 65 us, is what binds it.
    const bool gpu = detail::innermost_is_shared(levels);
    const double group = double(a.heads) / double(a.kv_heads);
    const double inner_extra =
        gpu && group <= 64 ? 0.0 : 2.0 * e * a.d * a.batch * a.kv_len * (a.heads - a.kv_heads);
    c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes, inner_extra);
    return c;
  }
  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    s.shape["batch"] = detail::check_dim(full.shape.at("batch"), 2);
    s.shape["kv_len"] = detail::check_dim(full.shape.at("kv_len"), 200);
    if (s.shape.count("splits")) s.shape["splits"] = std::min(s.shape["splits"], s.shape["kv_len"]);
    detail::check_gqa_heads(s, full, 4);
    return s;
  }
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    const auto a = decode_dims(inst);
    std::mt19937_64 rng(seed);
    Problem p;
    p.inputs.push_back(detail::random_tensor("Q", {a.batch, 1, a.heads, a.d}, rng));
    p.inputs.push_back(detail::random_tensor("K", {a.batch, a.kv_len, a.kv_heads, a.d}, rng));
    p.inputs.push_back(detail::random_tensor("V", {a.batch, a.kv_len, a.kv_heads, a.d}, rng));
    p.outputs.push_back(detail::empty_tensor("O", {a.batch, 1, a.heads, a.d}));
    return p;
  }
  void reference(const OpInstance& inst, Problem& p) const override {
    detail::attention_forward_reference(decode_dims(inst), p.inputs[0].data, p.inputs[1].data,
                                        p.inputs[2].data, p.outputs[0].data);
  }
};

class AttentionBackwardOp : public detail::CatalogueOp {
 public:
  AttentionBackwardOp()
      : CatalogueOp("attention_backward", "backward of prefill attention: dQ, dK, dV from dO (flash form)",
                    prefill_params(), attention_precisions(), {"bwd"}) {}
  void validate(const OpInstance& inst) const override {
    OperatorDef::validate(inst);
    detail::check_head_groups(inst);
  }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const auto a = prefill_dims(inst);
    const double e = detail::element_bytes(inst), P = double(a.batch) * double(a.heads) * a.pairs_per_head();
    Cost c;
    c.flops[std::string(precision_info(inst.precision).compute_class)] = 10.0 * P * a.d;
    c.flops["fp32"] += 8.0 * P;
    // Reads Q, K, V, O, dO and the row statistics (fp32); writes dQ, dK, dV.
    const double q_side = double(a.batch) * a.q_len * a.heads * a.d * e;
    const double kv_side = double(a.batch) * a.kv_len * a.kv_heads * a.d * e;
    c.compulsory_bytes = 4.0 * q_side + 4.0 * kv_side + 4.0 * a.batch * a.heads * a.q_len;
    c.compulsory_write_bytes = q_side + 2.0 * kv_side;  // dQ, dK, dV
    c.bytes = flash_traffic(levels, a, e, 4.0, c.compulsory_bytes);
    return c;
  }
  OpInstance check_instance(const OpInstance& full) const override {
    return AttentionPrefillOp().check_instance(full);
  }
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    Problem p = AttentionPrefillOp().make_problem(inst, seed);
    std::mt19937_64 rng(seed + 1);
    const auto a = prefill_dims(inst);
    p.inputs.push_back(detail::random_tensor("dO", {a.batch, a.q_len, a.heads, a.d}, rng));
    p.outputs.clear();
    p.outputs.push_back(detail::empty_tensor("dQ", {a.batch, a.q_len, a.heads, a.d}));
    p.outputs.push_back(detail::empty_tensor("dK", {a.batch, a.kv_len, a.kv_heads, a.d}));
    p.outputs.push_back(detail::empty_tensor("dV", {a.batch, a.kv_len, a.kv_heads, a.d}));
    return p;
  }
  void reference(const OpInstance& inst, Problem& p) const override {
    const auto a = prefill_dims(inst);
    const auto &Q = p.inputs[0].data, &K = p.inputs[1].data, &V = p.inputs[2].data, &dO = p.inputs[3].data;
    auto &dQ = p.outputs[0].data, &dK = p.outputs[1].data, &dV = p.outputs[2].data;
    for (std::int64_t b = 0; b < a.batch; ++b)
      for (std::int64_t i = 0; i < a.q_len; ++i)
        for (std::int64_t h = 0; h < a.heads; ++h) {
          const auto prob = detail::attention_probs(a, Q, K, b, i, h);
          const auto qi = a.q_index(b, i, h);
          std::vector<double> dp(prob.size());
          double D = 0;
          for (std::size_t j = 0; j < prob.size(); ++j) {
            const auto kj = a.kv_index(b, std::int64_t(j), h);
            for (std::int64_t x = 0; x < a.d; ++x) dp[j] += dO[qi + x] * V[kj + x];
            D += prob[j] * dp[j];
          }
          for (std::size_t j = 0; j < prob.size(); ++j) {
            const auto kj = a.kv_index(b, std::int64_t(j), h);
            const double ds = prob[j] * (dp[j] - D) * a.scale();
            for (std::int64_t x = 0; x < a.d; ++x) {
              dQ[qi + x] += ds * K[kj + x];
              dK[kj + x] += ds * Q[qi + x];
              dV[kj + x] += prob[j] * dO[qi + x];
            }
          }
        }
  }
};

RAFTER_REGISTER_OPERATOR(AttentionPrefillOp);
RAFTER_REGISTER_OPERATOR(AttentionDecodeOp);
RAFTER_REGISTER_OPERATOR(AttentionBackwardOp);

}  // namespace
}  // namespace rafter::workloads
