// Placement math checked against hand-computed values (small_machine(): bf16 100 GFLOP/s,
// L2 50 GB/s, DRAM 10 GB/s, nvlink 5 GB/s).
#include <gtest/gtest.h>

#include "rafter/collector/error.hpp"
#include "rafter/roofline/placement.hpp"
#include "roofline_test_util.hpp"

namespace rafter::roofline {
namespace {
using test::make_record;
using test::make_run;
using test::small_machine;

TEST(Placement, BoundsEfficiencyAndGapByHand) {
  // 1 GFLOP, 0.4 GB at L2, 0.2 GB at DRAM, 25 ms: t_bf16 = 10 ms, t_L2 = 8 ms, t_DRAM = 20 ms.
  auto rp = place_run(make_run({make_record("mlp", "bf16", 1e9, 4e8, 2e8, 0.025)}), small_machine());
  const Placement& p = rp.records.at(0);
  ASSERT_TRUE(p.timed);
  ASSERT_TRUE(p.binding.has_value());
  EXPECT_EQ(p.binding->kind, ResourceKind::Memory);
  EXPECT_EQ(p.binding_name(), "DRAM");
  EXPECT_DOUBLE_EQ(p.bound_seconds, 0.02);
  EXPECT_DOUBLE_EQ(p.efficiency, 0.8);
  EXPECT_NEAR(p.gap_seconds, 0.005, 1e-15);
  EXPECT_DOUBLE_EQ(p.flops_per_second, 40e9);
  ASSERT_EQ(p.levels.size(), 2u);
  EXPECT_EQ(p.levels[0].level, "L2");  // innermost first
  EXPECT_DOUBLE_EQ(p.levels[0].ai_flops_per_byte, 2.5);
  EXPECT_DOUBLE_EQ(p.levels[1].ai_flops_per_byte, 5.0);
  EXPECT_DOUBLE_EQ(p.levels[1].roof_flops_per_second, 50e9);   // min(100 G, 5 x 10 G)
  EXPECT_DOUBLE_EQ(p.levels[0].roof_flops_per_second, 100e9);  // min(100 G, 2.5 x 50 G)
  // Step: count 2.
  EXPECT_DOUBLE_EQ(rp.step_seconds, 0.05);
  EXPECT_DOUBLE_EQ(rp.bound_step_seconds, 0.04);
  EXPECT_DOUBLE_EQ(p.share_of_step, 1.0);
}

TEST(Placement, ComputeBoundAndFasterThanRoofIsFlagged) {
  // 5 GFLOP in bf16: t = 50 ms on compute; measured 40 ms is faster than the roof allows.
  auto rp = place_run(make_run({make_record("qkv", "bf16", 5e9, 1e8, 1e8, 0.04)}), small_machine());
  const Placement& p = rp.records.at(0);
  EXPECT_EQ(p.binding_name(), "bf16 compute");
  EXPECT_DOUBLE_EQ(p.bound_seconds, 0.05);
  EXPECT_DOUBLE_EQ(p.efficiency, 1.25);
  bool flagged = false;
  for (const auto& r : p.remarks) flagged = flagged || r.find("faster than the roof") != std::string::npos;
  EXPECT_TRUE(flagged);
}

TEST(Placement, EmulatedRecordIsJudgedOnItsPathsRoof) {
  // nvfp4 emulated via fp8: its 2 GFLOP are judged on the fp8 roof (200 G): 10 ms, not on an fp4 roof.
  OperatorRecord r = make_record("fp4_gemm", "nvfp4", 0, 1e6, 1e6, 0.02);
  r.flops = {{"fp4", 2e9}};
  r.emulated = true;
  r.emulated_via = "fp8_e4m3";
  auto rp = place_run(make_run({r}), small_machine());
  const Placement& p = rp.records.at(0);
  EXPECT_EQ(p.judged_as, "fp8");
  ASSERT_EQ(p.flops_by_class.count("fp8"), 1u);
  EXPECT_EQ(p.flops_by_class.count("fp4"), 0u);
  EXPECT_EQ(p.binding_name(), "fp8 compute");
  EXPECT_DOUBLE_EQ(p.bound_seconds, 0.01);
  EXPECT_DOUBLE_EQ(p.efficiency, 0.5);
}

TEST(Placement, UntimedRecordsShowTheirFloorOnly) {
  OperatorRecord r = make_record("lm_head", "bf16", 1e9, 4e8, 2e8, 1);
  r.time.reset();
  r.status = RecordStatus::Planned;
  OperatorRecord timed = make_record("mlp", "bf16", 1e9, 4e8, 2e8, 0.025);
  auto rp = place_run(make_run({timed, r}), small_machine());
  const Placement& p = rp.records.at(1);
  EXPECT_FALSE(p.timed);
  EXPECT_DOUBLE_EQ(p.bound_seconds, 0.02);
  EXPECT_DOUBLE_EQ(p.efficiency, 0);
  EXPECT_EQ(rp.timed_records, 1);
  EXPECT_EQ(rp.untimed_records, 1);
  EXPECT_DOUBLE_EQ(rp.step_seconds, 0.05);  // only the timed record counts
}

TEST(Placement, LinkBoundCollective) {
  // 50 MB over a 5 GB/s link: 10 ms; no FLOPs.
  OperatorRecord r = make_record("all_reduce", "bf16", 0, 0, 0, 0.0125);
  r.flops.clear();
  r.bytes = {{"nvlink", 5e7, Source::Analytic}};
  auto rp = place_run(make_run({r}), small_machine());
  const Placement& p = rp.records.at(0);
  EXPECT_EQ(p.binding->kind, ResourceKind::Link);
  EXPECT_DOUBLE_EQ(p.bound_seconds, 0.01);
  EXPECT_DOUBLE_EQ(p.efficiency, 0.8);
  EXPECT_TRUE(p.levels.empty());  // a link is not a memory level of the roofline chart
}

TEST(Placement, MissingRoofIsARemarkNotABound) {
  OperatorRecord r = make_record("int8_gemm", "int8", 1e9, 0, 2e8, 0.05);
  r.bytes = {{"DRAM", 2e8, Source::Analytic}, {"L3", 3e8, Source::Analytic}};
  auto rp = place_run(make_run({r}), small_machine());
  const Placement& p = rp.records.at(0);
  EXPECT_EQ(p.binding_name(), "DRAM");  // int8 and L3 have no roof here
  int remarks = 0;
  for (const auto& m : p.remarks) remarks += m.find("no ") == 0;
  EXPECT_EQ(remarks, 2);
}

TEST(Placement, CpuWithoutNativeBf16HasTheFp32PathAsItsBf16Roof) {
  // The probe's bf16 ceiling on a CPU without AVX512_BF16: the fp32 roof (50 G), labelled so.
  MachineProfile m = small_machine();
  std::erase_if(m.ceilings, [](const Ceiling& c) { return c.resource == "bf16"; });
  Ceiling bf16 = test::make_ceiling(CeilingKind::Compute, "cpu", "bf16", 50e9);
  bf16.params["emulated_via"] = "fp32";
  m.ceilings.push_back(bf16);
  // A bf16 GEMM that ran via fp32 and a native bf16 kernel (fp32 arithmetic on bf16 storage):
  // 1 GFLOP each, 25 ms; both floors are 20 ms of compute, no remark about a missing roof.
  OperatorRecord gemm = make_record("qkv", "bf16", 1e9, 1e6, 1e6, 0.025);
  gemm.emulated = true;
  gemm.emulated_via = "fp32";
  const OperatorRecord norm = make_record("norm", "bf16", 1e9, 1e6, 1e6, 0.025);
  const auto rp = place_run(make_run({gemm, norm}), m);
  ASSERT_NE(rp.roofs.compute_for("bf16"), nullptr);
  EXPECT_EQ(rp.roofs.compute_for("bf16")->emulated_via, "fp32");
  EXPECT_EQ(rp.records[0].judged_as, "fp32");
  EXPECT_EQ(rp.records[0].binding_name(), "fp32 compute");
  EXPECT_EQ(rp.records[1].judged_as, "bf16");
  EXPECT_EQ(rp.records[1].binding_name(), "bf16 compute");
  for (const auto& p : rp.records) {
    EXPECT_DOUBLE_EQ(p.bound_seconds, 0.02) << p.label;
    for (const auto& r : p.remarks) EXPECT_NE(r.find("no "), 0u) << r;
  }
}

TEST(Placement, WhatIfAnotherMachineHalvesTheMemoryFloor) {
  rafter::Run run = make_run({make_record("mlp", "bf16", 1e9, 4e8, 2e8, 0.025)});
  auto here = place_run(run, small_machine(10e9));
  auto there = place_run(run, small_machine(20e9));
  EXPECT_DOUBLE_EQ(here.records[0].bound_seconds, 0.02);
  EXPECT_DOUBLE_EQ(there.records[0].bound_seconds, 0.01);  // now bf16 compute (10 ms) ties DRAM
  EXPECT_DOUBLE_EQ(there.records[0].efficiency, 0.4);
}

TEST(Placement, DeviceOfTheSameKindStandsInAndAbsentKindThrows) {
  MachineProfile m = small_machine();
  rafter::Run run = make_run({make_record("mlp", "bf16", 1e9, 4e8, 2e8, 0.025)});
  run.device.id = "cpu:1";
  run.records[0].device = "cpu:1";
  EXPECT_EQ(place_run(run, m).roofs.device_id, "cpu");
  run.device.id = "cuda:0";
  run.records[0].device = "cuda:0";
  EXPECT_THROW(place_run(run, m), InputError);
}

TEST(Placement, ComputeClassNames) {
  EXPECT_EQ(compute_class_of("fp8_e4m3"), "fp8");
  EXPECT_EQ(compute_class_of("fp8_e5m2_e4m3"), "fp8");
  EXPECT_EQ(compute_class_of("nvfp4"), "fp4");
  EXPECT_EQ(compute_class_of("mxfp4"), "fp4");
  EXPECT_EQ(compute_class_of("bf16"), "bf16");
}

}  // namespace
}  // namespace rafter::roofline
