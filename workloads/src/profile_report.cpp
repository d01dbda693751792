// Console tables and CSV of plans and runs (see profile_report.hpp).
#include "rafter/workloads/profile_report.hpp"

#include <fmt/format.h>

#include "rafter/workloads/operator.hpp"
#include "rafter/workloads/suite.hpp"

namespace rafter::workloads {
namespace {

double outer_bytes(const OperatorRecord& r) {
  for (const auto& b : r.bytes)
    if (b.level == "DRAM" || b.level == "HBM") return b.bytes;
  return r.compulsory_bytes;
}

std::string link_bytes(const OperatorRecord& r) {
  for (const auto& b : r.bytes)
    if (b.level == "nvlink" || b.level == "network" || b.level == "pcie") return fmt::format("{} {:.3g} GB", b.level, b.bytes * r.count / 1e9);
  return "";
}

std::string short_shape(const OperatorRecord& r) {
  std::string s = format_shape(r.shape);
  return s.size() > 58 ? s.substr(0, 55) + "..." : s;
}

std::string csv_quote(const std::string& s) { return "\"" + s + "\""; }

std::string status_text(const OperatorRecord& r) {
  switch (r.status) {
    case RecordStatus::Ok: return "ok";
    case RecordStatus::Invalid: return "INVALID";
    case RecordStatus::NoBackend: return "no_backend";
    case RecordStatus::Failed: return "FAILED";
    case RecordStatus::Planned: return "planned";
  }
  return "";
}

std::string title(const Run& run) {
  if (!run.suite.contains("model")) return "";
  const auto& s = run.suite;
  return fmt::format("{} {} batch={} seq={} kv_len={} precision={} tp={} zero={} dp={} ({:.3g} B parameters)\n",
                     s.value("model", ""), s.value("phase", ""), s.value("batch", 0), s.value("seq", 0),
                     s.value("kv_len", 0), s.value("precision", ""), s.value("tp", 1), s.value("zero", 0),
                     s.value("dp", 1), s.value("parameters", 0.0) / 1e9);
}

}  // namespace

std::string plan_table(const Run& run) {
  const auto totals = step_totals(run);
  std::string out = title(run);
  out += fmt::format("{:<34} {:<18} {:<10} {:<58} {:<13} {:>7} {:>12} {:>7} {:>11} {:>8}\n", "label", "operator",
                     "phase", "shape", "precision", "count", "GFLOP/step", "share", "GB/step", "FLOP/B");
  for (const auto& r : run.records) {
    const double f = r.total_flops() * r.count, b = outer_bytes(r) * r.count;
    std::string extra = link_bytes(r);
    out += fmt::format("{:<34} {:<18} {:<10} {:<58} {:<13} {:>7g} {:>12.4g} {:>6.2f}% {:>11.4g} {:>8.3g}{}\n", r.label,
                       r.op, r.phase, short_shape(r), r.precision, r.count, f / 1e9,
                       totals.flops > 0 ? 100 * f / totals.flops : 0.0, b / 1e9, b > 0 ? f / b : 0.0,
                       extra.empty() ? "" : "  link: " + extra);
  }
  out += fmt::format("total: {} operators, {:.6g} TFLOP per step, {:.6g} GB at {} per step\n", run.records.size(),
                     totals.flops / 1e12, totals.bytes_outer / 1e9,
                     run.device.memory_levels.empty() ? "DRAM" : run.device.memory_levels.back().name);
  return out;
}

std::string plan_csv(const Run& run) {
  const auto totals = step_totals(run);
  std::string out = "label,operator,phase,shape,precision,count,flops_per_call,flops_per_step,share_of_step_flops,"
                    "outer_bytes_per_call,compulsory_bytes_per_call,link_bytes_per_call\n";
  for (const auto& r : run.records) {
    double link = 0;
    for (const auto& b : r.bytes)
      if (b.level == "nvlink" || b.level == "network" || b.level == "pcie") link = b.bytes;
    out += fmt::format("{},{},{},{},{},{},{:.17g},{:.17g},{:.6g},{:.17g},{:.17g},{:.17g}\n", csv_quote(r.label), r.op,
                       r.phase, csv_quote(format_shape(r.shape)), r.precision, r.count, r.total_flops(),
                       r.total_flops() * r.count, totals.flops > 0 ? r.total_flops() * r.count / totals.flops : 0.0,
                       outer_bytes(r), r.compulsory_bytes, link);
  }
  return out;
}

std::string run_table(const Run& run) {
  const auto totals = step_totals(run);
  std::string out = title(run);
  out += fmt::format("{:<30} {:<18} {:<10} {:<13} {:<11} {:<10} {:>6} {:>11} {:>11} {:>7} {:>11} {:>9} {:>17}\n",
                     "label", "operator", "phase", "precision", "backend", "status", "count", "time/call", "ms/step",
                     "share", "GFLOP/s", "GB/s", "check err/tol");
  for (const auto& r : run.records) {
    std::string t = "-", step = "-", share = "-", flops = "-", gbs = "-";
    if (r.time) {
      const double s = r.time->value;
      t = s < 1e-3 ? fmt::format("{:.1f} us", s * 1e6) : fmt::format("{:.3f} ms", s * 1e3);
      step = fmt::format("{:.3f}", s * r.count * 1e3);
      share = totals.seconds > 0 ? fmt::format("{:.1f}%", 100 * s * r.count / totals.seconds) : "-";
      flops = fmt::format("{:.1f}", r.total_flops() / s / 1e9);
      gbs = fmt::format("{:.1f}", outer_bytes(r) / s / 1e9);
    }
    std::string check = r.check.ran ? fmt::format("{:.1e}/{:.0e}", r.check.error, r.check.tolerance) : "-";
    std::string prec = r.precision + (r.emulated ? "*" : "");
    out += fmt::format("{:<30} {:<18} {:<10} {:<13} {:<11} {:<10} {:>6g} {:>11} {:>11} {:>7} {:>11} {:>9} {:>17}\n",
                       r.label.size() > 30 ? r.label.substr(0, 30) : r.label, r.op, r.phase, prec, r.backend,
                       status_text(r), r.count, t, step, share, flops, gbs, check);
  }
  out += fmt::format("total: {} operators, {} timed, step time {:.3f} ms over timed operators, {:.4g} TFLOP per step",
                     run.records.size(), totals.measured, totals.seconds * 1e3, totals.flops / 1e12);
  if (totals.seconds > 0) out += fmt::format(", {:.1f} GFLOP/s overall", totals.flops / totals.seconds / 1e9);
  out += "\n";
  if (totals.no_backend) out += fmt::format("{} operator(s) have no backend on {} (listed, not run)\n", totals.no_backend, run.device.id);
  if (totals.invalid) out += fmt::format("{} operator(s) FAILED their correctness check (status INVALID)\n", totals.invalid);
  if (totals.failed) out += fmt::format("{} operator(s) failed to run (status FAILED)\n", totals.failed);
  bool emulated = false;
  for (const auto& r : run.records) emulated = emulated || r.emulated;
  if (emulated) out += "* emulated precision (see emulated_via in run.json)\n";
  return out;
}

std::string run_csv(const Run& run) {
  std::string out = "label,operator,phase,shape,precision,emulated_via,backend,status,count,median_seconds,min_seconds,"
                    "max_seconds,samples,flops_per_call,outer_bytes_per_call,check_error,check_tolerance,note\n";
  for (const auto& r : run.records) {
    const Figure f = r.time.value_or(Figure{});
    out += fmt::format("{},{},{},{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{},{:.17g},{:.17g},{:.3g},{:.3g},{}\n",
                       csv_quote(r.label), r.op, r.phase, csv_quote(format_shape(r.shape)), r.precision, r.emulated_via,
                       r.backend, status_text(r), r.count, f.stats.median, f.stats.min, f.stats.max, f.stats.samples,
                       r.total_flops(), outer_bytes(r), r.check.error, r.check.tolerance, csv_quote(r.note));
  }
  return out;
}

}  // namespace rafter::workloads
