// The CUDA backends' coverage (no GPU needed): which catalogue instances each runs, that an
// instance with no GPU backend is reported NoBackend (never timed on the CPU), and that
// `rafter profile --device cuda` on a machine without a GPU says so in one line and exits 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include "rafter/workloads/backend.hpp"

#if RAFTER_HAVE_CUDA
#include <cuda_runtime.h>

#include "rafter/collector/gpu_timing.hpp"

using namespace rafter::workloads;

namespace {
OpInstance instance(std::string op, std::string precision, Shape shape, std::string phase = "fwd") {
  OpInstance i;
  i.op = std::move(op), i.precision = std::move(precision), i.shape = std::move(shape), i.phase = std::move(phase);
  return i;
}
std::string backend_for(const OpInstance& i) {
  const Backend* b = BackendRegistry::instance().find("cuda", i);
  return b ? b->name() : "none";
}
// A GPU of compute capability 10 or more (FP4 tensor cores) as the current device.
bool blackwell_present() {
  int dev = 0, major = 0;
  const bool ok = cudaGetDevice(&dev) == cudaSuccess &&
                  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess;
  cudaGetLastError();
  return ok && major >= 10;
}
}  // namespace

TEST(BackendsCuda, GemmPrecisionsRunOnCublasLt) {
  Shape s{{"m", 4096}, {"n", 4096}, {"k", 4096}, {"batch", 1}};
  for (const char* p : {"bf16", "fp16", "tf32", "fp32", "fp64", "int8", "fp8_e4m3", "fp8_e4m3_e5m2", "fp8_e5m2_e4m3"})
    for (const char* phase : {"fwd", "bwd_input", "bwd_weight"})
      EXPECT_EQ(backend_for(instance("gemm", p, s, phase)), "cuda.cublaslt") << p << " " << phase;
  EXPECT_EQ(backend_for(instance("gemm", "fp8_e5m2", s)), "none");  // no E5M2×E5M2 in cuBLASLt
  // Decode's few tokens: m is free in FP8 (cuBLAS's n), n and k stay multiples of 16.
  EXPECT_EQ(backend_for(instance("gemm", "fp8_e4m3", {{"m", 1}, {"n", 4096}, {"k", 4096}, {"batch", 1}})),
            "cuda.cublaslt");
  // FP4: cuBLASLt's block-scaled GEMM on sm_100+ (MXFP4 where it offers one), else emulated;
  // batches and K not a multiple of 32 stay emulated everywhere.
  const bool native = blackwell_present();
  for (const char* p : {"nvfp4", "mxfp4"})
    for (const char* phase : {"fwd", "bwd_input", "bwd_weight"}) {
      const std::string chosen = backend_for(instance("gemm", p, s, phase));
      const bool mxfp4_on_blackwell = native && std::string(p) == "mxfp4";  // either
      EXPECT_TRUE(chosen == (native ? "cuda.fp4_native" : "cuda.fp4_emulated") ||
                  (mxfp4_on_blackwell && chosen == "cuda.fp4_emulated"))
          << p << " " << phase << ": " << chosen;
    }
  Shape batched{{"m", 256}, {"n", 4096}, {"k", 4096}, {"batch", 2}},
      k16{{"m", 256}, {"n", 4096}, {"k", 4112}, {"batch", 1}};
  EXPECT_EQ(backend_for(instance("gemm", "nvfp4", batched)), "cuda.fp4_emulated");
  EXPECT_EQ(backend_for(instance("gemm", "nvfp4", k16)), "cuda.fp4_emulated");
  Shape odd{{"m", 16}, {"n", 4096}, {"k", 4100}, {"batch", 1}};
  EXPECT_EQ(backend_for(instance("gemm", "fp8_e4m3", odd)), "none");  // k not a multiple of 16
}

TEST(BackendsCuda, MemoryBoundOperatorsRunOnOurKernelsInBf16) {
  EXPECT_EQ(backend_for(instance("rmsnorm", "bf16", {{"tokens", 16384}, {"hidden", 4096}}, "bwd")), "cuda.native");
  EXPECT_EQ(backend_for(instance("swiglu", "bf16", {{"tokens", 16384}, {"ffn", 11008}})), "cuda.native");
  EXPECT_EQ(backend_for(instance("cross_entropy", "bf16", {{"tokens", 16384}, {"vocab", 32000}}, "bwd")),
            "cuda.native");
  EXPECT_EQ(backend_for(instance("adamw", "bf16", {{"params", 1 << 20}}, "step")), "cuda.native");
  EXPECT_EQ(backend_for(instance("rmsnorm", "fp32", {{"tokens", 16}, {"hidden", 64}})), "none");
  Shape attn{{"batch", 1}, {"seq", 4096}, {"kv_seq", 4096}, {"heads", 32}, {"kv_heads", 32}, {"head_dim", 128}};
  EXPECT_EQ(backend_for(instance("attention_qk", "bf16", attn)), "cuda.cublaslt");
  EXPECT_EQ(backend_for(instance("attention_pv", "bf16", attn)), "cuda.cublaslt");
  attn["causal"] = 1;
  EXPECT_EQ(backend_for(instance("attention_softmax", "bf16", attn)), "cuda.native");
  // Fused attention and decode: tests/workloads/test_attention_cuda.cpp.
}

