// Quantize / dequantize for the low-precision recipes. Input of quantize: x [rows, cols] in BF16;
// blocks run along cols (the GEMM's K). nvfp4: E2M1 values (0.5 B), one E4M3 scale per 1×16 block
// (or per 16×16 tile with block2d=1, for weights, so that W and Wᵀ share the quantization), one
// FP32 tensor scale; mxfp4: one E8M0 scale per 1×32; fp8_e4m3/e5m2: one FP32 scale per tensor.
// rht=1 applies a 16-point random Hadamard transform along cols first; sr=1 rounds stochastically.
// transpose=1 also writes the column-wise copy, Xᵀ [cols, rows] with its blocks along rows, from the
// same read of X (the recipe's operand of the weight-gradient GEMM): its own scales, and its own
// tensor scale where rht=1, which then transforms that copy only (the RHT is for the wgrad inputs).
// With 16×16 tiles and no RHT the copy is the row-wise one transposed, scales included.
// The check compares the dequantized output(s) with quant_math's exact FP64 emulation.
// FLOPs (fp32): 5 per element (abs, max for amax; scale, round, pack) + 32 per element for the RHT
// (a 16×16 matrix-vector product per block) + 2 for stochastic rounding, per copy written.
// Dequantize: 1 per element.
// Bytes: quantize reads x twice (amax pass, quantize pass) beyond a level it does not fit in,
// where the format has a tensor scale (NVFP4, FP8); MXFP4's scales are per block: one pass. The
// column-wise copy adds its writes, not a read.
#include <cmath>
#include <fmt/format.h>

#include "op_common.hpp"
#include "quant_math.hpp"
#include "rafter/collector/error.hpp"
#include "rafter/workloads/formats.hpp"

