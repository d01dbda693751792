// Counters: PAPI's status is either "available (...)" or "unavailable (reason)", never made-up
// counts; libpfm4 translates the events rafter uses, for this CPU's PMU and (forced) for the other
// vendor's, since translation is table-based and needs no PMU.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "rafter/collector/counters.hpp"
#include "rafter/collector/error.hpp"

using namespace rafter;

namespace {

// In a child process (a gtest death test forks): force libpfm4 to another PMU model, which it only
// honours once per process, and check that every rafter event for it translates.
[[noreturn]] void translate_all_forced(const char* pmu) {
  setenv("LIBPFM_FORCE_PMU", pmu, 1);
  reinitialize_pfm();
  if (active_pmu_name() != pmu) {
    std::fprintf(stderr, "active PMU %s, wanted %s\n", active_pmu_name().c_str(), pmu);
    std::_Exit(3);
  }
  const auto events = rafter_cpu_events(pmu);
  if (events.empty()) std::_Exit(4);
  for (const RafterEvent& e : events) {
    try {
      if (translate_event(e.native).canonical.find("::") == std::string::npos) std::_Exit(5);
    } catch (const std::exception& x) {
      std::fprintf(stderr, "%s\n", x.what());
      std::_Exit(6);
    }
  }
  std::_Exit(0);
}

void expect_all_translate(const std::string& pmu) {
  const auto events = rafter_cpu_events(pmu);
  ASSERT_FALSE(events.empty()) << pmu;
  for (const RafterEvent& e : events) {
    const EventEncoding enc = translate_event(e.native);
    EXPECT_NE(enc.canonical.find("::"), std::string::npos) << e.native;
    EXPECT_GT(e.scale, 0) << e.meaning;
    EXPECT_TRUE(e.unit == "FLOP" || e.unit == "lines") << e.meaning;
  }
}

}  // namespace

TEST(Counters, StatusIsAvailableOrSaysWhyNot) {
  const CounterStatus& s = cpu_counter_status();
  const std::string summary = s.summary();
  if (s.available) {
    EXPECT_GT(s.hardware_counters, 0);
    EXPECT_EQ(summary.rfind("available (", 0), 0u) << summary;
  } else {
    EXPECT_EQ(s.hardware_counters, 0);
    EXPECT_FALSE(s.reason.empty());
    EXPECT_EQ(summary.rfind("unavailable (", 0), 0u) << summary;
  }
}

TEST(Counters, NoCountsWithoutCounters) {
  if (cpu_counter_status().available) GTEST_SKIP() << "this machine has hardware counters";
  EXPECT_THROW(CounterSet({"PAPI_TOT_CYC"}), DeviceUnavailable);
}

TEST(Counters, CountsCyclesWhereCountersExist) {
  if (!cpu_counter_status().available) GTEST_SKIP() << cpu_counter_status().summary();
  CounterSet set({"PAPI_TOT_CYC"});
  set.start();
  volatile double x = 0;
  for (int i = 0; i < 1000000; ++i) x = x + 1;
  EXPECT_GT(set.stop().at(0), 100000);
}

TEST(Counters, TranslatesThisCpusEvents) {
  const std::string pmu = active_pmu_name();
  if (pmu.empty()) GTEST_SKIP() << "libpfm4 knows no core PMU for this CPU";
  if (rafter_cpu_events(pmu).empty()) GTEST_SKIP() << "no rafter event table for " << pmu;
  expect_all_translate(pmu);
}

TEST(Counters, TranslatesIntelFpArithAndCacheEvents) {
  // Ice Lake server: FP_ARITH_INST_RETIRED.*, L1D.REPLACEMENT, L2_LINES_IN, LONGEST_LAT_CACHE
  EXPECT_EXIT(translate_all_forced("icx"), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(translate_all_forced("spr"), ::testing::ExitedWithCode(0), "");
}

TEST(Counters, TranslatesAmdZenFlopsAndFillEvents) {
  EXPECT_EXIT(translate_all_forced("amd64_fam19h_zen4"), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(translate_all_forced("amd64_fam19h_zen3"), ::testing::ExitedWithCode(0), "");
}

TEST(Counters, ZenEncodingIsTheDocumentedEvent) {
  if (active_pmu_name() != "amd64_fam19h_zen4") GTEST_SKIP() << "not a Zen 4";
  const EventEncoding e = translate_event("RETIRED_SSE_AVX_FLOPS:ANY");
  EXPECT_EQ(e.perf_type, 4u);         // PERF_TYPE_RAW
  EXPECT_EQ(e.config & 0xff, 0x03u);  // event 0x03: retired SSE/AVX FLOPs
}

TEST(Counters, UnknownEventIsDeviceUnavailable) {
  EXPECT_THROW(translate_event("NO_SUCH_EVENT_ANYWHERE:FOO"), DeviceUnavailable);
}
