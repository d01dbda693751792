// The FP4 compute ceiling of a GPU that runs FP4 emulated (compute capability 9.x, no FP4 tensor
// cores). probes/ measures one way in (cuda.fp4: FP4 unpacked into FP8 wgmma inside shared memory);
// the best emulation rafter has is its operator, the NVFP4 GEMM of cuda.fp4_emulated (both operands
// decoded to BF16, exactly, then cuBLASLt's BF16 GEMM), so `rafter probe` also times that operator
// at a large square shape, checked first like any record, and adds its FLOP rate as a second fp4
// ceiling; the roofline takes the best of the two. Here in apps/ because it composes probes/ and
// workloads/, which do not see each other.
#include "fp4_gemm_ceiling.hpp"

#include <fmt/core.h>

#include <regex>

#include "rafter/workloads/backend.hpp"

namespace rafter::cli {
namespace {

// Seconds per call → FLOP/s, the extremes swapped.
Summary rate_of(const Summary& seconds, double flops) {
  Summary r = seconds;
  r.median = flops / seconds.median;
  r.min = flops / seconds.max;
  r.max = flops / seconds.min;
  r.mean = seconds.mean > 0 ? flops / seconds.mean : r.median;
  r.stddev = seconds.mean > 0 ? seconds.stddev * r.mean / seconds.mean : 0;
  r.spread = r.median > 0 ? (r.max - r.min) / r.median : 0;
  return r;
}

bool emulates_fp4(const Device& d) {
  return d.kind == "cuda" && !d.isa.empty() && d.isa.front().rfind("sm_9", 0) == 0;
}

}  // namespace

void add_fp4_gemm_ceilings(MachineProfile& profile, const probes::ProbeOptions& options) {
  if (!options.filter.empty() && !std::regex_search(std::string(kFp4GemmProbe), std::regex(options.filter)))
    return;
  for (const Device& d : profile.devices) {
    if (!emulates_fp4(d)) continue;
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
      continue;
    }
    Ceiling c;
    c.kind = CeilingKind::Compute;
    c.device = d.id;
    c.resource = "fp4";
    c.operation = "gemm";
    c.isa = "dequantize+bf16 mma";
    c.scope = "device";
    c.threads = d.cores;
    c.figure = Figure::measured(rate_of(r.time->stats, 2.0 * double(s) * double(s) * double(s)), "FLOP/s");
    c.clocks = r.clocks;  // sampled before and after the timing: no clock during it (frequency_hz 0)
    c.emulated = true;
    c.probe = std::string(kFp4GemmProbe);
    c.params = {
        {"format", "NVFP4 (E2M1, E4M3 scale per 16 along K; B in 16x16 blocks)"},
        {"operator", fmt::format("gemm nvfp4 fwd m=n=k={}", s)},
        {"backend", r.backend},
        {"emulation", r.details.value("emulation", "")},
        {"path", r.details.value("path", "")},
        {"check", {{"passed", r.check.passed}, {"error", r.check.error}, {"tolerance", r.check.tolerance}}},
        {"roof", "bf16"}};
    if (r.details.contains("algorithm")) c.params["algorithm"] = r.details["algorithm"];
    // The roof it runs under is BF16's: the datasheet figure is the BF16 rate the probes give.
    if (const Ceiling* bf16 = profile.best(d.id, CeilingKind::Compute, "bf16");
        bf16 && bf16->datasheet_value) {
      c.datasheet_value = bf16->datasheet_value;
      c.datasheet_ratio = c.figure.value / *bf16->datasheet_value;
      c.datasheet_basis = "BF16 tensor roof (FP4 emulated on BF16): " + bf16->datasheet_basis;
    }
    if (!r.check.passed) c.flag = "check_failed";
    profile.conditions[key] = "measured: rafter's emulated NVFP4 GEMM (" + r.backend + ")";
    profile.ceilings.push_back(std::move(c));
  }
}

}  // namespace rafter::cli
