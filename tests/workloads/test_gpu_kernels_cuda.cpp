// Every GPU kernel against the catalogue's FP64 reference on random data with poisoned outputs
// (runs only where a GPU is present; bench/gpu_sanitize.sh runs it under compute-sanitizer).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "rafter/collector/error.hpp"
#include "rafter/workloads/backend.hpp"

#if RAFTER_HAVE_CUDA
#include "../../workloads/cuda/kernels.hpp"
#include "rafter/collector/gpu_timing.hpp"

using namespace rafter::workloads;

namespace {
struct Case {
  const char* op;
  const char* phase;
  const char* precision;
  Shape shape;
};

// Small full shapes (the timed shape is checked too: the catalogue's check shape is smaller still),
// chosen to exercise odd lengths (scalar paths), GQA groups and every GEMM layout.
std::vector<Case> cases() {
  // Each attention operator takes its own parameters (the catalogue rejects others).
  Shape gemm_piece{{"batch", 2}, {"seq", 40}, {"kv_seq", 48}, {"heads", 4}, {"kv_heads", 2}, {"head_dim", 64}};
  Shape softmax{{"batch", 2}, {"seq", 40}, {"kv_seq", 48}, {"heads", 4}, {"head_dim", 64}, {"causal", 1}};
  Shape prefill{{"batch", 2}, {"seq", 40}, {"heads", 4}, {"kv_heads", 2}, {"head_dim", 64}, {"causal", 1}};
  Shape dec{{"batch", 3}, {"kv_len", 72}, {"heads", 8}, {"kv_heads", 2}, {"head_dim", 128}};
  std::vector<Case> c = {
      {"rmsnorm", "fwd", "bf16", {{"tokens", 64}, {"hidden", 4096}}},
      {"rmsnorm", "bwd", "bf16", {{"tokens", 300}, {"hidden", 8192}}},
      {"rmsnorm", "fwd", "bf16", {{"tokens", 5}, {"hidden", 300}}},
      // a warp a row (≤ 1024 elements, multiples of 8): 1, 2 and 4 chunks a lane, a part-filled
      // last round (125 chunks), and more row groups than backward blocks (the warps loop)
      {"rmsnorm", "fwd", "bf16", {{"tokens", 9}, {"hidden", 256}}},
      {"rmsnorm", "fwd", "bf16", {{"tokens", 300}, {"hidden", 512}}},
      {"rmsnorm", "fwd", "bf16", {{"tokens", 21}, {"hidden", 1000}}},
      {"rmsnorm", "bwd", "bf16", {{"tokens", 7}, {"hidden", 136}}},
      {"rmsnorm", "bwd", "bf16", {{"tokens", 5000}, {"hidden", 512}}},
      {"rmsnorm", "bwd", "bf16", {{"tokens", 33}, {"hidden", 1024}}},
      {"rmsnorm", "bwd", "bf16", {{"tokens", 40}, {"hidden", 1000}}},
      // a block a row at the longest rows, 2 and 4 chunks a thread on 1024 threads (a launch that
      // fits an SM only at ≤ 64 registers a thread), and 4 scalar chunks a thread
      {"rmsnorm", "bwd", "bf16", {{"tokens", 5}, {"hidden", 16384}}},
      {"rmsnorm", "bwd", "bf16", {{"tokens", 3}, {"hidden", 32768}}},
      {"rmsnorm", "fwd", "bf16", {{"tokens", 3}, {"hidden", 32768}}},
      {"rmsnorm", "bwd", "bf16", {{"tokens", 6}, {"hidden", 4001}}},
      {"swiglu", "fwd", "bf16", {{"tokens", 33}, {"ffn", 11008}}},
      {"swiglu", "bwd", "bf16", {{"tokens", 7}, {"ffn", 203}}},
      {"softmax", "fwd", "bf16", {{"rows", 16}, {"cols", 4096}}},
      {"softmax", "fwd", "bf16", {{"rows", 16}, {"cols", 300}}},
      // more queries than keys under a causal mask: the first seq - kv_seq rows see no key (zeros)
      {"attention_softmax", "fwd", "bf16",
       {{"batch", 1}, {"seq", 40}, {"kv_seq", 5}, {"heads", 2}, {"head_dim", 64}, {"causal", 1}}},
      {"attention_softmax", "fwd", "bf16", softmax},
      {"rope", "fwd", "bf16", {{"tokens", 12}, {"heads", 3}, {"head_dim", 128}, {"seq", 7}}},
      {"rope", "bwd", "bf16", {{"tokens", 12}, {"heads", 3}, {"head_dim", 64}, {"seq", 7}}},
      {"rope", "fwd", "bf16", {{"tokens", 40}, {"heads", 64}, {"head_dim", 128}, {"seq", 4096}}},
      {"rope", "fwd", "bf16", {{"tokens", 8192}, {"heads", 5}, {"head_dim", 128}, {"seq", 4096}}},  // all heads a thread
      // 1536 vectors a token: each of 1024 threads a second round
      {"rope", "fwd", "bf16", {{"tokens", 6}, {"heads", 96}, {"head_dim", 256}, {"seq", 5}}},
      {"residual_add", "fwd", "bf16", {{"tokens", 8}, {"hidden", 300}}},
      {"residual_add", "bwd", "bf16", {{"tokens", 8}, {"hidden", 300}}},
      {"embedding", "fwd", "bf16", {{"tokens", 24}, {"hidden", 64}, {"vocab", 20}}},
      // rows of 5 and 640 vectors: blocks straddle rows, and the last block is partly past the end
      {"embedding", "fwd", "bf16", {{"tokens", 29}, {"hidden", 40}, {"vocab", 20}}},
      {"embedding", "fwd", "bf16", {{"tokens", 37}, {"hidden", 5120}, {"vocab", 50}}},
      {"embedding", "bwd", "bf16", {{"tokens", 24}, {"hidden", 64}, {"vocab", 20}}},
      {"embedding", "bwd", "bf16", {{"tokens", 3000}, {"hidden", 1024}, {"vocab", 50}}},  // many duplicates
      {"cross_entropy", "fwd", "bf16", {{"tokens", 8}, {"vocab", 32000}}},
      {"cross_entropy", "bwd", "bf16", {{"tokens", 8}, {"vocab", 32000}}},
      {"cross_entropy", "bwd", "bf16", {{"tokens", 4}, {"vocab", 40000}}},
      {"adamw", "step", "bf16", {{"params", 1000}}},
      {"adamw", "step", "bf16", {{"params", 70001}}},  // many blocks, a 1-element tail
      {"attention_qk", "fwd", "bf16", gemm_piece},
      {"attention_pv", "fwd", "bf16", gemm_piece},
      {"attention_qk", "fwd", "fp16", gemm_piece},
      {"attention_pv", "fwd", "fp16", gemm_piece},
      {"attention_qk", "fwd", "fp32", gemm_piece},
      {"attention_pv", "fwd", "fp32", gemm_piece},
      {"attention_prefill", "fwd", "bf16", prefill},
      {"attention_decode", "fwd", "bf16", dec},
  };
#if RAFTER_HAVE_CUDNN
  c.push_back({"attention_backward", "bwd", "bf16", prefill});  // cuDNN's; no other backend runs it
  c.push_back({"attention_prefill", "fwd", "fp8_e4m3", prefill});  // cuDNN's FP8 forward and backward
  Shape prefill_128 = prefill;  // cuDNN's FP8 backward takes head dim 128 only
  prefill_128["head_dim"] = 128;
  c.push_back({"attention_backward", "bwd", "fp8_e4m3", prefill_128});
#endif
  for (const char* p : {"bf16", "fp16", "tf32", "fp32", "fp64", "int8", "fp8_e4m3", "fp8_e4m3_e5m2", "fp8_e5m2_e4m3"})
    for (const char* phase : {"fwd", "bwd_input", "bwd_weight"})
      c.push_back({"gemm", phase, p, {{"m", 128}, {"n", 96}, {"k", 320}, {"batch", 1}}});
  c.push_back({"gemm", "fwd", "bf16", {{"m", 48}, {"n", 80}, {"k", 64}, {"batch", 3}}});
  // FP4: the fused decode kernel (m ≤ 64) and dequantize + cuBLASLt (tests/workloads/test_fp4_gemm_cuda.cpp
  // covers the shapes the check's cap hides).
  for (const char* p : {"nvfp4", "mxfp4"})
    for (const char* phase : {"fwd", "bwd_input", "bwd_weight"}) {
      c.push_back({"gemm", phase, p, {{"m", 16}, {"n", 128}, {"k", 256}, {"batch", 2}}});
      c.push_back({"gemm", phase, p, {{"m", 128}, {"n", 96}, {"k", 320}, {"batch", 1}}});
    }
  // The hot-channel patch inside the FP4 GEMM: extra K (prefill; hot 20 pads to 24 columns) and a
  // BF16 GEMM into C (decode), at full size too (timed with and without the patch).
  c.push_back({"gemm", "fwd", "nvfp4", {{"m", 128}, {"n", 96}, {"k", 320}, {"batch", 1}, {"hot", 20}}});
  c.push_back({"gemm", "fwd", "mxfp4", {{"m", 16}, {"n", 128}, {"k", 256}, {"batch", 1}, {"hot", 16}}});
  c.push_back({"gemm", "fwd", "nvfp4", {{"m", 4096}, {"n", 4096}, {"k", 4096}, {"batch", 1}, {"hot", 40}}});
  // Quantizers: every format, 16×16 tiles, RHT, stochastic rounding, FP8 with a ragged tail.
  for (const char* p : {"nvfp4", "mxfp4", "fp8_e4m3", "fp8_e5m2"}) {
    c.push_back({"quantize", "fwd", p, {{"rows", 48}, {"cols", 320}}});
    c.push_back({"quantize", "fwd", p, {{"rows", 32}, {"cols", 256}, {"rht", 1}}});
    c.push_back({"quantize", "fwd", p, {{"rows", 32}, {"cols", 256}, {"sr", 1}}});
    c.push_back({"dequantize", "fwd", p, {{"rows", 48}, {"cols", 320}}});
    // Both copies from one pass; the RHT and stochastic rounding on the column-wise copy.
    c.push_back({"quantize", "fwd", p, {{"rows", 64}, {"cols", 320}, {"transpose", 1}}});
    c.push_back(
        {"quantize", "fwd", p, {{"rows", 96}, {"cols", 256}, {"transpose", 1}, {"rht", 1}, {"sr", 1}}});
  }
  c.push_back({"quantize",
               "fwd",
               "nvfp4",
               {{"rows", 64}, {"cols", 320}, {"block2d", 1}, {"transpose", 1}, {"rht", 1}}});
  for (const char* op : {"quantize", "dequantize"})
    c.push_back({op, "fwd", "nvfp4", {{"rows", 48}, {"cols", 320}, {"block2d", 1}}});
  c.push_back({"quantize", "fwd", "nvfp4", {{"rows", 64}, {"cols", 128}, {"block2d", 1}, {"rht", 1}, {"sr", 1}}});
  c.push_back({"quantize", "fwd", "fp8_e4m3", {{"rows", 5}, {"cols", 301}}});
  c.push_back({"dequantize", "fwd", "fp8_e5m2", {{"rows", 5}, {"cols", 301}}});
  // GLA (tests/workloads/test_gla_cuda.cpp checks the shapes the check's cap hides: chunk 64, dk 256).
  for (const char* p : {"bf16", "fp16", "fp32"}) {
    c.push_back(
        {"gla_chunked",
         "fwd",
         p,
         {{"batch", 2}, {"seq", 192}, {"heads", 2}, {"head_dim_k", 64}, {"head_dim_v", 96}, {"chunk", 64}}});
    c.push_back(
        {"gla_chunked",
         "bwd",
         p,
         {{"batch", 2}, {"seq", 192}, {"heads", 2}, {"head_dim_k", 64}, {"head_dim_v", 96}, {"chunk", 64}}});
    c.push_back(
        {"gla_decode", "fwd", p, {{"batch", 3}, {"heads", 2}, {"head_dim_k", 64}, {"head_dim_v", 96}}});
  }
  c.push_back({"hot_channel_patch", "fwd", "bf16", {{"tokens", 40}, {"out", 48}, {"hot", 32}}});
  c.push_back({"hot_channel_patch", "fwd", "bf16", {{"tokens", 4096}, {"out", 4096}, {"hot", 40}}});
  return c;
}
}  // namespace

