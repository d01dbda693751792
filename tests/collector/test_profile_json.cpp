// machine.json and run.json: round trips, flags, and errors that name the broken field.
#include <gtest/gtest.h>

#include "rafter/collector/error.hpp"
#include "rafter/collector/json_io.hpp"
#include "rafter/collector/machine_profile.hpp"
#include "rafter/collector/run_record.hpp"

using namespace rafter;

namespace {

Summary rate_summary(double median) {
  Summary s;
  s.samples = 5;
  s.median = s.mean = median;
  s.min = median * 0.98;
  s.max = median * 1.01;
  s.spread = 0.03;
  return s;
}

MachineProfile sample_profile() {
  MachineProfile p;
  p.rafter_version = "0.1.0";
  p.timestamp = "2026-11-22T17:00:00Z";
  p.host = "test";
  Device d;
  d.id = "cpu";
  d.kind = "cpu";
  d.name = "Test CPU";
  d.cores = 2;
  d.memory_levels = {{"L1", 32768, 64, 1, 2}, {"L2", 1 << 20, 64, 1, 2}, {"DRAM", 0, 64, 2, 1}};
  p.devices.push_back(d);
  Ceiling fma;
  fma.kind = CeilingKind::Compute;
  fma.device = "cpu";
  fma.resource = "fp64";
  fma.operation = "fma";
  fma.isa = "avx512";
  fma.scope = "device";
  fma.threads = 2;
  fma.figure = Figure::measured(rate_summary(150e9), "FLOP/s");
  fma.datasheet_value = 160e9;
  apply_flags(fma);
  p.ceilings.push_back(fma);
  Ceiling slow = fma;
  slow.isa = "avx2";
  slow.figure = Figure::measured(rate_summary(80e9), "FLOP/s");
  apply_flags(slow);
  p.ceilings.push_back(slow);
  Ceiling bw = fma;
  bw.kind = CeilingKind::Bandwidth;
  bw.resource = "DRAM";
  bw.operation = "load";
  bw.figure = Figure::measured(rate_summary(40e9), "B/s");
  bw.datasheet_value.reset();
  apply_flags(bw);
  p.ceilings.push_back(bw);
  return p;
}

}  // namespace

TEST(MachineProfile, FlagsFollowTheDatasheetRatio) {
  MachineProfile p = sample_profile();
  EXPECT_NEAR(*p.ceilings[0].datasheet_ratio, 150.0 / 160.0, 1e-12);
  EXPECT_EQ(p.ceilings[0].flag, "");
  EXPECT_EQ(p.ceilings[1].flag, "below_60pct_datasheet");
  Ceiling over = p.ceilings[0];
  over.figure.value = 170e9;
  apply_flags(over);
  EXPECT_EQ(over.flag, "above_datasheet");
}

TEST(MachineProfile, StealFlagsACeilingAndTravelsInItsClocks) {
  MachineProfile p = sample_profile();
  Ceiling& c = p.ceilings[0];
  EXPECT_DOUBLE_EQ(c.clocks.steal_fraction, -1);  // unknown unless measured
  EXPECT_FALSE(to_json(p)["ceilings"][0]["clocks"].contains("steal_fraction"));
  c.clocks.steal_fraction = 0.01;
  apply_flags(c);
  EXPECT_EQ(c.flag, "");
  c.clocks.steal_fraction = kStolenFlagFraction;
  c.clocks.throttled = true;  // the steal explains the slow clock chain too: it is named first
  apply_flags(c);
  EXPECT_EQ(c.flag, "stolen");
  const auto j = to_json(p);
  EXPECT_DOUBLE_EQ(j["ceilings"][0]["clocks"]["steal_fraction"].get<double>(), kStolenFlagFraction);
  const MachineProfile q = machine_profile_from_json(j);
  EXPECT_DOUBLE_EQ(q.ceilings[0].clocks.steal_fraction, kStolenFlagFraction);
  EXPECT_EQ(to_json(q), j);
  auto bad = j;
  bad["ceilings"][0]["clocks"]["steal_fraction"] = 1.5;
  try {
    machine_profile_from_json(bad);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "machine.json.ceilings[0].clocks.steal_fraction: expected a share in [0, 1]");
  }
}

TEST(MachineProfile, BestPicksTheFastestNativeCeiling) {
  MachineProfile p = sample_profile();
  const Ceiling* c = p.best("cpu", CeilingKind::Compute, "fp64");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->isa, "avx512");
  EXPECT_EQ(p.best("cpu", CeilingKind::Compute, "bf16"), nullptr);
  EXPECT_EQ(p.best("cpu", CeilingKind::Compute, "fp64", "core"), nullptr);
}

