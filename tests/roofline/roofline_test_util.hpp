// Shared by the roofline tests: small machines and records built in code (values chosen so that
// every bound can be worked out by hand), fixture paths, and SVG inspection helpers.
#pragma once
#include <cstdio>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "rafter/collector/machine_profile.hpp"
#include "rafter/collector/run_record.hpp"

namespace rafter::roofline::test {

inline std::string fixture(const std::string& name) { return std::string(RAFTER_SOURCE_DIR) + "/tests/fixtures/" + name; }

inline Ceiling make_ceiling(CeilingKind kind, const std::string& device, const std::string& resource, double value) {
  Ceiling c;
  c.kind = kind;
  c.device = device;
  c.resource = resource;
  c.scope = "device";
  c.figure.value = value;
  c.figure.unit = kind == CeilingKind::Compute ? "FLOP/s" : kind == CeilingKind::Latency ? "s" : "B/s";
  c.figure.source = Source::Measured;
  c.figure.stats.samples = 5;
  return c;
}

// A device "cpu" with bf16 100 GFLOP/s, fp32 50 GFLOP/s, L2 50 GB/s, DRAM 10 GB/s, a link
// "nvlink" 5 GB/s and a 2 us launch latency.
inline MachineProfile small_machine(double dram_bytes_per_second = 10e9) {
  MachineProfile m;
  m.host = "test-host";
  Device d;
  d.id = "cpu";
  d.kind = "cpu";
  d.name = "test cpu";
  d.memory_levels = {{"L2", 1 << 20, 64, 1, 1}, {"DRAM", 0, 64, 1, 1}};
  m.devices.push_back(d);
  m.ceilings = {make_ceiling(CeilingKind::Compute, "cpu", "bf16", 100e9),
                make_ceiling(CeilingKind::Compute, "cpu", "fp32", 50e9),
                make_ceiling(CeilingKind::Compute, "cpu", "fp8", 200e9),
                make_ceiling(CeilingKind::Bandwidth, "cpu", "L2", 50e9),
                make_ceiling(CeilingKind::Bandwidth, "cpu", "DRAM", dram_bytes_per_second),
                make_ceiling(CeilingKind::Link, "cpu", "nvlink", 5e9),
                make_ceiling(CeilingKind::Latency, "cpu", "launch", 2e-6)};
  return m;
}

inline OperatorRecord make_record(const std::string& label, const std::string& precision, double flops,
                                  double l2_bytes, double dram_bytes, double seconds) {
  OperatorRecord r;
  r.op = "gemm";
  r.label = label;
  r.phase = "fwd";
  r.device = "cpu";
  r.precision = precision;
  r.count = 2;
  r.status = RecordStatus::Ok;
  r.flops[precision] = flops;
  r.bytes = {{"L2", l2_bytes, Source::Analytic}, {"DRAM", dram_bytes, Source::Analytic}};
  Figure t;
  t.value = seconds;
  t.unit = "s";
  t.stats.samples = 5;
  t.stats.median = t.stats.min = t.stats.max = seconds;
  r.time = t;
  return r;
}

inline Run make_run(std::vector<OperatorRecord> records) {
  Run run;
  run.host = "test-host";
  run.device.id = "cpu";
  run.device.kind = "cpu";
  run.records = std::move(records);
  return run;
}

// Every element `<tag ...>` whose attributes include all of `must` (name -> value); returns each
// element's attribute map. Good enough for the SVG this library writes (one element per line).
inline std::vector<std::map<std::string, std::string>> svg_elements(const std::string& svg, const std::string& tag,
                                                                    const std::map<std::string, std::string>& must = {}) {
  std::vector<std::map<std::string, std::string>> out;
  std::regex element("<" + tag + R"(\s([^>]*)>)");
  std::regex attribute(R"re(([\w:-]+)="([^"]*)")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), element); it != std::sregex_iterator(); ++it) {
    std::map<std::string, std::string> attrs;
    std::string body = (*it)[1];
    for (auto a = std::sregex_iterator(body.begin(), body.end(), attribute); a != std::sregex_iterator(); ++a)
      attrs[(*a)[1]] = (*a)[2];
    bool ok = true;
    for (const auto& [k, v] : must) ok = ok && attrs.count(k) && attrs[k] == v;
    if (ok) out.push_back(attrs);
  }
  return out;
}

// Runs a shell command, returning its exit status and combined output.
inline int run_command(const std::string& cmd, std::string& output) {
  output.clear();
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, pipe)) output.append(buf, n);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline bool have_program(const std::string& name) {
  std::string out;
  return run_command("command -v " + name + " >/dev/null", out) == 0;
}

}  // namespace rafter::roofline::test