// cuda.nccl over every local GPU (one is enough): checked on random data and timed; with
// overlap_m/n/k the step's GEMM runs beside it, timed alone and together (details.overlap).
TEST(GpuKernelsCuda, NcclCollectiveAndItsOverlapWithAGemm) {
  const int n = rafter::gpu::device_count();
  if (n == 0) GTEST_SKIP() << "no GPU";
  OpInstance i;
  i.op = "all_gather", i.phase = "fwd", i.precision = "bf16";
  i.shape = {{"elements", std::int64_t(n) << 24},
             {"ranks", n},
             {"overlap_m", 4096},
             {"overlap_n", 8192},
             {"overlap_k", 4096}};
  const Backend* b = BackendRegistry::instance().find("cuda", i);
  if (!b || b->name() != "cuda.nccl") GTEST_SKIP() << "built without NCCL";
  ExecContext ctx;
  ctx.device = "cuda:0";
  ctx.policy = rafter::RepeatPolicy::quick();
  const rafter::OperatorRecord r = profile_instance(i, ctx, {});
  ASSERT_EQ(r.status, rafter::RecordStatus::Ok) << r.note;
  EXPECT_TRUE(r.check.passed);
  ASSERT_TRUE(r.details.contains("overlap")) << r.details.dump();
  const auto& o = r.details["overlap"];
  const double coll = o["collective_s"], gemm = o["gemm_s"]["median"], both = o["together_s"]["median"];
  std::printf("overlap: all_gather %.1f us, gemm %.1f us, together %.1f us, hidden %.2f, efficiency %.2f\n",
              coll * 1e6, gemm * 1e6, both * 1e6, double(o["hidden_fraction"]),
              double(o["overlap_efficiency"]));
  EXPECT_GT(gemm, 0);
  EXPECT_GT(both, 0.9 * std::max(coll, gemm));  // both ran: never much faster than the longer alone
  EXPECT_GE(double(o["hidden_fraction"]), 0.0);
  EXPECT_LE(double(o["hidden_fraction"]), 1.0);
  EXPECT_NEAR(double(o["serialized_s"]), coll + gemm, 1e-12);
  i.shape.erase("overlap_m");  // no GEMM beside it: no overlap measured
  EXPECT_FALSE(profile_instance(i, ctx, {}).details.contains("overlap"));
}

