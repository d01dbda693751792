// GEMM: C[m,n] = A[m,k] · B[k,n] for the three passes of a linear layer, batched when batch > 1.
// With X [tokens, in] and W [out, in]:  fwd       Y  = X · Wᵀ   (m=tokens, n=out, k=in; B stored [n,k])
//                                      bwd_input dX = dY · W   (m=tokens, n=in,  k=out; B stored [k,n])
//                                      bwd_weight dW = dYᵀ · X (m=out,   n=in,  k=tokens; A stored [k,m])
// FLOPs 2·batch·m·n·k in the precision's compute class; inputs in the precision's storage (block
// scales included), output per gemm_output_bytes_per_element.
// hot (optional, FP4 forward only, batch 1): the hot-channel patch of the CHON recipe inside the
// GEMM, C = A·Bᵀ + R·W_hotᵀ with R [m, hot] (the quantization residual of the hot input channels)
// and W_hot [n, hot] (those channels' weights) in BF16: 2·m·n·hot more BF16 FLOPs, R and W_hot read
// once more, C not read again (ops_hot_channel.cpp is the same patch as a separate operator).
#include <fmt/format.h>

#include "op_common.hpp"
#include "rafter/collector/error.hpp"

namespace rafter::workloads {
namespace {

using detail::dimension;

class GemmOp : public detail::CatalogueOp {
 public:
  GemmOp()
      : CatalogueOp("gemm", "matrix multiply C = A·B (linear layer passes; batched when batch > 1)",
                    {{"m", 4096, "rows of C"},
                     {"n", 4096, "columns of C"},
                     {"k", 4096, "reduction length"},
                     {"batch", 1, "independent GEMMs of the same shape"},
                     {"hot", 0,
                      "hot input channels patched inside the GEMM (FP4 fwd): + R[m,hot]·W_hot[n,hot]ᵀ in "
                      "BF16 (0: none)",
                      false, true}},
                    {"bf16", "fp64", "fp32", "tf32", "fp16", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3_e5m2",
                     "fp8_e5m2_e4m3", "int8", "nvfp4", "mxfp4"},
                    {"fwd", "bwd_input", "bwd_weight"}) {}

  void validate(const OpInstance& inst) const override {
    OperatorDef::validate(inst);
    const std::int64_t k = shape_value(inst, "k");
    const int block = inst.precision == "nvfp4" ? 16 : inst.precision == "mxfp4" ? 32 : 1;
    if (k % block != 0)
      throw InputError(fmt::format("gemm {}: k={} must be a multiple of the {}-element scale block",
                                   inst.precision, k, block));
    const std::int64_t hot = shape_value(inst, "hot", 0);
    if (hot > 0 && (block == 1 || inst.phase != "fwd" || shape_value(inst, "batch") != 1 || hot > k))
      throw InputError(fmt::format(
          "gemm {} {}: hot={} needs an FP4 precision (nvfp4, mxfp4), phase fwd, batch 1 and hot <= k={}",
          inst.precision, inst.phase, hot, k));
  }

  // The patch as the GEMM's extra work: m×n×hot in BF16, C neither read nor written again.
  static detail::GemmTrafficInput patch_traffic_input(const OpInstance& inst) {
    detail::GemmTrafficInput g;
    g.m = dimension(inst, "m");
    g.n = dimension(inst, "n");
    g.k = double(shape_value(inst, "hot", 0));
    g.c_bytes = 0;
    return g;
  }

  static detail::GemmTrafficInput traffic_input(const OpInstance& inst) {
    detail::GemmTrafficInput g;
    g.m = dimension(inst, "m");
    g.n = dimension(inst, "n");
    g.k = dimension(inst, "k");
    g.batch = dimension(inst, "batch");
    g.a_bytes = precision_info(inst.precision).bytes_per_element;
    g.b_bytes = operand_b_bytes_per_element(inst.precision);
    g.c_bytes = gemm_output_bytes_per_element(inst.precision);
    return g;
  }

  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const auto g = traffic_input(inst);
    Cost c;
    c.flops[std::string(precision_info(inst.precision).compute_class)] = 2.0 * g.batch * g.m * g.n * g.k;
    c.compulsory_bytes = detail::gemm_compulsory_bytes(g);
    c.compulsory_write_bytes = detail::gemm_written_bytes(g);
    c.bytes = detail::gemm_traffic(levels, g);
    if (shape_value(inst, "hot", 0) > 0) {
      const auto p = patch_traffic_input(inst);
      c.flops["bf16"] += 2.0 * p.m * p.n * p.k;
      c.compulsory_bytes += detail::gemm_compulsory_bytes(p);
      const auto patch = detail::gemm_traffic(levels, p);
      for (std::size_t i = 0; i < c.bytes.size() && i < patch.size(); ++i) c.bytes[i].bytes += patch[i].bytes;
    }
    return c;
  }

  OpInstance check_instance(const OpInstance& full) const override {
    OpInstance s = full;
    s.shape["m"] = detail::check_dim(full.shape.at("m"), 64);
    s.shape["n"] = detail::check_dim(full.shape.at("n"), 64);
    s.shape["k"] = detail::check_dim(full.shape.at("k"), 256);
    s.shape["batch"] = detail::check_dim(full.shape.at("batch"), 2);
    if (full.shape.count("hot")) s.shape["hot"] = detail::check_dim(full.shape.at("hot"), 24);
    return s;
  }

  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    std::mt19937_64 rng(seed);
    const auto b = shape_value(inst, "batch"), m = shape_value(inst, "m"), n = shape_value(inst, "n"),
               k = shape_value(inst, "k");
    Problem p;
    p.inputs.push_back(detail::random_tensor("A", {b, m, k}, rng));  // logical [m,k]; backends lay out
    p.inputs.push_back(detail::random_tensor("B", {b, k, n}, rng));  // logical [k,n]
    p.outputs.push_back(detail::empty_tensor("C", {b, m, n}));
    if (const std::int64_t h = shape_value(inst, "hot", 0); h > 0) {
      p.inputs.push_back(detail::random_tensor("R", {m, h}, rng));      // batch 1
      p.inputs.push_back(detail::random_tensor("W_hot", {n, h}, rng));  // [n, hot]
    }
    return p;
  }

  void reference(const OpInstance& inst, Problem& p) const override {
    const auto b = shape_value(inst, "batch"), m = shape_value(inst, "m"), n = shape_value(inst, "n"),
               k = shape_value(inst, "k");
    const auto& A = p.inputs[0].data;
    const auto& B = p.inputs[1].data;
    auto& C = p.outputs[0].data;
    for (std::int64_t z = 0; z < b; ++z)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (std::int64_t l = 0; l < k; ++l) acc += A[(z * m + i) * k + l] * B[(z * k + l) * n + j];
          C[(z * m + i) * n + j] = acc;
        }
    if (const std::int64_t h = shape_value(inst, "hot", 0); h > 0) {
      const auto &R = p.inputs[2].data, &W = p.inputs[3].data;
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j)
          for (std::int64_t l = 0; l < h; ++l) C[i * n + j] += R[i * h + l] * W[j * h + l];
    }
  }
};

RAFTER_REGISTER_OPERATOR(GemmOp);

}  // namespace
}  // namespace rafter::workloads