TEST(BackendsCuda, NoGpuBackendMeansNoBackendNeverCpu) {
  ExecContext ctx;
  ctx.device = "cuda:0";
  auto r = profile_instance(instance("gemm", "fp8_e5m2", {{"m", 64}, {"n", 64}, {"k", 64}, {"batch", 1}}), ctx, {});
  EXPECT_EQ(r.status, rafter::RecordStatus::NoBackend);
  EXPECT_TRUE(r.backend.empty() || r.backend.rfind("cuda", 0) == 0);
  EXPECT_FALSE(r.time.has_value());
}

// A shape past a GPU kernel's limits has no backend, and the record's note names the limit (no GPU
// needed: nothing runs). Within the limits the same operators have their backend.
TEST(BackendsCuda, AShapePastAKernelsLimitsNamesIt) {
  ExecContext ctx;
  ctx.device = "cuda:0";
  const struct {
    OpInstance inst;
    const char* limit;
  } past[] = {
      {instance("rmsnorm", "bf16", {{"tokens", 3}, {"hidden", 32769}}), "cuda.native: a row of 32769 values"},
      {instance("rmsnorm", "bf16", {{"tokens", 3}, {"hidden", 4097}}, "bwd"), "4096 otherwise"},
      {instance("softmax", "bf16", {{"rows", 3}, {"cols", 40000}}), "cuda.native: a row of 40000"},
      {instance("rope", "bf16", {{"tokens", 5}, {"heads", 3}, {"head_dim", 8}, {"seq", 3}}),
       "multiple of 16, got 8"},
      {instance("embedding", "bf16", {{"tokens", 9}, {"hidden", 7}, {"vocab", 3}}), "multiple of 8, got 7"},
      {instance("gemm", "fp8_e4m3", {{"m", 7}, {"n", 9}, {"k", 13}, {"batch", 1}}),
       "cuda.cublaslt: FP8 GEMMs need"},
      {instance("attention_backward", "bf16",
                {{"batch", 1}, {"seq", 64}, {"heads", 2}, {"kv_heads", 2}, {"head_dim", 96}, {"causal", 1}},
                "bwd"),
       "cuda.cudnn: rafter builds cuDNN's SDPA for head_dim 64 and 128, got 96"},
      {instance("gla_decode", "bf16", {{"batch", 2}, {"heads", 2}, {"head_dim_k", 16}, {"head_dim_v", 9}}),
       "cuda.gla: the decode kernel needs head_dim_v a multiple of 4"},
  };
  for (const auto& c : past) {
    const auto r = profile_instance(c.inst, ctx, {});
    EXPECT_EQ(r.status, rafter::RecordStatus::NoBackend) << c.inst.op;
    EXPECT_NE(r.note.find("at this shape"), std::string::npos) << r.note;
    EXPECT_NE(r.note.find(c.limit), std::string::npos) << r.note;
  }
  EXPECT_EQ(backend_for(instance("rmsnorm", "bf16", {{"tokens", 3}, {"hidden", 32768}})), "cuda.native");
  EXPECT_EQ(backend_for(instance("softmax", "bf16", {{"rows", 3}, {"cols", 4095}})), "cuda.native");
  EXPECT_EQ(
      backend_for(instance("rope", "bf16", {{"tokens", 5}, {"heads", 3}, {"head_dim", 64}, {"seq", 3}})),
      "cuda.native");
  // A precision no backend runs: no shape is blamed.
  const auto r = profile_instance(
      instance("gemm", "fp8_e5m2", {{"m", 64}, {"n", 64}, {"k", 64}, {"batch", 1}}), ctx, {});
  EXPECT_EQ(r.note.find("at this shape"), std::string::npos) << r.note;
}

TEST(BackendsCuda, ProfileOnCudaWithoutGpuSaysSoAndExits2) {
  if (rafter::gpu::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  std::string cmd = std::string(RAFTER_BINARY) + " profile --device cuda --op rmsnorm 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 256> buf{};
  while (fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  int status = pclose(pipe);
  EXPECT_EQ(WEXITSTATUS(status), 2) << out;
  EXPECT_NE(out.find("rafter: error:"), std::string::npos) << out;
  EXPECT_NE(out.find("GPU"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

#else
TEST(BackendsCuda, NeedsTheCudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
