// Every x86-64 CPU runs every CPU operator: under whatever ISA this process is held to (ctest runs
// these again with ONEDNN_MAX_CPU_ISA and RAFTER_CPU_ISA at AVX2 and at SSE4.1), the GEMMs run
// natively where oneDNN can and via FP32 where it cannot — labelled so, checked against their
// reference — and no operator is left without a kernel.
#include <gtest/gtest.h>

#include <set>

#include "onednn_oracle.hpp"
#include "rafter/workloads/backend.hpp"
#include "rafter/workloads/suite.hpp"

using namespace rafter;
using namespace rafter::workloads;

namespace {

ExecContext tiny_context() {
  ExecContext ctx;
  ctx.policy = RepeatPolicy{0, 1, 1, 0.0, 0.0};
  ctx.warm_cache = true;
  ctx.seed = 11;
  return ctx;
}

OperatorRecord run_check_shape(const std::string& op_name, const std::string& phase, const std::string& precision) {
  const auto& op = OperatorRegistry::instance().get(op_name);
  OpInstance inst = normalize_instance(op, {op_name, "", phase, {}, precision, 1});
  return profile_instance(normalize_instance(op, op.check_instance(inst)), tiny_context(), {});
}

void expect_ran_and_passed(const OperatorRecord& r) {
  EXPECT_EQ(r.status, RecordStatus::Ok) << r.note;
  EXPECT_TRUE(r.check.passed) << "error " << r.check.error << " tolerance " << r.check.tolerance;
  EXPECT_TRUE(r.time.has_value());
}

}  // namespace

TEST(CpuIsaPaths, GemmsRunNativelyWhereOneDnnCanAndViaFp32Otherwise) {
  const OperatorRecord bf16 = run_check_shape("gemm", "fwd", "bf16");  // first: makes rafter's engine
  const bool native_bf16 = test::bf16_matmul_is_native();
  SCOPED_TRACE(native_bf16 ? "oneDNN has a bf16 matmul here" : "oneDNN has no bf16 matmul here");
  expect_ran_and_passed(bf16);
  EXPECT_EQ(bf16.backend, "cpu.onednn");
  EXPECT_EQ(bf16.emulated, !native_bf16);
  EXPECT_EQ(bf16.emulated_via, native_bf16 ? "" : "fp32");
  EXPECT_EQ(bf16.details.contains("path"), !native_bf16);
  for (const char* phase : {"bwd_input", "bwd_weight"}) {
    const OperatorRecord r = run_check_shape("gemm", phase, "bf16");
    expect_ran_and_passed(r);
    EXPECT_EQ(r.emulated_via, bf16.emulated_via) << phase;
  }
  // FP8 / FP4: dequantized to bf16 for a bf16 GEMM, or to fp32 where there is none.
  for (const char* p : {"fp8_e4m3", "nvfp4", "mxfp4"}) {
    const OperatorRecord r = run_check_shape("gemm", "fwd", p);
    expect_ran_and_passed(r);
    EXPECT_TRUE(r.emulated) << p;
    EXPECT_EQ(r.emulated_via, native_bf16 ? "bf16" : "fp32") << p;
  }
  // INT8: oneDNN's kernels without VNNI sum in saturating int16; rafter must not use those.
  const OperatorRecord int8 = run_check_shape("gemm", "fwd", "int8");
  expect_ran_and_passed(int8);
  EXPECT_EQ(int8.emulated_via, test::onednn_int8_matmul_is_exact() ? "" : "fp32");
  const OperatorRecord patch = run_check_shape("hot_channel_patch", "fwd", "bf16");
  expect_ran_and_passed(patch);
  EXPECT_EQ(patch.emulated_via, native_bf16 ? "" : "fp32");
  // The same patch inside an FP4 GEMM (hot channels): the GEMM, then the patch matmul into C.
  const auto& gemm = OperatorRegistry::instance().get("gemm");
  for (const char* p : {"nvfp4", "mxfp4"}) {
    OpInstance inst =
        normalize_instance(gemm, {"gemm", "", "fwd", {{"m", 48}, {"n", 64}, {"k", 256}, {"hot", 20}}, p, 1});
    const OperatorRecord r = profile_instance(inst, tiny_context(), {});
    expect_ran_and_passed(r);
    ASSERT_TRUE(r.details.contains("hot_patch")) << p;
    EXPECT_EQ(r.details["hot_patch"]["channels"], 20) << p;
  }
}

// Every phase and precision of every non-collective operator has a CPU kernel, whatever the held
// ISA: the same set as on an AVX-512 machine. The one exception is by design, not by ISA.
TEST(CpuIsaPaths, EveryOperatorHasACpuKernelUnderTheHeldIsa) {
  const std::set<std::string> gpu_only = {"attention_prefill fp8_e4m3", "attention_decode fp8_e4m3",
                                          "attention_backward fp8_e4m3"};  // cuDNN's FP8 attention
  int with_kernel = 0;
  for (const auto* op : OperatorRegistry::instance().all()) {
    if (op->is_collective()) continue;
    for (const auto& phase : op->phases())
      for (const auto& precision : op->precisions()) {
        OpInstance inst = normalize_instance(*op, {op->name(), "", phase, {}, precision, 1});
        inst = normalize_instance(*op, op->check_instance(inst));
        const bool has = BackendRegistry::instance().find("cpu", inst) != nullptr;
        const bool expected = !gpu_only.count(op->name() + " " + precision);
        EXPECT_EQ(has, expected) << op->name() << " " << phase << " " << precision;
        with_kernel += has;
      }
  }
  EXPECT_GE(with_kernel, 114);  // as many as on an unheld AVX-512 machine
}
