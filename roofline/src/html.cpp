// The self-contained HTML page: inline SVG charts, the table, toggles and hover; no network.
#include "rafter/roofline/html.hpp"

#include <fmt/format.h>

#include "rafter/roofline/format.hpp"
#include "rafter/roofline/report.hpp"

namespace rafter::roofline {

namespace {

constexpr const char* kStyle = R"CSS(
body{font-family:"DejaVu Sans","Liberation Sans",Arial,Helvetica,sans-serif;margin:24px;color:#1a1a1a;max-width:1100px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 8px} p.meta{color:#555;margin:2px 0}
#controls{position:sticky;top:0;background:#fff;padding:8px 0;border-bottom:1px solid #ddd;z-index:2}
#controls label{margin-right:12px;white-space:nowrap} #controls span.group{margin-right:24px;font-weight:bold}
.chart svg{max-width:100%;height:auto;border:1px solid #eee} .hidden{display:none}
table{border-collapse:collapse;font-size:12.5px} th,td{padding:3px 8px;border-bottom:1px solid #e5e5e5;text-align:right}
th:first-child,td:first-child{text-align:left} tr.hl td{background:#fff3c4} tr.untimed td{color:#888}
.hl{stroke:#000 !important;stroke-width:2.5px !important} pre{font-size:12px;background:#f7f7f7;padding:8px;overflow-x:auto}
#tip{position:fixed;pointer-events:none;background:#222;color:#fff;font-size:12px;padding:6px 8px;border-radius:4px;max-width:420px;z-index:3}
)CSS";

// Toggles hide elements by their data-level / data-precision (compared as strings, never built
// into selectors, so names from input files cannot inject anything); hover shows the <title>.
constexpr const char* kScript = R"JS(
(function(){
  var off={level:{},precision:{}};
  function apply(){
    document.querySelectorAll('.plot [data-level],.plot [data-precision],#ops tr[data-precision]').forEach(function(el){
      var l=el.getAttribute('data-level'), p=el.getAttribute('data-precision');
      var hide=(l!==null&&off.level[l])||(p!==null&&off.precision[p]);
      el.classList.toggle('hidden',!!hide);
    });
  }
  document.querySelectorAll('#controls input[type=checkbox]').forEach(function(box){
    box.addEventListener('change',function(){ off[box.getAttribute('data-kind')][box.value]=!box.checked; apply(); });
  });
  var tip=document.getElementById('tip');
  function mark(op,on){
    document.querySelectorAll('[data-op]').forEach(function(el){
      if(el.getAttribute('data-op')===op){ if(el.tagName==='TR') el.classList.toggle('hl',on);
        else if(el.classList.contains('point')) el.classList.toggle('hl',on); }
    });
  }
  document.querySelectorAll('.point,.step-segment,.measured,#ops tr[data-op]').forEach(function(el){
    el.addEventListener('mouseenter',function(ev){
      var t=el.querySelector('title'); var op=el.getAttribute('data-op');
      tip.textContent=t?t.textContent:(op||''); tip.hidden=false; if(op!==null) mark(op,true);
    });
    el.addEventListener('mousemove',function(ev){ tip.style.left=(ev.clientX+14)+'px'; tip.style.top=(ev.clientY+12)+'px'; });
    el.addEventListener('mouseleave',function(){ tip.hidden=true; var op=el.getAttribute('data-op'); if(op!==null) mark(op,false); });
  });
})();
)JS";

std::string strip_xml_declaration(const std::string& svg) {
  std::size_t start = svg.find("<svg");
  return start == std::string::npos ? svg : svg.substr(start);
}

// Each inline SVG gets its own clip-path id: ids are global to the page.
std::string inline_svg(std::string svg, int n) {
  svg = strip_xml_declaration(std::move(svg));
  std::string id = fmt::format("plot-clip-{}", n);
  for (std::string from : {"id=\"plot-clip\"", "url(#plot-clip)"}) {
    std::string to = from == "url(#plot-clip)" ? "url(#" + id + ")" : "id=\"" + id + "\"";
    for (std::size_t pos = svg.find(from); pos != std::string::npos; pos = svg.find(from, pos + to.size()))
      svg.replace(pos, from.size(), to);
  }
  return svg;
}

std::string controls(const RunPlacement& rp) {
  std::string out = "<div id=\"controls\"><span class=\"group\">Memory levels:</span>";
  for (const auto& l : rp.memory_levels())
    out += fmt::format("<label><input type=\"checkbox\" data-kind=\"level\" value=\"{0}\" checked> {0}</label>", xml_escape(l));
  out += "<span class=\"group\">Precisions:</span>";
  std::vector<std::string> precisions = rp.precisions();
  for (const auto& p : rp.records)
    if (std::find(precisions.begin(), precisions.end(), p.main_class) == precisions.end()) precisions.push_back(p.main_class);
  for (const auto& p : precisions)
    out += fmt::format("<label><input type=\"checkbox\" data-kind=\"precision\" value=\"{0}\" checked> {0}</label>", xml_escape(p));
  return out + "</div>\n";
}

std::string table(const RunPlacement& rp) {
  auto rows = report_rows(rp);
  std::string out = "<table id=\"ops\"><thead><tr><th>#</th>";
  for (const auto& h : rows.front()) out += "<th>" + xml_escape(h) + "</th>";
  out += "</tr></thead><tbody>\n";
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const Placement& p = rp.records[i - 1];
    out += fmt::format("<tr data-op=\"{}\" data-precision=\"{}\"{}><td>{}</td>", xml_escape(p.display_name()),
                       xml_escape(p.main_class), p.timed ? "" : " class=\"untimed\"", i);
    for (const auto& cell : rows[i]) out += "<td>" + xml_escape(cell) + "</td>";
    out += "</tr>\n";
  }
  return out + "</tbody></table>\n";
}

}  // namespace

std::string html_report(const RunPlacement& rp, const ChartOptions& options) {
  std::string model = rp.suite.contains("model") && rp.suite["model"].is_string() ? rp.suite["model"].get<std::string>() : "-";
  std::string title = fmt::format("rafter roofline: run {} on {}", rp.run_name,
                                  rp.roofs.device_name.empty() ? rp.roofs.device_id : rp.roofs.device_name);
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + xml_escape(title) +
                    "</title>\n<style>" + kStyle + "</style></head>\n<body>\n";
  out += "<h1>" + xml_escape(title) + "</h1>\n";
  out += fmt::format("<p class=\"meta\">Model {}; run host {} ({}); judged on device {} of machine {}.</p>\n", xml_escape(model),
                     xml_escape(rp.run_host), xml_escape(rp.run_timestamp), xml_escape(rp.roofs.device_id), xml_escape(rp.roofs.host));
  out += controls(rp);
  out += "<h2>Hierarchical roofline</h2>\n<div class=\"chart\" id=\"chart-hierarchical\">" +
         inline_svg(hierarchical_roofline_svg(rp, options), 1) + "</div>\n";
  out += "<h2>Where the step's time goes</h2>\n<div class=\"chart\" id=\"chart-stacked\">" +
         inline_svg(time_stacked_svg(rp, options), 2) + "</div>\n";
  out += "<h2>Time-based roofline</h2>\n<div class=\"chart\" id=\"chart-time\">" + inline_svg(time_roofline_svg(rp, options), 3) +
         "</div>\n";
  out += "<h2>Operators</h2>\n" + table(rp);
  out += "<pre id=\"notes\">" + xml_escape(format_report_footer(rp)) + "</pre>\n";
  out += "<div id=\"tip\" hidden></div>\n<script>" + std::string(kScript) + "</script>\n</body></html>\n";
  return out;
}

std::string html_page(const std::string& title, const std::string& svg_text, const std::string& table_text) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + xml_escape(title) + "</title>\n<style>" +
         kStyle + "</style></head>\n<body>\n<h1>" + xml_escape(title) + "</h1>\n<div class=\"chart\">" +
         inline_svg(svg_text, 1) + "</div>\n<pre>" + xml_escape(table_text) + "</pre>\n</body></html>\n";
}

}  // namespace rafter::roofline
