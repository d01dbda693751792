// Charts: every SVG parses with a real XML parser (xmllint, libxml2), a point of known AI and
// FLOP/s lands where the axes say, ceilings meet at the ridge point, ceiling labels never overlap,
// and names from input files are escaped.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "rafter/roofline/charts.hpp"
#include "rafter/roofline/format.hpp"
#include "rafter/roofline/inputs.hpp"
#include "rafter/roofline/labels.hpp"
#include "rafter/roofline/svg.hpp"
#include "roofline_test_util.hpp"
#include "run_cli.hpp"

namespace rafter::roofline {
namespace {
using test::fixture;
using test::svg_elements;

std::filesystem::path temp_file(const std::string& name, const std::string& text) {
  const auto& dir = rafter::testing::process_temp_dir("test-charts");
  std::ofstream(dir / name) << text;
  return dir / name;
}

void expect_well_formed(const std::string& svg, const std::string& name) {
  ASSERT_FALSE(svg.empty()) << name;
  if (!test::have_program("xmllint")) GTEST_SKIP() << "xmllint (libxml2-utils) not installed";
  std::string out;
  EXPECT_EQ(test::run_command("xmllint --noout " + temp_file(name, svg).string(), out), 0) << name << ": " << out;
}

std::vector<std::string> all_charts(const RunPlacement& rp) {
  return {hierarchical_roofline_svg(rp), time_roofline_svg(rp), time_stacked_svg(rp)};
}

TEST(Charts, EverySvgParses) {
  MachineProfile h100 = load_machine(fixture("machine_h100.json"));
  for (const char* run : {"run_gpu_bf16.json", "run_gpu_fp8.json", "run_gpu_nvfp4.json", "run_cpu.json", "run_escape.json"}) {
    auto rp = place_run(load_run(fixture(run)), h100, run);
    int i = 0;
    for (const auto& svg : all_charts(rp)) expect_well_formed(svg, std::string(run) + std::to_string(i++) + ".svg");
  }
  auto cmp = compare_machines({"a", "b"}, {h100, load_machine(fixture("machine_h200.json"))}, "cuda:0");
  expect_well_formed(machine_comparison_svg(cmp), "machines.svg");
  std::vector<RunPlacement> cols;
  cols.push_back(place_run(load_run(fixture("run_gpu_bf16.json")), h100, "a"));
  cols.push_back(place_run(load_run(fixture("run_gpu_fp8.json")), h100, "b"));
  expect_well_formed(run_comparison_svg(compare_runs(std::move(cols))), "runs.svg");
}

struct Frame {
  double left, top, right, bottom, xlo, xhi, ylo, yhi;
  double x(double v) const { return left + (std::log10(v) - xlo) / (xhi - xlo) * (right - left); }
  double y(double v) const { return bottom - (std::log10(v) - ylo) / (yhi - ylo) * (bottom - top); }
};

Frame frame_of(const std::string& svg) {
  auto plots = svg_elements(svg, "g", {{"class", "plot"}});
  EXPECT_EQ(plots.size(), 1u);
  Frame f{};
  std::istringstream(plots.at(0)["data-plot"]) >> f.left >> f.top >> f.right >> f.bottom;
  std::istringstream(plots.at(0)["data-x-decades"]) >> f.xlo >> f.xhi;
  std::istringstream(plots.at(0)["data-y-decades"]) >> f.ylo >> f.yhi;
  return f;
}

TEST(Charts, CountedPointsAreSolidAnalyticHollowEmulatedDashed) {
  OperatorRecord counted = test::make_record("counted", "bf16", 1e9, 4e8, 2e8, 0.025);
  set_counted_bytes(counted, "DRAM", 2.2e8);
  OperatorRecord emulated = test::make_record("emulated", "fp8", 1e9, 4e8, 2e8, 0.025);
  emulated.emulated = true;
  emulated.emulated_via = "bf16";
  auto rp = place_run(test::make_run({counted, emulated}), test::small_machine());
  for (const auto& svg : {hierarchical_roofline_svg(rp), time_roofline_svg(rp)}) {
    int solid = 0, hollow = 0, dashed = 0;
    for (auto& pt : svg_elements(svg, "polygon", {{"class", "point"}})) {
      const bool is_hollow = pt["fill"] == "#ffffff";
      EXPECT_EQ(is_hollow, !(pt["data-op"] == "counted" && pt["data-level"] == "DRAM")) << pt["data-op"];
      (is_hollow ? hollow : solid) += 1;
      dashed += pt.count("stroke-dasharray") && pt["data-op"] == "emulated";
      EXPECT_EQ(pt.count("stroke-dasharray") > 0, pt["data-op"] == "emulated");
    }
    for (auto& pt : svg_elements(svg, "circle", {{"class", "point"}})) {
      const bool is_hollow = pt["fill"] == "#ffffff";
      EXPECT_EQ(is_hollow, !(pt["data-op"] == "counted" && pt["data-level"] == "DRAM")) << pt["data-op"];
      (is_hollow ? hollow : solid) += 1;
      dashed += pt.count("stroke-dasharray") && pt["data-op"] == "emulated";
    }
    EXPECT_EQ(solid, 1);
    EXPECT_EQ(hollow, 3);
    EXPECT_EQ(dashed, 2);
    EXPECT_NE(svg.find("solid: bytes counted by hardware"), std::string::npos);
    EXPECT_NE(svg.find("hollow: bytes from the analytic model"), std::string::npos);
    EXPECT_NE(svg.find("dashed: emulated"), std::string::npos);
  }
}

TEST(Charts, PointOfKnownAiAndFlopsLandsWhereTheAxesSay) {
  // 1 GFLOP in 25 ms = 40 GFLOP/s; AI 5 at L2 (0.2 GB), 10 at DRAM (0.1 GB).
  auto rp = place_run(test::make_run({test::make_record("op", "bf16", 1e9, 2e8, 1e8, 0.025)}), test::small_machine());
  std::string svg = hierarchical_roofline_svg(rp);
  Frame f = frame_of(svg);
  EXPECT_LE(f.xlo, std::log10(5.0));
  EXPECT_GE(f.xhi, std::log10(10.0));
  EXPECT_EQ(f.xlo, std::floor(f.xlo));  // the axes start at a decade
  auto dram = svg_elements(svg, "circle", {{"class", "point"}, {"data-level", "DRAM"}});
  auto l2 = svg_elements(svg, "circle", {{"class", "point"}, {"data-level", "L2"}});
  ASSERT_EQ(dram.size(), 1u);
  ASSERT_EQ(l2.size(), 1u);
  EXPECT_NEAR(std::stod(dram[0]["cx"]), f.x(10.0), 0.011);
  EXPECT_NEAR(std::stod(dram[0]["cy"]), f.y(40e9), 0.011);
  EXPECT_NEAR(std::stod(l2[0]["cx"]), f.x(5.0), 0.011);
  EXPECT_NEAR(std::stod(l2[0]["cy"]), f.y(40e9), 0.011);
  // One decade is the same length wherever it is: 5 -> 10 is log10(2) of a decade.
  double decade_px = (f.right - f.left) / (f.xhi - f.xlo);
  EXPECT_NEAR(std::stod(dram[0]["cx"]) - std::stod(l2[0]["cx"]), decade_px * std::log10(2.0), 0.03);
}

TEST(Charts, CeilingsMeetAtTheRidgePoint) {
  auto rp = place_run(test::make_run({test::make_record("op", "bf16", 1e9, 2e8, 1e8, 0.025)}), test::small_machine());
  std::string svg = hierarchical_roofline_svg(rp);
  Frame f = frame_of(svg);
  auto bf16 = svg_elements(svg, "line", {{"class", "ceiling ceiling-compute"}, {"data-precision", "bf16"}});
  auto l2 = svg_elements(svg, "line", {{"class", "ceiling ceiling-memory"}, {"data-level", "L2"}});
  auto dram = svg_elements(svg, "line", {{"class", "ceiling ceiling-memory"}, {"data-level", "DRAM"}});
  ASSERT_EQ(bf16.size(), 1u);
  ASSERT_EQ(l2.size(), 1u);
  ASSERT_EQ(dram.size(), 1u);
  // bf16 100 GFLOP/s meets L2 (50 GB/s, the fastest level) at AI 2, DRAM (10 GB/s) at AI 10.
  EXPECT_NEAR(std::stod(bf16[0]["x1"]), std::stod(l2[0]["x2"]), 0.011);
  EXPECT_NEAR(std::stod(bf16[0]["y1"]), std::stod(l2[0]["y2"]), 0.011);
  EXPECT_NEAR(std::stod(l2[0]["x2"]), f.x(2.0), 0.011);
  EXPECT_NEAR(std::stod(dram[0]["x2"]), f.x(10.0), 0.011);
  EXPECT_NEAR(std::stod(dram[0]["y2"]), f.y(100e9), 0.011);
  EXPECT_NEAR(std::stod(bf16[0]["y1"]), f.y(100e9), 0.011);
  // Only the precisions the run uses are drawn by default.
  EXPECT_TRUE(svg_elements(svg, "line", {{"data-precision", "fp32"}}).empty());
}

std::vector<OrientedBox> label_boxes(const std::string& svg) {
  std::vector<OrientedBox> boxes;
  for (auto& a : svg_elements(svg, "text", {{"class", "ceiling-label"}})) {
    OrientedBox b;
    std::istringstream(a["data-box"]) >> b.cx >> b.cy >> b.hw >> b.hh >> b.angle_deg;
    boxes.push_back(b);
  }
  return boxes;
}

void expect_no_overlap(const std::string& svg, const std::string& what, std::size_t at_least) {
  auto boxes = label_boxes(svg);
  EXPECT_GE(boxes.size(), at_least) << what;
  for (std::size_t i = 0; i < boxes.size(); ++i)
    for (std::size_t j = i + 1; j < boxes.size(); ++j) EXPECT_FALSE(overlaps(boxes[i], boxes[j])) << what << ": " << i << " vs " << j;
}

TEST(Charts, CeilingLabelsDoNotOverlap) {
  MachineProfile h100 = load_machine(fixture("machine_h100.json"));
  expect_no_overlap(hierarchical_roofline_svg(place_run(load_run(fixture("run_gpu_bf16.json")), h100)), "gpu", 5);
  expect_no_overlap(hierarchical_roofline_svg(place_run(load_run(fixture("run_cpu.json")), h100)), "cpu", 6);
  ChartOptions all;
  all.all_precisions = true;
  expect_no_overlap(hierarchical_roofline_svg(place_run(load_run(fixture("run_gpu_fp8.json")), h100), all), "all", 10);
  auto cmp = compare_machines({"a", "b"}, {h100, load_machine(fixture("machine_h200.json"))}, "cuda:0");
  expect_no_overlap(machine_comparison_svg(cmp), "machines", 10);
}

TEST(Charts, LabelsAreValuedAndLegendsPresent) {
  auto rp = place_run(load_run(fixture("run_gpu_bf16.json")), load_machine(fixture("machine_h100.json")));
  std::string svg = hierarchical_roofline_svg(rp);
  EXPECT_NE(svg.find("BF16 700 TFLOP/s"), std::string::npos);
  EXPECT_NE(svg.find("HBM 3.00 TB/s"), std::string::npos);
  EXPECT_NE(svg.find("Memory level (colour)"), std::string::npos);
  EXPECT_NE(svg.find("Precision (marker)"), std::string::npos);
  EXPECT_NE(svg.find("Arithmetic intensity (FLOP/byte)"), std::string::npos);
  EXPECT_NE(svg.find("Performance (FLOP/s)"), std::string::npos);
  // Each drawable operator once per level: 12 timed operators with FLOPs, 3 levels (rmsnorm: 2).
  std::size_t points = svg_elements(svg, "circle", {{"class", "point"}}).size() + svg_elements(svg, "polygon", {{"class", "point"}}).size();
  EXPECT_EQ(points, 10u * 3 + 2 * 2);
}

TEST(Charts, NamesFromInputFilesAreEscaped) {
  auto rp = place_run(load_run(fixture("run_escape.json")), load_machine(fixture("machine_h100.json")));
  for (const auto& svg : all_charts(rp)) {
    EXPECT_EQ(svg.find("<script"), std::string::npos);
    EXPECT_EQ(svg.find("<b>"), std::string::npos);
    EXPECT_NE(svg.find("&lt;script&gt;"), std::string::npos);
  }
  EXPECT_EQ(xml_escape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
}

TEST(Labels, OverlapTestAndSpreading) {
  EXPECT_TRUE(overlaps({0, 0, 10, 5, 0}, {15, 0, 10, 5, 0}));
  EXPECT_FALSE(overlaps({0, 0, 10, 5, 0}, {25, 0, 10, 5, 0}));
  // Two long thin boxes side by side at 45 degrees: their axis-aligned hulls overlap, they do not.
  EXPECT_FALSE(overlaps({0, 0, 50, 2, 45}, {10, -10, 50, 2, 45}));
  EXPECT_TRUE(overlaps({0, 0, 50, 2, 45}, {0, 0, 50, 2, -45}));
  auto ys = spread_positions({100, 102, 104, 300}, 14, 0, 1000);
  EXPECT_DOUBLE_EQ(ys[0], 100);
  EXPECT_DOUBLE_EQ(ys[1], 114);
  EXPECT_DOUBLE_EQ(ys[2], 128);
  EXPECT_DOUBLE_EQ(ys[3], 300);
  auto top = spread_positions({995, 996}, 14, 0, 1000);  // pushed back inside the upper bound
  EXPECT_DOUBLE_EQ(top[1], 1000);
  EXPECT_DOUBLE_EQ(top[0], 986);
}

}  // namespace
}  // namespace rafter::roofline

TEST(Charts, EveryMemoryLevelHasItsOwnColour) {
  using rafter::roofline::svg::level_colour;
  // A GPU chart draws shared memory, L1, L2 and HBM together; a CPU chart L1, L2, L3 and DRAM.
  const std::vector<std::string> levels = {"shared", "L1", "L2", "L3", "HBM"};
  std::set<std::string> colours;
  for (std::size_t i = 0; i < levels.size(); ++i) colours.insert(level_colour(levels[i], i));
  for (std::size_t i = 0; i < 4; ++i) colours.insert(level_colour("level" + std::to_string(i), i));
  EXPECT_EQ(colours.size(), levels.size() + 4);
  EXPECT_EQ(level_colour("DRAM", 0), level_colour("HBM", 3));  // the same role on CPU and GPU
}
