// rafter's entry point: parses the verb and turns errors into one line and an exit code
// (2 for bad input, a missing device or counter permission; 1 for an internal error).
#include <fmt/core.h>

#include <array>
#include <cstdio>
#include <exception>
#include <filesystem>

#include "commands.hpp"
#include "rafter/collector/cpu_isa.hpp"
#include "rafter/collector/environment.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/collector/interrupt.hpp"

namespace rafter::cli {
ExitStatus interrupted_status(const std::string& what_was_kept) {
  const int sig = interrupt_signal();
  std::fflush(stdout);
  fmt::print(stderr, "rafter: interrupted by {}: {}\n", signal_name(sig), what_was_kept);
  return ExitStatus{interrupted_exit_code(sig)};
}

bool output_holds_a_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  return !(std::filesystem::file_size(path, ec) == 0 && !ec);
}

void on_rank0_for_all_ranks(Ranks& ranks, const std::function<void()>& check) {
  const bool shared = ranks.mpi() && ranks.size() > 1;
  std::array<char, 1024> refusal{};
  if (ranks.rank() == 0) {
    try {
      check();
    } catch (const InputError& e) {
      if (!shared) throw;
      fmt::format_to_n(refusal.data(), refusal.size() - 1, "{}", e.what());
    }
  }
  if (!shared) return;
  ranks.broadcast(refusal.data(), refusal.size(), 0, "rank 0's check of the output path");
  if (refusal[0] == 0) return;
  if (ranks.rank() == 0) throw InputError(refusal.data());
  throw ExitStatus{2};  // rank 0 says why, once
}
}  // namespace rafter::cli

int main(int argc, char** argv) {
  CLI::App app{"rafter — hierarchical roofline profiler for machines that train and serve LLMs.\n"
               "With no verb: characterize this machine, profile the default suite and write ./rafter-out/."};
  app.set_version_flag("--version", rafter::rafter_version());
  app.require_subcommand(0, 1);
  std::string out_dir = "rafter-out";
  app.add_option("--out", out_dir, "Output folder of the default job")->capture_default_str();
  rafter::cli::add_topology_command(app);
  rafter::cli::add_probe_command(app);
  rafter::cli::add_profile_command(app);
  rafter::cli::add_report_command(app);
  rafter::cli::add_plot_command(app);
  rafter::cli::add_compare_command(app);
  try {
    rafter::held_cpu_isa();  // a bad RAFTER_CPU_ISA fails every verb at once, before any work
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) return rafter::cli::run_default_job(out_dir);
    return 0;
  } catch (const rafter::cli::ExitStatus& e) {
    return e.code;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "rafter: error: {}\n", e.what());
    return 2;
  } catch (const rafter::InputError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "rafter: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "rafter: internal error: {}\n", e.what());
    return 1;
  }
}
