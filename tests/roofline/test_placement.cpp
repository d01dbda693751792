// Placement math checked against hand-computed values (small_machine(): bf16 100 GFLOP/s,
// L2 50 GB/s, DRAM 10 GB/s, nvlink 5 GB/s).
#include <gtest/gtest.h>

#include "rafter/collector/error.hpp"
#include "rafter/roofline/placement.hpp"
#include "rafter/roofline/report.hpp"
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

// A small record's ratio far from 1 by less than kModelMismatchFloorBytes is the counted pass's own
// traffic, not the model's: shown, not flagged.
TEST(Placement, SmallDifferencesBelowTheFloorAreNotFlagged) {
  OperatorRecord r = make_record("final_norm", "bf16", 1e5, 2.5e4, 2.5e4, 2e-6);
  set_counted_bytes(r, "DRAM", 5.03e5);  // the model's 25 KB: 0.05 of the count, 0.48 MB apart
  auto rp = place_run(make_run({r}), small_machine());
  const Placement& p = rp.records.at(0);
  const LevelPoint& dram = p.levels.at(1);
  ASSERT_TRUE(dram.model_over_measured.has_value());
  EXPECT_NEAR(*dram.model_over_measured, 2.5e4 / 5.03e5, 1e-12);
  EXPECT_FALSE(dram.model_mismatch);
  for (const auto& remark : p.remarks) EXPECT_EQ(remark.find("model/measured"), std::string::npos) << remark;
  EXPECT_EQ(format_report_table(rp).find("0.05!"), std::string::npos);
  EXPECT_NE(format_report_table(rp).find("0.05"), std::string::npos);
  set_counted_bytes(r, "DRAM", 2.5e4 + 1.5 * kModelMismatchFloorBytes);  // past the floor: flagged
  EXPECT_TRUE(place_run(make_run({r}), small_machine()).records.at(0).levels.at(1).model_mismatch);
}

