// Console table, CSV and JSON of a run's placement.
#include "rafter/roofline/report.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "rafter/collector/text_table.hpp"
#include "rafter/roofline/format.hpp"

namespace rafter::roofline {

std::string format_text_table(const std::vector<std::vector<std::string>>& rows) {
  return rafter::format_text_table(rows);
}

namespace {

std::string untimed_text(const Placement& p) {
  switch (p.status) {
    case RecordStatus::Planned: return "planned";
    case RecordStatus::NoBackend: return "no backend";
    case RecordStatus::Failed: return "failed";
    case RecordStatus::DoesNotFit: return "does not fit";
    case RecordStatus::NotRun: return "not run";
    default: return "no time";
  }
}

std::string precision_text(const Placement& p) {
  return p.emulated ? p.precision + "→" + p.judged_as : p.precision;
}

// Levels where some record's bytes were counted: each gets a "model/measured" column.
std::vector<std::string> counted_levels(const RunPlacement& rp) {
  std::vector<std::string> out;
  for (const auto& level : rp.memory_levels())
    for (const auto& p : rp.records)
      for (const auto& l : p.levels)
        if (l.level == level && l.model_over_measured && std::find(out.begin(), out.end(), level) == out.end())
          out.push_back(level);
  return out;
}

// The record's point at `level` (the last one, should a level appear twice), nullptr when none.
const LevelPoint* level_point(const Placement& p, const std::string& level) {
  const LevelPoint* point = nullptr;
  for (const auto& l : p.levels)
    if (l.level == level) point = &l;
  return point;
}

// "0.42!" marks a ratio the placement judged a mismatch (kModelMismatch, kModelMismatchFloorBytes).
std::string ratio_text(const LevelPoint* point) {
  if (!point || !point->model_over_measured) return "-";
  return fmt::format("{:.2f}{}", *point->model_over_measured, point->model_mismatch ? "!" : "");
}

std::vector<std::string> table_row(const Placement& p, const std::vector<std::string>& levels,
                                   const std::vector<std::string>& counted) {
  std::vector<std::string> row = {p.display_name(), p.phase, precision_text(p), fmt::format("{:g}", p.count)};
  if (p.timed) {
    row.push_back(format_seconds(p.seconds_per_call));
    row.push_back(format_percent(p.share_of_step));
    row.push_back(p.total_flops > 0 ? format_flops_per_second(p.flops_per_second) : "-");
  } else {
    row.insert(row.end(), {untimed_text(p), "-", "-"});
  }
  for (const auto& level : levels) {
    const LevelPoint* point = level_point(p, level);
    row.push_back(point ? format_intensity(point->ai_flops_per_byte) : "-");
  }
  for (const auto& level : counted) {
    const LevelPoint* point = level_point(p, level);
    row.push_back(ratio_text(point));
  }
  row.push_back(p.binding_name());
  if (p.timed && p.binding) {
    row.push_back(format_percent(p.efficiency));
    row.push_back(format_seconds(p.gap_seconds));
  } else {
    row.push_back(p.binding ? fmt::format("floor {}", format_seconds(p.bound_seconds)) : "-");
    row.push_back("-");
  }
  return row;
}

std::string header_text(const RunPlacement& rp) {
  std::string model = rp.suite.contains("model") && rp.suite["model"].is_string()
                          ? rp.suite["model"].get<std::string>()
                          : std::string("-");
  return fmt::format("run {} (host {}, model {}) judged on {} [{}] of machine {}; compute roofs: {}\n", rp.run_name,
                     rp.run_host, model, rp.roofs.device_id, rp.roofs.device_name, rp.roofs.host,
                     rp.roofs.compute_regime);
}

// The step's time as one CUDA graph vs launched kernel by kernel: each timed call is at least one
// kernel launch, and a launch form costs at least its floor per kernel.
std::string launch_floor_text(const RunPlacement& rp) {
  const auto& forms = rp.roofs.launch_seconds_by_form;
  const auto graph = forms.find("graph_node"), stream = forms.find("stream");
  if (rp.timed_records == 0 || (graph == forms.end() && stream == forms.end())) return "";
  double launches = 0;
  for (const auto& p : rp.records)
    if (p.timed) launches += p.count;
  std::string out = fmt::format("launch floors of the step's {:g} kernel launches (at least one per call):", launches);
  if (graph != forms.end())
    out += fmt::format(" as one CUDA graph {} ({} a node)", format_seconds(launches * graph->second),
                       format_seconds(graph->second));
  if (stream != forms.end())
    out += fmt::format("{} launched one by one {} ({} a launch)", graph != forms.end() ? ";" : "",
                       format_seconds(launches * stream->second), format_seconds(stream->second));
  return out + fmt::format("; measured {}\n", format_seconds(rp.step_seconds));
}

}  // namespace

std::string format_report_footer(const RunPlacement& rp) {
  std::string out;
  if (rp.timed_records > 0) {
    out += fmt::format("step: {} measured, {} explained by roofs ({}), {} unexplained gap\n",
                       format_seconds(rp.step_seconds), format_seconds(rp.bound_step_seconds),
                       format_percent(rp.step_seconds > 0 ? rp.bound_step_seconds / rp.step_seconds : 0),
                       format_seconds(rp.gap_step_seconds));
    out += "time by binding resource:";
    for (const auto& [name, s] : rp.step_seconds_by_binding)
      out += fmt::format("  {} {}", name, format_percent(s / rp.step_seconds));
    out += "\ntime by kind of work:";
    for (const auto& kind : work_kinds())
      if (auto it = rp.step_seconds_by_work.find(kind); it != rp.step_seconds_by_work.end())
        out += fmt::format("  {} {}", kind, format_percent(it->second / rp.step_seconds));
    out += "\n";
    if (const OverlapTotals& o = rp.overlap; o.records > 0)
      out += fmt::format(
          "overlap measured on {} collective(s): {} per step alone, {} exposed beside the step's GEMMs ({} "
          "hidden); with it the step would take {}\n",
          o.records, format_seconds(o.alone_seconds), format_seconds(o.exposed_seconds),
          format_percent(o.hidden_fraction()),
          format_seconds(rp.step_seconds - (o.alone_seconds - o.exposed_seconds)));
  }
  if (rp.timed_records > 0 && rp.step_seconds > 0)
    out += fmt::format("achieved over the timed records: {} ({} of the step's {} in {})\n",
                       format_flops_per_second(rp.timed_step_flops / rp.step_seconds),
                       format_si(rp.timed_step_flops, "FLOP"), format_si(rp.step_flops, "FLOP"),
                       format_seconds(rp.step_seconds));
  out += launch_floor_text(rp);
  if (!rp.interrupted.empty()) {
    const auto not_run = std::count_if(rp.records.begin(), rp.records.end(),
                                       [](const Placement& p) { return p.status == RecordStatus::NotRun; });
    out += fmt::format("interrupted by {}: {} record(s) not run; the step above is partial\n", rp.interrupted, not_run);
  }
  if (rp.untimed_records > 0) {
    out += fmt::format("{} record(s) without a measured time: their roof floors are shown instead\n",
                       rp.untimed_records);
    out += fmt::format("not covered by a timed record: {} of the step's FLOPs, {} of its DRAM/HBM bytes\n",
                       format_percent(rp.step_flops > 0 ? 1 - rp.timed_step_flops / rp.step_flops : 0),
                       format_percent(rp.step_outer_bytes > 0 ? 1 - rp.timed_step_outer_bytes / rp.step_outer_bytes : 0));
  }
  for (const auto& p : rp.records)
    for (const auto& r : p.remarks) out += fmt::format("note: {}: {}\n", p.display_name(), r);
  return out;
}

std::vector<std::vector<std::string>> report_rows(const RunPlacement& rp) {
  auto levels = rp.memory_levels();
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {"operator", "phase", "precision", "count", "time", "% step", "FLOP/s"};
  for (const auto& l : levels) head.push_back(fmt::format("AI {}", l));
  const auto counted = counted_levels(rp);
  for (const auto& l : counted) head.push_back(fmt::format("model/measured {}", l));
  head.insert(head.end(), {"bound", "efficiency", "gap"});
  rows.push_back(head);
  for (const auto& p : rp.records) rows.push_back(table_row(p, levels, counted));
  return rows;
}

std::string format_report_table(const RunPlacement& rp) {
  return header_text(rp) + format_text_table(report_rows(rp)) + format_report_footer(rp);
}

std::string format_report_csv(const RunPlacement& rp) {
  auto levels = rp.memory_levels();
  std::string out = "operator,op,phase,precision,judged_as,emulated,status,count,seconds_per_call,step_seconds,"
                    "share_of_step,flops_per_call,flops_per_second";
  for (const auto& l : levels) out += fmt::format(",ai_{}_flops_per_byte", csv_field(l));
  for (const auto& l : levels) out += fmt::format(",{}_bytes_source,{}_model_over_measured", csv_field(l), csv_field(l));
  out += ",flops_source,bound,bound_seconds,efficiency,gap_seconds\n";
  for (const auto& p : rp.records) {
    out += fmt::format("{},{},{},{},{},{},{},{:g},{:g},{:g},{:g},{:g},{:g}", csv_field(p.display_name()),
                       csv_field(p.op), csv_field(p.phase), csv_field(p.precision), csv_field(p.judged_as),
                       p.emulated ? "true" : "false", to_string(p.status), p.count, p.seconds_per_call,
                       p.step_seconds, p.share_of_step, p.total_flops, p.flops_per_second);
    for (const auto& level : levels) {
      const LevelPoint* point = level_point(p, level);
      out += fmt::format(",{:g}", point ? point->ai_flops_per_byte : 0.0);
    }
    for (const auto& level : levels) {
      const LevelPoint* point = level_point(p, level);
      const auto ratio = point ? point->model_over_measured : std::nullopt;
      out += fmt::format(",{},{}", point ? to_string(point->source) : "", ratio ? fmt::format("{:g}", *ratio) : "");
    }
    out += fmt::format(",{},{},{:g},{:g},{:g}\n", to_string(p.flops_source), csv_field(p.binding_name()),
                       p.bound_seconds, p.efficiency, p.gap_seconds);
  }
  return out;
}

nlohmann::json report_json(const RunPlacement& rp) {
  nlohmann::json j = {{"schema", {{"name", "rafter.report"}, {"version", 1}}},
                      {"run", rp.run_name},
                      {"run_host", rp.run_host},
                      {"machine_host", rp.roofs.host},
                      {"device", {{"id", rp.roofs.device_id}, {"name", rp.roofs.device_name}}},
                      {"suite", rp.suite},
                      {"step_seconds", rp.step_seconds},
                      {"bound_step_seconds", rp.bound_step_seconds},
                      {"gap_step_seconds", rp.gap_step_seconds},
                      {"step_seconds_by_binding", rp.step_seconds_by_binding},
                      {"step_seconds_by_work", rp.step_seconds_by_work}};
  nlohmann::json records = nlohmann::json::array();
  for (const auto& p : rp.records) {
    nlohmann::json r = {{"operator", p.display_name()}, {"op", p.op}, {"phase", p.phase},
                        {"precision", p.precision}, {"judged_as", p.judged_as}, {"emulated", p.emulated},
                        {"status", to_string(p.status)}, {"count", p.count}, {"timed", p.timed},
                        {"flops_per_call", p.total_flops}, {"flops_by_class", p.flops_by_class},
                        {"flops_source", to_string(p.flops_source)}, {"model_flops_per_call", p.model_flops},
                        {"bound", p.binding_name()}, {"bound_seconds", p.bound_seconds},
                        {"remarks", p.remarks}};
    if (p.timed)
      r.update({{"seconds_per_call", p.seconds_per_call}, {"step_seconds", p.step_seconds},
                {"share_of_step", p.share_of_step}, {"flops_per_second", p.flops_per_second},
                {"flops_per_second_by_class", p.flops_per_second_by_class}, {"efficiency", p.efficiency},
                {"gap_seconds", p.gap_seconds}});
    nlohmann::json levels = nlohmann::json::array();
    for (const auto& l : p.levels) {
      nlohmann::json level = {{"level", l.level}, {"bytes", l.bytes}, {"source", to_string(l.source)},
                              {"ai_flops_per_byte", l.ai_flops_per_byte},
                              {"bandwidth_bytes_per_second", l.bandwidth_bytes_per_second},
                              {"roof_flops_per_second", l.roof_flops_per_second}};
      if (l.model_over_measured) level["model_over_measured"] = *l.model_over_measured;
      levels.push_back(std::move(level));
    }
    nlohmann::json bounds = nlohmann::json::array();
    for (const auto& b : p.bounds)
      bounds.push_back({{"kind", to_string(b.kind)}, {"resource", b.resource}, {"amount", b.amount},
                        {"ceiling", b.ceiling}, {"seconds", b.seconds}});
    r["levels"] = levels;
    r["bounds"] = bounds;
    records.push_back(r);
  }
  j["records"] = records;
  return j;
}

}  // namespace rafter::roofline
