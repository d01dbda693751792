// Per-core FP throughput of documented cores (AMD Software Optimization Guides for Zen 3/4/5).
#include "datasheet.hpp"

#include <fmt/format.h>

namespace rafter::probes::cpu {
namespace {

struct Core {
  const char* name;
  int fma_pipes;
  int fma_pipe_bits;  // datapath width of each FMA pipe
};

std::optional<Core> known_core(const CpuFeatures& f) {
  if (f.vendor != "AuthenticAMD") return std::nullopt;
  // Family 19h: Zen 3 (no AVX-512) and Zen 4 (AVX-512 on 256-bit pipes); family 1Ah: Zen 5.
  if (f.family == 0x19) return f.avx512f ? Core{"Zen 4", 2, 256} : Core{"Zen 3", 2, 256};
  if (f.family == 0x1a) return Core{"Zen 5", 2, 512};
  return std::nullopt;
}

}  // namespace

std::optional<PeakPerCycle> datasheet_peak(const CpuFeatures& f, const ComputeKernel& k) {
  if (k.operation != "fma" || (k.precision != "fp64" && k.precision != "fp32")) return std::nullopt;
  const auto core = known_core(f);
  if (!core) return std::nullopt;
  const int element_bits = k.precision == "fp64" ? 64 : 32;
  // A vector wider than the pipe takes several pipe-cycles (Zen 4 double-pumps zmm), so the
  // throughput is pipes x min(vector, pipe width) elements x 2 FLOPs per FMA.
  const int bits = std::min(k.vector_bits, core->fma_pipe_bits);
  const double flops = core->fma_pipes * (bits / element_bits) * 2.0;
  return PeakPerCycle{flops, fmt::format("{}: {} FMA pipes x {} bit, {}-bit {} FMA: {} FLOP/cycle/core "
                                         "x measured clock x threads",
                                         core->name, core->fma_pipes, core->fma_pipe_bits, k.vector_bits,
                                         k.precision, flops)};
}

}  // namespace rafter::probes::cpu
