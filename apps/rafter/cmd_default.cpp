// `rafter` with no verb: characterize this machine quickly, profile a small Llama-2 7B
// prefill + decode mix on the best device present (a GPU if there is one, else the CPU), and write
// machine.json, run.json, report.txt, roofline.svg and roofline.html into the output folder.
#include <cstdio>
#include <filesystem>
#include <fmt/core.h>

#include "commands.hpp"
#include "rafter/collector/environment.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/collector/interrupt.hpp"
#include "rafter/collector/json_io.hpp"
#include "rafter/collector/output_lock.hpp"
#include "rafter/probes/probe.hpp"
#include "rafter/roofline/html.hpp"
#include "rafter/roofline/outputs.hpp"
#include "rafter/roofline/placement.hpp"
#include "rafter/roofline/report.hpp"
#include "rafter/workloads/suite.hpp"

namespace rafter::cli {

namespace {

namespace fs = std::filesystem;

// The GPU when one is present: that is where an LLM runs; else the CPU.
std::string best_device() {
  try {
    if (!probes::describe_cuda_devices().empty()) return "cuda:0";
  } catch (const InputError&) {  // no driver or no usable GPU: the CPU it is
  }
  return "cpu";
}

// The default mix: one prefill and one decode step of Llama-2 7B, sized so that a CPU finishes in
// minutes (prefill 128 tokens, decode with 512 cached) and a GPU sees serving-sized shapes.
std::vector<workloads::SuiteConfig> default_suites(const std::string& device) {
  bool gpu = device != "cpu";
  workloads::SuiteConfig prefill, decode;
  prefill.model = decode.model = "llama2-7b";
  prefill.precision = decode.precision = "bf16";
  prefill.phase = "prefill";
  prefill.batch = 1;
  prefill.seq = gpu ? 2048 : 128;
  decode.phase = "decode";
  decode.batch = gpu ? 8 : 1;
  decode.seq = decode.kv_len = gpu ? 2048 : 512;
  return {prefill, decode};
}

// Profiles each suite and merges them into one run; labels get the phase as a prefix so that the
// prefill and decode instances of one layer stay apart in tables and charts.
Run profile_default_mix(const std::string& device) {
  workloads::ExecContext ctx;
  ctx.device = device;
  ctx.policy = RepeatPolicy::quick();
  Run merged;
  nlohmann::json parts = nlohmann::json::array();
  for (const auto& config : default_suites(device)) {
    if (!merged.interrupted.empty()) {  // a suite after the interrupt: every record not run
      for (auto& r : workloads::plan_suite(config, workloads::device_memory_levels(device)).records) {
        r.label = config.phase + "." + (r.label.empty() ? r.op : r.label);
        r.device = device;
        r.status = RecordStatus::NotRun;
        r.note = fmt::format("not run: {} stopped the run", merged.interrupted);
        merged.records.push_back(std::move(r));
      }
      continue;
    }
    fmt::print("rafter: profiling {} {} (batch {}, {} tokens) on {}\n", config.model, config.phase, config.batch,
               config.phase == "decode" ? config.kv_len : config.seq, device);
    Run part = workloads::run_suite(config, ctx);
    for (auto& r : part.records) {
      r.label = config.phase + "." + (r.label.empty() ? r.op : r.label);
      merged.records.push_back(std::move(r));
    }
    parts.push_back(part.suite);
    if (merged.device.id.empty()) merged.device = part.device;
    merged.interrupted = part.interrupted;
  }
  merged.rafter_version = rafter_version();
  merged.timestamp = utc_timestamp();
  merged.host = host_name();
  merged.suite = {{"model", "llama2-7b"}, {"phase", "prefill+decode"}, {"precision", "bf16"}, {"parts", parts}};
  merged.conditions = {{"quick", true}, {"job", "default"}};
  return merged;
}

}  // namespace

int run_default_job(const std::string& out_dir) {
  const fs::path dir(out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError(fmt::format("cannot create the output folder {}: {}", dir.string(), ec.message()));
  check_writable(dir / "machine.json");  // fail before minutes of measuring, not after
  const OutputLock lock_machine(dir / "machine.json"), lock_run(dir / "run.json");
  const InterruptScope interrupts;  // a first Ctrl-C stops after the current repeat and keeps what finished
  const std::string device = best_device();
  fmt::print("rafter: characterizing {} (quick)\n", device == "cpu" ? "the CPU" : device);
  probes::ProbeOptions options;
  options.quick = true;
  options.policy = RepeatPolicy::quick();
  MachineProfile machine = probes::characterize(device, options);
  write_measured_file(dir / "machine.json", to_json(machine).dump(2) + "\n");
  if (!machine.interrupted.empty())
    throw interrupted_status(fmt::format("wrote {} with the ceilings of the probes that finished; nothing profiled",
                                         (dir / "machine.json").string()));
  Run run = profile_default_mix(device);
  write_measured_file(dir / "run.json", to_json(run).dump(2) + "\n");
  if (!run.interrupted.empty())
    throw interrupted_status(fmt::format("wrote {} and {} (its unfinished records marked not run); no charts",
                                         (dir / "machine.json").string(), (dir / "run.json").string()));
  roofline::RunPlacement rp = roofline::place_run(run, machine, "run.json");
  const std::string report = roofline::format_report_table(rp);
  write_file_atomic(dir / "report.txt", report);
  roofline::write_run_chart(rp, roofline::ChartKind::Hierarchical, dir / "roofline.svg");
  write_file_atomic(dir / "roofline.html", roofline::html_report(rp));
  fmt::print("\n{}\nrafter: wrote into {}/:\n", report, dir.string());
  for (const char* f : {"machine.json", "run.json", "report.txt", "roofline.svg", "roofline.html"})
    fmt::print("  {}\n", (dir / f).string());
  // Everything is written; a record that failed or failed its check still makes the job fail.
  const auto totals = workloads::step_totals(run);
  if (totals.failed || totals.invalid) {
    std::fflush(stdout);
    fmt::print(stderr, "rafter: error: {} record(s) failed or failed their correctness check (see {})\n",
               totals.failed + totals.invalid, (dir / "run.json").string());
    return 1;
  }
  return 0;
}

}  // namespace rafter::cli