TEST(GpuKernelsCuda, EveryKernelMatchesTheReference) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  ExecContext ctx;
  ctx.device = "cuda:0";
  ctx.policy = rafter::RepeatPolicy::quick();
  for (const Case& c : cases()) {
    OpInstance i;
    i.op = c.op, i.phase = c.phase, i.precision = c.precision, i.shape = c.shape;
    rafter::OperatorRecord r;
    try {
      r = profile_instance(i, ctx, {});
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.op << " " << c.phase << " " << c.precision << ": " << e.what();
      continue;
    }
    SCOPED_TRACE(std::string(c.op) + " " + c.phase + " " + c.precision);
    EXPECT_EQ(r.status, rafter::RecordStatus::Ok) << r.note;
    EXPECT_TRUE(r.check.ran);
    EXPECT_TRUE(r.check.passed) << "error " << r.check.error << " tolerance " << r.check.tolerance;
    std::printf("check %-18s %-10s %-14s error %.3e tolerance %.1e %s\n", c.op, c.phase, c.precision, r.check.error,
                r.check.tolerance, r.check.passed ? "pass" : "FAIL");
  }
}

// No GPU needed: adamw_step checks its 16-byte loads' and stores' alignment before it touches
// the device, so misaligned pointers (never dereferenced) must give an InputError for each array,
// and no launch.
TEST(GpuKernelsCuda, AdamWRefusesAnArrayNotSixteenByteAligned) {
  alignas(16) static unsigned char arena[5][64];
  for (int bad = 0; bad < 5; ++bad) {
    unsigned char* q[5];
    for (int a = 0; a < 5; ++a) q[a] = arena[a] + (a == bad ? 4 : 0);
    try {
      rafter::workloads::cuda::adamw_step(
          reinterpret_cast<float*>(q[0]), reinterpret_cast<const rafter::workloads::cuda::bf16*>(q[1]),
          reinterpret_cast<float*>(q[2]), reinterpret_cast<float*>(q[3]),
          reinterpret_cast<rafter::workloads::cuda::bf16*>(q[4]), 8, {}, nullptr);
      ADD_FAILURE() << "array " << bad << " 4 bytes off: no error";
    } catch (const rafter::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("16-byte aligned"), std::string::npos) << e.what();
    }
  }
}

