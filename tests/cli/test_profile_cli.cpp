// `rafter profile` end to end: listing, plans in three formats, a real CPU run with run.json, and
// bad input (one line, exit 2, no output file).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "rafter/collector/run_record.hpp"
#include "run_cli.hpp"

namespace fs = std::filesystem;

namespace {

struct Result {
  int code = -1;
  std::string out, err;
};

Result rafter_cmd(const std::string& args) {
  const fs::path err_path = fs::temp_directory_path() / ("rafter_profile_err_" + std::to_string(::getpid()));
  const std::string cmd = std::string(RAFTER_BINARY) + " " + args + " 2>" + err_path.string();
  Result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  fs::remove(err_path);
  return r;
}

fs::path temp_dir() { return rafter::testing::process_temp_dir("profile-cli"); }

void expect_bad_input(const std::string& args, const std::string& mention) {
  const fs::path out = temp_dir() / "never.json";
  const Result r = rafter_cmd(args + " -o " + out.string());
  EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("rafter: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(mention), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out)) << args;
}

}  // namespace

TEST(ProfileCli, ListsOperatorsBackendsModels) {
  const Result r = rafter_cmd("profile --list");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"gemm", "attention_prefill", "gla_chunked", "quantize", "all_reduce", "cpu.onednn",
                        "cpu.native", "llama2-70b", "gla-1.3b", "nvfp4"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

TEST(ProfileCli, PlanAsTableJsonAndCsv) {
  Result r = rafter_cmd("profile --plan --model llama2-70b --phase train --tp 8 --zero 1 --dp 4 --precision fp8");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("total:"), std::string::npos);
  EXPECT_NE(r.out.find("tp_all_reduce"), std::string::npos);
  EXPECT_NE(r.out.find("fp8_e4m3"), std::string::npos);
  r = rafter_cmd("profile --plan --model llama2-7b --phase decode --kv-len 4096 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto run = rafter::run_from_json(nlohmann::json::parse(r.out));
  EXPECT_GT(run.records.size(), 10u);
  for (const auto& rec : run.records) EXPECT_EQ(rec.status, rafter::RecordStatus::Planned);
  r = rafter_cmd("profile --plan --model gla-1.3b --phase prefill --csv");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("label,operator,phase,shape,precision,count", 0), 0u);
  EXPECT_NE(r.out.find("gla_chunked"), std::string::npos);
}

TEST(ProfileCli, UserModelFile) {
  const fs::path f = temp_dir() / "mini.json";
  std::ofstream(f) << R"({"name": "mini", "hidden": 256, "heads": 4, "kv_heads": 4, "head_dim": 64,
                          "ffn": 512, "layers": 2, "vocab": 1000})";
  const Result r = rafter_cmd("profile --plan --model-file " + f.string() + " --phase prefill --seq 128");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("mini"), std::string::npos);
}

