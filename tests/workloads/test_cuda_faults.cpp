// A GPU that errors mid-run: after an illegal-address fault (sticky: the context is lost), each
// later record fails with one line that says so, and the run still ends with every record listed.
// The fault poisons the process's CUDA context, so the test runs in a child process (a gtest death
// test, re-executed: "threadsafe" style); ctest runs each test in its own process anyway.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "rafter/workloads/suite.hpp"

#if RAFTER_HAVE_CUDA
#include "rafter/collector/gpu_timing.hpp"

void corrupt_cuda_context();  // cuda_fault_kernel.cu

using namespace rafter::workloads;
using rafter::RecordStatus;

namespace {

// Records 0-1 run, the context is lost before record 2, records 2-4 must fail one line each.
bool run_with_a_fault_before_the_third() {
  std::vector<OpInstance> instances;
  for (const char* op : {"rmsnorm", "swiglu", "rmsnorm", "gemm", "softmax"}) {
    OpInstance i;
    i.op = op, i.phase = "fwd", i.precision = "bf16";
    if (std::string(op) == "rmsnorm") i.shape = {{"tokens", 64}, {"hidden", 4096}};
    if (std::string(op) == "swiglu") i.shape = {{"tokens", 64}, {"ffn", 4096}};
    if (std::string(op) == "gemm") i.shape = {{"m", 256}, {"n", 256}, {"k", 256}, {"batch", 1}};
    if (std::string(op) == "softmax") i.shape = {{"rows", 64}, {"cols", 4096}};
    instances.push_back(i);
  }
  ExecContext ctx;
  ctx.device = "cuda:0";
  ctx.policy = rafter::RepeatPolicy::quick();
  ctx.before_each = [](std::size_t i, const OpInstance&) {
    if (i == 2) corrupt_cuda_context();
  };
  const rafter::Run run = run_instances(instances, ctx, {});
  bool ok = run.records.size() == 5;
  for (std::size_t i = 0; ok && i < 5; ++i) {
    const auto& r = run.records[i];
    std::fprintf(stderr, "record %zu %s: %s %s\n", i, r.op.c_str(), std::string(rafter::to_string(r.status)).c_str(),
                 r.note.c_str());
    if (i < 2) ok &= r.status == RecordStatus::Ok;
    else
      ok &= r.status == RecordStatus::Failed && r.note.find("the GPU context is lost") != std::string::npos &&
            r.note.find('\n') == std::string::npos;
  }
  return ok;
}

}  // namespace

TEST(CudaFaultsDeathTest, AStickyErrorMidRunFailsEachLaterRecordWithOneLine) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(run_with_a_fault_before_the_third() ? 0 : 1), ::testing::ExitedWithCode(0), "");
}

#else
TEST(CudaFaultsDeathTest, NeedsTheCudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