TEST(MachineProfile, JsonRoundTrip) {
  MachineProfile p = sample_profile();
  MachineProfile q = machine_profile_from_json(to_json(p));
  EXPECT_EQ(to_json(q), to_json(p));
  ASSERT_EQ(q.devices.size(), 1u);
  EXPECT_EQ(q.devices[0].memory_levels[1].size_bytes, 1 << 20);
  EXPECT_EQ(q.ceilings[2].kind, CeilingKind::Bandwidth);
  EXPECT_EQ(q.ceilings[0].figure.stats.samples, 5u);
  // A held (sustained) ceiling keeps its regime, and a new id beside the burst one.
  p.ceilings.push_back(p.ceilings[0]);
  p.ceilings.back().regime = "sustained";
  q = machine_profile_from_json(to_json(p));
  EXPECT_EQ(q.ceilings.back().regime, "sustained");
  EXPECT_EQ(q.ceilings[0].regime, "burst");
  EXPECT_NE(q.ceilings.back().id(), q.ceilings[0].id());
  auto j = to_json(p);
  j["ceilings"][0]["regime"] = "forever";
  EXPECT_THROW(machine_profile_from_json(j), FormatError);
  j["ceilings"][0].erase("regime");  // files from before the field: burst
  EXPECT_EQ(machine_profile_from_json(j).ceilings[0].regime, "burst");
}

// A second probe run into the same file: its probes replace their earlier ceilings (every ISA of
// them), the probes it did not run keep theirs with the time they were measured, and so do the
// devices and sweeps it did not touch.
TEST(MachineProfile, MergeKeepsWhatTheNewRunDidNotMeasure) {
  MachineProfile earlier = sample_profile();
  earlier.ceilings[0].probe = earlier.ceilings[1].probe = "cpu.compute";
  earlier.ceilings[2].probe = "cpu.bandwidth";
  Device gpu;
  gpu.id = "cuda:0";
  gpu.kind = "cuda";
  gpu.name = "NVIDIA H200";
  earlier.devices.push_back(gpu);
  Ceiling tensor = earlier.ceilings[0];
  tensor.device = "cuda:0";
  tensor.resource = "bf16";
  tensor.probe = "cuda.tensor";
  earlier.ceilings.push_back(tensor);
  earlier.sweeps.push_back({"cpu", "bandwidth", "load", "avx512", 2, false, {}});
  earlier.sweeps.push_back({"cpu", "latency", "chase", "scalar", 1, false, {}});

  MachineProfile fresh = sample_profile();
  fresh.timestamp = "2026-11-23T09:00:00Z";
  fresh.ceilings.resize(1);  // the avx512 FMA alone, measured again
  fresh.ceilings[0].probe = "cpu.compute";
  fresh.ceilings[0].figure = Figure::measured(rate_summary(155e9), "FLOP/s");
  fresh.sweeps.push_back({"cpu", "latency", "chase", "scalar", 1, false, {}});
  ASSERT_EQ(other_machine(earlier, fresh), "");

  const MachineProfile m = merge_earlier(earlier, fresh);
  ASSERT_EQ(m.devices.size(), 2u);
  EXPECT_EQ(m.devices[1].name, "NVIDIA H200");
  ASSERT_EQ(m.ceilings.size(), 3u);  // the new FMA; DRAM load and the GPU's BF16 kept; avx2 FMA gone
  EXPECT_EQ(m.ceilings[0].figure.value, 155e9);
  EXPECT_FALSE(m.ceilings[0].params.contains("measured_at"));
  EXPECT_EQ(m.ceilings[1].probe, "cpu.bandwidth");
  EXPECT_EQ(m.ceilings[1].params.value("measured_at", ""), earlier.timestamp);
  EXPECT_EQ(m.ceilings[2].device, "cuda:0");
  EXPECT_EQ(m.best("cpu", CeilingKind::Compute, "fp64")->figure.value, 155e9);
  ASSERT_EQ(m.sweeps.size(), 2u);  // the new latency sweep and the earlier bandwidth one
  EXPECT_EQ(m.sweeps[1].probe, "bandwidth");
  const auto& merged = m.conditions.at("merged");
  EXPECT_EQ(merged.at("kept_ceilings"), 2);
  EXPECT_EQ(merged.at("kept_sweeps"), 1);
  EXPECT_EQ(merged.at("kept_probes"), nlohmann::json({"cpu cpu.bandwidth", "cuda:0 cuda.tensor"}));
  EXPECT_EQ(merged.at("earlier_timestamp"), earlier.timestamp);
  EXPECT_EQ(machine_profile_from_json(to_json(m)).ceilings.size(), 3u);  // a valid machine.json

  // Merged once more, a kept ceiling keeps the time it was measured, not the merged file's.
  MachineProfile third = fresh;
  third.timestamp = "2026-11-24T09:00:00Z";
  const MachineProfile m2 = merge_earlier(m, third);
  EXPECT_EQ(m2.ceilings[1].params.value("measured_at", ""), earlier.timestamp);
  // Nothing kept: no merged note.
  EXPECT_FALSE(merge_earlier(fresh, fresh).conditions.contains("merged"));

  // Another host, or a device id that names another device, is another machine.
  MachineProfile elsewhere = earlier;
  elsewhere.host = "other";
  EXPECT_NE(other_machine(elsewhere, fresh).find("host 'other'"), std::string::npos);
  MachineProfile swapped = fresh;
  gpu.name = "NVIDIA H100 80GB HBM3";
  swapped.devices.push_back(gpu);
  EXPECT_NE(
      other_machine(earlier, swapped).find("cuda:0 there is 'NVIDIA H200', here 'NVIDIA H100 80GB HBM3'"),
      std::string::npos);
}