TEST(ProfileCli, SingleOperatorRunWritesRunJson) {
  const fs::path out = temp_dir() / "gemm.json";
  const Result r = rafter_cmd("profile --op gemm --dtype bf16 --m 64 --n 64 --k 128 --quick --warm-cache -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("cpu.onednn"), std::string::npos);
  std::ifstream in(out);
  const auto run = rafter::run_from_json(nlohmann::json::parse(in));
  ASSERT_EQ(run.records.size(), 1u);
  EXPECT_EQ(run.records[0].status, rafter::RecordStatus::Ok);
  EXPECT_TRUE(run.records[0].check.passed);
  EXPECT_TRUE(run.records[0].time.has_value());
}

// A measured run at -o, or anything else that is not a run, is not overwritten: one line, exit 2,
// before anything runs, the file untouched. A plan there, an empty file and --replace are written
// over, as is the default ./run.json (scratch).
TEST(ProfileCli, AMeasuredRunAtTheOutputIsNotOverwritten) {
  using rafter::testing::run_rafter;
  const fs::path dir = rafter::testing::make_temp_dir("profile-held");
  const fs::path out = dir / "run.json";
  const std::vector<std::string> gemm = {"profile", "--op",    "gemm",         "--dtype", "bf16",
                                         "--m",     "64",      "--n",          "64",      "--k",
                                         "128",     "--quick", "--warm-cache", "-o",      out.string()};
  const auto with = [&](std::vector<std::string> args, const std::string& extra) {
    if (!extra.empty()) args.insert(args.begin() + 1, extra);
    return run_rafter(args);
  };
  ASSERT_EQ(with(gemm, "").exit_code, 0);
  const std::string measured = rafter::testing::slurp(out);
  const std::string machine =
      rafter::testing::slurp(std::string(RAFTER_SOURCE_DIR) + "/tests/fixtures/machine_h100.json");
  for (const std::string& held : {measured, std::string("not json\n"), machine}) {
    {
      std::ofstream f(out);
      f << held;
    }
    const auto r = with(gemm, "");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
    EXPECT_NE(r.err.find("not overwritten (--replace overwrites it)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(held == measured ? "holds a measured run (1 record(s)" : "is not a rafter run"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "") << "it measured before refusing";
    EXPECT_EQ(rafter::testing::slurp(out), held);
  }
  // A plan with -o over the measured run is refused too; a run over a plan or an empty file is not.
  {
    std::ofstream f(out);
    f << measured;
  }
  const auto plan = run_rafter(
      {"profile", "--plan", "--op", "gemm", "--m", "64", "--n", "64", "--k", "128", "-o", out.string()});
  EXPECT_EQ(plan.exit_code, 2) << plan.err;
  EXPECT_EQ(rafter::testing::slurp(out), measured);
  for (const bool empty : {false, true}) {
    if (empty)
      std::ofstream{out};
    else
      ASSERT_EQ(run_rafter({"profile", "--plan", "--op", "gemm", "--replace", "-o", out.string()}).exit_code,
                0);
    const auto r = with(gemm, "");
    EXPECT_EQ(r.exit_code, 0) << (empty ? "empty file: " : "plan: ") << r.err;
    EXPECT_NE(rafter::testing::slurp(out), measured);
  }
  const std::string second = rafter::testing::slurp(out);
  const auto replaced = with(gemm, "--replace");
  EXPECT_EQ(replaced.exit_code, 0) << replaced.err;
  EXPECT_NE(rafter::testing::slurp(out), second);  // a new run (its timestamp and times)
  fs::remove_all(dir);
}

TEST(ProfileCli, ModelRunOnCpuListsNoBackendRecords) {
  const fs::path out = temp_dir() / "decode.json";
  const Result r = rafter_cmd("profile --device cpu --model llama2-7b --phase decode --kv-len 64 --tp 2 --quick "
                              "--warm-cache --filter 'rmsnorm|residual|rope|tp_all_reduce' -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("no_backend"), std::string::npos);  // the TP all-reduces: listed, not run
  std::ifstream in(out);
  const auto run = rafter::run_from_json(nlohmann::json::parse(in));
  int ok = 0, nb = 0;
  for (const auto& rec : run.records) {
    ok += rec.status == rafter::RecordStatus::Ok;
    nb += rec.status == rafter::RecordStatus::NoBackend;
  }
  EXPECT_GT(ok, 0);
  EXPECT_EQ(nb, 3);  // layer.attn/mlp and the vocab-parallel embedding's all-reduce
}

TEST(ProfileCli, BadInputIsOneLineAndExitTwo) {
  expect_bad_input("profile --plan --model llama9", "llama9");
  expect_bad_input("profile --op gemmm", "gemmm");
  expect_bad_input("profile --plan --model llama2-7b --phase serve", "serve");
  expect_bad_input("profile --plan --model llama2-7b --precision fp3", "fp3");
  expect_bad_input("profile --op gemm --dtype fp7", "fp7");
  expect_bad_input("profile --plan --model llama2-70b --tp 3", "--tp 3");
  expect_bad_input("profile --op gemm --shape m=abc", "abc");
  expect_bad_input("profile --op gemm --dtype fp32 --m 1048576 --n 1048576 --k 65536", "GiB");
  // One operator that no backend of the device runs: one line that says so (a model step lists it).
  expect_bad_input("profile --device cpu --op all_reduce --dtype bf16", "no cpu backend runs all_reduce");
  expect_bad_input("profile --op rope --shape tokens=5,heads=3,head_dim=7,seq=3", "head_dim must be even");
#if !RAFTER_HAVE_CUDA
  expect_bad_input("profile --device cuda --op rmsnorm", "built without CUDA");
#endif
  const fs::path broken = temp_dir() / "broken.json";
  std::ofstream(broken) << R"({"name": "broken", "hidden": 4096, "heads": 32, "kv_heads": 32,
                              "ffn": 11008, "layers": 32, "vocab": 32000})";
  expect_bad_input("profile --plan --model-file " + broken.string(), "head_dim");
  std::ofstream(broken) << "{ not json";
  expect_bad_input("profile --plan --model-file " + broken.string(), "broken.json");
  expect_bad_input("profile --plan", "--model");
}

TEST(ProfileCli, PlanOnADeviceSaysWhichBackendWouldRunEachRecord) {
  Result r = rafter_cmd("profile --plan --device cpu --model llama2-7b --phase train --seq 256 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto run = rafter::run_from_json(nlohmann::json::parse(r.out));
  ASSERT_GT(run.records.size(), 20u);
  for (const auto& rec : run.records) {
    EXPECT_FALSE(rec.time.has_value()) << rec.label << ": a plan runs nothing";
    if (rec.status == rafter::RecordStatus::Planned) {
      EXPECT_EQ(rec.backend.rfind("cpu.", 0), 0u) << rec.label;
    } else {
      EXPECT_EQ(rec.status, rafter::RecordStatus::NoBackend) << rec.label;
    }
  }
  // On a device this build cannot run (or with no GPU backend for an operator): no_backend, listed.
  r = rafter_cmd("profile --plan --device cuda:0 --model llama2-7b --phase decode --precision nvfp4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  run = rafter::run_from_json(nlohmann::json::parse(r.out));
  int no_backend = 0;
  for (const auto& rec : run.records) {
    no_backend += rec.status == rafter::RecordStatus::NoBackend;
    if (rec.status == rafter::RecordStatus::Planned) {
      EXPECT_EQ(rec.backend.rfind("cuda.", 0), 0u) << rec.label;
    }
  }
#if !RAFTER_HAVE_CUDA
  EXPECT_EQ(no_backend, int(run.records.size()));
#else
  EXPECT_EQ(no_backend, 0);  // FP4 GEMMs, quantizers and hot-channel patches all run on Hopper
  // GLA's chunked forward and backward and its decode step run on cuda.gla.
  r = rafter_cmd("profile --plan --device cuda:0 --model gla-1.3b --phase train --seq 2048 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  run = rafter::run_from_json(nlohmann::json::parse(r.out));
  int gla_fwd = 0, gla_bwd = 0;
  for (const auto& rec : run.records) {
    if (rec.op != "gla_chunked") continue;
    if (rec.phase == "fwd") {
      ++gla_fwd;
      EXPECT_EQ(rec.backend, "cuda.gla") << rec.label;
    } else {
      ++gla_bwd;
      EXPECT_EQ(rec.backend, "cuda.gla") << rec.label;
    }
  }
  EXPECT_GT(gla_fwd, 0);
  EXPECT_GT(gla_bwd, 0);
  r = rafter_cmd("profile --plan --device cuda:0 --model gla-1.3b --phase decode --json");
  ASSERT_EQ(r.code, 0) << r.err;
  run = rafter::run_from_json(nlohmann::json::parse(r.out));
  for (const auto& rec : run.records) {
    if (rec.op == "gla_decode") {
      EXPECT_EQ(rec.backend, "cuda.gla") << rec.label;
    }
  }
#endif
  r = rafter_cmd("profile --plan --device cpu --model llama2-7b --phase decode");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("backend"), std::string::npos);
  EXPECT_NE(r.out.find("cpu.onednn"), std::string::npos);
}

// --counters where no counted pass can run (no PMU on the CPU, no CUPTI pass there): the run
// completes with analytic bytes, says why once on stderr and in run.conditions.counters.
TEST(ProfileCli, CountersWithoutCountersCompleteWithANote) {
  const fs::path out = temp_dir() / "counters.json";
  const Result r = rafter_cmd("profile --op rmsnorm --shape tokens=64,hidden=256 --quick --counters -o " + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in);
  ASSERT_TRUE(j["conditions"].contains("counters"));
  const std::string why = j["conditions"]["counters"].get<std::string>();
  EXPECT_TRUE(why.rfind("unavailable (", 0) == 0 || why.rfind("not counted (", 0) == 0) << why;
  std::size_t notes = 0;
  for (std::size_t at = r.err.find("rafter: note:"); at != std::string::npos; at = r.err.find("rafter: note:", at + 1))
    ++notes;
  EXPECT_EQ(notes, why.rfind("unavailable", 0) == 0 ? 1u : 0u) << r.err;
  const auto run = rafter::run_from_json(j);
  ASSERT_EQ(run.records.size(), 1u);
  const auto& rec = run.records[0];
  EXPECT_EQ(rec.status, rafter::RecordStatus::Ok);
  // The CPU backend ran its counted pass and says how it went; bytes are counted only where it could.
  ASSERT_TRUE(rec.details.contains("counters")) << rec.details.dump();
  const std::string status = rec.details["counters"].value("status", "");
  EXPECT_EQ(status, why);
  const bool counted = status.rfind("available", 0) == 0;
  for (const auto& b : rec.bytes) {
    if (b.level == "L2" || b.level == "L3" || b.level == "DRAM") {
      EXPECT_EQ(b.source, counted ? rafter::Source::Counter : rafter::Source::Analytic) << b.level;
    }
  }
}
