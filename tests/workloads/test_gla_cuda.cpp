// The GLA kernels (workloads/cuda/kernels_gla.cu, kernels_gla_bwd.cu) against the catalogue's FP64 recurrence
// at shapes the catalogue check (capped at chunk 16, dk 32, dv 48: one sub-chunk, one dk slice, one dv tile)
// does not reach: chunk 64 with its four sub-chunks, chunks 32 and 48, several dk slices, partial
// dv tiles, batches; decode with a partial column group and dk not a multiple of 32. Outputs poisoned first.
#include <gtest/gtest.h>

#include <string>

#include "rafter/workloads/backend.hpp"

#if RAFTER_HAVE_CUDA
#include <cuda_runtime.h>

#include "../../workloads/cuda/gla.hpp"
#include "rafter/collector/gpu_timing.hpp"
#include "rafter/workloads/precision.hpp"

using namespace rafter::workloads;

namespace {

rafter::CheckResult check_at(const std::string& op, const std::string& precision, const Shape& shape,
                             const std::string& phase = "fwd") {
  const OperatorDef& def = OperatorRegistry::instance().get(op);
  OpInstance inst;
  inst.op = op, inst.phase = phase, inst.precision = precision, inst.shape = shape;
  inst = normalize_instance(def, inst);
  Problem p = def.make_problem(inst, 11);
  cuda::DeviceProblem dev(&p, 11);
  const cuda::StreamFn launch =
      op == "gla_chunked" ? cuda::bind_gla_chunked(inst, dev) : cuda::bind_gla_decode(inst, dev);
  def.reference(inst, p);
  launch(nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const rafter::CheckResult r = compare_outputs(p, dev.results(), check_tolerance(op, precision, false));
  std::printf("gla check %-11s %-3s %-4s %-70s error %.3e tolerance %.1e %s\n", op.c_str(), phase.c_str(),
              precision.c_str(), format_shape(inst.shape).c_str(), r.error, r.tolerance,
              r.passed ? "pass" : "FAIL");
  return r;
}

Shape chunked(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t dk, std::int64_t dv,
              std::int64_t c) {
  return {{"batch", b}, {"seq", s}, {"heads", h}, {"head_dim_k", dk}, {"head_dim_v", dv}, {"chunk", c}};
}

}  // namespace

TEST(GlaCuda, ChunkedForwardMatchesTheRecurrence) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  struct Case {
    const char* precision;
    Shape shape;
  };
  const Case cases[] = {
      {"bf16", chunked(2, 192, 2, 256, 512, 64)},  // GLA-1.3B head dims, three chunks
      {"fp16", chunked(2, 320, 1, 128, 64, 64)},
      {"fp32", chunked(1, 96, 2, 96, 80, 32)},  // a partial dk slice and dv tile
      {"bf16", chunked(1, 144, 1, 64, 48, 48)},
      {"fp32", chunked(2, 128, 2, 64, 64, 64)},
  };
  for (const Case& c : cases) {
    const auto r = check_at("gla_chunked", c.precision, c.shape);
    EXPECT_TRUE(r.passed) << c.precision << " " << format_shape(c.shape) << ": error " << r.error;
  }
}

// The backward (kernels_gla_bwd.cu) against the FP64 reverse mode through the recurrence: dq, dk,
// dv and dg (the last by the reverse cumulative sum identity) at GLA-1.3B head dims, batches,
// chunks 16/32/48/64, several dk slices and dv tiles, partial ones.
TEST(GlaCuda, ChunkedBackwardMatchesTheRecurrence) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  struct Case {
    const char* precision;
    Shape shape;
  };
  const Case cases[] = {
      {"bf16", chunked(2, 192, 2, 256, 512, 64)},  // GLA-1.3B head dims, three chunks, batch 2
      {"fp16", chunked(1, 256, 2, 256, 512, 64)},
      {"fp32", chunked(2, 128, 1, 256, 512, 64)},
      {"fp16", chunked(2, 320, 1, 128, 64, 64)},
      {"fp32", chunked(1, 96, 2, 96, 80, 32)},  // a partial dk slice and dv tile
      {"bf16", chunked(2, 96, 2, 96, 80, 32)},
      {"bf16", chunked(1, 144, 1, 64, 48, 48)},
      {"fp16", chunked(2, 64, 3, 32, 48, 16)},
      {"bf16", chunked(1, 64, 1, 16, 16, 64)},  // one chunk: no state gradient
  };
  for (const Case& c : cases) {
    const auto r = check_at("gla_chunked", c.precision, c.shape, "bwd");
    EXPECT_TRUE(r.passed) << c.precision << " " << format_shape(c.shape) << ": error " << r.error;
  }
}