TEST(MachineProfile, BrokenFieldIsNamed) {
  auto j = to_json(sample_profile());
  j["ceilings"][1]["figure"]["value"] = "fast";
  try {
    machine_profile_from_json(j);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "machine.json.ceilings[1].figure.value: expected a number");
  }
  j = to_json(sample_profile());
  j["ceilings"][0]["figure"]["value"] = 0;
  EXPECT_THROW(machine_profile_from_json(j), FormatError);  // an absent ceiling is never 0
  j = to_json(sample_profile());
  j["schema"]["name"] = "rafter.run";
  EXPECT_THROW(machine_profile_from_json(j), FormatError);
  j = to_json(sample_profile());
  j["ceilings"][0]["device"] = "cuda:3";
  EXPECT_THROW(machine_profile_from_json(j), FormatError);
  j = to_json(sample_profile());
  j.erase("devices");
  try {
    machine_profile_from_json(j, "m.json");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "m.json.devices: missing");
  }
}

namespace {
Run sample_run() {
  Run run;
  run.rafter_version = "0.1.0";
  run.timestamp = "2026-11-22T17:00:00Z";
  run.device = sample_profile().devices[0];
  OperatorRecord r;
  r.op = "gemm";
  r.label = "layer.mlp.up_proj";
  r.phase = "fwd";
  r.backend = "cpu.onednn";
  r.device = "cpu";
  r.shape = {{"m", 64}, {"n", 128}, {"k", 256}};
  r.precision = "bf16";
  r.count = 32;
  r.status = RecordStatus::Ok;
  r.time = Figure::measured(rate_summary(1e-3), "s");
  r.flops = {{"bf16", 2.0 * 64 * 128 * 256}};
  r.bytes = {{"L1", 1e6, Source::Analytic}, {"DRAM", 2e5, Source::Analytic}};
  r.check = {true, true, 1e-3, 1e-2, "rel_l2", ""};
  run.records.push_back(r);
  OperatorRecord planned = r;
  planned.status = RecordStatus::NoBackend;
  planned.time.reset();
  planned.precision = "nvfp4";
  planned.emulated = true;
  planned.emulated_via = "bf16";
  run.records.push_back(planned);
  OperatorRecord sliced = r;  // timed on a slice that fits the device, scaled by bytes
  sliced.op = "adamw";
  sliced.shape = {{"params", 6738415616}};
  sliced.scaled_from = ScaledFrom{"params", 4563402752, 6738415616, 1.4766, 1.08e11, 8.0e10};
  run.records.push_back(sliced);
  OperatorRecord too_big = r;
  too_big.status = RecordStatus::DoesNotFit;
  too_big.time.reset();
  too_big.note = "gemm bf16 [...] needs 200 GiB of device memory; 75 GiB free";
  run.records.push_back(too_big);
  return run;
}
}  // namespace

TEST(RunRecord, JsonRoundTripAndHelpers) {
  rafter::Run run = sample_run();
  rafter::Run back = run_from_json(to_json(run));
  EXPECT_EQ(to_json(back), to_json(run));
  EXPECT_DOUBLE_EQ(back.records[0].total_flops(), 2.0 * 64 * 128 * 256);
  ASSERT_NE(back.records[0].bytes_at("DRAM"), nullptr);
  EXPECT_EQ(back.records[0].bytes_at("L3"), nullptr);
  EXPECT_EQ(back.records[1].status, RecordStatus::NoBackend);
  EXPECT_FALSE(back.records[1].time.has_value());
  ASSERT_TRUE(back.records[2].scaled_from.has_value());
  EXPECT_EQ(back.records[2].scaled_from->slice, 4563402752);
  EXPECT_EQ(back.records[3].status, RecordStatus::DoesNotFit);
  EXPECT_EQ(to_json(back.records[0].time.value()).value("value_is", ""), "median");
}

