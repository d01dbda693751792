// Console tables and CSV of plans and runs (see profile_report.hpp).
#include "rafter/workloads/profile_report.hpp"

#include <fmt/format.h>

#include <cmath>

#include "rafter/collector/text_table.hpp"
#include "rafter/workloads/operator.hpp"
#include "rafter/workloads/suite.hpp"

namespace rafter::workloads {
namespace {

std::string link_bytes(const OperatorRecord& r) {
  for (const auto& b : r.bytes)
    if (is_link_level(b.level)) return fmt::format("{} {:.3g} GB", b.level, b.bytes * r.count / 1e9);
  return "";
}

std::string short_shape(const OperatorRecord& r) {
  std::string s = format_shape(r.shape);
  return s.size() > 58 ? s.substr(0, 55) + "..." : s;
}

// 4 significant digits in fixed notation (the column's unit is in its header): "1595", "67.60",
// "0.5714"; never an exponent below a million.
std::string sig4(double v) {
  if (!std::isfinite(v)) return "-";
  if (v == 0) return "0";
  const double mag = std::fabs(v);
  if (mag >= 1e6 || mag < 1e-4) return fmt::format("{:.3e}", v);
  const int int_digits = static_cast<int>(std::floor(std::log10(mag))) + 1;
  return fmt::format("{:.{}f}", v, std::max(0, 4 - int_digits));
}

std::string csv_quote(const std::string& s) { return "\"" + s + "\""; }

std::string status_text(const OperatorRecord& r) {
  switch (r.status) {
    case RecordStatus::Ok: return "ok";
    case RecordStatus::Invalid: return "INVALID";
    case RecordStatus::NoBackend: return "no_backend";
    case RecordStatus::Failed: return "FAILED";
    case RecordStatus::Planned: return "planned";
    case RecordStatus::DoesNotFit: return "does_not_fit";
    case RecordStatus::NotRun: return "not_run";
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
  std::vector<std::vector<std::string>> rows = {{"label", "operator", "phase", "shape", "precision", "backend",
                                                 "count", "GFLOP/step", "share", "GB/step", "FLOP/B", "link"}};
  for (const auto& r : run.records) {
    const double f = r.total_flops() * r.count, b = r.outer_bytes() * r.count;
    std::string backend = r.status == RecordStatus::Planned ? r.backend : status_text(r);
    if (r.scaled_from) backend += fmt::format(" (slice {}={})", r.scaled_from->axis, r.scaled_from->slice);
    rows.push_back({r.label, r.op, r.phase, short_shape(r), r.precision, backend.empty() ? "-" : backend,
                    fmt::format("{:g}", r.count), sig4(f / 1e9),
                    fmt::format("{:.2f}%", totals.flops > 0 ? 100 * f / totals.flops : 0.0), sig4(b / 1e9),
                    b > 0 ? sig4(f / b) : "-", link_bytes(r)});
  }
  std::string out = title(run) + format_text_table(rows, {1, 2, 3, 4, 5, 11});
  out += fmt::format("total: {} operators, {:.4g} TFLOP per step, {:.4g} GB at {} per step\n", run.records.size(),
                     totals.flops / 1e12, totals.bytes_outer / 1e9,
                     run.device.memory_levels.empty() ? "DRAM" : run.device.memory_levels.back().name);
  int no_backend = 0;
  for (const auto& r : run.records) no_backend += r.status == RecordStatus::NoBackend;
  if (no_backend) out += fmt::format("{} operator(s) would have no backend on {}\n", no_backend, run.device.id);
  return out;
}

std::string plan_csv(const Run& run) {
  const auto totals = step_totals(run);
  std::string out = "label,operator,phase,shape,precision,count,flops_per_call,flops_per_step,share_of_step_flops,"
                    "outer_bytes_per_call,compulsory_bytes_per_call,link_bytes_per_call,backend\n";
  for (const auto& r : run.records) {
    double link = 0;
    for (const auto& b : r.bytes)
      if (is_link_level(b.level)) link = b.bytes;
    out += fmt::format("{},{},{},{},{},{},{:.17g},{:.17g},{:.6g},{:.17g},{:.17g},{:.17g},{}\n", csv_quote(r.label), r.op,
                       r.phase, csv_quote(format_shape(r.shape)), r.precision, r.count, r.total_flops(),
                       r.total_flops() * r.count, totals.flops > 0 ? r.total_flops() * r.count / totals.flops : 0.0,
                       r.outer_bytes(), r.compulsory_bytes, link,
                       r.status == RecordStatus::Planned ? r.backend : status_text(r));
  }
  return out;
}

std::string run_table(const Run& run) {
  const auto totals = step_totals(run);
  std::vector<std::vector<std::string>> rows = {{"label", "operator", "phase", "precision", "backend", "status",
                                                 "count", "time/call", "ms/step", "share", "GFLOP/s", "GB/s",
                                                 "check err/tol"}};
  for (const auto& r : run.records) {
    std::string t = "-", step = "-", share = "-", flops = "-", gbs = "-";
    if (r.time) {
      const double s = r.time->value;
      t = format_si(s, "s", 4);
      step = sig4(s * r.count * 1e3);
      share = totals.seconds > 0 ? fmt::format("{:.1f}%", 100 * s * r.count / totals.seconds) : "-";
      flops = sig4(r.total_flops() / s / 1e9);
      gbs = sig4(r.outer_bytes() / s / 1e9);
    }
    std::string check = r.check.ran ? fmt::format("{:.1e}/{:.0e}", r.check.error, r.check.tolerance) : "-";
    std::string status = status_text(r) + (r.scaled_from ? " (scaled)" : "");
    rows.push_back({r.label, r.op, r.phase, r.precision + (r.emulated ? "*" : ""), r.backend.empty() ? "-" : r.backend,
                    status, fmt::format("{:g}", r.count), t, step, share, flops, gbs, check});
  }
  std::string out = title(run) + format_text_table(rows, {1, 2, 3, 4, 5});
  out += fmt::format("total: {} operators, {} timed: {} per step over the timed operators, {} per step",
                     run.records.size(), totals.measured, format_si(totals.seconds, "s", 4),
                     format_si(totals.flops, "FLOP", 4));
  if (totals.seconds > 0) out += fmt::format(", {} over the timed operators", format_si(totals.timed_flops_per_second(), "FLOP/s", 4));
  out += "\n";
  if (totals.untimed_flops_share() > 0 || totals.untimed_bytes_share() > 0)
    out += fmt::format("not covered by a timed record: {:.1f}% of the step's FLOPs, {:.1f}% of its {} bytes\n",
                       100 * totals.untimed_flops_share(), 100 * totals.untimed_bytes_share(),
                       run.device.memory_levels.empty() ? "DRAM" : run.device.memory_levels.back().name);
  if (const OverlapTotals o = overlap_totals(run); o.records > 0)
    out += fmt::format(
        "overlap measured on {} collective(s): {} per step alone, {} exposed beside the step's GEMMs "
        "({:.0f}% hidden)\n",
        o.records, format_si(o.alone_seconds, "s", 4), format_si(o.exposed_seconds, "s", 4),
        100 * o.hidden_fraction());
  if (totals.no_backend) out += fmt::format("{} operator(s) have no backend on {} (listed, not run)\n", totals.no_backend, run.device.id);
  if (totals.does_not_fit)
    out += fmt::format("{} operator(s) do not fit in {}'s memory (status does_not_fit, not run)\n", totals.does_not_fit,
                       run.device.id);
  if (totals.scaled)
    out += fmt::format("{} operator(s) timed on a slice that fits and scaled by bytes (see scaled_from)\n", totals.scaled);
  if (totals.invalid) out += fmt::format("{} operator(s) FAILED their correctness check (status INVALID)\n", totals.invalid);
  if (totals.failed) out += fmt::format("{} operator(s) failed to run (status FAILED)\n", totals.failed);
  if (totals.not_run)
    out += fmt::format("{} operator(s) not run: {} stopped the run (status not_run)\n", totals.not_run, run.interrupted);
  bool emulated = false;
  for (const auto& r : run.records) emulated = emulated || r.emulated;
  if (emulated) out += "* emulated precision (see emulated_via in run.json)\n";
  return out;
}

std::string run_csv(const Run& run) {
  std::string out = "label,operator,phase,shape,precision,emulated_via,backend,status,count,median_seconds,min_seconds,"
                    "max_seconds,samples,flops_per_call,outer_bytes_per_call,check_error,check_tolerance,scaled_from,note\n";
  for (const auto& r : run.records) {
    const Figure f = r.time.value_or(Figure{});
    const std::string scaled =
        r.scaled_from ? fmt::format("{}={} of {}", r.scaled_from->axis, r.scaled_from->slice, r.scaled_from->full) : "";
    out += fmt::format("{},{},{},{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{},{:.17g},{:.17g},{:.3g},{:.3g},{},{}\n",
                       csv_quote(r.label), r.op, r.phase, csv_quote(format_shape(r.shape)), r.precision, r.emulated_via,
                       r.backend, status_text(r), r.count, f.stats.median, f.stats.min, f.stats.max, f.stats.samples,
                       r.total_flops(), r.outer_bytes(), r.check.error, r.check.tolerance, csv_quote(scaled),
                       csv_quote(r.note));
  }
  return out;
}

}  // namespace rafter::workloads
