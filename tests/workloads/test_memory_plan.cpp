// Device memory planning: instances that fit run as asked, a streaming operator too large for the
// free memory is timed on the largest slice that fits and its time scaled by compulsory bytes,
// anything else gets DoesNotFit with one line naming the operator and the memory it needs; the
// step totals count only timed records in FLOP/s and say what no timed record covers.
#include <gtest/gtest.h>

#include "rafter/workloads/backend.hpp"
#include "rafter/workloads/memory_plan.hpp"
#include "rafter/workloads/profile_report.hpp"
#include "rafter/workloads/suite.hpp"

using namespace rafter::workloads;
using rafter::RecordStatus;

namespace {

OpInstance instance(const std::string& op, const std::string& precision, Shape shape, const std::string& phase = "") {
  const auto& def = OperatorRegistry::instance().get(op);
  return normalize_instance(def, OpInstance{op, "", phase, std::move(shape), precision, 1});
}

const double kGiB = double(1ull << 30);
const ExtraBytesFn kReserve = [](const OpInstance&, double) { return 512.0 * (1 << 20); };

// A device of its own kind with a fixed amount of free memory; it "times" every call at 1 ms per
// GB of compulsory bytes, so that scaling can be checked exactly.
class SmallDeviceBackend : public Backend {
 public:
  std::string name() const override { return "memtest.fake"; }
  std::string device_kind() const override { return "memtest"; }
  bool supports(const OpInstance&) const override { return true; }
  double free_memory_bytes(const ExecContext&) const override { return 4 * kGiB; }
  void execute(const OpInstance& inst, const ExecContext&, rafter::OperatorRecord& r) override {
    const auto& op = OperatorRegistry::instance().get(inst.op);
    const double seconds = op.cost(inst, {}).compulsory_bytes / 1e9 * 1e-3;
    rafter::Summary s;
    s.samples = 3, s.median = s.mean = seconds, s.min = 0.9 * seconds, s.max = 1.1 * seconds;
    r.time = rafter::Figure::measured(s, "s");
    r.details["ran_shape"] = format_shape(inst.shape);
    r.status = RecordStatus::Ok;
  }
};
RAFTER_REGISTER_BACKEND(SmallDeviceBackend);

// A backend that names the precision its work ran via and no more (as cuda.fp4_emulated did, whose
// records the roofline then judged as FP4, with no roof on sm_90).
class ViaOnlyBackend : public Backend {
 public:
  std::string name() const override { return "viatest.fake"; }
  std::string device_kind() const override { return "viatest"; }
  bool supports(const OpInstance&) const override { return true; }
  void execute(const OpInstance&, const ExecContext&, rafter::OperatorRecord& r) override {
    r.emulated_via = "bf16";
    r.status = RecordStatus::Ok;
  }
};
RAFTER_REGISTER_BACKEND(ViaOnlyBackend);

}  // namespace

TEST(MemoryPlan, FitsWhenFreeMemoryIsUnknownOrEnough) {
  const auto& adamw = OperatorRegistry::instance().get("adamw");
  const OpInstance seven_b = instance("adamw", "bf16", {{"params", 6738415616}}, "step");
  EXPECT_EQ(plan_memory(adamw, seven_b, 0, kReserve, {}).verdict, MemoryPlan::Verdict::Fits);
  // 16 bytes a parameter in place (p, m, v in FP32; gradient and copy in BF16): 108 GB fits 139 GiB.
  const MemoryPlan h200 = plan_memory(adamw, seven_b, 139 * kGiB, kReserve, {});
  EXPECT_EQ(h200.verdict, MemoryPlan::Verdict::Fits);
  EXPECT_NEAR(h200.needed_bytes, 16.0 * 6738415616 + 512.0 * (1 << 20), 1);
}

TEST(MemoryPlan, StreamingOperatorTooLargeIsSlicedAndScaledByBytes) {
  const auto& adamw = OperatorRegistry::instance().get("adamw");
  const OpInstance seven_b = instance("adamw", "bf16", {{"params", 6738415616}}, "step");
  const double free = 75 * kGiB;  // an H100 with a CUDA context
  const MemoryPlan p = plan_memory(adamw, seven_b, free, kReserve, {});
  ASSERT_EQ(p.verdict, MemoryPlan::Verdict::Sliced) << p.note;
  ASSERT_TRUE(p.scaled.has_value());
  EXPECT_EQ(p.scaled->axis, "params");
  EXPECT_EQ(p.scaled->full, 6738415616);
  EXPECT_EQ(p.scaled->slice, shape_value(p.run, "params"));
  EXPECT_EQ(p.scaled->slice % 256, 0);
  const double slice_need = 16.0 * double(p.scaled->slice) + 512.0 * (1 << 20);
  EXPECT_LE(slice_need, free);
  EXPECT_GT(slice_need, 0.8 * free) << "the largest slice that fits, not a timid one";
  EXPECT_NEAR(p.scaled->factor, double(p.scaled->full) / double(p.scaled->slice), 1e-9);
  EXPECT_NE(p.note.find("params="), std::string::npos) << p.note;
}

