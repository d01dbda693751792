// Fused attention on the GPU: cuDNN SDPA forward and backward ("cuda.cudnn", where cuDNN was
// found; its FP8 E4M3 forward and backward too) and decode ("cuda.decode": cuDNN's SDPA with one
// query token and our split-KV kernel, each checked, the faster timed) against the catalogue's FP64
// reference on random data with poisoned outputs: causal and not, GQA, head dims 64 and 128,
// decode chunkings with one and several splits (chosen, and given by the shape) and every heads-per-block
// path. The unfused path (cuda.unfused) runs the same prefill cases through its backend directly, since the
// fused one wins the registry's choice. Runs only where a GPU is present; bench/attention_vs_pytorch.sh also
// runs it under compute-sanitizer.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "rafter/workloads/backend.hpp"

#if RAFTER_HAVE_CUDA
#include "rafter/collector/gpu_timing.hpp"

using namespace rafter::workloads;

namespace {
#if RAFTER_HAVE_CUDNN
constexpr bool kHaveCudnn = true;
#else
constexpr bool kHaveCudnn = false;
#endif
OpInstance instance(std::string op, Shape shape, std::string precision = "bf16") {
  OpInstance i;
  i.op = std::move(op), i.precision = std::move(precision), i.shape = std::move(shape);
  i.phase = i.op == "attention_backward" ? "bwd" : "fwd";
  return normalize_instance(OperatorRegistry::instance().get(i.op), i);
}
std::string backend_for(const OpInstance& i) {
  const Backend* b = BackendRegistry::instance().find("cuda", i);
  return b ? b->name() : "none";
}
ExecContext quick_context() {
  ExecContext ctx;
  ctx.device = "cuda:0";
  ctx.policy = rafter::RepeatPolicy::quick();
  return ctx;
}
Shape prefill(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t hkv, std::int64_t d, bool causal) {
  return {{"batch", b},      {"seq", s},      {"heads", h},
          {"kv_heads", hkv}, {"head_dim", d}, {"causal", causal ? 1 : 0}};
}
Shape decode(std::int64_t b, std::int64_t kv, std::int64_t h, std::int64_t hkv, std::int64_t d) {
  return {{"batch", b}, {"kv_len", kv}, {"heads", h}, {"kv_heads", hkv}, {"head_dim", d}};
}
void expect_checked(const rafter::OperatorRecord& r, const std::string& what) {
  EXPECT_EQ(r.status, rafter::RecordStatus::Ok) << what << ": " << r.note;
  EXPECT_TRUE(r.check.ran) << what;
  EXPECT_TRUE(r.check.passed) << what << ": error " << r.check.error << " tolerance " << r.check.tolerance;
  std::printf("check %-40s %-14s error %.3e tolerance %.1e %s\n", what.c_str(), r.backend.c_str(),
              r.check.error, r.check.tolerance, r.check.passed ? "pass" : "FAIL");
  std::fflush(stdout);  // a later case that hangs must not take these lines with it
}
std::string describe(const OpInstance& i) {
  std::string s = i.op;
  for (const auto& [k, v] : i.shape) s += " " + k + "=" + std::to_string(v);
  return s;
}
}  // namespace

TEST(AttentionCuda, FusedAttentionRunsOnCudnnAndDecodeOnCudaDecode) {
#if RAFTER_HAVE_CUDNN
  const std::string fused = "cuda.cudnn", backward = "cuda.cudnn";
#else
  const std::string fused = "cuda.unfused", backward = "none";
#endif
  EXPECT_EQ(backend_for(instance("attention_prefill", prefill(1, 4096, 64, 8, 128, true))), fused);
  EXPECT_EQ(backend_for(instance("attention_prefill", prefill(1, 4096, 32, 32, 64, false))), fused);
  EXPECT_EQ(backend_for(instance("attention_backward", prefill(1, 4096, 32, 32, 128, true))), backward);
  EXPECT_EQ(backend_for(instance("attention_prefill", prefill(1, 4096, 32, 32, 96, true))), "cuda.unfused");
#if RAFTER_HAVE_CUDNN
  EXPECT_EQ(backend_for(instance("attention_prefill", prefill(1, 4096, 64, 8, 128, true), "fp8_e4m3")),
            fused);
  EXPECT_EQ(backend_for(instance("attention_backward", prefill(1, 4096, 64, 8, 128, true), "fp8_e4m3")),
            fused);
  // cuDNN 9's FP8 backward on sm_90 takes head dim 128 only.
  EXPECT_EQ(backend_for(instance("attention_backward", prefill(1, 4096, 32, 32, 64, true), "fp8_e4m3")),
            "none");
#endif
  EXPECT_EQ(backend_for(instance("attention_decode", decode(16, 4096, 64, 8, 128))), "cuda.decode");
  EXPECT_EQ(backend_for(instance("attention_decode", decode(16, 4096, 32, 32, 64))), "cuda.decode");
  EXPECT_EQ(backend_for(instance("attention_decode", decode(16, 4096, 32, 32, 96))), "cuda.unfused");
}

