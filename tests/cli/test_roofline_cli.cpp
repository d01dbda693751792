// End to end: `rafter report`, `rafter plot`, `rafter compare` on the fixtures, and bad input
// (malformed file, missing field, wrong format) giving one line naming the problem and exit 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "rafter/roofline/png.hpp"
#include "run_cli.hpp"

namespace {

namespace fs = std::filesystem;

struct Result {
  int status = -1;
  std::string out, err;
};

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

fs::path scratch() { return rafter::testing::process_temp_dir("cli-roofline"); }

Result rafter(const std::string& args) {
  fs::path out = scratch() / "stdout.txt", err = scratch() / "stderr.txt";
  std::string cmd = std::string(RAFTER_BINARY) + " " + args + " > " + out.string() + " 2> " + err.string();
  int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(out), read_text(err)};
}

std::string fx(const std::string& name) { return std::string(RAFTER_SOURCE_DIR) + "/tests/fixtures/" + name; }

bool has_xmllint() { return std::system("command -v xmllint > /dev/null 2>&1") == 0; }

void expect_one_error_line(const Result& r, const std::string& must_mention) {
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_EQ(r.err.rfind("rafter: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(must_mention), std::string::npos) << r.err;
}

TEST(RooflineCli, ReportTableCsvJson) {
  std::string args = fx("run_gpu_bf16.json") + " --machine " + fx("machine_h100.json");
  Result table = rafter("report " + args);
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("prefill.mlp.gate_up_proj"), std::string::npos);
  EXPECT_NE(table.out.find("efficiency"), std::string::npos);
  Result csv = rafter("report --csv " + args);
  ASSERT_EQ(csv.status, 0) << csv.err;
  EXPECT_EQ(csv.out.rfind("operator,op,phase", 0), 0u);
  Result json = rafter("report --json " + args);
  ASSERT_EQ(json.status, 0) << json.err;
  auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["records"].size(), 15u);
  EXPECT_GT(j["step_seconds"].get<double>(), 0);
  fs::path file = scratch() / "report.txt";
  ASSERT_EQ(rafter("report " + args + " -o " + file.string()).status, 0);
  EXPECT_NE(read_text(file).find("bound"), std::string::npos);
}

TEST(RooflineCli, MachineBesideTheRunIsTheDefault) {
  fs::path dir = scratch() / "beside";
  fs::create_directories(dir);
  fs::copy_file(fx("run_cpu.json"), dir / "run.json", fs::copy_options::overwrite_existing);
  expect_one_error_line(rafter("report " + (dir / "run.json").string()), "machine.json");
  fs::copy_file(fx("machine_h100.json"), dir / "machine.json", fs::copy_options::overwrite_existing);
  EXPECT_EQ(rafter("report " + (dir / "run.json").string()).status, 0);
}

TEST(RooflineCli, PlotEveryKindAndFormat) {
  for (const char* kind : {"hierarchical", "time", "time-stacked"})
    for (const char* ext : {".svg", ".png", ".html"}) {
      fs::path out = scratch() / (std::string("plot-") + kind + ext);
      Result r = rafter("plot " + fx("run_gpu_nvfp4.json") + " -m " + fx("machine_h100.json") + " --kind " + kind + " -o " + out.string());
      if (std::string(ext) == ".png" && !rafter::roofline::png_supported()) {  // a build without librsvg/cairo
        expect_one_error_line(r, "PNG");
        continue;
      }
      ASSERT_EQ(r.status, 0) << kind << ext << ": " << r.err;
      ASSERT_TRUE(fs::exists(out));
      EXPECT_GT(fs::file_size(out), 2000u);
      if (std::string(ext) == ".svg" && has_xmllint()) {
        EXPECT_EQ(std::system(("xmllint --noout " + out.string()).c_str()), 0) << out;
      }
    }
}

TEST(RooflineCli, CompareRunsWhatIfAndMachines) {
  Result runs = rafter("compare " + fx("run_gpu_bf16.json") + " " + fx("run_gpu_fp8.json") + " " + fx("run_gpu_nvfp4.json") +
                       " -m " + fx("machine_h100.json") + " -o " + (scratch() / "runs.svg").string());
  ASSERT_EQ(runs.status, 0) << runs.err;
  EXPECT_NE(runs.out.find("[C]/A time"), std::string::npos);
  EXPECT_TRUE(fs::exists(scratch() / "runs.svg"));
  Result what_if = rafter("compare " + fx("run_gpu_bf16.json") + " -m " + fx("machine_h100.json") + " -m " + fx("machine_h200.json"));
  ASSERT_EQ(what_if.status, 0) << what_if.err;
  EXPECT_NE(what_if.out.find("fixture-h200"), std::string::npos);
  const std::string m_chart = rafter::roofline::png_supported() ? "m.png" : "m.svg";  // PNG needs librsvg/cairo
  Result machines = rafter("compare " + fx("machine_h100.json") + " " + fx("machine_h200.json") + " -o " + (scratch() / m_chart).string());
  ASSERT_EQ(machines.status, 0) << machines.err;
  EXPECT_NE(machines.out.find("memory HBM"), std::string::npos);
  EXPECT_TRUE(fs::exists(scratch() / m_chart));
  Result csv = rafter("compare --csv " + fx("machine_h100.json") + " " + fx("machine_h200.json"));
  EXPECT_EQ(csv.out.rfind("kind,resource,unit", 0), 0u) << csv.out;
}