// No GPU needed: embedding_fwd checks its sizes before it touches the device, so an output of
// 2^31 16-byte vectors or more, or a hidden size that is not a multiple of 8, gives an InputError
// (pointers never dereferenced) and no launch.
TEST(GpuKernelsCuda, EmbeddingRefusesAnOutputPastItsIndexRange) {
  namespace c = rafter::workloads::cuda;
  const std::int64_t hidden = 4096, most = ((std::int64_t(1) << 31) - 1) / (hidden / 8);
  const auto error_of = [](std::int64_t tokens, std::int64_t h) -> std::string {
    try {
      c::embedding_fwd(nullptr, nullptr, nullptr, tokens, h, nullptr);
    } catch (const rafter::InputError& e) {
      return e.what();
    } catch (const std::exception&) {
      return "(not an InputError)";
    }
    return "";
  };
  EXPECT_NE(error_of(most + 1, hidden).find("2^31"), std::string::npos) << error_of(most + 1, hidden);
  EXPECT_NE(error_of(8, 4100).find("multiple of 8"), std::string::npos) << error_of(8, 4100);
  EXPECT_EQ(error_of(0, hidden), "");  // nothing to copy: no error and no launch
}

// An FP4 GEMM with hot channels is timed with and without its patch, on the same buffers.
TEST(GpuKernelsCuda, Fp4GemmTimesItsHotPatch) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  ExecContext ctx;
  ctx.device = "cuda:0";
  ctx.policy = rafter::RepeatPolicy::quick();
  // Decode shapes check the three patch paths (the epilogue, a separate BF16 GEMM, the dependent
  // kernel) and time them in the contest; hot 41 has rows padded to 48.
  const struct {
    std::int64_t m, hot;
  } cases[] = {{16, 24}, {16, 41}, {1024, 24}};
  for (const auto& c : cases) {
    OpInstance i;
    i.op = "gemm", i.phase = "fwd", i.precision = "nvfp4";
    i.shape = {{"m", c.m}, {"n", 2048}, {"k", 2048}, {"batch", 1}, {"hot", c.hot}};
    const rafter::OperatorRecord r = profile_instance(i, ctx, {});
    SCOPED_TRACE("m = " + std::to_string(c.m) + ", hot = " + std::to_string(c.hot));
    ASSERT_EQ(r.status, rafter::RecordStatus::Ok) << r.note;
    ASSERT_TRUE(r.details.contains("hot_patch")) << r.details.dump();
    const auto& h = r.details["hot_patch"];
    EXPECT_EQ(h["channels"], c.hot);
    EXPECT_GT(h["gemm_without_patch_seconds"].get<double>(), 0.0);
    EXPECT_TRUE(h.contains("patch_share"));
    std::string path = "prefill";
    if (c.m <= 64) {
      path = h.at("path").get<std::string>();
      for (const char* p : {"fused", "separate", "dependent"}) {
        SCOPED_TRACE(p);
        const auto& cand = h.at("candidates").at(p);
        EXPECT_TRUE(cand.at("check").at("passed").get<bool>()) << cand.dump();
        EXPECT_EQ(cand.at("contest_seconds").size(), 2u) << cand.dump();
      }
    }
    std::printf("hot patch m=%lld hot=%lld (%s): %.1f us with, %.1f us without (%+.1f %%)\n",
                static_cast<long long>(c.m), static_cast<long long>(c.hot), path.c_str(), r.time->value * 1e6,
                h["gemm_without_patch_seconds"].get<double>() * 1e6, 100 * h["patch_share"].get<double>());
  }
}