// Full shapes at most as large as the check's own caps, so that the check runs them as given.
TEST(AttentionCuda, FusedAttentionMatchesTheReference) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  std::vector<OpInstance> cases;
  for (const char* op : {"attention_prefill", "attention_backward"})
    for (bool causal : {true, false}) {
      cases.push_back(instance(op, prefill(2, 48, 4, 2, 64, causal)));
      cases.push_back(instance(op, prefill(1, 40, 2, 2, 128, causal)));
    }
  // cuDNN's FP8 E4M3 forward (GQA and not, head dims 128 and 64) and backward (head dim 128 only).
  for (bool causal : {true, false}) {
    cases.push_back(instance("attention_prefill", prefill(2, 64, 4, 2, 128, causal), "fp8_e4m3"));
    cases.push_back(instance("attention_prefill", prefill(1, 128, 2, 2, 64, causal), "fp8_e4m3"));
    cases.push_back(instance("attention_backward", prefill(2, 64, 4, 2, 128, causal), "fp8_e4m3"));
    cases.push_back(instance("attention_backward", prefill(1, 128, 2, 2, 128, causal), "fp8_e4m3"));
  }
  // Heads per block 4 and 1 (a group of 3), one split and several (check caps kv_len at 200);
  // groups of 8 on the tensor cores: head dims 128 and 64, a last tile cut short, fewer tokens
  // than one tile, several sequences and KV heads.
  for (const Shape& s : {decode(2, 72, 8, 2, 128), decode(2, 200, 6, 2, 64), decode(2, 197, 4, 2, 64),
                         decode(2, 33, 4, 4, 128), decode(1, 200, 8, 1, 128), decode(2, 197, 16, 2, 64),
                         decode(3, 13, 8, 1, 128), decode(2, 200, 16, 2, 128)})
    cases.push_back(instance("attention_decode", s));
  // Split counts given by the shape (the merge kernel over 3–13 chunks): the CUDA-core paths (1 and 2 heads
  // a block) and the tensor cores, down to one token a chunk.
  for (auto [s, splits] : {std::pair{decode(2, 200, 6, 2, 64), 5}, std::pair{decode(2, 197, 4, 2, 64), 3},
                           std::pair{decode(2, 197, 16, 2, 64), 7}, std::pair{decode(2, 200, 16, 2, 128), 4},
                           std::pair{decode(1, 13, 8, 1, 128), 13}}) {
    s["splits"] = splits;
    cases.push_back(instance("attention_decode", s));
  }
  for (const OpInstance& i : cases) {
    if (backend_for(i) == "none") continue;  // backward without cuDNN
    const rafter::OperatorRecord r = profile_instance(i, quick_context(), {});
    expect_checked(r, describe(i));
    if (i.op == "attention_decode") {
      // Every candidate checked and passed; our kernel's plan as the shape asks.
      const auto& cand = r.details.at("decode").at("candidates");
      const auto& ours = cand.at("splitkv");
      EXPECT_TRUE(ours.at("check").value("passed", false)) << describe(i);
      EXPECT_EQ(ours.at("details").value("tensor_cores", false),
                i.shape.at("heads") == 8 * i.shape.at("kv_heads"))
          << describe(i);
      if (i.shape.count("splits")) {
        EXPECT_EQ(ours.at("details").value("splits", 0), i.shape.at("splits"));
        EXPECT_EQ(r.details.at("decode").value("kernel", ""), "splitkv") << describe(i);
        EXPECT_FALSE(cand.contains("cudnn")) << describe(i);
      } else if (kHaveCudnn) {
        ASSERT_TRUE(cand.contains("cudnn")) << describe(i);
        EXPECT_TRUE(cand.at("cudnn").contains("check")) << describe(i) << ": " << cand.at("cudnn").dump();
        EXPECT_TRUE(cand.at("cudnn").value("check", nlohmann::json::object()).value("passed", false))
            << describe(i) << ": " << cand.at("cudnn").dump();
        EXPECT_EQ(cand.at("cudnn").at("contest_seconds").size(), 2u) << describe(i);
        EXPECT_EQ(ours.at("contest_seconds").size(), 2u) << describe(i);
      }
    }
  }
}

// Without timing the candidates (ExecContext.algo "heuristic"), decode takes cuDNN where it fits.
TEST(AttentionCuda, DecodeHeuristicTakesCudnnWhereItFits) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  if (!kHaveCudnn) GTEST_SKIP() << "built without cuDNN";
  ExecContext ctx = quick_context();
  ctx.algo = "heuristic";
  const OpInstance i = instance("attention_decode", decode(2, 200, 16, 2, 128));
  const rafter::OperatorRecord r = profile_instance(i, ctx, {});
  expect_checked(r, describe(i));
  EXPECT_EQ(r.details.at("decode").value("kernel", ""), "cudnn");
  EXPECT_FALSE(r.details.at("decode").at("candidates").at("cudnn").contains("contest_seconds"));
}

TEST(AttentionCuda, UnfusedPrefillStaysCorrect) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  Backend* unfused = nullptr;
  for (Backend* b : BackendRegistry::instance().all())
    if (b->name() == "cuda.unfused") unfused = b;
  ASSERT_NE(unfused, nullptr);
  for (bool causal : {true, false}) {
    const OpInstance i = instance("attention_prefill", prefill(2, 48, 4, 2, 64, causal));
    rafter::OperatorRecord r;
    unfused->execute(i, quick_context(), r);
    expect_checked(r, describe(i));
  }
}

#else
TEST(AttentionCuda, NeedsTheCudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
