// The CLI's verbs. Each verb lives in its own cmd_<verb>.cpp and adds a CLI11 subcommand whose
// callback does the work by calling the libraries. Errors are thrown (InputError → exit 2).
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "rafter/collector/ranks.hpp"

namespace rafter::cli {

// Thrown by a verb that has written its results but must still end with a non-zero status: main
// returns `code` after the stack has unwound (output locks released). 1: a record failed; 128 + N:
// signal N interrupted the measurement.
struct ExitStatus {
  int code = 1;
};

// After an interrupted measurement was written: one line on stderr saying what was kept, and the
// ExitStatus of a process ended by that signal (130 for SIGINT, 143 for SIGTERM) to throw.
ExitStatus interrupted_status(const std::string& what_was_kept);

// Under mpirun only rank 0 checks (and locks) the output path, so its refusal would leave the other
// ranks waiting for it until --comm-timeout. `check` runs on rank 0 and its InputError reaches every
// rank at once: rank 0 throws it (one line), the others end silently with exit 2.
void on_rank0_for_all_ranks(Ranks& ranks, const std::function<void()>& check);

// Whether the output path holds a file that may be measured work: a regular file that is not empty
// (not a missing path, /dev/null, or mktemp's empty file). probe and profile read it before running.
bool output_holds_a_file(const std::string& path);

void add_topology_command(CLI::App& app);  // rafter topology [--json]
void add_probe_command(CLI::App& app);     // rafter probe --device cpu|cuda[:N]
void add_profile_command(CLI::App& app);   // rafter profile --model/--op ... [--plan]
void add_report_command(CLI::App& app);    // rafter report RUN --machine M
void add_plot_command(CLI::App& app);      // rafter plot RUN --machine M -o roofline.svg
void add_compare_command(CLI::App& app);   // rafter compare A.json B.json

// `rafter` with no arguments: characterize quickly, profile the default suite, write ./rafter-out/.
int run_default_job(const std::string& out_dir);

}  // namespace rafter::cli
