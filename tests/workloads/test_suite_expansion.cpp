// Model expansion: counts, TP and ZeRO communication volumes for a small hand-checked config, the
// Llama-2 7B training-step FLOPs against 6·N·T + attention, plan totals, model/recipe validation.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "rafter/collector/error.hpp"
#include "rafter/workloads/suite.hpp"

using namespace rafter;
using namespace rafter::workloads;

namespace {

// A tiny Llama: H=64, 4 heads of 16, 2 KV heads, FFN 128, 3 layers, vocab 100.
ModelConfig tiny_model() {
  return model_from_json({{"name", "tiny"}, {"hidden", 64}, {"heads", 4}, {"kv_heads", 2}, {"head_dim", 16},
                          {"ffn", 128}, {"layers", 3}, {"vocab", 100}},
                         "tiny.json");
}

std::vector<OpInstance> find(const std::vector<OpInstance>& ops, const std::string& label, const std::string& phase) {
  std::vector<OpInstance> out;
  for (const auto& o : ops)
    if (o.label == label && o.phase == phase) out.push_back(o);
  return out;
}

double step_flops(const std::vector<OpInstance>& ops) {
  double f = 0;
  for (const auto& o : ops) f += planned_record(o, {}).total_flops() * o.count;
  return f;
}

}  // namespace

TEST(SuiteExpansion, TinyModelCountsAndShapes) {
  SuiteConfig c;
  c.phase = "train";
  c.batch = 2;
  c.seq = 8;
  const auto ops = expand_suite(c, tiny_model(), load_recipe("bf16"));
  const auto qkv = find(ops, "layer.attn.qkv_proj", "fwd");
  ASSERT_EQ(qkv.size(), 1u);
  EXPECT_EQ(qkv[0].count, 3);                      // per layer, 3 layers
  EXPECT_EQ(qkv[0].shape.at("m"), 16);             // batch·seq tokens
  EXPECT_EQ(qkv[0].shape.at("n"), (4 + 2 * 2) * 16);
  EXPECT_EQ(qkv[0].shape.at("k"), 64);
  const auto wgrad = find(ops, "layer.mlp.down_proj", "bwd_weight");
  ASSERT_EQ(wgrad.size(), 1u);
  EXPECT_EQ(wgrad[0].shape.at("m"), 64);
  EXPECT_EQ(wgrad[0].shape.at("n"), 128);
  EXPECT_EQ(wgrad[0].shape.at("k"), 16);
  const auto attn = find(ops, "layer.attn.core", "fwd");
  ASSERT_EQ(attn.size(), 1u);
  EXPECT_EQ(attn[0].shape.at("kv_heads"), 2);
  EXPECT_EQ(find(ops, "layer.attn.core", "bwd").size(), 1u);
  EXPECT_EQ(find(ops, "loss", "bwd").size(), 1u);
  const auto adam = find(ops, "optimizer", "step");
  ASSERT_EQ(adam.size(), 1u);
  // parameters: layers·(64·(4+4)·16 + 4·16·64 + 3·64·128 + 2·64) + 2·100·64 + 64
  const double layer = 64.0 * 8 * 16 + 64 * 64 + 3 * 64 * 128 + 128;
  EXPECT_EQ(adam[0].shape.at("params"), std::int64_t(3 * layer + 2 * 6400 + 64));
  for (const auto& o : ops) EXPECT_NE(o.op, "all_reduce");  // tp = dp = 1: no communication
}

