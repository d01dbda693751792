// Native CPU kernels of quantize (BF16 → NVFP4 / MXFP4 / FP8, optional RHT and stochastic
// rounding) and dequantize (→ BF16), built on block_quant (AVX2 or baseline x86-64, whichever fits
// the CPU). The check decodes the quantized output back to values and compares with the exact FP64
// emulation.
#include "block_quant.hpp"
#include "cpu_kernel.hpp"

namespace rafter::workloads::cpu {
namespace {

QuantizedTensor make_q(const OpInstance& inst) {
  QuantizedTensor q;
  q.precision = inst.precision;
  q.rows = shape_value(inst, "rows");
  q.cols = shape_value(inst, "cols");
  q.block2d = shape_value(inst, "block2d") != 0;
  q.allocate();
  return q;
}

class QuantizeKernel : public Kernel {
 public:
  explicit QuantizeKernel(const OpInstance& inst) : q_(make_q(inst)) {
    options_.rht = shape_value(inst, "rht") != 0;
    options_.stochastic = shape_value(inst, "sr") != 0;
    inputs.push_back(make_tensor("x", DType::BF16, {q_.rows, q_.cols}, -3, 3));
    details["algorithm"] = "native two-pass (tensor amax, then block scales and E2M1/FP8 codes)";
  }
  void poison() override {  // 0xff: NaN scales and -6 codes everywhere
    std::memset(q_.values.data(), 0xff, q_.values.bytes());
    std::memset(q_.scales.data(), 0xff, q_.scales.bytes());
  }
  void run() override { quantize(inputs[0].as<bf16>(), q_, options_); }
  std::vector<std::vector<double>> results() const override {
    std::vector<float> y(static_cast<std::size_t>(q_.rows * q_.cols));
    dequantize(q_, y.data());
    return {std::vector<double>(y.begin(), y.end())};
  }

 private:
  QuantizedTensor q_;
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
