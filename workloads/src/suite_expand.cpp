// Expansion of a model suite into the operators of one step (see suite.hpp). Megatron-style TP:
// QKV / gate_up column-parallel, o_proj / down row-parallel, one all-reduce of [tokens, hidden]
// after each row-parallel GEMM in the forward pass and one after each column-parallel input
// gradient in the backward pass; the embedding is vocab-parallel (one all-reduce of [tokens,
// hidden] in the forward pass), and so are the head and the loss (three small fp32 all-reduces of
// [tokens] for max, sum and target logit). ZeRO over `dp` ranks: stage 0 all-reduces
// the gradients; stages 1-2 reduce-scatter them and all-gather the updated BF16 weights; stage 3
// all-gathers each layer's weights before its forward and its backward, and reduce-scatters its
// gradients. Prefill computes logits for the last token of each sequence only.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string_view>

#include "rafter/collector/error.hpp"
#include "rafter/workloads/suite.hpp"

namespace rafter::workloads {
namespace {

struct Emitter {
  std::vector<OpInstance>& out;
  void operator()(std::string op, std::string label, std::string phase, Shape shape, std::string precision,
                  double count) const {
    if (count <= 0) return;
    out.push_back({std::move(op), std::move(label), std::move(phase), std::move(shape), std::move(precision), count});
  }
};

struct Ctx {
  const SuiteConfig& cfg;
  const ModelConfig& m;
  const Recipe& r;
  Emitter emit;
  std::int64_t tokens;  // rows of every per-token operator
  bool train;
};

// A shape value made of model sizes and the step's batch and seq. The product is checked in double
// first: an absurd model (heads × head_dim beyond 2^63) must be an InputError, not a wrapped int64.
std::int64_t size_of(std::initializer_list<std::int64_t> factors, std::string_view what) {
  double p = 1;
  for (const auto f : factors) p *= double(f);
  if (!(p <= double(kMaxShapeValue)))
    throw InputError(fmt::format("{} = {:.4g} is too large for a shape (at most 2^48)", what, p));
  std::int64_t exact = 1;
  for (const auto f : factors) exact *= f;  // cannot overflow: within 2^48 up to double's rounding
  return exact;
}

// A count of elements computed in double (parameters): checked before it becomes a shape value.
std::int64_t size_of(double v, std::string_view what) {
  if (!(v >= 0 && v <= double(kMaxShapeValue)))
    throw InputError(fmt::format("{} = {:.4g} is too large for a shape (at most 2^48)", what, v));
  return static_cast<std::int64_t>(v);
}

bool low_precision(const std::string& p) { return p != "bf16" && p != "fp32" && p != "fp16" && p != "fp64"; }

// transpose: the column-wise copy too, from the same read (the weight-gradient GEMM's operand; rht
// then transforms that copy only). Where the shape is not whole blocks along rows (e.g. an odd token
// count), the two copies are two operators as before: `label` and `label`T over the transpose.
void quantize_op(const Ctx& c, const std::string& label, const std::string& precision, std::int64_t rows,
                 std::int64_t cols, bool block2d, bool rht, bool sr, bool transpose, double count) {
  const auto emit = [&](const std::string& l, std::int64_t r, std::int64_t k, bool h, bool t) {
    c.emit("quantize", l, "fwd",
           {{"rows", r},
            {"cols", k},
            {"block2d", block2d ? 1 : 0},
            {"rht", h ? 1 : 0},
            {"sr", sr ? 1 : 0},
            {"transpose", t ? 1 : 0}},
           precision, count);
  };
  const std::int64_t along_rows = precision == "mxfp4" ? 32 : 16;
  if (!transpose || (rows % along_rows == 0 && cols % 16 == 0))
    return emit(label, rows, cols, rht, transpose);
  emit(label, rows, cols, false, false);
  emit(label + "T", cols, rows, rht, false);
}

// One linear layer Y[T, n] = X[T, k] · W[n, k]ᵀ with its quantization and patch ops.
void linear(const Ctx& c, const std::string& label, std::int64_t n, std::int64_t k, bool quantized, double count) {
  const std::int64_t T = c.tokens;
  const std::string fwd = quantized ? c.r.linear_fwd : "bf16";
  const bool q = quantized && c.r.quantize_ops && low_precision(fwd);
  const bool sr = c.r.stochastic_rounding_on_grad, rht = c.r.rht_on_wgrad;
  // Training quantizes X, W and dY once each, row-wise and column-wise in one pass: X and dY
  // column-wise (with the RHT) feed the weight-gradient GEMM, W column-wise the input-gradient GEMM.
  if (q) {
    quantize_op(c, label + ".quant_x", c.r.quant_activation, T, k, false, c.train && rht, false, c.train,
                count);
    if (c.train)
      quantize_op(c, label + ".quant_w", c.r.quant_weight, n, k, c.r.weight_block2d, false, false, true,
                  count);
  }
  // The hot-channel patch: inside an FP4 forward GEMM as its `hot` channels (extra K on the GPU,
  // ops_gemm.cpp), else its own operator after the GEMM.
  const bool patch = q && c.r.hot_channels > 0, in_gemm = patch && (fwd == "nvfp4" || fwd == "mxfp4");
  Shape fwd_shape{{"m", T}, {"n", n}, {"k", k}, {"batch", 1}};
  if (in_gemm) fwd_shape["hot"] = std::min(c.r.hot_channels, k);
  c.emit("gemm", label, "fwd", fwd_shape, fwd, count);
  if (patch && !in_gemm)
    c.emit("hot_channel_patch", label + ".hot_patch", "fwd", {{"tokens", T}, {"out", n}, {"hot", c.r.hot_channels}},
           "bf16", count);
  if (!c.train) return;
  const std::string bi = quantized ? c.r.linear_bwd_input : "bf16", bw = quantized ? c.r.linear_bwd_weight : "bf16";
  if (q) quantize_op(c, label + ".quant_dy", c.r.quant_gradient, T, n, false, rht, sr, true, count);
  c.emit("gemm", label, "bwd_input", {{"m", T}, {"n", k}, {"k", n}, {"batch", 1}}, bi, count);
  c.emit("gemm", label, "bwd_weight", {{"m", n}, {"n", k}, {"k", T}, {"batch", 1}}, bw, count);
}

void tp_all_reduce(const Ctx& c, const std::string& label, std::string phase, double count) {
  if (c.cfg.tp <= 1) return;
  c.emit("all_reduce", label, std::move(phase),
         {{"elements", size_of({c.tokens, c.m.hidden}, "tokens x hidden")}, {"ranks", c.cfg.tp}, {"inter_node", c.cfg.tp > 8 ? 1 : 0}},
         c.r.elementwise, count);
}

void elementwise(const Ctx& c, const std::string& op, const std::string& label, Shape shape, double count) {
  c.emit(op, label, "fwd", shape, c.r.elementwise, count);
  if (c.train) c.emit(op, label, "bwd", shape, c.r.elementwise, count);
}

void attention_mixer(const Ctx& c, bool quantized, double count) {
  const auto& m = c.m;
  const std::int64_t t = c.cfg.tp, h = m.heads / t, kv = m.kv_heads / t, d = m.head_dim, T = c.tokens;
  linear(c, "layer.attn.qkv_proj", size_of({h + 2 * kv, d}, "qkv width"), m.hidden, quantized, count);
  const std::int64_t positions = c.cfg.phase == "decode" ? c.cfg.kv_len : c.cfg.seq;
  elementwise(c, "rope", "layer.attn.rope", {{"tokens", T}, {"heads", h + kv}, {"head_dim", d}, {"seq", positions}}, count);
  if (c.cfg.phase == "decode") {
    c.emit("attention_decode", "layer.attn.core", "fwd",
           {{"batch", c.cfg.batch}, {"kv_len", c.cfg.kv_len}, {"heads", h}, {"kv_heads", kv}, {"head_dim", d}},
           c.r.attention, count);
  } else {
    const Shape s{{"batch", c.cfg.batch}, {"seq", c.cfg.seq}, {"heads", h}, {"kv_heads", kv}, {"head_dim", d}, {"causal", 1}};
    c.emit("attention_prefill", "layer.attn.core", "fwd", s, c.r.attention, count);
    if (c.train) c.emit("attention_backward", "layer.attn.core", "bwd", s, c.r.attention, count);
  }
  linear(c, "layer.attn.o_proj", m.hidden, size_of({h, d}, "heads x head_dim"), quantized, count);
}

void gla_mixer(const Ctx& c, bool quantized, double count) {
  const auto& m = c.m;
  const std::int64_t t = c.cfg.tp, h = m.heads / t, dk = m.head_dim, dv = m.head_dim_v, T = c.tokens;
  linear(c, "layer.gla.qkvg_proj", size_of({h, 2 * dk + 2 * dv}, "qkvg width"), m.hidden, quantized, count);
  // The low-rank forget-gate projection stays in BF16 (rank 16: too thin for block scaling).
  linear(c, "layer.gla.gk_down", m.gate_low_rank, m.hidden, false, count);
  linear(c, "layer.gla.gk_up", size_of({h, dk}, "heads x head_dim"), m.gate_low_rank, false, count);
  if (c.cfg.phase == "decode") {
    // One recurrent step per sequence against its fp32 state: no KV cache, cost independent of kv_len.
    c.emit("gla_decode", "layer.gla.core", "fwd", {{"batch", c.cfg.batch}, {"heads", h}, {"head_dim_k", dk}, {"head_dim_v", dv}},
           c.r.attention, count);
  } else {
    const Shape s{{"batch", c.cfg.batch}, {"seq", c.cfg.seq}, {"heads", h},
                  {"head_dim_k", dk}, {"head_dim_v", dv}, {"chunk", m.chunk}};
    c.emit("gla_chunked", "layer.gla.core", "fwd", s, c.r.attention, count);
    if (c.train) c.emit("gla_chunked", "layer.gla.core", "bwd", s, c.r.attention, count);
  }
  const std::int64_t hdv = size_of({h, dv}, "heads x head_dim_v");
  elementwise(c, "rmsnorm", "layer.gla.head_norm", {{"tokens", size_of({T, h}, "tokens x heads")}, {"hidden", dv}}, count);
  elementwise(c, "swiglu", "layer.gla.output_gate", {{"tokens", T}, {"ffn", hdv}}, count);
  linear(c, "layer.gla.o_proj", m.hidden, hdv, quantized, count);
}

void layers(const Ctx& c, bool quantized, double count) {
  const std::int64_t T = c.tokens, H = c.m.hidden, f = c.m.ffn / c.cfg.tp;
  elementwise(c, "rmsnorm", "layer.attn_norm", {{"tokens", T}, {"hidden", H}}, count);
  if (c.m.architecture == "gla") gla_mixer(c, quantized, count);
  else attention_mixer(c, quantized, count);
  tp_all_reduce(c, "layer.attn.tp_all_reduce", "fwd", count);
  if (c.train) tp_all_reduce(c, "layer.attn.tp_all_reduce", "bwd", count);
  elementwise(c, "residual_add", "layer.attn_residual", {{"tokens", T}, {"hidden", H}}, count);
  elementwise(c, "rmsnorm", "layer.mlp_norm", {{"tokens", T}, {"hidden", H}}, count);
  linear(c, "layer.mlp.gate_up_proj", size_of({2, f}, "2 x ffn"), H, quantized, count);
  elementwise(c, "swiglu", "layer.mlp.swiglu", {{"tokens", T}, {"ffn", f}}, count);
  linear(c, "layer.mlp.down_proj", H, f, quantized, count);
  tp_all_reduce(c, "layer.mlp.tp_all_reduce", "fwd", count);
  if (c.train) tp_all_reduce(c, "layer.mlp.tp_all_reduce", "bwd", count);
  elementwise(c, "residual_add", "layer.mlp_residual", {{"tokens", T}, {"hidden", H}}, count);
}

void top(const Ctx& c) {
  const std::int64_t T = c.tokens, H = c.m.hidden, V = c.m.vocab / c.cfg.tp;
  // Vocab-parallel embedding (Megatron): each rank gathers from its V/tp rows (ids outside the
  // shard give zero rows) and one all-reduce of [tokens, hidden] sums the partial rows; its
  // backward is the identity, so the backward scatter-adds dy into the shard without a collective.
  c.emit("embedding", "embedding", "fwd", {{"tokens", T}, {"hidden", H}, {"vocab", V}}, c.r.elementwise, 1);
  tp_all_reduce(c, "embedding.tp_all_reduce", "fwd", 1);
  if (c.train) c.emit("embedding", "embedding", "bwd", {{"tokens", T}, {"hidden", H}, {"vocab", V}}, c.r.elementwise, 1);
  const std::int64_t head_rows = c.cfg.phase == "prefill" ? c.cfg.batch : T;
  Ctx head = c;
  head.tokens = head_rows;
  elementwise(head, "rmsnorm", "final_norm", {{"tokens", head_rows}, {"hidden", H}}, 1);
  c.emit("gemm", "lm_head", "fwd", {{"m", head_rows}, {"n", V}, {"k", H}, {"batch", 1}}, c.r.head, 1);
  if (!c.train) return;
  c.emit("cross_entropy", "loss", "fwd", {{"tokens", T}, {"vocab", V}}, c.r.head, 1);
  c.emit("cross_entropy", "loss", "bwd", {{"tokens", T}, {"vocab", V}}, c.r.head, 1);
  if (c.cfg.tp > 1)
    c.emit("all_reduce", "loss.tp_all_reduce", "fwd", {{"elements", T}, {"ranks", c.cfg.tp}, {"inter_node", c.cfg.tp > 8}},
           "fp32", 3);
  c.emit("gemm", "lm_head", "bwd_input", {{"m", T}, {"n", H}, {"k", V}, {"batch", 1}}, c.r.head, 1);
  c.emit("gemm", "lm_head", "bwd_weight", {{"m", V}, {"n", H}, {"k", T}, {"batch", 1}}, c.r.head, 1);
}

void optimizer_and_data_parallel(const Ctx& c) {
  const auto& cfg = c.cfg;
  const double P = c.m.parameters() / double(cfg.tp);
  const auto per_rank = size_of(P / double(cfg.zero >= 1 ? cfg.dp : 1), "parameters per rank");
  c.emit("adamw", "optimizer", "step", {{"params", per_rank}}, c.r.elementwise, 1);
  if (cfg.dp <= 1) return;
  const std::int64_t inter = double(cfg.tp) * double(cfg.dp) > 8 ? 1 : 0;
  const auto all_params = size_of(P, "parameters");
  // beside_n > 0: the collective runs beside the layer's linears, as one BF16 GEMM of the same
  // FLOPs (m = tokens, k = hidden, n = beside_n), whose overlap cuda.nccl measures.
  auto coll = [&](const char* op, const char* label, std::string phase, std::int64_t elements, double count,
                  std::int64_t beside_n = 0) {
    Shape shape{{"elements", elements}, {"ranks", cfg.dp}, {"inter_node", inter}};
    if (cfg.tp > 1) shape["stride"] = cfg.tp;  // the data-parallel groups of the TP×DP grid
    if (beside_n > 0)
      shape.insert({{"overlap_m", c.tokens}, {"overlap_n", beside_n}, {"overlap_k", c.m.hidden}});
    c.emit(op, label, std::move(phase), std::move(shape), "bf16", count);
  };
  if (cfg.zero == 0) {
    coll("all_reduce", "dp.grad_all_reduce", "step", all_params, 1);
  } else if (cfg.zero <= 2) {
    coll("reduce_scatter", "zero.grad_reduce_scatter", "step", all_params, 1);
    coll("all_gather", "zero.param_all_gather", "step", all_params, 1);
  } else {
    const auto layer = size_of(c.m.layer_parameters() / double(cfg.tp), "layer parameters");
    const auto rest = size_of(double(all_params) - double(layer) * double(c.m.layers), "parameters outside the layers");
    // ZeRO-3 prefetches: the next layer's all-gather runs beside this layer's forward (2 FLOPs a
    // parameter a token), the backward's all-gather and reduce-scatter beside a layer's backward (4).
    const auto fwd_n =
        64 * std::max<std::int64_t>(1, std::llround(double(layer) / double(c.m.hidden) / 64));  // aligned
    coll("all_gather", "zero3.layer_param_all_gather", "fwd", layer, double(c.m.layers), fwd_n);
    coll("all_gather", "zero3.layer_param_all_gather", "bwd", layer, double(c.m.layers), 2 * fwd_n);
    coll("reduce_scatter", "zero3.layer_grad_reduce_scatter", "bwd", layer, double(c.m.layers), 2 * fwd_n);
    coll("all_gather", "zero3.other_param_all_gather", "fwd", rest, 2);
    coll("reduce_scatter", "zero3.other_grad_reduce_scatter", "bwd", rest, 1);
  }
}

void check_config(const SuiteConfig& cfg, const ModelConfig& m) {
  if (cfg.phase != "prefill" && cfg.phase != "decode" && cfg.phase != "train")
    throw InputError(fmt::format("unknown phase '{}' (known: prefill, decode, train)", cfg.phase));
  if (cfg.batch <= 0 || cfg.seq <= 0 || cfg.kv_len < 0 || cfg.tp <= 0 || cfg.dp <= 0)
    throw InputError("batch, seq, tp and dp must be positive (kv-len non-negative)");
  if (cfg.zero < 0 || cfg.zero > 3) throw InputError(fmt::format("--zero must be 0, 1, 2 or 3, got {}", cfg.zero));
  if (cfg.zero > 0 && cfg.phase != "train") throw InputError("--zero applies to the train phase only");
  auto divides = [&](std::int64_t v, const char* what) {
    if (v % cfg.tp != 0)
      throw InputError(fmt::format("--tp {} does not divide {}'s {} ({})", cfg.tp, m.name, what, v));
  };
  divides(m.heads, "heads");
  divides(m.kv_heads, "kv_heads");
  divides(m.ffn, "ffn");
  divides(m.vocab, "vocab");
  if (m.architecture == "gla" && cfg.phase != "decode" && cfg.seq % m.chunk != 0)
    throw InputError(fmt::format("--seq {} is not a multiple of {}'s chunk ({})", cfg.seq, m.name, m.chunk));
}

}  // namespace

std::vector<OpInstance> expand_suite(const SuiteConfig& config, const ModelConfig& m, const Recipe& r) {
  SuiteConfig cfg = config;
  if (cfg.kv_len == 0) cfg.kv_len = cfg.seq;
  check_config(cfg, m);
  std::vector<OpInstance> out;
  const bool train = cfg.phase == "train";
  const std::int64_t tokens = cfg.phase == "decode" ? cfg.batch : size_of({cfg.batch, cfg.seq}, "batch x seq");
  Ctx c{cfg, m, r, Emitter{out}, tokens, train};
  std::int64_t bf16_layers = std::min(m.layers, r.bf16_first_layers + r.bf16_last_layers);
  const bool any_low = low_precision(r.linear_fwd) || low_precision(r.linear_bwd_input) || low_precision(r.linear_bwd_weight);
  if (!any_low) bf16_layers = 0;
  top(c);
  layers(c, true, double(m.layers - bf16_layers));
  if (bf16_layers > 0) {
    const auto first = out.size();
    layers(c, false, double(bf16_layers));
    for (auto i = first; i < out.size(); ++i) out[i].label = "bf16_" + out[i].label;
  }
  if (train) optimizer_and_data_parallel(c);
  return out;
}

std::vector<OpInstance> expand_suite(const SuiteConfig& config) {
  const ModelConfig m = config.model_file.empty() ? load_model(config.model) : load_model_file(config.model_file);
  return expand_suite(config, m, load_recipe(config.precision));
}

nlohmann::json suite_json(const SuiteConfig& c, const ModelConfig& m) {
  return {{"model", m.name},
          {"model_file", m.origin},
          {"architecture", m.architecture},
          {"hidden", m.hidden},
          {"heads", m.heads},
          {"kv_heads", m.kv_heads},
          {"head_dim", m.head_dim},
          {"ffn", m.ffn},
          {"layers", m.layers},
          {"vocab", m.vocab},
          {"parameters", m.parameters()},
          {"phase", c.phase},
          {"batch", c.batch},
          {"seq", c.seq},
          {"kv_len", c.kv_len == 0 ? c.seq : c.kv_len},
          {"precision", c.precision},
          {"tp", c.tp},
          {"zero", c.zero},
          {"dp", c.dp}};
}

}  // namespace rafter::workloads
