// The unfused pieces of attention, each an operator of its own (as eager frameworks run them):
//   attention_qk       S = Q·Kᵀ            FLOPs 2·b·h·s·kv·d    writes S [b, h, s, kv]
//   attention_softmax  P = softmax(S/√d + causal mask)  FLOPs 5 per visible score (fp32); reads
//                      the visible scores, writes all of them
//   attention_pv       O = P·V             FLOPs 2·b·h·s·kv·d
// Every score is computed (no skipping of masked blocks), as a plain batched GEMM does.
#include <algorithm>
#include <cmath>

#include "attention_math.hpp"
#include "op_common.hpp"

namespace rafter::workloads {
namespace {

struct Dims {
  std::int64_t b, s, kv, h, hkv, d;
  bool causal;
};
Dims dims_of(const OpInstance& inst) {
  return {shape_value(inst, "batch"),    shape_value(inst, "seq"),      shape_value(inst, "kv_seq"),
          shape_value(inst, "heads"),    shape_value(inst, "kv_heads", shape_value(inst, "heads")),
          shape_value(inst, "head_dim"), shape_value(inst, "causal") != 0};
}
std::int64_t sidx(const Dims& a, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  return ((b * a.h + h) * a.s + i) * a.kv + j;
}
std::int64_t qidx(const Dims& a, std::int64_t b, std::int64_t i, std::int64_t h) { return ((b * a.s + i) * a.h + h) * a.d; }
std::int64_t kidx(const Dims& a, std::int64_t b, std::int64_t j, std::int64_t h) {
  return ((b * a.kv + j) * a.hkv + h / (a.h / a.hkv)) * a.d;
}

std::vector<ParamSpec> base_params(bool with_kv_heads, bool with_causal) {
  std::vector<ParamSpec> p{{"batch", 1, "sequences"},       {"seq", 2048, "query tokens"},
                           {"kv_seq", 2048, "key tokens"},  {"heads", 32, "query heads"},
                           {"head_dim", 128, "head dimension"}};
  if (with_kv_heads) p.push_back({"kv_heads", 32, "key/value heads"});
  if (with_causal) p.push_back({"causal", 1, "causal mask", true});
  return p;
}

OpInstance shrink(const OpInstance& full) {
  OpInstance s = full;
  s.shape["batch"] = detail::check_dim(full.shape.at("batch"), 2);
  s.shape["seq"] = detail::check_dim(full.shape.at("seq"), 40);
  // Fewer keys than queries stays so (under a causal mask the first seq - kv_seq queries see no key).
  const std::int64_t kv = full.shape.at("kv_seq");
  s.shape["kv_seq"] = kv >= full.shape.at("seq") ? std::max(s.shape["seq"], detail::check_dim(kv, 48))
                                                 : std::min(kv, s.shape["seq"] - 1);
  if (full.shape.count("kv_heads")) {
    detail::check_gqa_heads(s, full, 2);
  } else {
    s.shape["heads"] = detail::check_dim(full.shape.at("heads"), 3);
  }
  return s;
}

struct BatchedGemmDims {
  double m, n, k, batch;
};
// A batched GEMM of `batch` products [m × k]·[k × n]; the operands hold a, b and c elements in all.
Cost batched_gemm_cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels, BatchedGemmDims g,
                       double a_elements, double b_elements, double c_elements) {
  const double e = detail::element_bytes(inst);
  const detail::GemmTrafficInput traffic =
      detail::with_device_tile({g.m, g.n, g.k, g.batch, e, e, e, false}, levels);
  Cost c;
  c.flops[std::string(precision_info(inst.precision).compute_class)] = 2.0 * g.batch * g.m * g.n * g.k;
  c.compulsory_bytes = e * (a_elements + b_elements + c_elements);
  c.compulsory_write_bytes = e * c_elements;
  c.bytes = detail::level_traffic(levels, [&](double inner) {
    return std::max(c.compulsory_bytes, detail::gemm_traffic_bytes(traffic, inner));
  });
  return c;
}

class AttentionQkOp : public detail::CatalogueOp {
 public:
  AttentionQkOp()
      : CatalogueOp("attention_qk", "unfused attention scores S = Q·Kᵀ", base_params(true, false),
                    {"bf16", "fp16", "fp32"}) {}
  void validate(const OpInstance& inst) const override {
    OperatorDef::validate(inst);
    detail::check_head_groups(inst);  // K/V rows are indexed by head / (heads / kv_heads)
  }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const auto a = dims_of(inst);  // [s × d]·[d × kv] per (batch, head)
    return batched_gemm_cost(inst, levels, {double(a.s), double(a.kv), double(a.d), double(a.b) * double(a.h)},
                             double(a.b) * a.s * a.h * a.d, double(a.b) * a.kv * a.hkv * a.d,
                             double(a.b) * a.h * a.s * a.kv);
  }
  OpInstance check_instance(const OpInstance& full) const override { return shrink(full); }
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    const auto a = dims_of(inst);
    std::mt19937_64 rng(seed);
    Problem p;
    p.inputs.push_back(detail::random_tensor("Q", {a.b, a.s, a.h, a.d}, rng));
    p.inputs.push_back(detail::random_tensor("K", {a.b, a.kv, a.hkv, a.d}, rng));
    p.outputs.push_back(detail::empty_tensor("S", {a.b, a.h, a.s, a.kv}));
    return p;
  }
  void reference(const OpInstance& inst, Problem& p) const override {
    const auto a = dims_of(inst);
    const auto &Q = p.inputs[0].data, &K = p.inputs[1].data;
    for (std::int64_t b = 0; b < a.b; ++b)
      for (std::int64_t h = 0; h < a.h; ++h)
        for (std::int64_t i = 0; i < a.s; ++i)
          for (std::int64_t j = 0; j < a.kv; ++j) {
            double acc = 0;
            for (std::int64_t x = 0; x < a.d; ++x) acc += Q[qidx(a, b, i, h) + x] * K[kidx(a, b, j, h) + x];
            p.outputs[0].data[sidx(a, b, h, i, j)] = acc;
          }
  }
};