TEST(RooflineCli, MalformedFileIsOneLineAndExit2) {
  fs::path bad = scratch() / "broken.json";
  std::ofstream(bad) << "{\"schema\": {\"name\": \"rafter.run\", \"version\": 1}, \"records\": [";
  expect_one_error_line(rafter("report " + bad.string() + " -m " + fx("machine_h100.json")), "broken.json");
}

TEST(RooflineCli, MissingFieldIsNamed) {
  auto run = nlohmann::json::parse(read_text(fx("run_cpu.json")));
  run["records"][2].erase("op");
  fs::path bad = scratch() / "no_op.json";
  std::ofstream(bad) << run.dump();
  expect_one_error_line(rafter("report " + bad.string() + " -m " + fx("machine_h100.json")), "records[2].op");
  auto machine = nlohmann::json::parse(read_text(fx("machine_h100.json")));
  machine["ceilings"][0].erase("figure");
  fs::path bad_machine = scratch() / "no_figure.json";
  std::ofstream(bad_machine) << machine.dump();
  expect_one_error_line(rafter("plot " + fx("run_cpu.json") + " -m " + bad_machine.string() + " -o " + (scratch() / "x.svg").string()),
                        "ceilings[0].figure");
}

TEST(RooflineCli, WrongOutputFormatsAndMixedInputs) {
  expect_one_error_line(rafter("plot " + fx("run_cpu.json") + " -m " + fx("machine_h100.json") + " -o " + (scratch() / "x.pdf").string()),
                        ".pdf");
  expect_one_error_line(rafter("compare " + fx("run_cpu.json") + " " + fx("machine_h100.json")), "not both");
  expect_one_error_line(rafter("report " + (scratch() / "absent.json").string() + " -m " + fx("machine_h100.json")), "absent.json");
  // A run on a GPU judged against a profile that has only a CPU names the missing device kind.
  auto machine = nlohmann::json::parse(read_text(fx("machine_h100.json")));
  nlohmann::json cpu_only = machine;
  cpu_only["devices"] = nlohmann::json::array({machine["devices"][0]});
  nlohmann::json ceilings = nlohmann::json::array();
  for (const auto& c : machine["ceilings"])
    if (c["device"] == "cpu") ceilings.push_back(c);
  cpu_only["ceilings"] = ceilings;
  fs::path cpu_file = scratch() / "cpu_only.json";
  std::ofstream(cpu_file) << cpu_only.dump();
  expect_one_error_line(rafter("report " + fx("run_gpu_bf16.json") + " -m " + cpu_file.string()), "cuda");
}

TEST(RooflineCli, HostileNamesAreEscapedInEveryOutput) {
  fs::path svg = scratch() / "escape.svg", html = scratch() / "escape.html";
  ASSERT_EQ(rafter("plot " + fx("run_escape.json") + " -m " + fx("machine_h100.json") + " -o " + svg.string()).status, 0);
  ASSERT_EQ(rafter("plot " + fx("run_escape.json") + " -m " + fx("machine_h100.json") + " -o " + html.string()).status, 0);
  for (const auto& f : {svg, html}) {
    std::string text = read_text(f);
    EXPECT_EQ(text.find("<script>alert"), std::string::npos) << f;
    EXPECT_EQ(text.find("<img"), std::string::npos) << f;
    EXPECT_NE(text.find("&lt;script&gt;"), std::string::npos) << f;
  }
  if (has_xmllint()) {
    EXPECT_EQ(std::system(("xmllint --noout " + svg.string()).c_str()), 0);
  }
}

TEST(RooflineCli, DefaultJobFailsFastOnAnUnwritableFolder) {
  // Checked before any measuring: a bad --out costs no minutes.
  expect_one_error_line(rafter("--out /proc/rafter-cannot-write-here"), "/proc/rafter-cannot-write-here");
}

}  // namespace