TEST(RunRecord, CountedBytesKeepTheModelBeside) {
  rafter::Run run = sample_run();
  OperatorRecord& r = run.records[0];
  set_counted_bytes(r, "DRAM", 4e5);  // model 2e5
  set_counted_bytes(r, "L2", 3e6);    // the model had no L2 figure
  r.flops_counted["bf16"] = 2.0 * 64 * 128 * 256;
  ASSERT_TRUE(r.bytes_at("DRAM")->model_bytes.has_value());
  EXPECT_DOUBLE_EQ(*model_over_measured(*r.bytes_at("DRAM")), 0.5);
  EXPECT_FALSE(model_over_measured(*r.bytes_at("L2")).has_value());
  EXPECT_FALSE(model_over_measured(*r.bytes_at("L1")).has_value());  // analytic
  for (const char* link : {"nvlink", "network", "pcie"}) EXPECT_TRUE(is_link_level(link)) << link;
  for (const char* level : {"L1", "L2", "DRAM", "HBM", "shared", "nvlink2"})
    EXPECT_FALSE(is_link_level(level)) << level;
  set_counted_bytes(r, "DRAM", 5e5);  // a second count keeps the model's figure, not the first count
  EXPECT_DOUBLE_EQ(*r.bytes_at("DRAM")->model_bytes, 2e5);
  const auto j = to_json(run);
  EXPECT_DOUBLE_EQ(j["records"][0]["bytes"][1]["model_over_measured"].get<double>(), 0.4);
  rafter::Run back = run_from_json(j);
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.records[0].bytes_at("L2")->source, Source::Counter);
  EXPECT_EQ(back.records[0].flops_counted, r.flops_counted);
  auto broken = j;
  broken["records"][0]["bytes"][0]["model_bytes"] = 1e6;  // L1 is analytic
  try {
    run_from_json(broken);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "run.json.records[0].bytes[0].model_bytes: only a counted level keeps a model figure");
  }
  broken = j;
  broken["records"][0]["flops_counted"]["bf16"] = -1;
  EXPECT_THROW(run_from_json(broken), FormatError);
}

TEST(RunRecord, BrokenFieldIsNamed) {
  auto j = to_json(sample_run());
  j["records"][0].erase("time");
  try {
    run_from_json(j);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "run.json.records[0].time: missing for a timed record");
  }
  j = to_json(sample_run());
  j["records"][1]["status"] = "great";
  EXPECT_THROW(run_from_json(j), FormatError);
  j = to_json(sample_run());
  j["records"][0]["bytes"][1]["source"] = "guess";
  EXPECT_THROW(run_from_json(j), FormatError);
  j = to_json(sample_run());
  j["records"][2]["scaled_from"]["slice"] = 7000000000;
  try {
    run_from_json(j);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "run.json.records[2].scaled_from.slice: must be positive and below full");
  }
  j = to_json(sample_run());
  j["records"][0]["shape"]["m"] = 1.5;
  try {
    run_from_json(j);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "run.json.records[0].shape.m: expected an integer");
  }
}

// Found by the fuzz targets (fuzz/regressions/machine_json, roofline_report): numbers JSON allows
// but no measurement has, and fields the roofline looks into that had no type check.
TEST(MachineProfile, ImplausibleNumbersAndTypesAreFormatErrors) {
  EXPECT_THROW(parse_json_text(R"({"a": 2e308})", "m.json"), FormatError);  // was nlohmann's out_of_range
  for (const double v : {1e-300, 5e-324, 1e300, -1.0}) {
    auto j = to_json(sample_profile());
    j["ceilings"][0]["figure"]["value"] = v;
    EXPECT_THROW(machine_profile_from_json(j), FormatError) << v;
  }
  auto j = to_json(sample_profile());
  j["ceilings"][0]["params"] = 3;
  EXPECT_THROW(machine_profile_from_json(j), FormatError);
  j = to_json(sample_profile());
  j["schema"]["version"] = nlohmann::json(std::uint64_t(1) << 63);  // would wrap to a negative int64
  EXPECT_THROW(machine_profile_from_json(j), FormatError);
}

TEST(RunRecord, ImplausibleNumbersAndTypesAreFormatErrors) {
  auto j = to_json(sample_run());
  j["records"][0]["time"]["value"] = 5e-324;
  EXPECT_THROW(run_from_json(j), FormatError);
  j = to_json(sample_run());
  j["records"][0]["bytes"][0]["bytes"] = -4096;
  EXPECT_THROW(run_from_json(j), FormatError);
  j = to_json(sample_run());
  j["suite"]["phase"] = 3;
  EXPECT_THROW(run_from_json(j), FormatError);
  j = to_json(sample_run());
  j["records"][0]["flops"] = {{"bf16", 0}};  // zero stays a valid quantity
  EXPECT_NO_THROW(run_from_json(j));
}
