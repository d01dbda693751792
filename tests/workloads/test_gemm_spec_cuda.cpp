// GEMM specification rules of the CUDA backend (no GPU needed): the layout of each linear-layer
// pass, element types per precision, cuBLASLt's shape rules, and the algorithm record's JSON.
#include <gtest/gtest.h>

#include <stdexcept>

#if RAFTER_HAVE_CUDA
#include "../../workloads/cuda/gemm_spec.hpp"
#include "rafter/collector/error.hpp"

using namespace rafter::workloads::cuda;

TEST(GemmSpecCuda, LinearPassesUseTheTrainingLayouts) {
  // Y[T×N] = X[T×K]·Wᵀ with W stored [N, K]; T = 4096 tokens, K = 4096 in, N = 11008 out.
  GemmSpec fwd = linear_pass_spec("fwd", 4096, 4096, 11008, "bf16");
  EXPECT_EQ(fwd.m, 4096);
  EXPECT_EQ(fwd.n, 11008);
  EXPECT_EQ(fwd.k, 4096);
  EXPECT_FALSE(fwd.trans_a);
  EXPECT_TRUE(fwd.trans_b);
  GemmSpec din = linear_pass_spec("bwd_input", 4096, 4096, 11008, "bf16");  // dX = dY·W
  EXPECT_EQ(din.n, 4096);
  EXPECT_EQ(din.k, 11008);
  EXPECT_FALSE(din.trans_a || din.trans_b);
  GemmSpec dw = linear_pass_spec("bwd_weight", 4096, 4096, 11008, "bf16");  // dW = dYᵀ·X
  EXPECT_EQ(dw.m, 11008);
  EXPECT_EQ(dw.n, 4096);
  EXPECT_EQ(dw.k, 4096);
  EXPECT_TRUE(dw.trans_a);
  EXPECT_FALSE(dw.trans_b);
  // FLOPs are the same in the three passes: 2·T·K·N.
  EXPECT_EQ(fwd.m * fwd.n * fwd.k, dw.m * dw.n * dw.k);
  EXPECT_THROW(linear_pass_spec("sideways", 1, 1, 1, "bf16"), rafter::InputError);
}

TEST(GemmSpecCuda, TypesPerPrecision) {
  GemmSpec s = linear_pass_spec("fwd", 64, 64, 64, "bf16");
  EXPECT_EQ(gemm_types(s).a, "bf16");
  EXPECT_EQ(gemm_types(s).compute, "32F");
  s.precision = "tf32";
  EXPECT_EQ(gemm_types(s).compute, "32F_FAST_TF32");
  s.precision = "fp64";
  EXPECT_EQ(gemm_types(s).c, "f64");
  s.precision = "int8";
  EXPECT_EQ(gemm_types(s).c, "i32");
  EXPECT_EQ(gemm_types(s).compute, "32I");
  s.precision = "fp8_e4m3_e5m2";
  GemmTypes t = gemm_types(s);
  EXPECT_EQ(t.a, "e4m3");
  EXPECT_EQ(t.b, "e5m2");
  EXPECT_EQ(t.c, "bf16");
  EXPECT_TRUE(t.scaled);
  s.out_fp32 = true;
  EXPECT_EQ(gemm_types(s).c, "f32");
  s.precision = "fp8_e5m2";  // cuBLASLt has no E5M2×E5M2
  EXPECT_THROW(gemm_types(s), rafter::InputError);
  s.precision = "nvfp4";  // block-scaled E2M1 (cuBLASLt on sm_100+): E4M3 per 16
  t = gemm_types(s);
  EXPECT_EQ(t.a, "e2m1");
  EXPECT_EQ(t.b, "e2m1");
  EXPECT_EQ(t.c, "f32");
  EXPECT_EQ(t.block_scale, "vec16_ue4m3");
  EXPECT_FALSE(t.scaled);
  s.precision = "mxfp4";
  EXPECT_EQ(gemm_types(s).block_scale, "vec32_ue8m0");
  s.precision = "bf16";
  EXPECT_EQ(gemm_types(s).block_scale, "");
  s.precision = "int4";
  EXPECT_THROW(gemm_types(s), rafter::InputError);
}

TEST(GemmSpecCuda, ShapeRules) {
  GemmSpec s = linear_pass_spec("fwd", 16, 4096, 4096, "fp8_e4m3");
  EXPECT_EQ(gemm_shape_problem(s), "");
  s.m = 1;  // decode: any number of tokens
  EXPECT_EQ(gemm_shape_problem(s), "");
  s.k = 4100;  // not a multiple of 16
  EXPECT_NE(gemm_shape_problem(s), "");
  GemmSpec nn = linear_pass_spec("bwd_input", 64, 64, 64, "fp8_e4m3");
  EXPECT_NE(gemm_shape_problem(nn), "");  // FP8 needs TN
  std::string note;
  GemmSpec tn = to_tn_layout(nn, &note);
  EXPECT_EQ(gemm_shape_problem(tn), "");
  EXPECT_FALSE(note.empty());
  EXPECT_EQ(tn.m * tn.n * tn.k, nn.m * nn.n * nn.k);
  // Block-scaled FP4: TN (every FP4 copy is K-contiguous), k a multiple of 32, m and n of 16.
  GemmSpec fp4 = linear_pass_spec("fwd", 16, 4096, 11008, "nvfp4");
  EXPECT_EQ(gemm_shape_problem(fp4), "");
  fp4.k = 4112;  // a multiple of 16 (whole NVFP4 blocks), not of 32
  EXPECT_NE(gemm_shape_problem(fp4), "");
  fp4 = linear_pass_spec("fwd", 8, 4096, 4096, "mxfp4");  // m = 8 tokens
  EXPECT_NE(gemm_shape_problem(fp4), "");
  EXPECT_NE(gemm_shape_problem(linear_pass_spec("bwd_input", 64, 64, 64, "nvfp4")), "");
  GemmSpec i8 = linear_pass_spec("fwd", 8192, 8192, 8192, "int8");
  EXPECT_EQ(gemm_shape_problem(i8), "");
  i8.m = 30;
  EXPECT_NE(gemm_shape_problem(i8), "");
  GemmSpec bf = linear_pass_spec("bwd_weight", 5, 7, 3, "bf16");  // any shape, any layout
  EXPECT_EQ(gemm_shape_problem(bf), "");
  bf.k = 0;
  EXPECT_NE(gemm_shape_problem(bf), "");
}

