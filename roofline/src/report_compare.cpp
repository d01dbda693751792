// Tables, CSV and JSON of comparisons (runs side by side, machines ceiling by ceiling).
#include <fmt/format.h>

#include "rafter/roofline/format.hpp"
#include "rafter/roofline/report.hpp"

namespace rafter::roofline {

namespace {

std::string column_title(const RunPlacement& rp) { return rp.run_name + " @ " + rp.roofs.host; }

std::string cell_time(const Placement* p) {
  if (!p) return "absent";
  return p->timed ? format_seconds(p->seconds_per_call) : std::string(to_string(p->status));
}

std::string ratio_text(double a, double b) { return a > 0 && b > 0 ? fmt::format("{:.2f}x", b / a) : "-"; }

}  // namespace

std::string format_run_comparison_table(const RunComparison& cmp) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {"operator", "phase"};
  for (std::size_t c = 0; c < cmp.columns.size(); ++c) {
    std::string tag = fmt::format("[{}]", char('A' + c));
    head.insert(head.end(), {tag + " precision", tag + " time", tag + " bound", tag + " eff"});
    if (c > 0) head.push_back(fmt::format("{}/A time", tag));
  }
  rows.push_back(head);
  for (const auto& row : cmp.rows) {
    std::vector<std::string> line = {row.name, row.phase};
    for (std::size_t c = 0; c < row.cells.size(); ++c) {
      const Placement* p = row.cells[c];
      line.push_back(p ? p->precision : "-");
      line.push_back(cell_time(p));
      line.push_back(p ? p->binding_name() : "-");
      line.push_back(p && p->timed && p->binding ? format_percent(p->efficiency) : "-");
      if (c > 0) {
        const Placement* a = row.cells[0];
        line.push_back(a && p && a->timed && p->timed ? ratio_text(a->seconds_per_call, p->seconds_per_call) : "-");
      }
    }
    rows.push_back(line);
  }
  std::string out;
  for (std::size_t c = 0; c < cmp.columns.size(); ++c) {
    const auto& rp = cmp.columns[c];
    out += fmt::format("[{}] {}: step {} measured, {} floor ({} explained), device {} [{}]\n", char('A' + c),
                       column_title(rp), format_seconds(rp.step_seconds), format_seconds(rp.bound_step_seconds),
                       format_percent(rp.step_seconds > 0 ? rp.bound_step_seconds / rp.step_seconds : 0),
                       rp.roofs.device_id, rp.roofs.device_name);
  }
  out += format_text_table(rows);
  for (std::size_t c = 1; c < cmp.columns.size(); ++c)
    out += fmt::format("step time [{}]/[A]: {} measured, {} floor\n", char('A' + c),
                       ratio_text(cmp.columns[0].step_seconds, cmp.columns[c].step_seconds),
                       ratio_text(cmp.columns[0].bound_step_seconds, cmp.columns[c].bound_step_seconds));
  return out + format_work_table(cmp);
}

// The steps' time by kind of work (work_kind), each run's seconds and share of its step: the
// stacked chart's slices, quantization overhead among them.
std::string format_work_table(const RunComparison& cmp) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {"kind of work"};
  for (std::size_t c = 0; c < cmp.columns.size(); ++c)
    head.push_back(fmt::format("[{}] time (share)", char('A' + c)));
  rows.push_back(head);
  for (const auto& kind : work_kinds()) {
    std::vector<std::string> line = {kind};
    bool any = false;
    for (const auto& rp : cmp.columns) {
      auto it = rp.step_seconds_by_work.find(kind);
      const double s = it == rp.step_seconds_by_work.end() ? 0 : it->second;
      any = any || s > 0;
      line.push_back(s > 0 ? fmt::format("{} ({})", format_seconds(s), format_percent(s / rp.step_seconds))
                           : "-");
    }
    if (any) rows.push_back(line);
  }
  return "step time by kind of work:\n" + format_text_table(rows);
}