TEST(MemoryPlan, OtherOperatorsTooLargeDoNotFit) {
  const auto& gemm = OperatorRegistry::instance().get("gemm");
  const OpInstance huge = instance("gemm", "bf16", {{"m", 1 << 20}, {"n", 1 << 20}, {"k", 4096}});
  const MemoryPlan p = plan_memory(gemm, huge, 75 * kGiB, kReserve, {});
  EXPECT_EQ(p.verdict, MemoryPlan::Verdict::DoesNotFit);
  EXPECT_EQ(p.note.find('\n'), std::string::npos);
  EXPECT_NE(p.note.find("gemm"), std::string::npos) << p.note;
  EXPECT_NE(p.note.find("GiB"), std::string::npos) << p.note;
}

TEST(MemoryPlan, ProfileInstanceScalesTheSliceAndSkipsWhatDoesNotFit) {
  ExecContext ctx;
  ctx.device = "memtest";
  const OpInstance big = instance("residual_add", "bf16", {{"tokens", 1 << 20}, {"hidden", 4096}});  // 24 GiB
  const auto r = profile_instance(big, ctx, {});
  ASSERT_EQ(r.status, RecordStatus::Ok) << r.note;
  ASSERT_TRUE(r.scaled_from.has_value());
  EXPECT_EQ(r.shape.at("tokens"), 1 << 20);  // the record keeps the full shape ...
  EXPECT_EQ(r.details.at("ran_shape").get<std::string>().find("tokens=1048576"), std::string::npos);  // ... ran a slice
  // Scaled by bytes, the slice's time is the full shape's (the fake backend is exactly linear).
  EXPECT_NEAR(r.time->value, r.compulsory_bytes / 1e9 * 1e-3, 1e-9 * r.time->value);
  EXPECT_NEAR(r.time->stats.max / r.time->stats.median, 1.1, 1e-9);

  const OpInstance huge = instance("gemm", "bf16", {{"m", 65536}, {"n", 65536}, {"k", 4096}});  // 8.5 GiB
  const auto g = profile_instance(huge, ctx, {});
  EXPECT_EQ(g.status, RecordStatus::DoesNotFit);
  EXPECT_FALSE(g.time.has_value());
  EXPECT_NE(g.note.find("needs"), std::string::npos) << g.note;

  const OpInstance small = instance("gemm", "bf16", {{"m", 256}, {"n", 256}, {"k", 256}});
  const auto s = profile_instance(small, ctx, {});
  EXPECT_EQ(s.status, RecordStatus::Ok);
  EXPECT_FALSE(s.scaled_from.has_value());
}

TEST(StepTotals, FlopRateCoversTimedRecordsOnlyAndTheRestIsNamed) {
  ExecContext ctx;
  ctx.device = "memtest";
  rafter::Run run;
  run.device.id = "memtest";
  run.records.push_back(profile_instance(instance("gemm", "bf16", {{"m", 256}, {"n", 256}, {"k", 256}}), ctx, {}));
  rafter::OperatorRecord untimed = planned_record(instance("gemm", "bf16", {{"m", 4096}, {"n", 4096}, {"k", 4096}}), {});
  untimed.status = RecordStatus::Failed;
  run.records.push_back(untimed);
  const StepTotals t = step_totals(run);
  EXPECT_DOUBLE_EQ(t.timed_flops, run.records[0].total_flops());
  EXPECT_DOUBLE_EQ(t.timed_flops_per_second(), run.records[0].total_flops() / run.records[0].time->value);
  EXPECT_NEAR(t.untimed_flops_share(), untimed.total_flops() / t.flops, 1e-12);
  const std::string table = run_table(run);
  EXPECT_NE(table.find("over the timed operators"), std::string::npos) << table;
  EXPECT_NE(table.find("not covered by a timed record: 100.0% of the step's FLOPs"), std::string::npos) << table;
}

// Collectives whose overlap with the step's GEMMs was measured (cuda.nccl's details.overlap):
// the table says how much of their time per step stays exposed.
TEST(StepTotals, MeasuredOverlapIsSummed) {
  rafter::Run run;
  run.device.id = "memtest";
  rafter::OperatorRecord gather =
      planned_record(instance("all_gather", "bf16", {{"elements", 1024}, {"ranks", 2}}), {});
  gather.status = RecordStatus::Ok;
  gather.time = rafter::Figure{};
  gather.time->value = 2e-3;
  gather.count = 4;
  gather.details["overlap"] = {{"collective_s", 2e-3}, {"exposed_collective_s", 0.5e-3}};
  run.records.push_back(gather);
  std::string table = run_table(run);
  EXPECT_NE(table.find("overlap measured on 1 collective(s): 8.000 ms per step alone, 2.000 ms exposed "
                       "beside the step's GEMMs (75% hidden)"),
            std::string::npos)
      << table;
  run.records[0].details.erase("overlap");
  table = run_table(run);
  EXPECT_EQ(table.find("overlap measured"), std::string::npos) << table;
}

// profile_instance marks a record emulated wherever its backend names the precision it ran via.
TEST(MemoryPlan, RecordNamingItsPathIsEmulated) {
  ExecContext ctx;
  ctx.device = "viatest";
  const auto r = profile_instance(instance("gemm", "nvfp4", {{"m", 16}, {"n", 16}, {"k", 64}}), ctx, {});
  EXPECT_EQ(r.backend, "viatest.fake");
  EXPECT_EQ(r.emulated_via, "bf16");
  EXPECT_TRUE(r.emulated);
}