TEST(GemmSpecCuda, EnumNamesFromTheHeader) {
  EXPECT_EQ(tile_name(23), "128x256");
  EXPECT_EQ(tile_name(0), "undefined");
  EXPECT_EQ(tile_name(100000), "id100000");
  EXPECT_EQ(stages_name(16), "64x4");
  EXPECT_EQ(cluster_name(3), "2x1x1");
}

TEST(GemmSpecCuda, AlgorithmRecordRoundTrip) {
  GemmAlgoRecord r;
  r.algo_id = 66, r.tile_id = 23, r.tile = "128x256", r.stages_id = 16, r.stages = "64x4";
  r.split_k = 2, r.cluster = "2x1x1", r.cluster_shape_id = 3, r.workspace_bytes = 1 << 20;
  r.candidate_rank = 3, r.candidates = 16, r.candidate_seconds = 1.25e-3, r.choice = "best";
  GemmAlgoRecord back = gemm_algo_from_json(to_json(r));
  EXPECT_EQ(back.algo_id, 66);
  EXPECT_EQ(back.tile, "128x256");
  EXPECT_EQ(back.split_k, 2);
  EXPECT_EQ(back.workspace_bytes, std::size_t(1) << 20);
  EXPECT_EQ(back.candidate_rank, 3);
  EXPECT_DOUBLE_EQ(back.candidate_seconds, 1.25e-3);
  EXPECT_EQ(back.choice, "best");
  EXPECT_TRUE(back.contest_fastest.empty());
  r.contest_fastest = {1.30e-3, 1.31e-3}, r.contest_heuristic = {1.35e-3, 1.36e-3};
  back = gemm_algo_from_json(to_json(r));
  EXPECT_EQ(back.contest_fastest, r.contest_fastest);
  EXPECT_EQ(back.contest_heuristic, r.contest_heuristic);
  nlohmann::json older = to_json(r);  // records written before the contest existed still read
  older.erase("contest_fastest_seconds"), older.erase("contest_heuristic_seconds");
  EXPECT_TRUE(gemm_algo_from_json(older).contest_heuristic.empty());
}

TEST(GemmSpecCuda, TheSearchsFastestStaysOnlyWhenItBeatsTheHeuristicsFirstByTheMargin) {
  // The H100's lm_head row: the 176x128 candidate fast in one timing, slower in the record's.
  EXPECT_FALSE(fastest_wins_contest({1.433e-3, 1.420e-3}, {1.356e-3, 1.357e-3}));
  EXPECT_TRUE(fastest_wins_contest({1.300e-3, 1.305e-3}, {1.356e-3, 1.357e-3}));
  // Within the margin (1 %) the heuristic's first, what PyTorch runs, is kept: a tie at worst.
  EXPECT_FALSE(fastest_wins_contest({0.995e-3, 0.996e-3}, {1.0e-3, 1.0e-3}));
  EXPECT_TRUE(fastest_wins_contest({0.985e-3, 0.986e-3}, {1.0e-3, 1.0e-3}));
  // The sums decide, so one lucky round does not.
  EXPECT_FALSE(fastest_wins_contest({0.90e-3, 1.20e-3}, {1.0e-3, 1.0e-3}));
  EXPECT_TRUE(fastest_wins_contest({0.99e-3, 0.99e-3}, {1.0e-3, 1.0e-3}, 0.005));
  EXPECT_THROW(fastest_wins_contest({}, {}), std::invalid_argument);
  EXPECT_THROW(fastest_wins_contest({1e-3}, {1e-3, 1e-3}), std::invalid_argument);
}

TEST(GemmSpecCuda, MalformedAlgorithmRecordsNameTheField) {
  GemmAlgoRecord r;
  r.algo_id = 1, r.candidates = 4, r.choice = "heuristic";
  nlohmann::json j = to_json(r);
  auto expect_error = [](const nlohmann::json& bad, const std::string& field) {
    try {
      gemm_algo_from_json(bad);
      FAIL() << "no error for " << field;
    } catch (const rafter::FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  nlohmann::json missing = j;
  missing.erase("tile");
  expect_error(missing, "tile");
  nlohmann::json wrong = j;
  wrong["split_k"] = "two";
  expect_error(wrong, "split_k");
  nlohmann::json zero_split = j;
  zero_split["split_k"] = 0;
  expect_error(zero_split, "split_k");
  nlohmann::json rank = j;
  rank["candidate_rank"] = 4;
  expect_error(rank, "candidate_rank");
  nlohmann::json choice = j;
  choice["choice"] = "fastest";
  expect_error(choice, "choice");
  expect_error(nlohmann::json::array(), "object");
}

#else
TEST(GemmSpecCuda, NeedsTheCudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