TEST(SuiteExpansion, TensorParallelAllReduces) {
  SuiteConfig c;
  c.phase = "train";
  c.batch = 1;
  c.seq = 8;
  c.tp = 2;
  const auto ops = expand_suite(c, tiny_model(), load_recipe("bf16"));
  const auto fwd = find(ops, "layer.attn.tp_all_reduce", "fwd");
  ASSERT_EQ(fwd.size(), 1u);
  EXPECT_EQ(fwd[0].count, 3);
  EXPECT_EQ(fwd[0].shape.at("elements"), 8 * 64);
  EXPECT_EQ(fwd[0].shape.at("ranks"), 2);
  EXPECT_EQ(find(ops, "layer.mlp.tp_all_reduce", "bwd").size(), 1u);
  // Per layer 2 fwd + 2 bwd all-reduces of [tokens, hidden] bf16: link bytes = 4·S·2·2(n-1)/n.
  double link = 0;
  for (const auto& o : ops)
    if (o.label.find("tp_all_reduce") != std::string::npos && o.label.rfind("layer", 0) == 0)
      for (const auto& b : planned_record(o, {}).bytes)
        if (b.level == "nvlink") link += b.bytes * o.count;
  EXPECT_DOUBLE_EQ(link, 3 * 4 * (8 * 64 * 2.0) * 2 * (2 - 1) / 2.0);
  EXPECT_EQ(find(ops, "layer.attn.qkv_proj", "fwd")[0].shape.at("n"), (2 + 2 * 1) * 16);
  EXPECT_EQ(find(ops, "layer.mlp.swiglu", "fwd")[0].shape.at("ffn"), 64);
  // Vocab-parallel embedding: each rank holds 100/2 rows; the partial rows are summed by one
  // all-reduce of [tokens, hidden] in the forward pass, none in the backward pass.
  for (const char* phase : {"fwd", "bwd"}) EXPECT_EQ(find(ops, "embedding", phase).at(0).shape.at("vocab"), 50);
  const auto emb_ar = find(ops, "embedding.tp_all_reduce", "fwd");
  ASSERT_EQ(emb_ar.size(), 1u);
  EXPECT_EQ(emb_ar[0].count, 1);
  EXPECT_EQ(emb_ar[0].shape.at("elements"), 8 * 64);
  EXPECT_TRUE(find(ops, "embedding.tp_all_reduce", "bwd").empty());
  c.tp = 3;
  EXPECT_THROW(expand_suite(c, tiny_model(), load_recipe("bf16")), InputError);
  c.tp = 4;  // divides heads (4) but not kv_heads (2)
  EXPECT_THROW(expand_suite(c, tiny_model(), load_recipe("bf16")), InputError);
}

TEST(SuiteExpansion, ZeroStagesCommunication) {
  const ModelConfig m = tiny_model();
  const auto P = std::int64_t(m.parameters());
  SuiteConfig c;
  c.phase = "train";
  c.seq = 8;
  c.dp = 4;
  auto ops = expand_suite(c, m, load_recipe("bf16"));
  auto ar = find(ops, "dp.grad_all_reduce", "step");
  ASSERT_EQ(ar.size(), 1u);
  EXPECT_EQ(ar[0].shape.at("elements"), P);
  c.zero = 1;
  ops = expand_suite(c, m, load_recipe("bf16"));
  EXPECT_EQ(find(ops, "zero.grad_reduce_scatter", "step")[0].shape.at("elements"), P);
  EXPECT_EQ(find(ops, "zero.param_all_gather", "step")[0].shape.at("elements"), P);
  EXPECT_EQ(find(ops, "optimizer", "step")[0].shape.at("params"), P / 4);
  c.zero = 3;
  ops = expand_suite(c, m, load_recipe("bf16"));
  const auto gather = find(ops, "zero3.layer_param_all_gather", "fwd");
  ASSERT_EQ(gather.size(), 1u);
  EXPECT_EQ(gather[0].count, 3);
  EXPECT_EQ(gather[0].shape.at("elements"), std::int64_t(m.layer_parameters()));
  // Each runs beside a GEMM of the layer's linear FLOPs (2 per parameter and token forward, 4
  // backward), whose overlap cuda.nccl measures; the catalogue cost is the collective's alone.
  const auto T = c.batch * c.seq;
  EXPECT_EQ(gather[0].shape.at("overlap_m"), T);
  EXPECT_EQ(gather[0].shape.at("overlap_k"), m.hidden);
  EXPECT_EQ(gather[0].shape.at("overlap_n") % 64, 0);  // n rounded to 64 columns (aligned rows)
  EXPECT_NEAR(2.0 * T * m.hidden * double(gather[0].shape.at("overlap_n")), 2.0 * T * m.layer_parameters(),
              2.0 * T * m.hidden * 32);
  const auto scatter = find(ops, "zero3.layer_grad_reduce_scatter", "bwd");
  ASSERT_EQ(scatter.size(), 1u);
  EXPECT_EQ(scatter[0].shape.at("overlap_n"), 2 * gather[0].shape.at("overlap_n"));
  EXPECT_EQ(find(ops, "zero3.layer_param_all_gather", "bwd")[0].shape.at("overlap_n"),
            2 * gather[0].shape.at("overlap_n"));
  EXPECT_EQ(find(ops, "zero3.other_param_all_gather", "fwd")[0].shape.count("overlap_m"), 0u);
  OpInstance alone = gather[0];
  for (const char* k : {"overlap_m", "overlap_n", "overlap_k"}) alone.shape.erase(k);
  EXPECT_EQ(planned_record(gather[0], {}).bytes.size(), planned_record(alone, {}).bytes.size());
  EXPECT_EQ(planned_record(gather[0], {}).total_flops(), planned_record(alone, {}).total_flops());
  // ZeRO-3 moves 1.5x the link bytes of plain data parallelism (DeepSpeed's 3Ψ vs 2Ψ).
  auto link_bytes = [](const std::vector<OpInstance>& v) {
    double s = 0;
    for (const auto& o : v)
      for (const auto& b : planned_record(o, {}).bytes)
        if (b.level == "nvlink" || b.level == "network") s += b.bytes * o.count;
    return s;
  };
  c.zero = 0;
  const double dp_bytes = link_bytes(expand_suite(c, m, load_recipe("bf16")));
  c.zero = 3;
  EXPECT_NEAR(link_bytes(expand_suite(c, m, load_recipe("bf16"))) / dp_bytes, 1.5, 1e-9);
  c.zero = 4;
  EXPECT_THROW(expand_suite(c, m, load_recipe("bf16")), InputError);
}

