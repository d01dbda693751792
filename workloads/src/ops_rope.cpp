// Rotary position embedding (Llama / HF "rotate half": pairs (i, i + d/2)), θ_i = 10000^(−2i/d),
// position of token t = t mod seq. y_i = x_i·cos − x_{i+d/2}·sin, y_{i+d/2} = x_{i+d/2}·cos + x_i·sin.
// bwd rotates by −θ (same cost). FLOPs 3·t·heads·d (fp32); bytes: x read, y written, and one
// cos/sin row (d fp32) per position, shared by its heads and by the batch's sequences (4 sequences
// of 4096 tokens read the 4096 rows once; counting a row per token put the H100's 16384-token RoPE,
// which computes its angles, at 102.5 % of the copy roof).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "op_common.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::workloads {
namespace {

class RopeOp : public detail::CatalogueOp {
 public:
  RopeOp()
      : CatalogueOp("rope", "rotary position embedding on q or k [tokens, heads, head_dim]",
                    {{"tokens", 4096, "rows (batch × seq)"}, {"heads", 32, "heads"},
                     {"head_dim", 128, "head dimension (even)"}, {"seq", 4096, "sequence length (positions)"}},
                    detail::activation_precisions(), {"fwd", "bwd"}) {}

  // Rotate-half pairs value i with i + d/2: an odd head dim has no such pairing (HF's rotate_half
  // fails on it too).
  void validate(const OpInstance& inst) const override {
    OperatorDef::validate(inst);
    if (shape_value(inst, "head_dim") % 2 != 0)
      throw InputError(
          fmt::format("operator 'rope': head_dim must be even (rotate-half pairs i with i + d/2), got {}",
                      shape_value(inst, "head_dim")));
  }
  std::string slice_axis(const OpInstance&) const override { return "tokens"; }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const double t = detail::dimension(inst, "tokens"), h = detail::dimension(inst, "heads"),
                 d = detail::dimension(inst, "head_dim"),
                 positions = std::min(t, detail::dimension(inst, "seq"));
    Cost c;
    c.flops["fp32"] = 3 * t * h * d;
    c.compulsory_bytes = 2 * t * h * d * detail::element_bytes(inst) + positions * d * 4;
    c.compulsory_write_bytes = t * h * d * detail::element_bytes(inst);
    c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes);
    return c;
  }
  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    // Up to 8192 tokens: the GPU kernel gives a thread all heads only from 64K threads (8192 tokens
    // x 8 vectors at head_dim 128) and splits heads across threads below that; the check covers both.
    s.shape["tokens"] = detail::check_dim(full.shape.at("tokens"), 8192);
    s.shape["heads"] = detail::check_dim(full.shape.at("heads"), 3);
    s.shape["seq"] = detail::check_dim(full.shape.at("seq"), 7);
    return s;
  }
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    const auto t = shape_value(inst, "tokens"), h = shape_value(inst, "heads"), d = shape_value(inst, "head_dim");
    Problem p;
    p.inputs.push_back(detail::random_tensor("x", {t, h, d}, rng));
    p.outputs.push_back(detail::empty_tensor("y", {t, h, d}));
    return p;
  }
  void reference(const OpInstance& inst, Problem& p) const override {
    const auto t = shape_value(inst, "tokens"), h = shape_value(inst, "heads"), d = shape_value(inst, "head_dim"),
               seq = shape_value(inst, "seq");
    const double sign = inst.phase == "bwd" ? -1.0 : 1.0;
    const auto half = d / 2;
    for (std::int64_t r = 0; r < t; ++r)
      for (std::int64_t hh = 0; hh < h; ++hh)
        for (std::int64_t i = 0; i < half; ++i) {
          const double theta = double(r % seq) * std::pow(10000.0, -2.0 * double(i) / double(d));
          const double cs = std::cos(theta), sn = sign * std::sin(theta);
          const auto base = (r * h + hh) * d;
          const double a = p.inputs[0].data[base + i], b = p.inputs[0].data[base + half + i];
          p.outputs[0].data[base + i] = a * cs - b * sn;
          p.outputs[0].data[base + half + i] = b * cs + a * sn;
        }
  }
};

RAFTER_REGISTER_OPERATOR(RopeOp);

}  // namespace
}  // namespace rafter::workloads
