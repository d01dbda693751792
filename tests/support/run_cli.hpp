// Test support: runs the `rafter` executable (RAFTER_BINARY) with arguments and captures its exit
// code, stdout and stderr, for end-to-end CLI tests. Include from any test folder.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace rafter::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  // Lines of stderr (without the trailing empty line).
  std::vector<std::string> err_lines() const {
    std::vector<std::string> lines;
    std::istringstream in(err);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh temporary folder, removed by the caller (or left for inspection on failure).
inline std::filesystem::path make_temp_dir(const std::string& tag) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("rafter-" + tag + "-XXXXXX")).string();
  if (!mkdtemp(tmpl.data())) return {};
  return tmpl;
}

// One fresh temporary folder per tag for this test process, made at its first use (make_temp_dir:
// a folder named by the pid alone could be an earlier run's, its files still there, once the pid
// comes round again).
inline const std::filesystem::path& process_temp_dir(const std::string& tag) {
  static std::map<std::string, std::filesystem::path> made;
  auto it = made.find(tag);
  if (it == made.end()) {
    std::filesystem::path d = make_temp_dir(tag);
    if (d.empty()) throw std::runtime_error("mkdtemp failed for rafter-" + tag);
    it = made.emplace(tag, std::move(d)).first;
  }
  return it->second;
}

// Runs `rafter args...` (stdin from /dev/null) and returns its exit code and output.
inline CliResult run_rafter(const std::vector<std::string>& args, const std::string& binary = RAFTER_BINARY) {
  auto dir = make_temp_dir("cli");
  std::string cmd = shell_quote(binary);
  for (const auto& a : args) {
    cmd.push_back(' ');
    cmd.append(shell_quote(a));
  }
  cmd.append(" </dev/null >");
  cmd.append(shell_quote((dir / "out").string()));
  cmd.append(" 2>");
  cmd.append(shell_quote((dir / "err").string()));
  int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace rafter::testing
