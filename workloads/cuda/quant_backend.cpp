// "cuda.quant": the catalogue's quantize and dequantize (NVFP4 1×16 and 16×16, MXFP4, FP8 E4M3/E5M2
// with current per-tensor scaling; RHT and stochastic rounding) on our kernels (quantize.hpp); and
// "cuda.hot_channel": the hot-channel patch Y += R_hot·W_hotᵀ as one cuBLASLt BF16 GEMM with beta = 1.
// The quantize check decodes the codes back to FP32 in the same launch (as the CPU backend's check
// does) and compares with quant_math's exact emulation; only the encoding is timed.
#include <fmt/format.h>

#include <memory>

#include "cublaslt_gemm.hpp"
#include "device_problem.hpp"
#include "quantize.hpp"

namespace rafter::workloads::cuda {
namespace {

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

QuantFormat format_of(const OpInstance& in) {
  if (in.precision == "nvfp4")
    return shape_value(in, "block2d") ? QuantFormat::Nvfp4Tile16 : QuantFormat::Nvfp4;
  if (in.precision == "mxfp4") return QuantFormat::Mxfp4;
  return in.precision == "fp8_e4m3" ? QuantFormat::Fp8E4m3 : QuantFormat::Fp8E5m2;
}

struct DeviceQuantized {
  QuantTensorRef ref;
  void* workspace = nullptr;
};

// Codes, scales and tensor scale poisoned; the amax workspace zeroed once (quantize.hpp).
DeviceQuantized alloc_quantized(DeviceProblem& d, QuantFormat f, std::int64_t rows, std::int64_t cols) {
  DeviceQuantized q;
  q.ref.codes = d.scratch(DType::I8, quant_code_bytes(f, rows, cols)).as<std::uint8_t>();
  q.ref.scales =
      d.scratch(DType::I8, std::max<std::size_t>(1, quant_scale_bytes(f, rows, cols))).as<std::uint8_t>();
  q.ref.tensor_scale = d.scratch(DType::F32, 1).as<float>();
  DeviceTensor& ws = d.adopt(alloc_tensor(DType::I8, quant_workspace_bytes()));
  RAFTER_CUDA_CHECK(cudaMemset(ws.data(), 0, ws.count));
  q.workspace = ws.data();
  return q;
}

// transpose=1: the column-wise copy [cols, rows] from the same encoding pass, checked as output 1.
StreamFn bind_quantize(const OpInstance& in, DeviceProblem& d) {
  const auto rows = shape_value(in, "rows"), cols = shape_value(in, "cols");
  const QuantFormat f = format_of(in);
  const QuantLaunchOptions o{shape_value(in, "rht") != 0, shape_value(in, "sr") != 0, 1};
  const auto* x = d.input(0, DType::BF16, sz(rows * cols), -3, 3).as_bf16();
  const DeviceQuantized q = alloc_quantized(d, f, rows, cols);
  const bool both = shape_value(in, "transpose") != 0;
  const QuantTensorRef qt = both ? alloc_quantized(d, f, cols, rows).ref : QuantTensorRef{};
  const auto encode = [=](cudaStream_t s) {
    quantize_bf16(x, q.ref, rows, cols, f, o, q.workspace, s, both ? &qt : nullptr);
  };
  if (!d.checking()) return encode;
  auto* y = d.output(DType::F32, sz(rows * cols), 0).as<float>();
  float* yt = both ? d.output(DType::F32, sz(rows * cols), 1).as<float>() : nullptr;
  return [=](cudaStream_t s) {
    encode(s);
    dequantize_to_f32(q.ref, y, rows, cols, f, s);
    if (yt) dequantize_to_f32(qt, yt, cols, rows, f, s);
  };
}

StreamFn bind_dequantize(const OpInstance& in, DeviceProblem& d) {
  const auto rows = shape_value(in, "rows"), cols = shape_value(in, "cols");
  const QuantFormat f = format_of(in);
  const auto* x = d.input(0, DType::BF16, sz(rows * cols), -3, 3).as_bf16();
  const DeviceQuantized q = alloc_quantized(d, f, rows, cols);
  quantize_bf16(x, q.ref, rows, cols, f, {}, q.workspace, nullptr);  // untimed: the operator's input
  RAFTER_CUDA_CHECK(cudaDeviceSynchronize());
  auto* y = d.output(DType::BF16, sz(rows * cols), 0).as_bf16();
  return [=](cudaStream_t s) { dequantize_to_bf16(q.ref, y, rows, cols, f, s); };
}

class CudaQuantBackend : public CudaBackend {
 public:
  std::string name() const override { return "cuda.quant"; }
  bool supports(const OpInstance& inst) const override {
    return (inst.op == "quantize" || inst.op == "dequantize") &&
           (inst.precision == "nvfp4" || inst.precision == "mxfp4" || inst.precision == "fp8_e4m3" ||
            inst.precision == "fp8_e5m2");
  }
  void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) override {
    record.backend = name();
    recording_failures(record, [&] {
      const bool quantize = inst.op == "quantize";
      check_and_time(inst, ctx, quantize ? bind_quantize : bind_dequantize, record);
      record.details["kernels"] =
          quantize
              ? "rafter CUDA: tensor amax (grid-stride reduction, RHT applied) unless MXFP4, then one "
                "encoding "
                "pass (8 values per thread, block maxima by shuffles, 16-point RHT in registers, Philox "
                "stochastic rounding) walking the tensor in reverse so that its start hits what L2 kept; "
                "with transpose=1, the amax pass finds both copies' maxima in one read and one pass of "
                "64x64 tiles through shared memory writes the row-wise and the column-wise copies"
              : "rafter CUDA: one pass, 8 codes per thread decoded with their block scale to BF16";
      if (quantize && shape_value(inst, "sr") != 0 && inst.precision.rfind("fp8", 0) == 0)
        record.details["rounding"] = "FP8 rounds to nearest even (stochastic rounding is for FP4 gradients)";
    });
  }
};

StreamFn bind_hot_patch(const OpInstance& in, DeviceProblem& d, bool time_all, nlohmann::json* algorithm) {
  const auto t = shape_value(in, "tokens"), n = shape_value(in, "out"), h = shape_value(in, "hot");
  const auto* r = d.input(0, DType::BF16, sz(t * h)).as_bf16();
  const auto* w = d.input(1, DType::BF16, sz(n * h)).as_bf16();
  auto* y = d.in_out(2, DType::BF16, sz(t * n), 0).as_bf16();  // Y_in, accumulated in place
  GemmSpec spec;
  spec.m = t, spec.n = n, spec.k = h, spec.trans_b = true, spec.precision = "bf16";
  auto gemm = std::make_shared<LtGemm>(spec);
  gemm->bind(r, w, y);
  gemm->set_beta(1.0);
  const GemmAlgoRecord algo = gemm->choose(time_all);
  if (algorithm) *algorithm = to_json(algo);
  return [gemm](cudaStream_t s) { gemm->launch(s); };
}

class CudaHotChannelBackend : public CudaBackend {
 public:
  std::string name() const override { return "cuda.hot_channel"; }
  bool supports(const OpInstance& inst) const override {
    return inst.op == "hot_channel_patch" && inst.precision == "bf16";
  }
  void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) override {
    record.backend = name();
    recording_failures(record, [&] {
      nlohmann::json algorithm;
      const bool time_all = time_all_candidates(ctx.algo);
      BindFn bind = [&](const OpInstance& in, DeviceProblem& d) {
        const bool full = !d.checking();
        return bind_hot_patch(in, d, full && time_all, full ? &algorithm : nullptr);
      };
      check_and_time(inst, ctx, bind, record);
      record.details["kernels"] = "cuBLASLt BF16 GEMM, FP32 accumulation, beta = 1 into Y in place";
      if (!algorithm.is_null()) record.details["algorithm"] = algorithm;
    });
  }
};

RAFTER_REGISTER_BACKEND(CudaQuantBackend);
RAFTER_REGISTER_BACKEND(CudaHotChannelBackend);

}  // namespace
}  // namespace rafter::workloads::cuda
