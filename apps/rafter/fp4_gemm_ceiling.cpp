// The FP4 compute ceiling of a GPU that runs FP4 emulated (compute capability 9.x, no FP4 tensor
// cores). probes/ measures one way in (cuda.fp4: FP4 unpacked into FP8 wgmma inside shared memory);
// the best emulation rafter has is its operator, the NVFP4 GEMM of cuda.fp4_emulated (both operands
// decoded to BF16, exactly, then cuBLASLt's BF16 GEMM), so `rafter probe` also times that operator
// at a large square shape, checked first like any record, and adds its FLOP rate as a second fp4
// ceiling (probe "cuda.fp4_gemm"); the roofline takes the best of the two. Here in apps/ because it
// composes probes/ and workloads/, which do not see each other.
#include "fp4_gemm_ceiling.hpp"

#include <fmt/core.h>

#include "rafter/collector/stats.hpp"
#include "rafter/probes/probe.hpp"
#include "rafter/workloads/backend.hpp"

namespace rafter::cli {
namespace {

bool emulates_fp4(const Device& d) {
  return d.kind == "cuda" && !d.isa.empty() && d.isa.front().rfind("sm_9", 0) == 0;
}

constexpr const char* kProbe = "cuda.fp4_gemm";

// GPUs with FP4 tensor cores (compute capability 10+) are left to cuda.fp4's note; others have none.
void run_fp4_gemm_probe(const probes::ProbeOptions& options, const Device& d, MachineProfile& profile) {
  if (!emulates_fp4(d)) return;
  const std::int64_t s = options.quick ? 4096 : 8192;
  workloads::OpInstance inst{
      "gemm", "fp4_ceiling", "fwd", {{"m", s}, {"n", s}, {"k", s}, {"batch", 1}}, "nvfp4", 1};
  workloads::ExecContext ctx;
  ctx.device = d.id;
  ctx.policy = options.policy;
  const OperatorRecord r = workloads::profile_instance(inst, ctx, d.memory_levels);
  const std::string key = fmt::format("cuda.{}.fp4_gemm", d.id);
  if (r.status != RecordStatus::Ok || !r.time) {
    profile.conditions[key] = fmt::format("not measured: {} ({})", to_string(r.status), r.note);
    return;
  }
  nlohmann::json params = {
      {"format", "NVFP4 (E2M1, E4M3 scale per 16 along K; B in 16x16 blocks)"},
      {"operator", fmt::format("gemm nvfp4 fwd m=n=k={}", s)},
      {"backend", r.backend},
      {"emulation", r.details.value("emulation", "")},
      {"path", r.details.value("path", "")},
      {"check", {{"passed", r.check.passed}, {"error", r.check.error}, {"tolerance", r.check.tolerance}}},
      {"roof", "bf16"}};
  if (r.details.contains("algorithm")) params["algorithm"] = r.details["algorithm"];
  const double flops = 2.0 * double(s) * double(s) * double(s);
  Ceiling c{
      .kind = CeilingKind::Compute,
      .device = d.id,
      .resource = "fp4",
      .operation = "gemm",
      .isa = "dequantize+bf16 mma",
      .scope = "device",
      .threads = d.cores,
      .figure = Figure::measured(transform(r.time->stats, [flops](double t) { return flops / t; }), "FLOP/s"),
      .frequency_hz = 0,  // the record's clocks are sampled before and after the timing only
      .clocks = r.clocks,
      .emulated = true,
      .probe = kProbe,
      .params = std::move(params),
      .datasheet_value = std::nullopt,  // attach_fp4_gemm_datasheets
      .datasheet_ratio = std::nullopt,
      .datasheet_basis = "",
      .flag = r.check.passed ? "" : "check_failed",
      .regime = "burst"};
  profile.conditions[key] = "measured: rafter's emulated NVFP4 GEMM (" + r.backend + ")";
  profile.ceilings.push_back(std::move(c));
}

RAFTER_REGISTER_PROBE(kProbe, "cuda",
                      "FP4 ceiling from rafter's emulated NVFP4 GEMM operator (decoded to BF16 + cuBLASLt, "
                      "8192^3), where FP4 is emulated",
                      run_fp4_gemm_probe);

}  // namespace

void attach_fp4_gemm_datasheets(MachineProfile& profile) {
  for (Ceiling& c : profile.ceilings) {
    if (c.probe != kProbe) continue;
    const Ceiling* bf16 = profile.best(c.device, CeilingKind::Compute, "bf16");
    if (bf16 == nullptr || !bf16->datasheet_value) continue;
    c.datasheet_value = bf16->datasheet_value;
    c.datasheet_ratio = c.figure.value / *bf16->datasheet_value;
    c.datasheet_basis = "BF16 tensor roof (FP4 emulated on BF16): " + bf16->datasheet_basis;
  }
}

}  // namespace rafter::cli
