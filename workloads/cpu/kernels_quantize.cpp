// Native CPU kernels of quantize (BF16 → NVFP4 / MXFP4 / FP8, optional RHT and stochastic
// rounding) and dequantize (→ BF16), built on block_quant (AVX2 or baseline x86-64, whichever fits
// the CPU). The check decodes the quantized output back to values and compares with the exact FP64
// emulation. transpose=1 takes a second pass on the CPU: X transposed (BF16, exact), then quantized
// as the column-wise copy, with the RHT if asked (the row-wise copy is then not transformed); where
// the copy's codes are X's transposed (16×16 tiles, FP8; no RHT, no SR) the codes are transposed.
#include <emmintrin.h>

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

// 8×8 16-bit values from x (row stride ldx) to t (row stride ldt), transposed through SSE2 unpacks.
void transpose8x8(const bf16* x, std::int64_t ldx, bf16* t, std::int64_t ldt) {
  __m128i a[8], b[8], c[8];
  for (int i = 0; i < 8; ++i) a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i * ldx));
  for (int i = 0; i < 4; ++i) {
    b[2 * i] = _mm_unpacklo_epi16(a[2 * i], a[2 * i + 1]);
    b[2 * i + 1] = _mm_unpackhi_epi16(a[2 * i], a[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      c[4 * i + 2 * j] = _mm_unpacklo_epi32(b[4 * i + j], b[4 * i + j + 2]);
      c[4 * i + 2 * j + 1] = _mm_unpackhi_epi32(b[4 * i + j], b[4 * i + j + 2]);
    }
  for (int i = 0; i < 4; ++i) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(t + (2 * i) * ldt), _mm_unpacklo_epi64(c[i], c[i + 4]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(t + (2 * i + 1) * ldt), _mm_unpackhi_epi64(c[i], c[i + 4]));
  }
}

// x [rows, cols] into t [cols, rows], both multiples of 16 (quantize's transpose=1 asks for that):
// 64×64 tiles of 8×8 register transposes, tile rows split over the pool. oneDNN 2.6's reorder to the
// transposed layout took 13–31 ms for 4096×4096 on the 2-core build VM, these 8×8 blocks 10 ms on
// one thread.
void transpose_bf16(const bf16* x, bf16* t, std::int64_t rows, std::int64_t cols) {
  constexpr std::int64_t kTile = 64;
  parallel_for((rows + kTile - 1) / kTile, [&](std::int64_t b, std::int64_t e, int) {
    for (std::int64_t r0 = b * kTile; r0 < std::min(e * kTile, rows); r0 += kTile)
      for (std::int64_t c0 = 0; c0 < cols; c0 += kTile)
        for (std::int64_t r = r0; r < std::min(r0 + kTile, rows); r += 8)
          for (std::int64_t c = c0; c < std::min(c0 + kTile, cols); c += 8)
            transpose8x8(x + r * cols + c, cols, t + c * rows + r, rows);
  });
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
    if (transposed_ && codes_transpose(q_, options_)) {
      qt_ = make_q(inst, true);
      details["algorithm"] =
          "native two-pass on X; the column-wise copy's codes are X's transposed (16x16 SSE2 byte blocks)";
    } else if (transposed_) {
      qt_ = make_q(inst, true);
      xt_ = Buffer(std::size_t(q_.rows * q_.cols) * sizeof(bf16));
      details["algorithm"] =
          "native two-pass, twice: X, then X transposed (BF16, 8x8 SSE2 blocks) for the column-wise copy";
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
    if (codes_transpose(q_, options_)) return transpose_codes(q_, qt_);
    auto* t = static_cast<bf16*>(xt_.data());
    transpose_bf16(x, t, q_.rows, q_.cols);
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
                            [](const OpInstance& i) -> std::unique_ptr<Kernel> {
                              return std::make_unique<QuantizeKernel>(i);
                            }});
RAFTER_REGISTER_CPU_KERNEL({"dequantize", "cpu.native", [](const OpInstance&) { return true; },
                            [](const OpInstance& i) -> std::unique_ptr<Kernel> {
                              return std::make_unique<DequantizeKernel>(i);
                            }});

}  // namespace
}  // namespace rafter::workloads::cpu