namespace rafter::workloads {
namespace {

std::vector<std::string> quant_precisions() { return {"nvfp4", "mxfp4", "fp8_e4m3", "fp8_e5m2"}; }

bool transposed(const OpInstance& inst) {
  const auto it = inst.shape.find("transpose");
  return it != inst.shape.end() && it->second != 0;
}

detail::QuantSpec spec_of(const OpInstance& inst) {
  return {inst.precision, shape_value(inst, "rows"), shape_value(inst, "cols"), shape_value(inst, "block2d") != 0,
          shape_value(inst, "rht") != 0};
}

// Storage of the quantized tensor: values plus scales.
double quantized_bytes(const detail::QuantSpec& s) {
  const double n = double(s.rows) * double(s.cols);
  if (s.precision == "fp8_e4m3" || s.precision == "fp8_e5m2") return n + 4;
  if (s.precision == "mxfp4") return n * 0.5 + n / 32;
  return n * 0.5 + (s.block2d ? n / 256 : n / 16) + 4;
}

void validate_quant(const OperatorDef& op, const OpInstance& inst) {
  op.OperatorDef::validate(inst);
  const auto s = spec_of(inst);
  const int bc = detail::block_cols(s);
  if (bc && s.cols % bc != 0)
    throw InputError(fmt::format("{} {}: cols={} must be a multiple of {}", inst.op, inst.precision, s.cols, bc));
  if (s.block2d && (s.precision != "nvfp4" || s.rows % 16 != 0))
    throw InputError(fmt::format("{}: block2d needs nvfp4 and rows a multiple of 16", inst.op));
  if (s.rht && s.cols % 16 != 0) throw InputError(fmt::format("{}: rht needs cols a multiple of 16", inst.op));
  if (transposed(inst)) {
    const std::int64_t along_rows = std::max(16, bc);  // the copy's blocks, and the kernels' 16-row steps
    if (s.rows % along_rows != 0 || s.cols % 16 != 0)
      throw InputError(fmt::format("{} {} transpose=1: rows={} must be a multiple of {} and cols={} of 16",
                                   inst.op, inst.precision, s.rows, along_rows, s.cols));
  }
}

// The column-wise copy's spec: Xᵀ, blocks along the original rows; the RHT stays with it.
detail::QuantSpec transposed_spec(const detail::QuantSpec& s) {
  return {s.precision, s.cols, s.rows, s.block2d, s.rht};
}

std::vector<double> transpose(const std::vector<double>& x, std::int64_t rows, std::int64_t cols) {
  std::vector<double> t(x.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) t[std::size_t(c * rows + r)] = x[std::size_t(r * cols + c)];
  return t;
}

// One copy's check values: the (transformed) input where it rounds stochastically (random, so its
// check compares with the unquantized values), else its exact quantize-dequantize.
std::vector<double> reference_copy(const detail::QuantSpec& s, std::vector<double> x, bool sr) {
  if (s.rht) detail::apply_rht(x, s.rows, s.cols);
  return sr ? x : detail::quantize_dequantize(s, x);
}

// The check's shape keeps what selects a kernel's path: up to 512 columns as they are, wider rows
// as 256 columns plus their remainder modulo 256 (the AVX-512 kernels work in groups of 256).
OpInstance shrink(const OpInstance& full) {
  OpInstance s = full;
  const std::int64_t cols = full.shape.at("cols");
  s.shape["rows"] = std::min<std::int64_t>(full.shape.at("rows"), 32);
  s.shape["cols"] = cols <= 512 ? cols : 256 + cols % 256;
  return s;
}

Problem quant_problem(const OpInstance& inst, std::uint64_t seed, const char* out_name) {
  std::mt19937_64 rng(seed);
  const auto s = spec_of(inst);
  Problem p;
  auto x = detail::random_tensor("x", {s.rows, s.cols}, rng, -3.0, 3.0);
  // Inputs on the BF16 grid: the operator's input is BF16, so reference and kernel see the same values.
  for (auto& v : x.data) v = numfmt::round_to(v, numfmt::kBf16);
  p.inputs.push_back(std::move(x));
  p.outputs.push_back(detail::empty_tensor(out_name, {s.rows, s.cols}));
  if (transposed(inst))
    p.outputs.push_back(detail::empty_tensor(std::string(out_name) + "_t", {s.cols, s.rows}));
  return p;
}

std::vector<ParamSpec> quant_params(bool with_transforms) {
  std::vector<ParamSpec> p{{"rows", 4096, "rows (tokens, or output features of a weight)"},
                           {"cols", 4096, "columns: the GEMM's K, along which blocks run"},
                           {"block2d", 0, "16x16 scale tiles (NVFP4 weights)", true}};
  if (with_transforms) {
    p.push_back({"rht", 0, "random Hadamard transform over 16-value blocks first", true});
    p.push_back({"sr", 0, "stochastic rounding", true});
    p.push_back(
        {"transpose", 0, "also the column-wise copy (Xᵀ, blocks along rows) from the same read", true});
  }
  return p;
}

class QuantizeOp : public detail::CatalogueOp {
 public:
  QuantizeOp()
      : CatalogueOp("quantize", "BF16 → NVFP4 / MXFP4 / FP8 with block scales (optional RHT, stochastic rounding)",
                    quant_params(true), quant_precisions()) {}
  void validate(const OpInstance& inst) const override { validate_quant(*this, inst); }
  std::string slice_axis(const OpInstance&) const override { return "rows"; }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const auto s = spec_of(inst);
    const double n = double(s.rows) * double(s.cols), in_bytes = 2 * n;
    const double copies = transposed(inst) ? 2 : 1, sr = shape_value(inst, "sr") ? 2 * n : 0;
    Cost c;
    c.flops["fp32"] = copies * (5 * n + sr) + (s.rht ? 32 * n : 0);
    c.compulsory_write_bytes = copies * quantized_bytes(s);
    c.compulsory_bytes = in_bytes + c.compulsory_write_bytes;
    const bool amax_pass = s.precision != "mxfp4";
    c.bytes = detail::level_traffic(levels, [&](double inner) {
      return c.compulsory_bytes + (amax_pass && (inner == 0 || in_bytes > inner) ? in_bytes : 0.0);
    });
    return c;
  }
  OpInstance check_instance(const OpInstance& full) const override { return shrink(full); }
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    return quant_problem(inst, seed, "dequantized");
  }
  void reference(const OpInstance& inst, Problem& p) const override {
    auto s = spec_of(inst);
    const bool sr = shape_value(inst, "sr") != 0;
    if (transposed(inst)) {
      p.outputs[1].data = reference_copy(transposed_spec(s), transpose(p.inputs[0].data, s.rows, s.cols), sr);
      s.rht = false;  // the row-wise copy is not transformed
    }
    p.outputs[0].data = reference_copy(s, p.inputs[0].data, sr);
  }
};

class DequantizeOp : public detail::CatalogueOp {
 public:
  DequantizeOp()
      : CatalogueOp("dequantize", "NVFP4 / MXFP4 / FP8 with block scales → BF16", quant_params(false),
                    quant_precisions()) {}
  void validate(const OpInstance& inst) const override { validate_quant(*this, inst); }
  std::string slice_axis(const OpInstance&) const override { return "rows"; }
  Cost cost(const OpInstance& inst, const std::vector<MemoryLevel>& levels) const override {
    const auto s = spec_of(inst);
    const double n = double(s.rows) * double(s.cols);
    Cost c;
    c.flops["fp32"] = n;
    c.compulsory_bytes = quantized_bytes(s) + 2 * n;
    c.compulsory_write_bytes = 2 * n;
    c.bytes = detail::streaming_traffic(levels, c.compulsory_bytes);
    return c;
  }
  OpInstance check_instance(const OpInstance& full) const override { return shrink(full); }
  Problem make_problem(const OpInstance& inst, std::uint64_t seed) const override {
    return quant_problem(inst, seed, "y");
  }
  void reference(const OpInstance& inst, Problem& p) const override {
    auto y = detail::quantize_dequantize(spec_of(inst), p.inputs[0].data);
    for (auto& v : y) v = numfmt::round_to(v, numfmt::kBf16);  // the output is BF16
    p.outputs[0].data = std::move(y);
  }
};

RAFTER_REGISTER_OPERATOR(QuantizeOp);
RAFTER_REGISTER_OPERATOR(DequantizeOp);

}  // namespace
}  // namespace rafter::workloads
