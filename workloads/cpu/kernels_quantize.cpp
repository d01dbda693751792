// Native CPU kernels of quantize (BF16 → NVFP4 / MXFP4 / FP8, optional RHT and stochastic
// rounding) and dequantize (→ BF16), built on block_quant (AVX2 or baseline x86-64, whichever fits
// the CPU). The check decodes the quantized output back to values and compares with the exact FP64
// emulation. transpose=1 takes a second pass on the CPU: X transposed (BF16, exact), then quantized
// as the column-wise copy, with the RHT if asked (the row-wise copy is then not transformed).
#include <algorithm>
#include <cstring>

#include "block_quant.hpp"
#include "cpu_kernel.hpp"

namespace rafter::workloads::cpu {
namespace {

QuantizedTensor make_q(const OpInstance& inst, bool transposed = false) {
  QuantizedTensor q;
  q.precision = inst.precision;
  q.rows = shape_value(inst, transposed ? "cols" : "rows");
  q.cols = shape_value(inst, transposed ? "rows" : "cols");
  q.block2d = shape_value(inst, "block2d") != 0;
  q.allocate();
  return q;
}

void poison(QuantizedTensor& q) {  // 0xff: NaN scales and -6 codes everywhere
  std::memset(q.values.data(), 0xff, q.values.bytes());
  std::memset(q.scales.data(), 0xff, q.scales.bytes());
}

std::vector<double> decoded(const QuantizedTensor& q) {
  std::vector<float> y(static_cast<std::size_t>(q.rows * q.cols));
  dequantize(q, y.data());
  return {y.begin(), y.end()};
}

class QuantizeKernel : public Kernel {
 public:
  explicit QuantizeKernel(const OpInstance& inst)
      : q_(make_q(inst)), transposed_(shape_value(inst, "transpose") != 0) {
    options_.rht = shape_value(inst, "rht") != 0;
    options_.stochastic = shape_value(inst, "sr") != 0;
    inputs.push_back(make_tensor("x", DType::BF16, {q_.rows, q_.cols}, -3, 3));
    details["algorithm"] = "native two-pass (tensor amax, then block scales and E2M1/FP8 codes)";
    if (transposed_) {
      qt_ = make_q(inst, true);
      xt_ = Buffer(std::size_t(q_.rows * q_.cols) * sizeof(bf16));
      details["algorithm"] = "native two-pass, twice: X, then X transposed (BF16) for the column-wise copy";
    }
  }
  void poison() override {
    cpu::poison(q_);
    if (transposed_) cpu::poison(qt_);
  }
  void run() override {
    const bf16* x = inputs[0].as<bf16>();
    if (!transposed_) return quantize(x, q_, options_);
    quantize(x, q_, {false, options_.stochastic, options_.seed});  // the RHT is the column-wise copy's
    auto* t = static_cast<bf16*>(xt_.data());
    constexpr std::int64_t kTile = 32;  // tiles, so that both sides stay in cache lines
    for (std::int64_t r0 = 0; r0 < q_.rows; r0 += kTile)
      for (std::int64_t c0 = 0; c0 < q_.cols; c0 += kTile)
        for (std::int64_t r = r0; r < std::min(r0 + kTile, q_.rows); ++r)
          for (std::int64_t c = c0; c < std::min(c0 + kTile, q_.cols); ++c)
            t[c * q_.rows + r] = x[r * q_.cols + c];
    quantize(t, qt_, {options_.rht, options_.stochastic, options_.seed + 1});
  }
  std::vector<std::vector<double>> results() const override {
    if (!transposed_) return {decoded(q_)};
    return {decoded(q_), decoded(qt_)};
  }

 private:
  QuantizedTensor q_, qt_;
  bool transposed_;
  Buffer xt_;
  QuantOptions options_;
};

class DequantizeKernel : public Kernel {
 public:
  explicit DequantizeKernel(const OpInstance& inst) : q_(make_q(inst)) {
    inputs.push_back(make_tensor("x", DType::BF16, {q_.rows, q_.cols}, -3, 3));
    outputs.push_back(make_tensor("y", DType::BF16, {q_.rows, q_.cols}));
  }
  void prepare() override { quantize(inputs[0].as<bf16>(), q_, {}); }  // untimed: the input is quantized data
  void run() override { dequantize(q_, outputs[0].as<bf16>()); }

 private:
  QuantizedTensor q_;
};

RAFTER_REGISTER_CPU_KERNEL({"quantize", "cpu.native", [](const OpInstance&) { return true; },
                            [](const OpInstance& i) -> std::unique_ptr<Kernel> { return std::make_unique<QuantizeKernel>(i); }});
RAFTER_REGISTER_CPU_KERNEL({"dequantize", "cpu.native", [](const OpInstance&) { return true; },
                            [](const OpInstance& i) -> std::unique_ptr<Kernel> { return std::make_unique<DequantizeKernel>(i); }});

}  // namespace
}  // namespace rafter::workloads::cpu