// A GPU kernel that no case above reaches would escape both its check and compute-sanitizer
// (bench/gpu_sanitize.sh runs this test under memcheck, racecheck and initcheck): every
// operator, phase and precision that some CUDA backend runs at its default shape must be a case.
TEST(GpuKernelsCuda, EveryCudaBackendPathIsACase) {
  std::set<std::string> covered;
  for (const Case& c : cases()) covered.insert(std::string(c.op) + " " + c.phase + " " + c.precision);
  for (const OperatorDef* op : OperatorRegistry::instance().all()) {
    if (op->is_collective()) continue;  // cuda.nccl runs NCCL's kernels, none of rafter's (docs/collectives.md)
    for (const std::string& phase : op->phases())
      for (const std::string& precision : op->precisions()) {
        OpInstance i;
        i.op = op->name(), i.phase = phase, i.precision = precision;
        try {
          i = normalize_instance(*op, i);
        } catch (const rafter::InputError&) {
          continue;  // not a valid combination at the defaults
        }
        if (BackendRegistry::instance().find("cuda", i) == nullptr) continue;
        const std::string key = op->name() + " " + phase + " " + precision;
        EXPECT_TRUE(covered.count(key)) << key << " runs on a CUDA backend but is not a case of the kernel check";
      }
  }
}

#else
TEST(GpuKernelsCuda, NeedsTheCudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
