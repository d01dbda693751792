// CPU counted work: event grouping, the counts -> FLOPs/bytes arithmetic on counts in
// tests/fixtures/counters/ (constructed from kernels of known work: no development machine has a
// PMU), and the counted pass's fallback for real (here: no PMU, so it must refuse with the reason).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "rafter/collector/counted_work.hpp"
#include "rafter/collector/error.hpp"

using namespace rafter;

namespace {

nlohmann::json fixture(const std::string& name) {
  std::ifstream in(std::string(RAFTER_SOURCE_DIR) + "/tests/fixtures/counters/" + name);
  return nlohmann::json::parse(in);
}

void expect_fixture(const std::string& name) {
  const auto f = fixture(name);
  std::map<std::string, double> counts;
  for (const auto& [k, v] : f["counts"].items()) counts[k] = v.get<double>();
  const CountedWork w = counted_work_from_counts(f["pmu"], counts, f["precision_class"]);
  for (const auto& [k, v] : f["expected"]["flops"].items()) {
    const double got = w.flops.count(k) ? w.flops.at(k) : 0;
    EXPECT_DOUBLE_EQ(got, v.get<double>()) << name << " flops " << k;
  }
  EXPECT_EQ(w.flops.size(), f["expected"]["flops"].size()) << name;
  for (const auto& [k, v] : f["expected"]["bytes"].items()) {
    ASSERT_TRUE(w.bytes_by_level.count(k)) << name << " " << k;
    EXPECT_DOUBLE_EQ(w.bytes_by_level.at(k), v.get<double>()) << name << " bytes " << k;
  }
  EXPECT_EQ(w.notes.size(), f["expected"]["notes"].get<std::size_t>()) << name;
  EXPECT_EQ(w.raw.size(), counts.size());
}

}  // namespace

TEST(CountedWork, IntelFpArithIsWeightedByVectorWidth) { expect_fixture("icx_stream_triad.json"); }

TEST(CountedWork, ZenFlopsTakeTheRecordsPrecisionAndFillsSplitByLevel) { expect_fixture("zen4_bf16_gemm.json"); }

TEST(CountedWork, MissingOrNegativeCountsAndUnknownPmusAreErrors) {
  EXPECT_THROW(counted_work_from_counts("icx", {{"fp64_scalar", 1}}, "fp64"), InputError);
  auto f = fixture("icx_stream_triad.json");
  std::map<std::string, double> counts;
  for (const auto& [k, v] : f["counts"].items()) counts[k] = v.get<double>();
  counts["llc_misses"] = -5;
  EXPECT_THROW(counted_work_from_counts("icx", counts, "fp64"), InputError);
  EXPECT_THROW(counted_work_from_counts("no_such_pmu", counts, "fp64"), InputError);
}

TEST(CountedWork, EventsAreGroupedToFitTheCounters) {
  const auto intel = rafter_cpu_events("icx");  // 11 events
  const auto groups = group_events(intel, 4);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].size(), 4u);
  EXPECT_EQ(groups[2].size(), 3u);
  EXPECT_EQ(groups[2].back().meaning, "llc_misses");
  EXPECT_EQ(group_events(rafter_cpu_events("amd64_fam19h_zen4"), 6).size(), 2u);
  EXPECT_EQ(group_events(intel, 64).size(), 1u);
  EXPECT_THROW(group_events(intel, 0), InputError);
}

TEST(CountedWork, PassWithoutCountersRefusesWithTheReason) {
  if (cpu_counter_status().available) GTEST_SKIP() << "this machine has hardware counters";
  int runs = 0;
  try {
    count_cpu_pass({}, [&] { ++runs; }, "fp32");
    FAIL() << "counted without counters";
  } catch (const DeviceUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("unavailable ("), std::string::npos) << e.what();
  }
  EXPECT_EQ(runs, 0);
}

TEST(CountedWork, PassCountsEveryThreadWhereCountersExist) {
  if (!cpu_counter_status().available) GTEST_SKIP() << cpu_counter_status().summary();
  if (rafter_cpu_events(cpu_counter_status().pmu).empty()) GTEST_SKIP() << "no event table for this PMU";
  std::vector<double> a(1 << 22, 1.0);
  const CountedWork w = count_cpu_pass({}, [&] {
    for (auto& x : a) x = x * 1.5 + 0.5;
  }, "fp64");
  EXPECT_GE(w.groups, 1);
  EXPECT_GT(w.bytes_by_level.at("L2"), 0);
}