class AttentionSoftmaxOp : public detail::CatalogueOp {
 public:
  AttentionSoftmaxOp()
      : CatalogueOp("attention_softmax", "unfused scale + causal mask + softmax over attention scores",
                    base_params(false, true), {"bf16", "fp16", "fp32"}) {}
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const auto a = dims_of(inst);
    const double e = detail::element_bytes(inst), n = double(a.b) * a.h * a.s * a.kv;
    // Under a causal mask a row reads and exponentiates only its visible scores (query i sees keys up
    // to i + kv - s); every score is written (masked ones as zeros).
    const double s = double(a.s), kv = double(a.kv);
    const double visible = double(a.b) * a.h * (a.causal ? detail::causal_pairs(s, kv) : s * kv);
    Cost c;
    c.flops["fp32"] = 5.0 * visible;
    c.compulsory_bytes = visible * e + n * e;
    c.compulsory_write_bytes = n * e;
    // Three passes over a row (max, exp-sum, normalize): the re-reads hit the innermost level.
    c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes, 2.0 * n * e);
    return c;
  }
  OpInstance check_instance(const OpInstance& full) const override { return shrink(full); }
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    const auto a = dims_of(inst);
    std::mt19937_64 rng(seed);
    Problem p;
    p.inputs.push_back(detail::random_tensor("S", {a.b, a.h, a.s, a.kv}, rng, -8.0, 8.0));
    p.outputs.push_back(detail::empty_tensor("P", {a.b, a.h, a.s, a.kv}));
    return p;
  }
  void reference(const OpInstance& inst, Problem& p) const override {
    const auto a = dims_of(inst);
    const double scale = 1.0 / std::sqrt(double(a.d));
    for (std::int64_t r = 0; r < a.b * a.h * a.s; ++r) {
      const std::int64_t i = r % a.s;
      const std::int64_t visible = a.causal ? std::min(a.kv, i + (a.kv - a.s) + 1) : a.kv;
      const double* S = &p.inputs[0].data[r * a.kv];
      double* P = &p.outputs[0].data[r * a.kv];
      double mx = -INFINITY, sum = 0;
      for (std::int64_t j = 0; j < visible; ++j) mx = std::max(mx, S[j] * scale);
      for (std::int64_t j = 0; j < visible; ++j) sum += std::exp(S[j] * scale - mx);
      for (std::int64_t j = 0; j < a.kv; ++j) P[j] = j < visible ? std::exp(S[j] * scale - mx) / sum : 0.0;
    }
  }
};

class AttentionPvOp : public detail::CatalogueOp {
 public:
  AttentionPvOp()
      : CatalogueOp("attention_pv", "unfused attention output O = P·V", base_params(true, false),
                    {"bf16", "fp16", "fp32"}) {}
  void validate(const OpInstance& inst) const override {
    OperatorDef::validate(inst);
    detail::check_head_groups(inst);  // K/V rows are indexed by head / (heads / kv_heads)
  }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const auto a = dims_of(inst);  // [s × kv]·[kv × d] per (batch, head)
    return batched_gemm_cost(inst, levels, {double(a.s), double(a.d), double(a.kv), double(a.b) * double(a.h)},
                             double(a.b) * a.h * a.s * a.kv, double(a.b) * a.kv * a.hkv * a.d,
                             double(a.b) * a.s * a.h * a.d);
  }
  OpInstance check_instance(const OpInstance& full) const override { return shrink(full); }
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    const auto a = dims_of(inst);
    std::mt19937_64 rng(seed);
    Problem p;
    p.inputs.push_back(detail::random_tensor("P", {a.b, a.h, a.s, a.kv}, rng, 0.0, 1.0));
    p.inputs.push_back(detail::random_tensor("V", {a.b, a.kv, a.hkv, a.d}, rng));
    p.outputs.push_back(detail::empty_tensor("O", {a.b, a.s, a.h, a.d}));
    return p;
  }
  void reference(const OpInstance& inst, Problem& p) const override {
    const auto a = dims_of(inst);
    const auto &P = p.inputs[0].data, &V = p.inputs[1].data;
    for (std::int64_t b = 0; b < a.b; ++b)
      for (std::int64_t h = 0; h < a.h; ++h)
        for (std::int64_t i = 0; i < a.s; ++i)
          for (std::int64_t x = 0; x < a.d; ++x) {
            double acc = 0;
            for (std::int64_t j = 0; j < a.kv; ++j) acc += P[sidx(a, b, h, i, j)] * V[kidx(a, b, j, h) + x];
            p.outputs[0].data[qidx(a, b, i, h) + x] = acc;
          }
  }
};

RAFTER_REGISTER_OPERATOR(AttentionQkOp);
RAFTER_REGISTER_OPERATOR(AttentionSoftmaxOp);
RAFTER_REGISTER_OPERATOR(AttentionPvOp);

}  // namespace
}  // namespace rafter::workloads
