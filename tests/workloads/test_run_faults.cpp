// run_instances under faults: an interrupt mid-run keeps the finished records and marks the rest
// NotRun; a device that goes away mid-run fails that record and the run goes on; a device missing
// before anything ran is still one line, exit 2 (DeviceUnavailable out of run_instances).
#include <gtest/gtest.h>

#include <csignal>

#include "rafter/collector/error.hpp"
#include "rafter/collector/interrupt.hpp"
#include "rafter/workloads/suite.hpp"

using namespace rafter::workloads;
using rafter::RecordStatus;

namespace {

std::vector<OpInstance> five_small_instances() {
  std::vector<OpInstance> v;
  for (int i = 0; i < 5; ++i) {
    OpInstance inst;
    inst.op = "rmsnorm";
    inst.label = "norm" + std::to_string(i);
    inst.phase = "fwd";
    inst.precision = "bf16";
    inst.shape = {{"tokens", 4}, {"hidden", 256}};
    v.push_back(inst);
  }
  return v;
}

ExecContext quick_cpu() {
  ExecContext ctx;
  ctx.device = "cpu";
  ctx.policy = rafter::RepeatPolicy::quick();
  return ctx;
}

TEST(RunFaults, InterruptBeforeTheThirdKeepsTwoAndMarksThreeNotRun) {
  rafter::InterruptScope scope;
  ExecContext ctx = quick_cpu();
  ctx.before_each = [](std::size_t i, const OpInstance&) {
    if (i == 2) std::raise(SIGINT);
  };
  const rafter::Run run = run_instances(five_small_instances(), ctx, {});
  EXPECT_EQ(run.interrupted, "SIGINT");
  ASSERT_EQ(run.records.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(run.records[i].label, "norm" + std::to_string(i));
    EXPECT_EQ(run.records[i].status, i < 2 ? RecordStatus::Ok : RecordStatus::NotRun);
    EXPECT_EQ(run.records[i].time.has_value(), i < 2);
  }
  EXPECT_EQ(run.records[3].note, "not run: SIGINT stopped the run");
  // Round trip: the reader accepts what the writer wrote.
  const rafter::Run back = rafter::run_from_json(to_json(run));
  EXPECT_EQ(back.interrupted, "SIGINT");
  EXPECT_EQ(back.records[4].status, RecordStatus::NotRun);
}

TEST(RunFaults, ADeviceLostMidRunFailsThatRecordAndTheRunGoesOn) {
  ExecContext ctx = quick_cpu();
  ctx.before_each = [](std::size_t i, const OpInstance&) {
    if (i == 2) throw rafter::DeviceUnavailable("cuda:0: the GPU fell off the bus");
  };
  const rafter::Run run = run_instances(five_small_instances(), ctx, {});
  ASSERT_EQ(run.records.size(), 5u);
  EXPECT_TRUE(run.interrupted.empty());
  EXPECT_EQ(run.records[2].status, RecordStatus::Failed);
  EXPECT_EQ(run.records[2].note, "cuda:0: the GPU fell off the bus");
  for (std::size_t i : {0u, 1u, 3u, 4u}) EXPECT_EQ(run.records[i].status, RecordStatus::Ok) << i;
  const StepTotals t = step_totals(run);
  EXPECT_EQ(t.failed, 1);
  EXPECT_EQ(t.measured, 4);
}

TEST(RunFaults, ADeviceMissingBeforeAnythingRanIsAnError) {
  ExecContext ctx = quick_cpu();
  ctx.before_each = [](std::size_t, const OpInstance&) { throw rafter::DeviceUnavailable("cuda:0: no CUDA GPU"); };
  EXPECT_THROW(run_instances(five_small_instances(), ctx, {}), rafter::DeviceUnavailable);
}

}  // namespace
