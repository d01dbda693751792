// run.json from profiling: a plan and a measured run survive to_json → run_from_json, and
// malformed files are rejected with the field named.
#include <gtest/gtest.h>

#include "onednn_oracle.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/workloads/suite.hpp"

using namespace rafter;
using namespace rafter::workloads;

TEST(ProfileRunJson, PlanRoundTrip) {
  SuiteConfig c;
  c.model = "llama2-7b";
  c.phase = "decode";
  c.precision = "nvfp4";
  c.tp = 2;
  const rafter::Run run = plan_suite(c, device_memory_levels("cpu"));
  const rafter::Run back = run_from_json(to_json(run));
  ASSERT_EQ(back.records.size(), run.records.size());
  for (std::size_t i = 0; i < run.records.size(); ++i) {
    const auto &a = run.records[i], &b = back.records[i];
    EXPECT_EQ(a.op, b.op);
    EXPECT_EQ(a.label, b.label);
    EXPECT_EQ(a.shape, b.shape);
    EXPECT_EQ(a.precision, b.precision);
    EXPECT_DOUBLE_EQ(a.count, b.count);
    EXPECT_DOUBLE_EQ(a.total_flops(), b.total_flops());
    ASSERT_EQ(a.bytes.size(), b.bytes.size());
    for (std::size_t j = 0; j < a.bytes.size(); ++j) {
      EXPECT_EQ(a.bytes[j].level, b.bytes[j].level);
      EXPECT_DOUBLE_EQ(a.bytes[j].bytes, b.bytes[j].bytes);
      EXPECT_EQ(b.bytes[j].source, Source::Analytic);
    }
  }
  EXPECT_EQ(back.suite.at("precision"), "nvfp4");
}

TEST(ProfileRunJson, MeasuredRunRoundTrip) {
  ExecContext ctx;
  ctx.policy = RepeatPolicy{0, 2, 2, 0.0, 0.0};
  ctx.warm_cache = true;
  const std::vector<OpInstance> ops{{"gemm", "", "fwd", {{"m", 32}, {"n", 32}, {"k", 64}}, "fp8_e4m3", 2},
                                    {"all_reduce", "", "fwd", {{"elements", 1024}, {"ranks", 2}}, "bf16", 1}};
  const rafter::Run run = run_instances(ops, ctx, {{"op", "test"}});
  const rafter::Run back = run_from_json(to_json(run));
  ASSERT_EQ(back.records.size(), 2u);
  const auto& g = back.records[0];
  EXPECT_EQ(g.status, RecordStatus::Ok);
  EXPECT_TRUE(g.emulated);
  EXPECT_EQ(g.emulated_via, test::bf16_matmul_is_native() ? "bf16" : "fp32");  // where a bf16 GEMM is
  ASSERT_TRUE(g.time.has_value());
  EXPECT_DOUBLE_EQ(g.time->value, run.records[0].time->value);
  EXPECT_EQ(g.time->stats.samples, 2u);
  EXPECT_TRUE(g.check.passed);
  EXPECT_DOUBLE_EQ(g.check.error, run.records[0].check.error);
  EXPECT_EQ(back.records[1].status, RecordStatus::NoBackend);
}

TEST(ProfileRunJson, MalformedFilesNameTheField) {
  SuiteConfig c;
  c.model = "llama2-7b";
  c.phase = "decode";
  auto j = to_json(plan_suite(c, {}));
  auto missing = j;
  missing["records"][0].erase("op");
  try {
    run_from_json(missing);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("op"), std::string::npos) << e.what();
  }
  auto wrong = j;
  wrong["records"][1]["count"] = "many";
  try {
    run_from_json(wrong);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("count"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_from_json(nlohmann::json::array()), FormatError);
}

TEST(ProfileRunJson, MemoryFitIsCheckedBeforeRunning) {
  // An instance too large for the machine is not run (one line naming it and the memory it needs);
  // the rest of the step still runs.
  ExecContext ctx;
  ctx.policy = rafter::RepeatPolicy::quick();
  const std::vector<OpInstance> ops{{"gemm", "", "fwd", {{"m", 1 << 20}, {"n", 1 << 20}, {"k", 1 << 16}}, "fp32", 1},
                                    {"gemm", "", "fwd", {{"m", 64}, {"n", 64}, {"k", 64}}, "fp32", 1}};
  const rafter::Run run = run_instances(ops, ctx, {});
  ASSERT_EQ(run.records.size(), 2u);
  EXPECT_EQ(run.records[0].status, rafter::RecordStatus::DoesNotFit);
  EXPECT_FALSE(run.records[0].time.has_value());
  EXPECT_NE(run.records[0].note.find("GiB"), std::string::npos) << run.records[0].note;
  EXPECT_EQ(run.records[0].note.find('\n'), std::string::npos);
  EXPECT_EQ(run.records[1].status, rafter::RecordStatus::Ok) << run.records[1].note;
}