// Not checks: the chunked forward's and backward's times at GLA-1.3B shapes, warm (10 launches back
// to back, events), for the closing note (run with --gtest_also_run_disabled_tests;
// bench/gla_vs_fla.sh does).
static void print_warm_times(const std::string& phase) {
  const OperatorDef& def = OperatorRegistry::instance().get("gla_chunked");
  for (auto [b, s] : {std::pair{1, 2048}, std::pair{8, 2048}, std::pair{1, 16384}, std::pair{8, 16384}}) {
    OpInstance inst;
    inst.op = "gla_chunked", inst.phase = phase, inst.precision = "bf16",
    inst.shape = chunked(b, s, 4, 256, 512, 64);
    inst = normalize_instance(def, inst);
    cuda::DeviceProblem dev(nullptr, 3);
    const cuda::StreamFn launch = cuda::bind_gla_chunked(inst, dev);
    launch(nullptr);
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    constexpr int kReps = 10;
    cudaEventRecord(start);
    for (int i = 0; i < kReps; ++i) launch(nullptr);
    cudaEventRecord(stop);
    ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    std::printf("gla time %-7s batch %d seq %5d: %9.1f us\n", phase == "fwd" ? "forward" : "bwd", b, s,
                1e3 * ms / kReps);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
}

TEST(GlaCuda, DISABLED_ChunkedForwardTimes) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  print_warm_times("fwd");
}

TEST(GlaCuda, DISABLED_ChunkedBackwardTimes) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  print_warm_times("bwd");
}

// No GPU needed: the forward's scratch parts follow one another without overlap, each aligned
// for the kernels' 16-byte copies, and the backward's parts start where they end.
TEST(GlaCuda, ForwardScratchPartsAreDisjointAndAligned) {
  for (const auto t : {cuda::GlaType::BF16, cuda::GlaType::F16, cuda::GlaType::F32})
    for (const cuda::GlaShape s :
         {cuda::GlaShape{8, 16384, 4, 256, 512, 64}, cuda::GlaShape{1, 144, 1, 64, 48, 48},
          cuda::GlaShape{2, 64, 3, 32, 48, 16}, cuda::GlaShape{1, 96, 2, 96, 80, 32}}) {
      ASSERT_TRUE(cuda::gla_chunked_supports(s));
      const auto l = cuda::gla_fwd_scratch_layout(s, t);
      const bool f32 = t == cuda::GlaType::F32;  // FP32 has no prepared operands
      const std::size_t elem = f32 ? 4 : 2, bh = std::size_t(s.batch * s.heads),
                        chunks = bh * std::size_t(s.seq / s.chunk);
      EXPECT_EQ(l.scores, 0u);
      EXPECT_EQ(l.states - l.scores, chunks * std::size_t(s.chunk * s.chunk) * 4);
      EXPECT_EQ(l.q_decayed - l.states, chunks * std::size_t(s.dk * s.dv) * elem);
      EXPECT_EQ(l.k_decayed - l.q_decayed, f32 ? 0 : bh * std::size_t(s.seq * s.dk) * elem);
      EXPECT_EQ(l.decays - l.k_decayed, f32 ? 0 : bh * std::size_t(s.seq * s.dk) * elem);
      EXPECT_EQ(l.end - l.decays, f32 ? 0 : chunks * std::size_t(s.dk) * 4);
      for (const std::size_t offset : {l.states, l.q_decayed, l.k_decayed, l.decays, l.end})
        EXPECT_EQ(offset % 16, 0u);
      EXPECT_EQ(cuda::gla_chunked_scratch_bytes(s, t), l.end);
      EXPECT_GT(cuda::gla_chunked_bwd_scratch_bytes(s, t), l.end);
    }
}

TEST(GlaCuda, DecodeStepMatchesTheReference) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  const Shape big{{"batch", 2}, {"heads", 4}, {"head_dim_k", 256}, {"head_dim_v", 512}};
  const Shape ragged{{"batch", 1}, {"heads", 3}, {"head_dim_k", 40}, {"head_dim_v", 36}};
  for (const char* p : {"bf16", "fp16", "fp32"}) {
    EXPECT_TRUE(check_at("gla_decode", p, big).passed) << p;
    EXPECT_TRUE(check_at("gla_decode", p, ragged).passed)
        << p;  // a partial column group, dk not a multiple of 32
  }
}

#else
TEST(GlaCuda, NeedsTheCudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