// Llama-2 7B training step, batch 1 × 4096 tokens. Expected FLOPs:
//   6·N·T + 3.5·A,   N = all weights except the input embedding table (the LM head is a GEMM),
//   A = forward attention matmul FLOPs = L · 4·d·h·s(s+1)/2 (causal), and backward = 2.5·A
//   (flash backward recomputes QKᵀ: 5 matmuls against the forward's 2).
// The remaining difference (norms, SwiGLU, softmax, loss, AdamW) is far below 2%.
TEST(SuiteExpansion, Llama7bTrainingFlopsMatchSixNT) {
  SuiteConfig c;
  c.model = "llama2-7b";
  c.phase = "train";
  c.batch = 1;
  c.seq = 4096;
  const ModelConfig m = load_model("llama2-7b");
  const double T = 4096, s = 4096;
  const double N = m.parameters() - double(m.vocab * m.hidden);
  const double A = double(m.layers) * 4.0 * m.head_dim * m.heads * s * (s + 1) / 2;
  const double expected = 6 * N * T + 3.5 * A;
  const double got = step_flops(expand_suite(c));
  EXPECT_NEAR(got / expected, 1.0, 0.02) << got << " vs " << expected;
  EXPECT_NEAR(m.parameters() / 1e9, 6.74, 0.01);  // the published 7B count (6.74 B)
}

TEST(SuiteExpansion, PlanTotalsAreTheSumOfRecords) {
  SuiteConfig c;
  c.model = "llama2-13b";
  c.phase = "prefill";
  c.seq = 512;
  const rafter::Run run = plan_suite(c, {});
  const auto t = step_totals(run);
  double f = 0;
  for (const auto& r : run.records) f += r.total_flops() * r.count;
  EXPECT_DOUBLE_EQ(t.flops, f);
  EXPECT_EQ(run.suite.at("model"), "llama2-13b");
  for (const auto& r : run.records) EXPECT_EQ(r.status, RecordStatus::Planned);
}

TEST(SuiteExpansion, Nvfp4RecipeAddsQuantizersPatchesAndBf16Layers) {
  SuiteConfig c;
  c.phase = "train";
  c.seq = 32;
  c.precision = "nvfp4";
  ModelConfig m = tiny_model();
  m.layers = 6;
  const auto ops = expand_suite(c, m, load_recipe("nvfp4"));
  const auto g = find(ops, "layer.mlp.down_proj", "fwd");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].precision, "nvfp4");
  EXPECT_EQ(g[0].count, 3);  // 6 layers − first 1 − last 2 kept in BF16
  EXPECT_EQ(find(ops, "bf16_layer.mlp.down_proj", "fwd")[0].count, 3);
  EXPECT_EQ(find(ops, "bf16_layer.mlp.down_proj", "fwd")[0].precision, "bf16");
  // The hot-channel patch rides inside the FP4 forward GEMM as its `hot` channels, not as its own op.
  EXPECT_EQ(g[0].shape.at("hot"), 32);
  EXPECT_TRUE(find(ops, "layer.mlp.down_proj.hot_patch", "fwd").empty());
  EXPECT_EQ(find(ops, "layer.mlp.down_proj", "bwd_input")[0].shape.count("hot"), 0u);
  EXPECT_EQ(find(ops, "bf16_layer.mlp.down_proj", "fwd")[0].shape.count("hot"), 0u);
  const auto qw = find(ops, "layer.mlp.down_proj.quant_w", "fwd");
  ASSERT_EQ(qw.size(), 1u);
  EXPECT_EQ(qw[0].shape.at("block2d"), 1);
  EXPECT_EQ(qw[0].shape.at("transpose"), 1);
  // X and dY: both copies from one pass each; the RHT on the column-wise copies (wgrad inputs).
  const auto qx = find(ops, "layer.mlp.down_proj.quant_x", "fwd"),
             qdy = find(ops, "layer.mlp.down_proj.quant_dy", "fwd");
  ASSERT_EQ(qx.size(), 1u);
  ASSERT_EQ(qdy.size(), 1u);
  EXPECT_EQ(qx[0].shape.at("transpose"), 1);
  EXPECT_EQ(qx[0].shape.at("rht"), 1);
  EXPECT_EQ(qx[0].shape.at("sr"), 0);
  EXPECT_EQ(qdy[0].shape.at("transpose"), 1);
  EXPECT_EQ(qdy[0].shape.at("rht"), 1);
  EXPECT_EQ(qdy[0].shape.at("sr"), 1);
  EXPECT_TRUE(find(ops, "layer.mlp.down_proj.quant_xT", "fwd").empty());
  EXPECT_TRUE(find(ops, "layer.mlp.down_proj.quant_dyT", "fwd").empty());
  EXPECT_EQ(find(ops, "layer.attn.core", "fwd")[0].precision, "bf16");  // post-QK in BF16
}

