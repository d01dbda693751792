// rafter probe / topology end to end: one quick CPU characterization (shared by the physics
// checks), and bad input — unknown option, device or ISA, unwritable path, a working set larger
// than memory — giving one line on stderr, exit 2 and no output file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "rafter/collector/json_io.hpp"
#include "rafter/collector/machine_profile.hpp"
#include "run_cli.hpp"

using rafter::testing::run_rafter;
namespace fs = std::filesystem;

namespace {

struct QuickRun {
  rafter::testing::CliResult result;
  nlohmann::json json;
};

// The quick probe runs once for the whole test program (it is the slow part of the suite).
const QuickRun& quick_run() {
  static const QuickRun run = [] {
    QuickRun r;
    const fs::path dir = rafter::testing::make_temp_dir("probe");
    const fs::path out = dir / "machine.json";
    r.result = run_rafter({"probe", "--device", "cpu", "--quick", "-o", out.string()});
    if (fs::exists(out)) r.json = rafter::read_json_file(out);
    fs::remove_all(dir);
    return r;
  }();
  return run;
}

const rafter::Ceiling* find(const rafter::MachineProfile& p, rafter::CeilingKind kind,
                            const std::string& level, const std::string& op, const std::string& scope) {
  for (const auto& c : p.ceilings)
    if (c.kind == kind && c.resource == level && c.operation == op && c.scope == scope) return &c;
  return nullptr;
}

void expect_bad_input(const std::vector<std::string>& args, const std::string& mentions) {
  const fs::path dir = rafter::testing::make_temp_dir("bad");
  std::vector<std::string> full = args;
  const bool has_output = std::find(args.begin(), args.end(), "-o") != args.end();
  if (!has_output) {
    full.push_back("-o");
    full.push_back((dir / "m.json").string());
  }
  const auto r = run_rafter(full);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("rafter: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(mentions), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(dir)) << "something was written";
  fs::remove_all(dir);
}

void expect_physics(const rafter::MachineProfile& p);
void expect_trials(const rafter::MachineProfile& p);

}  // namespace

// One test for the whole quick run: ctest runs every test in its own process, so splitting this
// would probe the machine once per test.
TEST(ProbeCli, QuickRunIsValidAndPhysical) {
  const auto& r = quick_run();
  ASSERT_EQ(r.result.exit_code, 0) << r.result.err;
  const auto p = rafter::machine_profile_from_json(r.json);
  ASSERT_EQ(p.devices.size(), 1u);
  EXPECT_EQ(p.devices[0].id, "cpu");
  EXPECT_EQ(p.devices[0].counters.find("available") != std::string::npos, true);
  EXPECT_FALSE(p.sweeps.empty());
  EXPECT_TRUE(r.json["topology"].contains("caches"));
  EXPECT_NE(r.result.out.find("bandwidth"), std::string::npos);  // the console table
#ifdef __linux__
  EXPECT_NE(r.result.out.find(
                "hypervisor steal (share of the CPU time each probe wanted, /proc/stat): cpu.bandwidth "),
            std::string::npos)
      << r.result.out;
#endif
  for (const auto& c : p.ceilings) {
    EXPECT_GT(c.figure.value, 0) << c.id();
    EXPECT_GE(c.figure.stats.samples, 3u) << c.id();
    EXPECT_LE(c.figure.stats.min, c.figure.value) << c.id();
    EXPECT_GE(c.figure.stats.max, c.figure.value) << c.id();
    EXPECT_GT(c.frequency_hz, 0) << c.id();
    EXPECT_FALSE(c.isa.empty()) << c.id();
  }
  expect_physics(p);
  expect_trials(p);
}

namespace {

// L1 bandwidth > L2 > DRAM; latency grows outward; FP64 present; absent precisions absent.
void expect_physics(const rafter::MachineProfile& p) {
  using K = rafter::CeilingKind;
  const auto* l1 = find(p, K::Bandwidth, "L1", "load", "core");
  const auto* l2 = find(p, K::Bandwidth, "L2", "load", "core");
  const auto* dram = find(p, K::Bandwidth, "DRAM", "load", "core");
  ASSERT_TRUE(l1 && l2 && dram);
#if defined(__SANITIZE_ADDRESS__)
  // Under AddressSanitizer every load of the bandwidth kernels is checked as well: one core's L1
  // rate falls to L2's (39.5 vs 39.6 GB/s seen in CI), so the bandwidths' order says nothing here.
  constexpr bool kLoadsChecked = true;
#else
  constexpr bool kLoadsChecked = false;
#endif
  if (!kLoadsChecked) {
    if (l1->isa == "sse" || l1->isa == "scalar") {
      // 16-byte (or 8-byte) loads cannot outrun what L2 feeds one core on current x86, so L1 and
      // L2 read alike and their order is noise: held to SSE4.1 on the 2-core Zen 4 VM, the best of
      // five samples put L1 at 100-118 and L2 at 89-117 GB/s alone, and in one CI run (beside
      // another test) L1 at 83 against L2's 117. What holds there is that both outrun DRAM.
      EXPECT_GT(l1->figure.value, dram->figure.value);
    } else {
      EXPECT_GT(l1->figure.value, l2->figure.value);
    }
    EXPECT_GT(l2->figure.value, dram->figure.value);
  }
  // The latencies order under the sanitizer too: its check adds the same few cycles to every hop.
  const auto* lat1 = find(p, K::Latency, "L1", "chase", "core");
  const auto* lat2 = find(p, K::Latency, "L2", "chase", "core");
  const auto* latd = find(p, K::Latency, "DRAM", "chase", "core");
  ASSERT_TRUE(lat1 && lat2 && latd);
  EXPECT_LT(lat1->figure.value, lat2->figure.value);
  EXPECT_LT(lat2->figure.value, latd->figure.value);
  EXPECT_GT(lat1->params.at("cycles").get<double>(), 1.0);  // no load takes under one cycle
  // Compute: FP64 measured; a precision the CPU lacks is absent, never a 0 FLOP/s ceiling.
  EXPECT_NE(p.best("cpu", rafter::CeilingKind::Compute, "fp64", "core"), nullptr);
  const auto absent = p.devices[0].properties.at("precisions_absent");
  for (const auto& prec : absent) {
    for (const auto& c : p.ceilings)
      EXPECT_FALSE(c.kind == rafter::CeilingKind::Compute && c.resource == prec.get<std::string>()) << prec;
  }
  for (const auto& c : p.ceilings)
    if (c.datasheet_value) {
      EXPECT_FALSE(c.datasheet_basis.empty());
      EXPECT_TRUE(c.datasheet_ratio.has_value());
    }
}

// All-core bandwidth ceilings and every measured compute ceiling are the best of their trials, with
// the trials' spread and flag beside; the hypervisor's steal over the probe is in their clocks.
void expect_trials(const rafter::MachineProfile& p) {
  int with_trials = 0;
  for (const auto& c : p.ceilings) {
#ifdef __linux__
    if (c.kind == rafter::CeilingKind::Bandwidth || c.kind == rafter::CeilingKind::Compute) {
      EXPECT_GE(c.clocks.steal_fraction, 0) << c.id();  // /proc/stat read over seconds of probing
      EXPECT_LE(c.clocks.steal_fraction, 1) << c.id();
      EXPECT_EQ(c.flag == "stolen", c.clocks.steal_fraction >= rafter::kStolenFlagFraction) << c.id();
    }
#endif
    const bool bandwidth = c.kind == rafter::CeilingKind::Bandwidth && c.scope == "device";
    const bool compute = c.kind == rafter::CeilingKind::Compute && !c.params.contains("emulated_via");
    if (!bandwidth && !compute) continue;
    ASSERT_TRUE(c.params.contains("trials")) << c.id();
    const auto& trials = c.params.at("trials");
    EXPECT_GE(trials.size(), 2u) << c.id();
    double best = 0, first_at = -1;
    for (const auto& t : trials) {
      best = std::max(best, t.at("median").get<double>());
      EXPECT_GE(t.at("at_seconds").get<double>(), first_at) << c.id();  // in the order taken
      first_at = t.at("at_seconds").get<double>();
    }
    EXPECT_DOUBLE_EQ(c.figure.value, best) << c.id();
    const auto& m = c.params.at("trial_medians");
    EXPECT_LE(m.at("min").get<double>(), m.at("median").get<double>()) << c.id();
    EXPECT_DOUBLE_EQ(m.at("max").get<double>(), best) << c.id();
    const bool disagree = c.params.at("trials_disagree").get<bool>();
    EXPECT_EQ(disagree, c.params.at("between_trial_spread").get<double>() > 0.15) << c.id();
    if (disagree && c.flag != "throttled" && c.flag != "stolen") {
      EXPECT_EQ(c.flag, "drifting") << c.id();
    }
    if (compute) {
      EXPECT_EQ(trials.size(), 3u) << c.id();  // --quick
      EXPECT_DOUBLE_EQ(c.params.at("per_core_flops_per_second").get<double>(), best / c.threads) << c.id();
    }
    ++with_trials;
  }
  EXPECT_GT(with_trials, 0);
}

}  // namespace

TEST(ProbeCli, ListShowsTheProbes) {
  const auto r = run_rafter({"probe", "--list"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* name : {"cpu.bandwidth", "cpu.latency", "cpu.compute", "cuda.fp4_gemm"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
}

TEST(ProbeCli, BadInputIsOneLineExitTwoAndNothingWritten) {
  expect_bad_input({"probe", "--device", "cpu", "--no-such-option"}, "no-such-option");
  expect_bad_input({"probe", "--device", "tpu"}, "tpu");
  expect_bad_input({"probe", "--device", "cpu", "--isa", "avx1024"}, "avx1024");
  expect_bad_input({"probe", "--device", "cpu", "--max-working-set", "1000000G"}, "memory");
  expect_bad_input({"probe", "--device", "cpu", "--max-working-set", "lots"}, "lots");
  expect_bad_input({"probe", "--device", "cpu", "--threads", "100000"}, "threads");
  expect_bad_input({"probe", "--device", "cpu", "--filter", "(["}, "filter");
  expect_bad_input({"probe", "--device", "cpu", "-o", "/nonexistent-dir/m.json"}, "/nonexistent-dir");
}

// RAFTER_CPU_ISA: an unknown value fails any verb with one line naming it; a held ISA is a ceiling
// that an explicit --isa may not go above.
TEST(ProbeCli, HeldIsaIsACeilingAndAnUnknownOneIsOneLine) {
  const fs::path dir = rafter::testing::make_temp_dir("held-isa");
  const std::string never = (dir / "never-written.json").string();
  const auto held = [](const std::string& isa, std::vector<std::string> args) {
    args.insert(args.begin(), {"RAFTER_CPU_ISA=" + isa, RAFTER_BINARY});
    return run_rafter(args, "env");
  };
  for (const auto& args :
       {std::vector<std::string>{"probe", "--device", "cpu", "-o", never},
        std::vector<std::string>{"profile", "--op", "gemm", "--m", "8", "--n", "8", "--k", "8"}}) {
    const auto r = held("avx1024", args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
    EXPECT_NE(r.err.find("rafter: error: RAFTER_CPU_ISA=avx1024"), std::string::npos) << r.err;
  }
  const auto wider = held("avx2", {"probe", "--device", "cpu", "--isa", "avx512", "-o", never});
  EXPECT_EQ(wider.exit_code, 2) << wider.err;
  ASSERT_EQ(wider.err_lines().size(), 1u) << wider.err;
  EXPECT_NE(wider.err.find("--isa avx512: wider than RAFTER_CPU_ISA=avx2"), std::string::npos) << wider.err;
  EXPECT_TRUE(fs::is_empty(dir)) << "something was written";
  fs::remove_all(dir);
}

// A second probe into the same file (the README's `mpirun ... probe --filter comm.mpi` after a
// GPU probe, say) keeps what the first measured and the second did not; a probe run again replaces
// its own ceilings; --replace starts afresh.
TEST(ProbeCli, ASecondProbeOfThisMachineKeepsTheFirstsCeilings) {
  const fs::path dir = rafter::testing::make_temp_dir("merge");
  const std::string out = (dir / "machine.json").string();
  const auto probe = [&](const std::string& filter, bool replace = false) {
    std::vector<std::string> args = {"probe", "--device", "cpu", "--quick", "--filter", filter, "-o", out};
    if (replace) args.push_back("--replace");
    const auto r = run_rafter(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return rafter::machine_profile_from_json(rafter::read_json_file(out));
  };
  const auto probes_of = [](const rafter::MachineProfile& p) {
    std::set<std::string> s;
    for (const auto& c : p.ceilings) s.insert(c.probe + (c.params.contains("measured_at") ? " (kept)" : ""));
    return s;
  };
  const auto first = probe("^cpu\\.launch$");
  EXPECT_EQ(probes_of(first), std::set<std::string>{"cpu.launch"});
  const auto second = probe("^cpu\\.latency$");
  EXPECT_EQ(probes_of(second), (std::set<std::string>{"cpu.latency", "cpu.launch (kept)"}));
  EXPECT_EQ(second.conditions.at("merged").at("kept_probes"), nlohmann::json({"cpu cpu.launch"}));
  for (const auto& c : second.ceilings) {
    if (c.probe == "cpu.launch") {
      EXPECT_EQ(c.params.at("measured_at"), first.timestamp);
    }
  }
  EXPECT_FALSE(second.sweeps.empty());         // the latency probe's sweep
  const auto third = probe("^cpu\\.launch$");  // measured again: replaces its kept ceiling
  EXPECT_EQ(probes_of(third), (std::set<std::string>{"cpu.latency (kept)", "cpu.launch"}));
  EXPECT_EQ(third.sweeps.size(), second.sweeps.size());  // the latency sweep kept
  const auto fresh = probe("^cpu\\.launch$", true);
  EXPECT_EQ(probes_of(fresh), std::set<std::string>{"cpu.launch"});
  EXPECT_FALSE(fresh.conditions.contains("merged"));
  fs::remove_all(dir);
}

// What is at the output path and is not a profile of this host is measured work too: one line, exit
// 2, the file untouched and nothing measured; --replace overwrites it.
TEST(ProbeCli, AnOutputHoldingSomethingElseIsNotOverwritten) {
  const fs::path dir = rafter::testing::make_temp_dir("not-machine");
  const fs::path out = dir / "machine.json";
  nlohmann::json elsewhere =
      rafter::read_json_file(std::string(RAFTER_SOURCE_DIR) + "/tests/fixtures/machine_h100.json");
  elsewhere["host"] = "another-host";
  for (const std::string& held :
       {std::string("not json\n"), std::string("{\"schema\": {\"name\": \"rafter.run\"}}\n"),
        elsewhere.dump()}) {
    {
      std::ofstream f(out);
      f << held;
    }
    const auto r =
        run_rafter({"probe", "--device", "cpu", "--quick", "--filter", "^cpu\\.launch$", "-o", out.string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
    EXPECT_NE(r.err.find("not overwritten (--replace overwrites it)"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "") << "it measured before refusing";
    EXPECT_EQ(rafter::testing::slurp(out), held);
  }
  EXPECT_NE(
      run_rafter({"probe", "--device", "cpu", "--quick", "--filter", "^cpu\\.launch$", "-o", out.string()})
          .err.find("host 'another-host'"),
      std::string::npos);
  std::ofstream{out};  // an empty file holds nothing measured: written over
  EXPECT_EQ(
      run_rafter({"probe", "--device", "cpu", "--quick", "--filter", "^cpu\\.launch$", "-o", out.string()})
          .exit_code,
      0);
  {
    std::ofstream f(out);
    f << elsewhere.dump();
  }
  const auto replaced = run_rafter(
      {"probe", "--device", "cpu", "--quick", "--filter", "^cpu\\.launch$", "--replace", "-o", out.string()});
  EXPECT_EQ(replaced.exit_code, 0) << replaced.err;
  EXPECT_NE(rafter::read_json_file(out).at("host"), "another-host");
  fs::remove_all(dir);
}

// Where a GPU is present the probe runs (only its launch probe, so that finding out is quick) and
// the test is skipped; either way its output goes to a folder of its own.
TEST(ProbeCli, CudaWithoutGpuIsOneLineExitTwo) {
  const fs::path dir = rafter::testing::make_temp_dir("cuda-no-gpu");
  const auto r = run_rafter(
      {"probe", "--device", "cuda", "--filter", "^cuda\\.launch$", "-o", (dir / "machine.json").string()});
  const bool written = !fs::is_empty(dir);
  fs::remove_all(dir);
  if (r.exit_code == 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(r.exit_code, 2);
  ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
  EXPECT_NE(r.err.find("GPU"), std::string::npos) << r.err;
  EXPECT_FALSE(written) << "something was written";
}

TEST(TopologyCli, TableAndJson) {
  const auto table = run_rafter({"topology"});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("L1"), std::string::npos);
  const auto json = run_rafter({"topology", "--json"});
  ASSERT_EQ(json.exit_code, 0);
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_GE(j.at("cores").get<int>(), 1);
}

TEST(ProbeCli, EveryCeilingValueIsItsOwnMedian) {
  const QuickRun& q = quick_run();
  ASSERT_EQ(q.result.exit_code, 0) << q.result.err;
  const auto profile = rafter::machine_profile_from_json(q.json);
  ASSERT_FALSE(profile.ceilings.empty());
  for (const auto& c : profile.ceilings) {
    if (c.figure.source != rafter::Source::Measured) continue;
    EXPECT_DOUBLE_EQ(c.figure.value, c.figure.stats.median) << c.id();
  }
  for (const auto& c : q.json.at("ceilings")) {
    if (c.at("figure").at("source") == "measured") {
      EXPECT_EQ(c.at("figure").value("value_is", ""), "median");
    }
  }
  // The console table sizes its columns: no two cells run together, figures keep 4 digits.
  EXPECT_NE(q.result.out.find("value (median)"), std::string::npos) << q.result.out;
}

TEST(ProbeCli, LaunchFloorIsTheThreadPoolsForkJoin) {
  const QuickRun& q = quick_run();
  ASSERT_EQ(q.result.exit_code, 0) << q.result.err;
  const auto profile = rafter::machine_profile_from_json(q.json);
  const rafter::Ceiling* launch = find(profile, rafter::CeilingKind::Latency, "launch", "operator", "device");
  if (profile.devices.front().cores < 2) {
    EXPECT_EQ(launch, nullptr) << "one core: no dispatch, no floor";
    return;
  }
  ASSERT_NE(launch, nullptr);
  // Waking and joining the pool costs something, and far less than a millisecond.
  EXPECT_GT(launch->figure.value, 50e-9);
  EXPECT_LT(launch->figure.value, 1e-3);
  EXPECT_GE(launch->threads, 2);
}

TEST(ProbeCli, CountersOnTheCpuSayTheyCountGpuProbesOnly) {
  const fs::path dir = rafter::testing::make_temp_dir("probe_counters");
  const fs::path out = dir / "machine.json";
  const auto r = run_rafter({"probe", "--device", "cpu", "--quick", "--filter", "cpu.launch", "--counters", "-o",
                             out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rafter: note: --counters counts the GPU probes' launches"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(out));
  fs::remove_all(dir);
}
