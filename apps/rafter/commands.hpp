// The CLI's verbs. Each verb lives in its own cmd_<verb>.cpp and adds a CLI11 subcommand whose
// callback does the work by calling the libraries. Errors are thrown (InputError → exit 2).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

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

void add_topology_command(CLI::App& app);  // rafter topology [--json]
void add_probe_command(CLI::App& app);     // rafter probe --device cpu|cuda[:N]
void add_profile_command(CLI::App& app);   // rafter profile --model/--op ... [--plan]
void add_report_command(CLI::App& app);    // rafter report RUN --machine M
void add_plot_command(CLI::App& app);      // rafter plot RUN --machine M -o roofline.svg
void add_compare_command(CLI::App& app);   // rafter compare A.json B.json

// `rafter` with no arguments: characterize quickly, profile the default suite, write ./rafter-out/.
int run_default_job(const std::string& out_dir);

}  // namespace rafter::cli
