// The HTML page: self-contained (no network), opened in headless Chromium without console errors,
// every operator shown, names from input files escaped. Skipped when Chromium is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "rafter/roofline/html.hpp"
#include "rafter/roofline/inputs.hpp"
#include "roofline_test_util.hpp"
#include "run_cli.hpp"

namespace rafter::roofline {
namespace {
using test::fixture;

std::filesystem::path temp_dir() { return rafter::testing::process_temp_dir("test-html"); }

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Chromium's DOM serializer escapes &, < and > in text nodes.
std::string text_escape(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : std::string(1, c);
  return out;
}

std::string chromium_binary() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"})
    if (test::have_program(name)) return name;
  return "";
}

// Loads the page (scripts run) and returns the DOM after load; `console` gets the lines Chromium
// logged from the page's console (errors and uncaught exceptions included).
std::string dump_dom(const std::string& chromium, const std::filesystem::path& html, std::string& console) {
  auto dir = temp_dir();
  auto profile = dir / "profile", err = dir / "stderr.txt", dom = dir / "dom.html";
  std::string cmd = "timeout 120 " + chromium +
                    " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run --disable-background-networking"
                    " --disable-component-update --disable-sync --user-data-dir=" + profile.string() +
                    " --enable-logging=stderr --v=0 --dump-dom " + html.string() + " > " + dom.string() + " 2> " + err.string();
  std::string out;
  EXPECT_EQ(test::run_command(cmd, out), 0) << out << read_text(err);
  console.clear();
  std::istringstream lines(read_text(err));
  for (std::string line; std::getline(lines, line);)
    if (line.find(":CONSOLE") != std::string::npos) console += line + "\n";
  return read_text(dom);
}

void check_page(const std::string& run_file) {
  auto rp = place_run(load_run(fixture(run_file)), load_machine(fixture("machine_h100.json")), run_file);
  std::string html = html_report(rp);
  // Self-contained: no external script, style, image or font; the only URL is the SVG namespace.
  for (const char* bad : {"<script src", "<img", "<link", "<iframe", "href=\"", "@import", "url(http"})
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
  std::string without_ns = html;
  for (std::size_t p; (p = without_ns.find("http://www.w3.org/2000/svg")) != std::string::npos;) without_ns.erase(p, 26);
  EXPECT_EQ(without_ns.find("http"), std::string::npos);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  std::string chromium = chromium_binary();
  if (chromium.empty()) GTEST_SKIP() << "chromium not installed";
  auto path = temp_dir() / (run_file + ".html");
  std::ofstream(path) << html;
  std::string console;
  std::string dom = dump_dom(chromium, path, console);
  EXPECT_TRUE(console.empty()) << console;
  EXPECT_NE(dom.find("id=\"ops\""), std::string::npos);
  EXPECT_EQ(std::count(dom.begin(), dom.end(), '\n') > 10, true);
  for (const auto& p : rp.records)
    EXPECT_NE(dom.find("<td>" + text_escape(p.display_name()) + "</td>"), std::string::npos) << p.display_name();
  std::size_t svgs = 0;
  for (std::size_t pos = 0; (pos = dom.find("<svg", pos)) != std::string::npos; ++pos) ++svgs;
  EXPECT_EQ(svgs, 3u);
  EXPECT_EQ(dom.find("<script>alert"), std::string::npos);  // the hostile name stayed text
}

TEST(Html, RendersInChromiumWithEveryOperator) { check_page("run_gpu_bf16.json"); }

// Drives the page's own script: unchecking HBM hides every HBM point; hovering a point shows its details.
TEST(Html, TogglesAndHoverWork) {
  std::string chromium = chromium_binary();
  if (chromium.empty()) GTEST_SKIP() << "chromium not installed";
  auto rp = place_run(load_run(fixture("run_gpu_bf16.json")), load_machine(fixture("machine_h100.json")));
  std::string html = html_report(rp);
  const std::string probe = R"(<script>
var box=document.querySelector('#controls input[value="HBM"]'); box.checked=false; box.dispatchEvent(new Event('change'));
var all=document.querySelectorAll('.plot .point[data-level="HBM"]').length;
var hidden=document.querySelectorAll('.plot .point.hidden[data-level="HBM"]').length;
var shown=document.querySelectorAll('.plot .point[data-level="L2"]:not(.hidden)').length;
var pt=document.querySelector('.plot .point'); pt.dispatchEvent(new MouseEvent('mouseenter'));
var tip=document.getElementById('tip');
document.body.setAttribute('data-probe', all+'/'+hidden+'/'+shown+'/'+(tip.hidden?'hidden':'shown')+'/'+tip.textContent.length);
</script></body>)";
  html.replace(html.rfind("</body>"), 7, probe);
  auto path = temp_dir() / "probe.html";
  std::ofstream(path) << html;
  std::string console;
  std::string dom = dump_dom(chromium, path, console);
  EXPECT_TRUE(console.empty()) << console;
  auto at = dom.find("data-probe=\"");
  ASSERT_NE(at, std::string::npos);
  std::string probe_value = dom.substr(at + 12, dom.find('"', at + 12) - at - 12);
  int all = 0, hidden = 0, shown = 0;
  char state[16] = {};
  int tip_length = 0;
  ASSERT_EQ(std::sscanf(probe_value.c_str(), "%d/%d/%d/%15[a-z]/%d", &all, &hidden, &shown, state, &tip_length), 5) << probe_value;
  EXPECT_GT(all, 0);
  EXPECT_EQ(hidden, all);  // every HBM point hidden
  EXPECT_GT(shown, 0);     // the other levels stay
  EXPECT_STREQ(state, "shown");
  EXPECT_GT(tip_length, 20);
}
TEST(Html, HostileNamesStayText) { check_page("run_escape.json"); }

}  // namespace
}  // namespace rafter::roofline