// 40 tokens are not whole 16-row blocks: the two copies stay two operators (FP8 has no block to
// break; the suite still expands and every operator validates).
TEST(SuiteExpansion, TokensOffTheBlockGridKeepTwoQuantizers) {
  SuiteConfig c;
  c.phase = "train";
  c.seq = 40;
  c.precision = "fp8";
  const auto ops = expand_suite(c, tiny_model(), load_recipe("fp8"));
  const auto qx = find(ops, "layer.mlp.down_proj.quant_x", "fwd"), qxt = find(ops, "layer.mlp.down_proj.quant_xT", "fwd");
  ASSERT_EQ(qx.size(), 1u);
  ASSERT_EQ(qxt.size(), 1u);
  EXPECT_EQ(qx[0].shape.at("transpose"), 0);
  EXPECT_EQ(qxt[0].shape.at("rows"), qx[0].shape.at("cols"));
  EXPECT_EQ(qxt[0].shape.at("cols"), 40);
  EXPECT_EQ(find(ops, "layer.mlp.down_proj.quant_w", "fwd")[0].shape.at("transpose"), 1);
  const auto& quantize = OperatorRegistry::instance().get("quantize");
  for (const auto& o : ops)
    if (o.op == "quantize") {
      EXPECT_NO_THROW(normalize_instance(quantize, o)) << o.label;
    }
}

TEST(SuiteExpansion, GlaModelExpands) {
  SuiteConfig c;
  c.model = "gla-1.3b";
  c.phase = "prefill";
  c.seq = 2048;
  const auto ops = expand_suite(c);
  const auto core = find(ops, "layer.gla.core", "fwd");
  ASSERT_EQ(core.size(), 1u);
  EXPECT_EQ(core[0].count, 24);
  EXPECT_EQ(core[0].shape.at("head_dim_k"), 256);
  EXPECT_EQ(core[0].shape.at("head_dim_v"), 512);
  EXPECT_NEAR(load_model("gla-1.3b").parameters() / 1e9, 1.3, 0.15);
}

TEST(SuiteExpansion, GlaDecodeStepsTheRecurrentState) {
  SuiteConfig c;
  c.model = "gla-1.3b";
  c.phase = "decode";
  c.batch = 8;
  c.kv_len = 2048;
  const auto ops = expand_suite(c);
  // One recurrent step per sequence and layer: 24 layers, 4 heads of dk 256, dv 512, batch 8.
  const auto core = find(ops, "layer.gla.core", "fwd");
  ASSERT_EQ(core.size(), 1u);
  EXPECT_EQ(core[0].op, "gla_decode");
  EXPECT_EQ(core[0].count, 24);
  EXPECT_EQ(core[0].shape, (Shape{{"batch", 8}, {"heads", 4}, {"head_dim_k", 256}, {"head_dim_v", 512}}));
  for (const auto& o : ops) EXPECT_NE(o.op, "gla_chunked");
  // The projections run on tokens = batch: qkvg [8, 4·(2·256 + 2·512)] from hidden 2048.
  const auto qkvg = find(ops, "layer.gla.qkvg_proj", "fwd");
  ASSERT_EQ(qkvg.size(), 1u);
  EXPECT_EQ(qkvg[0].shape.at("m"), 8);
  EXPECT_EQ(qkvg[0].shape.at("n"), 4 * (2 * 256 + 2 * 512));
  EXPECT_EQ(qkvg[0].shape.at("k"), 2048);
  EXPECT_EQ(find(ops, "layer.gla.head_norm", "fwd")[0].shape.at("tokens"), 8 * 4);
  EXPECT_EQ(find(ops, "lm_head", "fwd")[0].shape.at("m"), 8);
  EXPECT_TRUE(find(ops, "layer.gla.core", "bwd").empty());
  // The state replaces the KV cache: the context length changes nothing, nor a seq that is not a
  // multiple of the chunk; with --tp 2 each rank steps 2 heads.
  c.kv_len = 64;
  c.seq = 100;
  EXPECT_EQ(find(expand_suite(c), "layer.gla.core", "fwd")[0].shape, core[0].shape);
  c.tp = 2;
  EXPECT_EQ(find(expand_suite(c), "layer.gla.core", "fwd")[0].shape.at("heads"), 2);
}

