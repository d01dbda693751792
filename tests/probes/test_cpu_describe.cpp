// describe_cpu, the topology summary, the probe registry and characterize's device specs.
#include <gtest/gtest.h>

#include "../../probes/cpu/cpu_options.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/probes/probe.hpp"
#include "rafter/probes/topology.hpp"

using namespace rafter;

TEST(DescribeCpu, LevelsGrowOutwardAndEndInDram) {
  const Device d = probes::describe_cpu();
  EXPECT_EQ(d.id, "cpu");
  EXPECT_GE(d.cores, 1);
  EXPECT_GE(d.threads, d.cores);
  ASSERT_GE(d.memory_levels.size(), 2u);
  EXPECT_EQ(d.memory_levels.front().name, "L1");
  EXPECT_EQ(d.memory_levels.back().name, "DRAM");
  for (std::size_t i = 1; i < d.memory_levels.size(); ++i)
    EXPECT_GT(d.memory_levels[i].size_bytes * d.memory_levels[i].instances,
              d.memory_levels[i - 1].size_bytes * d.memory_levels[i - 1].instances);
  for (const auto& m : d.memory_levels) EXPECT_GT(m.line_bytes, 0) << m.name;
}

TEST(Topology, SummaryHasTheHwlocCounts) {
  const auto s = probes::topology_summary();
  EXPECT_GE(s["packages"].get<int>(), 1);
  EXPECT_GE(s["pus"].get<int>(), s["cores"].get<int>());
  EXPECT_FALSE(s["caches"].empty());
  EXPECT_FALSE(s["numa_nodes"].empty());
  EXPECT_TRUE(s["pci_devices"].is_array());
  EXPECT_NE(probes::format_topology(s).find("L1"), std::string::npos);
}

TEST(Registry, CpuProbesAreRegisteredAndFiltered) {
  const auto all = probes::select_probes("cpu", "");
  ASSERT_EQ(all.size(), 5u);  // bandwidth, compute, latency, launch, then comm.mpi (the links come last)
  EXPECT_EQ(all.back().name, "comm.mpi");
  ASSERT_EQ(probes::select_probes("cpu", "launch").size(), 1u);
  const auto bw = probes::select_probes("cpu", "band");
  ASSERT_EQ(bw.size(), 1u);
  EXPECT_EQ(bw[0].name, "cpu.bandwidth");
  EXPECT_THROW(probes::select_probes("cpu", "(["), InputError);
}

TEST(Characterize, BadSpecsAndMissingDevicesThrowTypedErrors) {
  probes::ProbeOptions o;
  EXPECT_THROW(probes::characterize("tpu", o), InputError);
  if (probes::describe_cuda_devices().empty()) {
    EXPECT_THROW(probes::characterize("cuda", o), DeviceUnavailable);
    EXPECT_THROW(probes::characterize("cuda:0", o), DeviceUnavailable);
  }
  o.filter = "no-such-probe";
  EXPECT_THROW(probes::characterize("cpu", o), InputError);
}

TEST(CpuOptions, ValidationRejectsWhatThisCpuCannotDo) {
  const Device d = probes::describe_cpu();
  probes::ProbeOptions o;
  EXPECT_NO_THROW(probes::cpu::validate_cpu_options(o, d));
  o.isa = "avx1024";
  EXPECT_THROW(probes::cpu::validate_cpu_options(o, d), InputError);
  o.isa = "";
  o.threads = d.threads + 1;
  EXPECT_THROW(probes::cpu::validate_cpu_options(o, d), InputError);
  o.threads = 0;
  o.max_working_set_bytes = 1e18;
  EXPECT_THROW(probes::cpu::validate_cpu_options(o, d), InputError);
}

TEST(CpuOptions, GridIsLogarithmicAndReachesFourTimesTheLlc) {
  const Device d = probes::describe_cpu();
  probes::ProbeOptions o;
  o.quick = true;
  const double max = probes::cpu::max_working_set_bytes(o, d);
  EXPECT_GE(max, 4 * probes::cpu::last_level_cache_bytes(d));
  const auto g = probes::cpu::working_set_grid(4096, max, 2, 512);
  EXPECT_DOUBLE_EQ(g.front(), 4096);
  EXPECT_GE(g.back(), max * 0.99);
  for (std::size_t i = 1; i < g.size(); ++i) {
    EXPECT_GT(g[i], g[i - 1]);
    EXPECT_LE(g[i] / g[i - 1], 1.5);
  }
}

TEST(CpuOptions, MeasuredFrequencyIsPlausible) {
  const double hz = probes::cpu::measure_core_frequency_hz();
  EXPECT_GT(hz, 0.3e9);
  EXPECT_LT(hz, 8e9);
}
