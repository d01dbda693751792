// Text exporters over one data model (RunPlacement / comparisons): the console table, CSV and
// JSON. Charts live in charts.hpp, the HTML page in html.hpp.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "rafter/roofline/compare.hpp"
#include "rafter/roofline/placement.hpp"

namespace rafter::roofline {

// Console table: operator, count, time, % of step, FLOP/s, AI per level, bound, efficiency, gap;
// a header naming the run, machine and device, and a footer with where the step's time goes.
std::string format_report_table(const RunPlacement& rp);
// The table's cells (header first), shared by the console table and the HTML page.
std::vector<std::vector<std::string>> report_rows(const RunPlacement& rp);
// The lines under the table: step totals, time by binding resource and by kind of work, remarks
// per operator.
std::string format_report_footer(const RunPlacement& rp);
std::string format_report_csv(const RunPlacement& rp);  // one row per record, raw SI numbers
nlohmann::json report_json(const RunPlacement& rp);

// Operators side by side, then the steps' time by kind of work (format_work_table).
std::string format_run_comparison_table(const RunComparison& cmp);
// Each run's step time by kind of work (work_kind): seconds and share of its step.
std::string format_work_table(const RunComparison& cmp);
std::string format_run_comparison_csv(const RunComparison& cmp);
nlohmann::json run_comparison_json(const RunComparison& cmp);
std::string format_machine_comparison_table(const MachineComparison& cmp);
std::string format_machine_comparison_csv(const MachineComparison& cmp);
nlohmann::json machine_comparison_json(const MachineComparison& cmp);

// A plain-text table: columns padded to their widest cell (UTF-8 aware), first column left
// aligned, the rest right aligned.
std::string format_text_table(const std::vector<std::vector<std::string>>& rows);

}  // namespace rafter::roofline
