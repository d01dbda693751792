// End-to-end: what an interrupted measurement keeps (SIGINT / SIGTERM during rafter profile and
// rafter probe), a second signal, two runs writing one output path, and a read-only output folder.
// The runs print their progress as lines (RAFTER_PROGRESS=lines) so that a test can signal them
// mid-way at a known point instead of after a guessed delay.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "run_cli.hpp"

namespace {
namespace fs = std::filesystem;
using rafter::testing::make_temp_dir;
using rafter::testing::run_rafter;
using rafter::testing::slurp;
using Clock = std::chrono::steady_clock;

// A rafter process started in the background with stdout and stderr in files.
class Child {
 public:
  Child(const std::vector<std::string>& args, const fs::path& dir) : err_(dir / "child.err") {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setenv("RAFTER_PROGRESS", "lines", 1);
      std::vector<std::string> all = {RAFTER_BINARY};
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      if (!std::freopen((dir / "child.out").c_str(), "w", stdout) || !std::freopen(err_.c_str(), "w", stderr) ||
          !std::freopen("/dev/null", "r", stdin))
        ::_exit(120);
      ::execv(argv[0], argv.data());
      ::_exit(121);
    }
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // Waits until stderr holds `text` (true) or the process ended or `seconds` passed (false).
  bool wait_for(const std::string& text, double seconds) const {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      if (slurp(err_).find(text) != std::string::npos) return true;
      if (exited()) return slurp(err_).find(text) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  bool exited() const {  // without reaping it
    siginfo_t info{};
    return ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != 0;
  }
  void signal(int sig) const { ::kill(pid_, sig); }
  int wait_exit() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string err() const { return slurp(err_); }

 private:
  fs::path err_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

const std::vector<std::string> kDecodeRun = {"profile", "--device", "cpu", "--model", "llama2-7b",
                                            "--phase", "decode", "--quick"};

std::vector<std::string> with_output(std::vector<std::string> args, const fs::path& out) {
  args.push_back("-o");
  args.push_back(out.string());
  return args;
}

TEST(InterruptCli, SigintMidProfileKeepsFinishedRecordsAndMarksTheRestNotRun) {
  const fs::path dir = make_temp_dir("sigint");
  const fs::path out = dir / "run.json";
  Child child(with_output(kDecodeRun, out), dir);
  ASSERT_TRUE(child.wait_for("profile 4/", 120)) << child.err();
  child.signal(SIGINT);
  EXPECT_EQ(child.wait_exit(), 130) << child.err();
  EXPECT_NE(child.err().find("rafter: interrupted by SIGINT: wrote "), std::string::npos) << child.err();
  const auto run = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(run.value("interrupted", ""), "SIGINT");
  const auto& records = run.at("records");
  std::size_t ok = 0, not_run = 0;
  bool after_first_not_run_all_not_run = true;
  for (const auto& r : records) {
    const std::string status = r.at("status");
    if (status == "not_run") {
      ++not_run;
      EXPECT_FALSE(r.contains("time"));
    } else {
      after_first_not_run_all_not_run &= not_run == 0;
      ok += status == "ok";
      EXPECT_TRUE(r.contains("time")) << r.dump();
    }
  }
  EXPECT_GE(ok, 3u);       // the three that finished before the fourth began
  EXPECT_GE(not_run, 1u);  // the fourth (abandoned) and the ones after it
  EXPECT_TRUE(after_first_not_run_all_not_run);
  EXPECT_EQ(records.size(), 14u);  // every instance of the step is still listed
  // The interrupted file is a valid run: the report reads it and says which records did not run.
  const auto report =
      run_rafter({"report", out.string(), "--machine", std::string(RAFTER_SOURCE_DIR) + "/tests/fixtures/machine_h100.json"});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find(fmt::format("interrupted by SIGINT: {} record(s) not run", not_run)), std::string::npos)
      << report.out;
  EXPECT_FALSE(fs::exists(dir / ".run.json.lock"));  // the output lock is gone with the run
  fs::remove_all(dir);
}

TEST(InterruptCli, SecondSignalExitsAtOnceAndNeverTouchesThePreviousFile) {
  const fs::path dir = make_temp_dir("sigint2");
  const fs::path out = dir / "run.json";
  const std::string previous = "{\"previous\": \"run\"}\n";
  {
    std::FILE* f = std::fopen(out.c_str(), "w");
    std::fputs(previous.c_str(), f);
    std::fclose(f);
  }
  std::vector<std::string> over = kDecodeRun;
  over.push_back("--replace");  // the file there is not a run: refused otherwise, before anything runs
  Child child(with_output(over, out), dir);
  ASSERT_TRUE(child.wait_for("profile 2/", 120)) << child.err();
  // Two signals that arrive together: stopped, the process cannot act on the first before the
  // second is pending too; on SIGCONT both handlers run before any of its own code does.
  child.signal(SIGSTOP);
  child.signal(SIGINT);
  child.signal(SIGTERM);
  child.signal(SIGCONT);
  const int code = child.wait_exit();
  EXPECT_TRUE(code == 130 || code == 143) << code << child.err();
  EXPECT_EQ(child.err().find("rafter: interrupted by"), std::string::npos) << child.err();  // wrote nothing
  EXPECT_EQ(slurp(out), previous);  // untouched: neither truncated nor replaced
  fs::remove_all(dir);
}

TEST(InterruptCli, SigtermMidProbeKeepsTheFinishedProbesCeilings) {
  const fs::path dir = make_temp_dir("sigterm");
  const fs::path out = dir / "machine.json";
  // Two threads and working sets up to 64 MiB: the bandwidth probe's length must not grow with the
  // host's cores and memory (16 cores and 128 GiB took it past the wait below under ctest -j6).
  Child child({"probe", "--device", "cpu", "--quick", "--threads", "2", "--max-working-set", "64M", "-o",
               out.string()},
              dir);
  ASSERT_TRUE(child.wait_for("probe cpu 2/", 120)) << child.err();  // bandwidth finished, compute began
  child.signal(SIGTERM);
  EXPECT_EQ(child.wait_exit(), 143) << child.err();
  const auto m = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(m.value("interrupted", ""), "SIGTERM");
  const auto& not_run = m.at("conditions").at("probes_not_run");
  ASSERT_TRUE(not_run.is_array());
  EXPECT_EQ(not_run.front(), "cpu.compute on cpu");  // the abandoned probe, then the ones after it
  bool bandwidth = false;
  for (const auto& c : m.at("ceilings")) {
    EXPECT_NE(c.at("kind"), "compute") << "a half-finished probe left a ceiling: " << c.dump();
    bandwidth |= c.at("kind") == "bandwidth";
  }
  EXPECT_TRUE(bandwidth);
  // Still a valid machine profile for the readers.
  const auto compare = run_rafter({"compare", out.string(), out.string()});
  EXPECT_EQ(compare.exit_code, 0) << compare.err;
  fs::remove_all(dir);
}

TEST(OutputFaultsCli, TwoRunsWritingOneOutputPath) {
  const fs::path dir = make_temp_dir("lock");
  const fs::path out = dir / "run.json";
  Child first(with_output(kDecodeRun, out), dir);
  ASSERT_TRUE(first.wait_for("profile 2/", 120)) << first.err();
  const auto second = run_rafter(with_output(kDecodeRun, out));
  EXPECT_EQ(second.exit_code, 2);
  ASSERT_EQ(second.err_lines().size(), 1u) << second.err;
  EXPECT_NE(second.err.find("is being written by another rafter run (pid "), std::string::npos) << second.err;
  first.signal(SIGINT);
  EXPECT_EQ(first.wait_exit(), 130);
  // The first run's output is whole; with the first run gone the path is free again (its measured
  // run there is written over with --replace only).
  EXPECT_EQ(nlohmann::json::parse(slurp(out)).value("interrupted", ""), "SIGINT");
  const auto third = run_rafter(
      {"profile", "--device", "cpu", "--op", "rmsnorm", "--quick", "--replace", "-o", out.string()});
  EXPECT_EQ(third.exit_code, 0) << third.err;
  fs::remove_all(dir);
}

// A folder on a read-only mount (as root a chmod would not stop a write): a private mount
// namespace made by unshare(1), as a user namespace when not root.
TEST(OutputFaultsCli, ReadOnlyOutputFolderIsOneLineAndExitTwoBeforeMeasuring) {
  const fs::path dir = make_temp_dir("rofs");
  if (std::system("unshare -rm true >/dev/null 2>&1") != 0) GTEST_SKIP() << "unshare -rm unavailable here";
  const std::string ro = (dir / "ro").string();
  fs::create_directories(ro);
  const std::string cmd = "cd " + dir.string() + " && unshare -rm sh -c 'mount --bind -o ro " + ro + " " + ro +
                          " && exec " + RAFTER_BINARY + " profile --device cpu --op rmsnorm --quick -o " + ro +
                          "/run.json' >out 2>err";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  const std::string err = slurp(dir / "err");
  EXPECT_NE(err.find("rafter: error: cannot write '" + ro + "/run.json': folder '" + ro + "' is not writable"),
            std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
  EXPECT_EQ(slurp(dir / "out"), "");  // nothing measured, nothing printed
  fs::remove_all(dir);
}

// A full disk when the run is written: one line, exit 2, the previous file intact, no temporary
// left behind, and the measured run saved in $TMPDIR instead of lost. The disk is a 64 KiB tmpfs
// filled up, in a private mount namespace (unshare -rm).
TEST(OutputFaultsCli, FullDiskKeepsThePreviousFileAndSavesTheRunElsewhere) {
  const fs::path dir = make_temp_dir("full");
  if (std::system("unshare -rm true >/dev/null 2>&1") != 0) GTEST_SKIP() << "unshare -rm unavailable here";
  const std::string full = (dir / "full").string(), rescue = (dir / "rescue").string();
  fs::create_directories(full);
  fs::create_directories(rescue);
  const std::string cmd = "cd " + dir.string() + " && TMPDIR=" + rescue +
                          " unshare -rm sh -c 'mount -t tmpfs -o size=64k tmpfs " + full +
                          " && echo previous > " + full + "/run.json && (dd if=/dev/zero of=" + full +
                          "/filler bs=4k count=100 2>/dev/null; true) && " + RAFTER_BINARY +
                          " profile --device cpu --op rmsnorm --quick --replace -o " + full +
                          "/run.json; echo exit=$? >status; cat " + full + "/run.json >previous; ls -a " +
                          full + " >listing' >out 2>err";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(slurp(dir / "status"), "exit=2\n");
  const std::string err = slurp(dir / "err");
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("rafter: error: cannot write '" + full + "/run.json': No space left on device; the results are "
                     "saved in " + rescue + "/rafter-run-"),
            std::string::npos)
      << err;
  EXPECT_EQ(slurp(dir / "previous"), "previous\n");
  EXPECT_EQ(slurp(dir / "listing").find(".tmp"), std::string::npos) << slurp(dir / "listing");
  std::size_t saved = 0;
  for (const auto& e : fs::directory_iterator(rescue)) {
    const auto run = nlohmann::json::parse(slurp(e.path()));
    EXPECT_EQ(run.at("records").at(0).at("status"), "ok");
    ++saved;
  }
  EXPECT_EQ(saved, 1u);
  fs::remove_all(dir);
}

}  // namespace
