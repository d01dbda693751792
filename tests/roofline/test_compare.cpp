// Comparisons: runs matched by label and phase across precisions, machines ceiling by ceiling,
// and the fixtures' BF16 / FP8 / NVFP4 runs (NVFP4 emulated on FP8 roofs).
#include <gtest/gtest.h>

#include "rafter/roofline/charts.hpp"
#include "rafter/roofline/compare.hpp"
#include "rafter/roofline/inputs.hpp"
#include "rafter/roofline/report.hpp"
#include "roofline_test_util.hpp"

namespace rafter::roofline {
namespace {
using test::fixture;

TEST(Compare, RunsMatchByLabelAcrossPrecisions) {
  MachineProfile m = load_machine(fixture("machine_h100.json"));
  std::vector<RunPlacement> cols;
  for (const char* f : {"run_gpu_bf16.json", "run_gpu_fp8.json", "run_gpu_nvfp4.json"})
    cols.push_back(place_run(load_run(fixture(f)), m, f));
  auto cmp = compare_runs(std::move(cols));
  ASSERT_EQ(cmp.columns.size(), 3u);
  EXPECT_EQ(cmp.rows.size(), cmp.columns[0].records.size());  // same operators in every run
  for (const auto& row : cmp.rows)
    for (const Placement* p : row.cells) ASSERT_NE(p, nullptr) << row.key;
  const CompareRow& qkv = cmp.rows.front();
  EXPECT_EQ(qkv.cells[0]->precision, "bf16");
  EXPECT_EQ(qkv.cells[1]->precision, "fp8_e4m3");
  EXPECT_EQ(qkv.cells[2]->judged_as, "fp8");  // nvfp4 emulated: on fp8 roofs
  EXPECT_LT(cmp.columns[1].step_seconds, cmp.columns[0].step_seconds);
  std::string table = format_run_comparison_table(cmp);
  EXPECT_NE(table.find("[C]/A time"), std::string::npos);
  EXPECT_NE(format_run_comparison_csv(cmp).find("nvfp4"), std::string::npos);
}

// The fixture machines name their ceilings as the probes do (FP8 by format: fp8_e4m3, fp8_e5m2):
// every GPU record of the fixture runs meets a compute roof for each class of its FLOPs.
TEST(Compare, EveryFixtureGpuRecordMeetsItsComputeRoofs) {
  for (const char* machine : {"machine_h100.json", "machine_h200.json"})
    for (const char* f : {"run_gpu_bf16.json", "run_gpu_fp8.json", "run_gpu_nvfp4.json"}) {
      const RunPlacement rp = place_run(load_run(fixture(f)), load_machine(fixture(machine)), f);
      for (const auto& p : rp.records) {
        for (const auto& remark : p.remarks)
          EXPECT_EQ(remark.find("compute roof"), std::string::npos)
              << machine << " " << f << " " << p.label << ": " << remark;
        for (const auto& b : p.bounds) {
          if (b.kind == ResourceKind::Compute) {
            EXPECT_GT(b.ceiling, 0) << machine << " " << f << " " << p.label << " " << b.resource;
          }
        }
      }
    }
}

TEST(Compare, WorkKindsNameEveryCatalogueOperator) {
  EXPECT_EQ(work_kind("gemm"), "GEMM");
  for (const char* op : {"attention_prefill", "attention_decode", "attention_backward", "attention_softmax",
                         "gla_chunked", "gla_decode"})
    EXPECT_EQ(work_kind(op), "attention") << op;
  for (const char* op : {"quantize", "dequantize", "hot_channel_patch"})
    EXPECT_EQ(work_kind(op), "quantization") << op;
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"})
    EXPECT_EQ(work_kind(op), "communication") << op;
  for (const char* op :
       {"rmsnorm", "swiglu", "rope", "residual_add", "embedding", "cross_entropy", "adamw", "softmax"})
    EXPECT_EQ(work_kind(op), "memory-bound") << op;
}

TEST(Compare, QuantizationOverheadIsItsOwnSlice) {
  // A BF16 step (GEMM + norm) beside an NVFP4 one that adds quantize and hot-channel patch records.
  auto rec = [](const std::string& op, const std::string& label, const std::string& prec, double seconds) {
    OperatorRecord r = test::make_record(label, prec, 1e9, 1e8, 1e8, seconds);
    r.op = op;
    return r;
  };
  rafter::Run bf16 = test::make_run({rec("gemm", "qkv", "bf16", 0.04), rec("rmsnorm", "norm", "bf16", 0.01)});
  rafter::Run fp4 = test::make_run({rec("gemm", "qkv", "nvfp4", 0.02), rec("rmsnorm", "norm", "bf16", 0.01),
                                    rec("quantize", "qkv.quantize_x", "nvfp4", 0.004),
                                    rec("hot_channel_patch", "qkv.hot", "bf16", 0.001)});
  std::vector<RunPlacement> cols;
  cols.push_back(place_run(bf16, test::small_machine(), "bf16"));
  cols.push_back(place_run(fp4, test::small_machine(), "nvfp4"));
  EXPECT_DOUBLE_EQ(cols[1].step_seconds_by_work.at("quantization"), 2 * (0.004 + 0.001));  // count 2
  EXPECT_EQ(cols[0].step_seconds_by_work.count("quantization"), 0u);
  EXPECT_NE(format_report_footer(cols[1]).find(
                "time by kind of work:  GEMM 57%  quantization 14%  memory-bound 29%"),
            std::string::npos)
      << format_report_footer(cols[1]);
  auto cmp = compare_runs(std::move(cols));
  const std::string table = format_run_comparison_table(cmp);
  EXPECT_NE(table.find("step time by kind of work"), std::string::npos) << table;
  EXPECT_NE(table.find("quantization"), std::string::npos) << table;
  const std::string svg = run_comparison_svg(cmp);
  EXPECT_NE(svg.find("data-run=\"B\" data-kind=\"quantization\""), std::string::npos);
  EXPECT_EQ(svg.find("data-run=\"A\" data-kind=\"quantization\""), std::string::npos);
  EXPECT_NE(svg.find("data-run=\"A\" data-kind=\"GEMM\""), std::string::npos);
  EXPECT_DOUBLE_EQ(
      run_comparison_json(cmp)["columns"][1]["step_seconds_by_work"]["quantization"].get<double>(), 0.01);
}

TEST(Compare, RepeatedLabelsMatchInOrder) {
  rafter::Run a = test::make_run({test::make_record("x", "bf16", 1e9, 1e8, 1e8, 0.02), test::make_record("x", "bf16", 2e9, 1e8, 1e8, 0.04)});
  std::vector<RunPlacement> cols;
  cols.push_back(place_run(a, test::small_machine(), "a"));
  cols.push_back(place_run(a, test::small_machine(20e9), "b"));
  auto cmp = compare_runs(std::move(cols));
  ASSERT_EQ(cmp.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(cmp.rows[1].cells[1]->seconds_per_call, 0.04);
}

TEST(Compare, MachinesCeilingByCeiling) {
  auto cmp = compare_machines({"h100", "h200"}, {load_machine(fixture("machine_h100.json")), load_machine(fixture("machine_h200.json"))},
                              "cuda:0");
  const CeilingRow* hbm = nullptr;
  for (const auto& r : cmp.rows)
    if (r.kind == "memory" && r.resource == "HBM") hbm = &r;
  ASSERT_NE(hbm, nullptr);
  EXPECT_DOUBLE_EQ(hbm->values[0], 3.0e12);
  EXPECT_DOUBLE_EQ(hbm->values[1], 4.3e12);
  // The emulated fp4 ceiling never stands in for a native roof.
  for (const auto& r : cmp.rows) EXPECT_FALSE(r.kind == "compute" && r.resource == "fp4");
  EXPECT_NE(format_machine_comparison_table(cmp).find("1.43x"), std::string::npos);
}

TEST(Compare, WhatIfH100RunOnH200Profile) {
  rafter::Run run = load_run(fixture("run_gpu_bf16.json"));
  auto h100 = place_run(run, load_machine(fixture("machine_h100.json")));
  auto h200 = place_run(run, load_machine(fixture("machine_h200.json")));
  // HBM-bound decode GEMMs: their floor shrinks by the bandwidth ratio 3.0 / 4.3.
  const Placement& a = h100.records[5];
  const Placement& b = h200.records[5];
  ASSERT_EQ(a.display_name(), "decode.attn.qkv_proj");
  ASSERT_EQ(a.binding_name(), "HBM");
  EXPECT_NEAR(b.bound_seconds / a.bound_seconds, 3.0 / 4.3, 1e-9);
  EXPECT_LT(h200.bound_step_seconds, h100.bound_step_seconds);
}

TEST(Report, TableCsvJsonCarryEveryOperator) {
  auto rp = place_run(load_run(fixture("run_gpu_bf16.json")), load_machine(fixture("machine_h100.json")), "bf16");
  std::string table = format_report_table(rp), csv = format_report_csv(rp);
  auto json = report_json(rp);
  for (const char* col : {"operator", "count", "time", "% step", "FLOP/s", "AI HBM", "bound", "efficiency", "gap"})
    EXPECT_NE(table.find(col), std::string::npos) << col;
  for (const auto& p : rp.records) {
    EXPECT_NE(table.find(p.display_name()), std::string::npos);
    EXPECT_NE(csv.find(p.display_name()), std::string::npos);
  }
  EXPECT_EQ(json["records"].size(), rp.records.size());
  EXPECT_NE(table.find("planned"), std::string::npos);
  EXPECT_NE(table.find("no backend"), std::string::npos);
  double shares = 0;
  for (const auto& p : rp.records) shares += p.share_of_step;
  EXPECT_NEAR(shares, 1.0, 1e-12);
  // CSV: one header and one line per record, every line with the same number of fields.
  std::size_t lines = std::count(csv.begin(), csv.end(), '\n');
  EXPECT_EQ(lines, rp.records.size() + 1);
}

}  // namespace
}  // namespace rafter::roofline