TEST(SuiteExpansion, BadInputNamesTheProblem) {
  SuiteConfig c;
  c.phase = "serve";
  try {
    expand_suite(c, tiny_model(), load_recipe("bf16"));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("serve"), std::string::npos);
  }
  EXPECT_THROW(load_model("llama9"), InputError);
  EXPECT_THROW(load_recipe("fp3"), InputError);
  try {
    model_from_json({{"name", "x"}, {"hidden", 64}, {"heads", 4}, {"kv_heads", 2}, {"ffn", 1}, {"layers", 1}, {"vocab", 1}}, "x.json");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim"), std::string::npos) << e.what();
  }
  try {
    model_from_json({{"name", "x"}, {"hidden", "64"}, {"heads", 4}, {"kv_heads", 2}, {"head_dim", 16}, {"ffn", 1}, {"layers", 1}, {"vocab", 1}}, "x.json");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("hidden"), std::string::npos) << e.what();
  }
  EXPECT_THROW(model_from_json({{"name", "x"}, {"hidden", 64}, {"heads", 3}, {"kv_heads", 2}, {"head_dim", 16},
                                {"ffn", 1}, {"layers", 1}, {"vocab", 1}}, "x.json"),
               FormatError);
}

TEST(SuiteExpansion, ShippedModelFilesAreValid) {
  for (const auto& name : available_models()) EXPECT_NO_THROW(load_model(name)) << name;
  for (const auto& name : available_recipes()) EXPECT_NO_THROW(load_recipe(name)) << name;
  EXPECT_EQ(load_model("llama2-70b").kv_heads, 8);
  EXPECT_NEAR(load_model("llama2-13b").parameters() / 1e9, 13.0, 0.1);
  EXPECT_NEAR(load_model("llama2-70b").parameters() / 1e9, 69.0, 0.1);
}

// Found by fuzz_model_json and fuzz_recipe_json (fuzz/regressions/model_json, recipe_json): sizes
// whose products overflowed int64 (undefined behaviour) or a double → int64 cast out of range.
TEST(SuiteExpansion, HugeModelsAreInputErrorsNotOverflows) {
  auto json = nlohmann::json{{"name", "x"}, {"hidden", 4096}, {"heads", std::int64_t(1) << 40}, {"kv_heads", 1},
                             {"head_dim", std::int64_t(1) << 40}, {"ffn", 1}, {"layers", 1}, {"vocab", 1}};
  const ModelConfig m = model_from_json(json, "x.json");
  EXPECT_TRUE(std::isfinite(m.parameters()));
  SuiteConfig c;
  c.seq = 256;
  EXPECT_THROW(expand_suite(c, m, load_recipe("bf16")), InputError);
  json["vocab"] = std::int64_t(1) << 49;
  EXPECT_THROW(model_from_json(json, "x.json"), FormatError);
  json["vocab"] = std::uint64_t(18446744073709551615ull);
  EXPECT_THROW(model_from_json(json, "x.json"), FormatError);
  nlohmann::json recipe = {{"name", "r"}, {"linear", {{"fwd", "bf16"}, {"bwd_input", "bf16"}, {"bwd_weight", "bf16"}}},
                           {"attention", "bf16"}, {"elementwise", "bf16"}, {"head", "bf16"},
                           {"bf16_layers", {{"first", INT64_MAX}, {"last", 1}}}};
  EXPECT_THROW(recipe_from_json(recipe, "r.json"), FormatError);
  recipe["bf16_layers"] = {{"first", -1}};
  EXPECT_THROW(recipe_from_json(recipe, "r.json"), FormatError);
}