std::string format_run_comparison_csv(const RunComparison& cmp) {
  std::string out = "operator,phase,column,run,machine,precision,status,seconds_per_call,step_seconds,bound,"
                    "bound_seconds,efficiency\n";
  for (const auto& row : cmp.rows)
    for (std::size_t c = 0; c < row.cells.size(); ++c) {
      const Placement* p = row.cells[c];
      if (!p) continue;
      out += fmt::format("{},{},{},{},{},{},{},{:g},{:g},{},{:g},{:g}\n", csv_field(row.name), csv_field(row.phase),
                         char('A' + c), csv_field(cmp.columns[c].run_name), csv_field(cmp.columns[c].roofs.host),
                         csv_field(p->precision), to_string(p->status), p->seconds_per_call, p->step_seconds,
                         csv_field(p->binding_name()), p->bound_seconds, p->efficiency);
    }
  return out;
}

nlohmann::json run_comparison_json(const RunComparison& cmp) {
  nlohmann::json cols = nlohmann::json::array();
  for (const auto& rp : cmp.columns)
    cols.push_back({{"run", rp.run_name},
                    {"machine_host", rp.roofs.host},
                    {"device", rp.roofs.device_id},
                    {"step_seconds", rp.step_seconds},
                    {"bound_step_seconds", rp.bound_step_seconds},
                    {"step_seconds_by_work", rp.step_seconds_by_work}});
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : cmp.rows) {
    nlohmann::json cells = nlohmann::json::array();
    for (const Placement* p : row.cells) {
      if (!p) {
        cells.push_back(nullptr);
        continue;
      }
      cells.push_back({{"precision", p->precision}, {"status", to_string(p->status)}, {"timed", p->timed},
                       {"seconds_per_call", p->seconds_per_call}, {"bound", p->binding_name()},
                       {"bound_seconds", p->bound_seconds}, {"efficiency", p->efficiency}});
    }
    rows.push_back({{"operator", row.name}, {"phase", row.phase}, {"cells", cells}});
  }
  return {{"schema", {{"name", "rafter.compare.runs"}, {"version", 1}}}, {"columns", cols}, {"rows", rows}};
}

namespace {

std::string ceiling_value_text(const CeilingRow& r, double v) {
  if (!(v > 0)) return "-";
  return format_si(v, r.unit);
}

}  // namespace

std::string format_machine_comparison_table(const MachineComparison& cmp) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {"ceiling"};
  for (std::size_t i = 0; i < cmp.names.size(); ++i) head.push_back(fmt::format("[{}] {}", char('A' + i), cmp.names[i]));
  for (std::size_t i = 1; i < cmp.names.size(); ++i) head.push_back(fmt::format("{}/A", char('A' + i)));
  rows.push_back(head);
  for (const auto& r : cmp.rows) {
    std::vector<std::string> line = {r.kind + " " + r.resource};
    for (double v : r.values) line.push_back(ceiling_value_text(r, v));
    for (std::size_t i = 1; i < r.values.size(); ++i) line.push_back(ratio_text(r.values[0], r.values[i]));
    rows.push_back(line);
  }
  std::string out;
  for (std::size_t i = 0; i < cmp.roofs.size(); ++i)
    out += fmt::format("[{}] {}: host {}, device {} [{}]\n", char('A' + i), cmp.names[i], cmp.roofs[i].host,
                       cmp.roofs[i].device_id, cmp.roofs[i].device_name);
  return out + format_text_table(rows);
}

std::string format_machine_comparison_csv(const MachineComparison& cmp) {
  std::string out = "kind,resource,unit";
  for (const auto& n : cmp.names) out += fmt::format(",{}", csv_field(n));
  out += "\n";
  for (const auto& r : cmp.rows) {
    out += fmt::format("{},{},{}", r.kind, csv_field(r.resource), r.unit);
    for (double v : r.values) out += fmt::format(",{:g}", v);
    out += "\n";
  }
  return out;
}

nlohmann::json machine_comparison_json(const MachineComparison& cmp) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : cmp.rows)
    rows.push_back({{"kind", r.kind}, {"resource", r.resource}, {"unit", r.unit}, {"values", r.values}});
  nlohmann::json machines = nlohmann::json::array();
  for (std::size_t i = 0; i < cmp.names.size(); ++i)
    machines.push_back({{"name", cmp.names[i]}, {"host", cmp.roofs[i].host}, {"device", cmp.roofs[i].device_id},
                        {"device_name", cmp.roofs[i].device_name}});
  return {{"schema", {{"name", "rafter.compare.machines"}, {"version", 1}}}, {"machines", machines}, {"rows", rows}};
}

}  // namespace rafter::roofline