TEST(Placement, CountedBytesAndFlopsPlaceTheRecordAndMismatchesAreFlagged) {
  // Counted: L2 0.8 GB (the model said 0.4 GB: 0.50, flagged), DRAM 0.21 GB (model 0.2: 0.95, not
  // flagged), 1.1 GFLOP (model 1 GFLOP: within 25 %).
  OperatorRecord r = make_record("mlp", "bf16", 1e9, 4e8, 2e8, 0.025);
  set_counted_bytes(r, "L2", 8e8);
  set_counted_bytes(r, "DRAM", 2.1e8);
  r.flops_counted["bf16"] = 1.1e9;
  auto rp = place_run(make_run({r}), small_machine());
  const Placement& p = rp.records.at(0);
  EXPECT_EQ(p.flops_source, Source::Counter);
  EXPECT_DOUBLE_EQ(p.total_flops, 1.1e9);
  EXPECT_DOUBLE_EQ(p.model_flops, 1e9);
  ASSERT_EQ(p.levels.size(), 2u);
  EXPECT_EQ(p.levels[0].source, Source::Counter);
  EXPECT_DOUBLE_EQ(p.levels[0].ai_flops_per_byte, 1.1e9 / 8e8);
  ASSERT_TRUE(p.levels[0].model_over_measured.has_value());
  EXPECT_DOUBLE_EQ(*p.levels[0].model_over_measured, 0.5);
  EXPECT_NEAR(*p.levels[1].model_over_measured, 2e8 / 2.1e8, 1e-12);
  EXPECT_DOUBLE_EQ(p.bound_seconds, 0.021);  // counted DRAM bytes / 10 GB/s
  int flagged = 0;
  for (const auto& remark : p.remarks) flagged += remark.find("model/measured") != std::string::npos;
  EXPECT_EQ(flagged, 1);
  EXPECT_NE(format_report_footer(rp).find("model/measured L2 bytes 0.50"), std::string::npos);
  // The table gains one column per counted level; the flagged ratio carries a '!'.
  const auto table = format_report_table(rp);
  EXPECT_NE(table.find("model/measured L2"), std::string::npos);
  EXPECT_NE(table.find("model/measured DRAM"), std::string::npos);
  EXPECT_NE(table.find("0.50!"), std::string::npos);
  EXPECT_NE(table.find("0.95 "), std::string::npos);
  EXPECT_NE(format_report_csv(rp).find(",counter,0.5,"), std::string::npos);
  EXPECT_DOUBLE_EQ(report_json(rp)["records"][0]["levels"][0]["model_over_measured"].get<double>(), 0.5);
  // Counted FLOPs 3x the model's: flagged as well; an all-analytic run has no such column.
  r.flops_counted["bf16"] = 3e9;
  flagged = 0;
  const auto rp3 = place_run(make_run({r}), small_machine());
  for (const auto& remark : rp3.records[0].remarks)
    flagged += remark.find("model/measured") != std::string::npos;
  EXPECT_EQ(flagged, 2);
  const auto plain = format_report_table(place_run(make_run({make_record("mlp", "bf16", 1e9, 4e8, 2e8, 0.025)}),
                                                   small_machine()));
  EXPECT_EQ(plain.find("model/measured"), std::string::npos);
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

// A comm probe's ceilings (resource "mpi:2", operation the collective, isa the type, params.ranks)
// judge a collective of that rank count: its link bytes on the bus bandwidth, its time at least
// the smallest size's latency; another rank count falls back to the plain link roof.
TEST(Placement, CollectiveOnItsOwnMeasuredRoofs) {
  MachineProfile m = small_machine();
  auto comm = [&](CeilingKind kind, const char* op, const char* type, double value) {
    Ceiling c = test::make_ceiling(kind, "cpu", "mpi:2", value);
    c.operation = op, c.isa = type, c.params["ranks"] = 2;
    m.ceilings.push_back(c);
  };
  comm(CeilingKind::Link, "all_gather", "bf16", 40e9);
  comm(CeilingKind::Link, "all_gather", "bf16", 50e9);  // a second probe run: the best counts
  comm(CeilingKind::Latency, "all_gather", "bf16", 30e-6);
  comm(CeilingKind::Link, "all_reduce", "fp32", 20e9);
  auto gather = [](double bytes, double seconds, std::int64_t ranks, const char* op = "all_gather") {
    OperatorRecord r = make_record("zero3", "bf16", 0, 0, 0, seconds);
    r.op = op;
    r.flops.clear();
    r.bytes = {{"nvlink", bytes, Source::Analytic}, {"DRAM", 1e3, Source::Analytic}};
    r.shape = {{"elements", 1024}, {"ranks", ranks}};
    return r;
  };
  // 1 GB of bus bytes at 50 GB/s: 20 ms; measured 25 ms.
  auto rp = place_run(make_run({gather(1e9, 0.025, 2), gather(1e3, 40e-6, 2), gather(1e9, 0.4, 4),
                                gather(1e9, 0.1, 2, "all_reduce")}),
                      m);
  EXPECT_EQ(rp.records[0].binding_name(), "mpi:2 all_gather");
  EXPECT_DOUBLE_EQ(rp.records[0].bound_seconds, 0.02);
  EXPECT_DOUBLE_EQ(rp.records[0].efficiency, 0.8);
  EXPECT_EQ(rp.records[1].binding_name(), "mpi:2 all_gather latency");  // 1 kB: the latency floor
  EXPECT_DOUBLE_EQ(rp.records[1].bound_seconds, 30e-6);
  EXPECT_EQ(rp.records[2].binding_name(), "nvlink");  // 4 ranks: nothing measured, the link roof
  EXPECT_DOUBLE_EQ(rp.records[2].bound_seconds, 0.2);
  EXPECT_EQ(rp.records[3].binding_name(), "mpi:2 all_reduce");  // only fp32 measured: judged on it, said so
  EXPECT_DOUBLE_EQ(rp.records[3].bound_seconds, 0.05);
  bool said = false;
  for (const auto& remark : rp.records[3].remarks)
    said = said || remark.find("fp32 roofs (no bf16") != std::string::npos;
  EXPECT_TRUE(said);
}

// A collective whose message is larger than the sweep's largest size (the link ceiling's
// params.bytes) is judged on that roof all the same, with a remark that the roof may understate it.
TEST(Placement, CollectiveLargerThanItsRoofsSweepIsSaidSo) {
  MachineProfile m = small_machine();
  Ceiling c = test::make_ceiling(CeilingKind::Link, "cpu", "nccl:2", 263e9);
  c.operation = "all_gather", c.isa = "bf16", c.params["ranks"] = 2, c.params["bytes"] = double(1 << 30);
  m.ceilings.push_back(c);
  auto gather = [](std::int64_t elements) {
    OperatorRecord r = make_record("zero.param_all_gather", "bf16", 0, 0, 0, 0.0119);
    r.op = "all_gather";
    r.flops.clear();
    r.bytes = {{"nvlink", double(elements), Source::Analytic}};  // S · (n − 1)/n at 2 ranks, bf16
    r.shape = {{"elements", elements}, {"ranks", 2}};
    return r;
  };
  const auto rp = place_run(make_run({gather(3369207808), gather(1 << 29)}), m);
  const auto said = [](const Placement& p) {
    for (const auto& remark : p.remarks)
      if (remark.find("message is larger than the largest nccl:2 all_gather was measured at (1 GiB)") !=
          std::string::npos)
        return true;
    return false;
  };
  EXPECT_EQ(rp.records[0].binding_name(), "nccl:2 all_gather");
  EXPECT_TRUE(said(rp.records[0]));   // 6.7 GB
  EXPECT_FALSE(said(rp.records[1]));  // exactly 1 GiB
}

// cuda.nccl's measured overlap (details.overlap) summed over the step in the report's footer, and
// the step's time with the hidden part taken off.
TEST(Placement, MeasuredOverlapInTheReport) {
  OperatorRecord gemm = make_record("mlp", "bf16", 1e9, 4e8, 2e8, 0.025);  // count 2: 50 ms
  OperatorRecord gather = make_record("zero3", "bf16", 0, 0, 0, 0.002);
  gather.op = "all_gather";
  gather.flops.clear();
  gather.bytes = {{"nvlink", 1e6, Source::Analytic}};
  gather.count = 4;  // 8 ms alone, 2 ms of it exposed
  gather.details["overlap"] = {{"collective_s", 0.002}, {"exposed_collective_s", 0.0005}};
  const auto rp = place_run(make_run({gemm, gather}), small_machine());
  EXPECT_EQ(rp.overlap.records, 1);
  EXPECT_DOUBLE_EQ(rp.overlap.alone_seconds, 0.008);
  EXPECT_DOUBLE_EQ(rp.overlap.exposed_seconds, 0.002);
  const std::string footer = format_report_footer(rp);
  EXPECT_NE(footer.find("overlap measured on 1 collective(s)"), std::string::npos) << footer;
  EXPECT_NE(footer.find("(75% hidden)"), std::string::npos) << footer;
  EXPECT_NE(footer.find("with it the step would take 52.0 ms"), std::string::npos) << footer;  // 58 - 6
  EXPECT_EQ(format_report_footer(place_run(make_run({gemm}), small_machine())).find("overlap"),
            std::string::npos);
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

namespace rafter::roofline {
namespace {

// A GPU "cuda:0" with the three launch forms of cuda.launch: operator 3 us, graph node 1 us,
// stream 2.5 us; HBM 1 TB/s.
MachineProfile gpu_with_launch_floor() {
  MachineProfile m = test::small_machine();
  m.devices[0].id = "cuda:0";
  m.devices[0].kind = "cuda";
  m.devices[0].memory_levels = {{"L2", 50 << 20, 128, 1, 1}, {"HBM", 0, 64, 1, 1}};
  m.ceilings = {test::make_ceiling(CeilingKind::Compute, "cuda:0", "bf16", 900e12),
                test::make_ceiling(CeilingKind::Bandwidth, "cuda:0", "HBM", 1e12)};
  for (auto [form, seconds] : {std::pair{"operator", 3e-6}, {"graph_node", 1e-6}, {"stream", 2.5e-6}}) {
    Ceiling c = test::make_ceiling(CeilingKind::Latency, "cuda:0", "launch", seconds);
    c.operation = form;
    m.ceilings.push_back(c);
  }
  return m;
}

OperatorRecord gpu_record(const std::string& label, double hbm_bytes, double seconds) {
  OperatorRecord r = test::make_record(label, "bf16", 1e3, 0, hbm_bytes, seconds);
  r.device = "cuda:0";
  r.bytes = {{"HBM", hbm_bytes, Source::Analytic}};
  return r;
}

}  // namespace

TEST(Placement, LaunchFloorBindsSmallGpuOperatorsAndNamesThem) {
  // 64 KB at 1 TB/s is 64 ns: the 3 us launch floor binds; 4 us is within 1.5x of it.
  rafter::Run run = test::make_run({gpu_record("decode.rmsnorm", 64e3, 4e-6), gpu_record("mlp", 4e9, 5e-3)});
  run.device.id = "cuda:0";
  run.device.kind = "cuda";
  auto rp = place_run(run, gpu_with_launch_floor());
  ASSERT_TRUE(rp.roofs.launch_latency_seconds.has_value());
  EXPECT_DOUBLE_EQ(*rp.roofs.launch_latency_seconds, 3e-6);  // the form operators are timed in
  const Placement& small = rp.records.at(0);
  EXPECT_EQ(small.binding_name(), "launch");
  EXPECT_DOUBLE_EQ(small.bound_seconds, 3e-6);
  EXPECT_DOUBLE_EQ(small.efficiency, 0.75);
  bool named = false;
  for (const auto& r : small.remarks) named = named || r.find("launch-bound") != std::string::npos;
  EXPECT_TRUE(named);
  const Placement& big = rp.records.at(1);
  EXPECT_EQ(big.binding_name(), "HBM");
  for (const auto& r : big.remarks) EXPECT_EQ(r.find("launch-bound"), std::string::npos) << r;
  // 2 records x count 2 = 4 launches: as one graph >= 4 us, one by one >= 10 us.
  const std::string footer = format_report_footer(rp);
  EXPECT_NE(footer.find("as one CUDA graph 4.00 µs"), std::string::npos) << footer;
  EXPECT_NE(footer.find("launched one by one 10.0 µs"), std::string::npos) << footer;
}

TEST(Placement, LaunchFloorIsTheFastestEmptyLaunch) {
  // The H100's decode residual add (3.78 us median) ran faster than the empty kernel's median
  // (3.87 us; fastest 3.30): the floor is the fastest sample, and no efficiency passes 100 %.
  MachineProfile m = gpu_with_launch_floor();
  for (auto& c : m.ceilings)
    if (c.resource == "launch" && c.operation == "operator") {
      c.figure.value = c.figure.stats.median = 3.87e-6;
      c.figure.stats.min = 3.30e-6;
      c.figure.stats.max = 6.11e-6;
      c.figure.stats.samples = 1600;
    }
  rafter::Run run = test::make_run({gpu_record("decode.residual", 64e3, 3.78e-6)});
  run.device.id = "cuda:0";
  run.device.kind = "cuda";
  auto rp = place_run(run, m);
  EXPECT_DOUBLE_EQ(*rp.roofs.launch_latency_seconds, 3.30e-6);
  EXPECT_EQ(rp.records.at(0).binding_name(), "launch");
  EXPECT_NEAR(rp.records.at(0).efficiency, 3.30 / 3.78, 1e-12);
}

TEST(Placement, CpuLaunchFloorNamesButDoesNotBind) {
  // small_machine's CPU has a 2 us launch ceiling: a 2.5 us record is named launch-bound, but a CPU
  // operator that stays on the calling thread never dispatches, so the floor is no bound there.
  auto rp = place_run(test::make_run({test::make_record("tiny", "bf16", 1e3, 1e3, 1e3, 2.5e-6)}), test::small_machine());
  const Placement& p = rp.records.at(0);
  EXPECT_NE(p.binding_name(), "launch");
  bool named = false;
  for (const auto& r : p.remarks) named = named || r.find("launch-bound") != std::string::npos;
  EXPECT_TRUE(named);
  // A 1.5 us record ran faster than the floor: it stayed on the caller, and the floor is not its
  // (an Ice Lake VM's default job called 10 µs records "within 1.5x" of a 67.5 µs floor).
  auto under = place_run(test::make_run({test::make_record("tinier", "bf16", 1e3, 1e3, 1e3, 1.5e-6)}),
                         test::small_machine());
  for (const auto& r : under.records.at(0).remarks) EXPECT_EQ(r.find("launch-bound"), std::string::npos) << r;
}

}  // namespace rafter::roofline

namespace rafter::roofline {

TEST(Placement, MemoryRoofOfTheRecordsOwnReadWriteMix) {
  // HBM read 3.2, triad (2:1) 3.1, copy (1:1) 3.0, write 3.3 TB/s.
  MachineProfile m = test::small_machine();
  m.ceilings.clear();
  for (auto [op, bw] : {std::pair{"read", 3.2e12}, {"triad", 3.1e12}, {"copy", 3.0e12}, {"write", 3.3e12}}) {
    Ceiling c = test::make_ceiling(CeilingKind::Bandwidth, "cpu", "DRAM", bw);
    c.operation = op;
    m.ceilings.push_back(c);
  }
  const DeviceRoofs roofs = roofs_for(m, "cpu");
  const BandwidthRoof* dram = roofs.memory_for("DRAM");
  ASSERT_NE(dram, nullptr);
  ASSERT_EQ(dram->mixes.size(), 4u);
  EXPECT_DOUBLE_EQ(dram->bytes_per_second, 3.3e12);  // charts draw the best
  EXPECT_DOUBLE_EQ(dram->at_mix(std::nullopt), 3.3e12);
  EXPECT_DOUBLE_EQ(dram->at_mix(0.0), 3.2e12);
  EXPECT_DOUBLE_EQ(dram->at_mix(1.0 / 3), 3.1e12);
  EXPECT_NEAR(dram->at_mix(5.0 / 12), 3.05e12, 1e3);  // halfway between triad and copy
  EXPECT_NEAR(dram->at_mix(0.75), 3.15e12, 1e3);
  // A residual add (2 reads, 1 write) of 3 GB: judged on the triad roof, not the write-only one.
  OperatorRecord r = test::make_record("residual", "bf16", 1e9, 0, 3e9, 1e-3);
  r.bytes = {{"DRAM", 3e9, Source::Analytic}};
  r.write_fraction = 1.0 / 3;
  auto rp = place_run(test::make_run({r}), m);
  EXPECT_EQ(rp.records[0].binding_name(), "DRAM");
  EXPECT_NEAR(rp.records[0].bound_seconds, 3e9 / 3.1e12, 1e-15);
}

TEST(Placement, SmallOperatorsAreJudgedOnStreamsOfTheirSize) {
  // Operator-sized streams: triad 3.1 TB/s; streams of 3 x 32 MiB (the L2 keeps part of their
  // written lines when the timing stops): triad 3.4, copy 3.6, for records below 384 / 256 MiB.
  MachineProfile m = test::small_machine();
  m.ceilings.clear();
  Ceiling triad = test::make_ceiling(CeilingKind::Bandwidth, "cpu", "DRAM", 3.1e12);
  triad.operation = "triad";
  Ceiling small_triad = triad, small_copy = triad;
  small_triad.isa = small_copy.isa = "stream_small_operator";
  small_triad.figure.value = 3.4e12;
  small_triad.params["small_operators_below_bytes"] = 384.0 * (1 << 20);
  small_copy.operation = "copy";
  small_copy.figure.value = 3.6e12;
  small_copy.params["small_operators_below_bytes"] = 256.0 * (1 << 20);
  m.ceilings = {triad, small_triad, small_copy};
  // Never the level's own roof: best() and the charts keep the operator-sized 3.1.
  EXPECT_DOUBLE_EQ(m.best("cpu", CeilingKind::Bandwidth, "DRAM")->figure.value, 3.1e12);
  const DeviceRoofs roofs = roofs_for(m, "cpu");
  const BandwidthRoof* dram = roofs.memory_for("DRAM");
  ASSERT_NE(dram, nullptr);
  EXPECT_DOUBLE_EQ(dram->bytes_per_second, 3.1e12);
  ASSERT_EQ(dram->mixes.size(), 1u);
  ASSERT_EQ(dram->small_mixes.size(), 2u);
  EXPECT_DOUBLE_EQ(dram->at(1.0 / 3, 100e6), 3.4e12);  // a 100 MB residual add
  EXPECT_DOUBLE_EQ(dram->at(1.0 / 3, 500e6), 3.1e12);  // above 384 MiB: the level's roof
  EXPECT_DOUBLE_EQ(dram->at(0.5, 100e6), 3.6e12);      // a copy mix
  EXPECT_DOUBLE_EQ(dram->at(std::nullopt, 100e6), 3.1e12);
  // The 7B prefill step's residual add: 3 x 32 MiB in 30.9 us, 3.26 TB/s, at 96 % of its roof
  // (105 % of the operator-sized triad's).
  OperatorRecord r = test::make_record("residual", "bf16", 0, 0, 3.0 * (32 << 20), 30.9e-6);
  r.bytes = {{"DRAM", 3.0 * (32 << 20), Source::Analytic}};
  r.write_fraction = 1.0 / 3;
  auto rp = place_run(test::make_run({r}), m);
  EXPECT_NEAR(rp.records[0].bound_seconds, 3.0 * (32 << 20) / 3.4e12, 1e-15);
  EXPECT_LE(rp.records[0].bound_seconds, 30.9e-6);
}

TEST(Placement, PartitionBandwidthIsNotTheLevelsRoof) {
  // cuda.l2_partitions: every SM on lines of its near partition reads faster than any operator
  // can, whose lines fall in both partitions; the L2 roof stays the plain read.
  MachineProfile m = test::small_machine();
  m.ceilings.clear();
  Ceiling read = test::make_ceiling(CeilingKind::Bandwidth, "cpu", "L2", 9.7e12);
  read.operation = "read";
  Ceiling near = read, far = read;
  near.operation = "read_near_partition";
  near.figure.value = 11e12;
  near.params["l2_partition"] = "near";
  far.operation = "read_far_partition";
  far.figure.value = 7e12;
  far.params["l2_partition"] = "far";
  m.ceilings = {near, read, far};
  EXPECT_DOUBLE_EQ(m.best("cpu", CeilingKind::Bandwidth, "L2")->figure.value, 9.7e12);
  const DeviceRoofs roofs = roofs_for(m, "cpu");
  const BandwidthRoof* l2 = roofs.memory_for("L2");
  ASSERT_NE(l2, nullptr);
  EXPECT_DOUBLE_EQ(l2->bytes_per_second, 9.7e12);
  ASSERT_EQ(l2->mixes.size(), 1u);
}

}  // namespace rafter::roofline

namespace rafter::roofline {

// The CUDA probe names its FP8 ceilings by format (fp8_e4m3, fp8_e5m2, as machine.json holds them);
// every FP8 record is judged on the class "fp8": its best ceiling, a held one first where the class
// has one. Before, compute_for("fp8") met no roof named "fp8" and FP8 GEMMs went unjudged on compute.
TEST(Placement, FormatNamedFp8CeilingsMakeTheFp8ClassRoof) {
  MachineProfile m = test::small_machine();
  std::erase_if(m.ceilings, [](const Ceiling& c) { return c.resource == "fp8"; });
  m.ceilings.push_back(test::make_ceiling(CeilingKind::Compute, "cpu", "fp8_e5m2", 180e9));
  m.ceilings.push_back(test::make_ceiling(CeilingKind::Compute, "cpu", "fp8_e4m3", 200e9));
  const DeviceRoofs roofs = roofs_for(m, "cpu");
  ASSERT_NE(roofs.compute_for("fp8_e4m3"), nullptr);
  EXPECT_EQ(roofs.compute_for("fp8_e4m3")->precision, "fp8");
  EXPECT_DOUBLE_EQ(roofs.compute_for("fp8_e5m2_e4m3")->flops_per_second, 200e9);
  int fp8_roofs = 0;
  for (const auto& c : roofs.compute) fp8_roofs += c.precision == "fp8";
  EXPECT_EQ(fp8_roofs, 1);
  // 4 GFLOP of E5M2 x E4M3 (a backward GEMM) in 25 ms: 20 ms on the FP8 roof, 80 %.
  OperatorRecord r = test::make_record("dgrad", "fp8_e5m2_e4m3", 0, 1e6, 1e6, 0.025);
  r.flops = {{"fp8_e5m2_e4m3", 4e9}};
  auto rp = place_run(test::make_run({r}), m);
  const Placement& p = rp.records.at(0);
  EXPECT_EQ(p.binding_name(), "fp8 compute");
  EXPECT_DOUBLE_EQ(p.efficiency, 0.8);
  for (const auto& remark : p.remarks)
    EXPECT_EQ(remark.find("no fp8 compute roof"), std::string::npos) << remark;
  // Held at the power limit, E5M2 alone: the class takes it over the faster burst E4M3.
  Ceiling held = test::make_ceiling(CeilingKind::Compute, "cpu", "fp8_e5m2", 150e9);
  held.regime = "sustained";
  m.ceilings.push_back(held);
  EXPECT_DOUBLE_EQ(roofs_for(m, "cpu", true).compute_for("fp8")->flops_per_second, 150e9);
  EXPECT_DOUBLE_EQ(roofs_for(m, "cpu").compute_for("fp8")->flops_per_second, 200e9);
}

TEST(Placement, TrainingStepsAreJudgedOnSustainedComputeRoofs) {
  // bf16: 100 GFLOP/s in a burst, 80 held at the power limit; fp32 burst only.
  MachineProfile m = test::small_machine();
  Ceiling held = test::make_ceiling(CeilingKind::Compute, "cpu", "bf16", 80e9);
  held.regime = "sustained";
  m.ceilings.push_back(held);
  EXPECT_DOUBLE_EQ(m.best("cpu", CeilingKind::Compute, "bf16")->figure.value, 100e9);  // burst by default
  EXPECT_DOUBLE_EQ(m.best("cpu", CeilingKind::Compute, "bf16", "device", "sustained")->figure.value, 80e9);
  const DeviceRoofs burst = roofs_for(m, "cpu"), sustained = roofs_for(m, "cpu", true);
  EXPECT_EQ(burst.compute_regime, "burst");
  EXPECT_DOUBLE_EQ(burst.compute_for("bf16")->flops_per_second, 100e9);
  EXPECT_EQ(sustained.compute_regime, "sustained where measured");
  EXPECT_DOUBLE_EQ(sustained.compute_for("bf16")->flops_per_second, 80e9);
  EXPECT_DOUBLE_EQ(sustained.compute_for("fp32")->flops_per_second, 50e9);  // no held fp32: the burst one
  // 8 GFLOP in bf16: 80 ms held, 100 ms measured; a prefill is judged on the burst roof (80 ms -> 80 %).
  rafter::Run run = test::make_run({test::make_record("mlp", "bf16", 8e9, 1e6, 1e6, 0.1)});
  run.suite = {{"model", "m"}, {"phase", "train"}};
  auto rp = place_run(run, m);
  EXPECT_DOUBLE_EQ(rp.records[0].bound_seconds, 0.1);
  EXPECT_NE(format_report_table(rp).find("compute roofs: sustained where measured"), std::string::npos);
  run.suite["phase"] = "prefill";
  rp = place_run(run, m);
  EXPECT_DOUBLE_EQ(rp.records[0].bound_seconds, 0.08);
  EXPECT_NE(format_report_table(rp).find("compute roofs: burst"), std::string::npos);
}

}  // namespace rafter::roofline
