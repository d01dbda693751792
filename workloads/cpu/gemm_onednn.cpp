// GEMM on the CPU. cpu.onednn: FP32, BF16 (avx512_bf16 where present) and INT8 (s8·s8 → s32,
// per-tensor symmetric scales) through oneDNN's matmul; TF32 and FP16 emulated (inputs rounded to
// the format, FP32 GEMM: the products of TF32/FP16 values are exact in FP32); FP8, NVFP4, MXFP4
// emulated: operands stored quantized, the timed call dequantizes them to BF16 and runs the BF16
// GEMM. cpu.native: FP64 (oneDNN has no f64 matmul). Also the hot-channel patch (BF16 GEMM with
// accumulation into Y through oneDNN's sum post-op).
// Operand layouts follow the pass (operator ops_gemm.cpp): fwd A[m,k]·W[n,k]ᵀ, bwd_input dY[m,k]·W[k,n],
// bwd_weight dYᵀ (stored [k,m])·X[k,n]; quantized operands are kept K-contiguous (A[m,k], B as [n,k]).
#include <dnnl.hpp>

#include <cmath>

#include "block_quant.hpp"
#include "cpu_kernel.hpp"

namespace rafter::workloads::cpu {
namespace {

using dt = dnnl::memory::data_type;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// [batch, rows, cols] stored row-major, or transposed ([batch, cols, rows] in memory).
dnnl::memory::desc md(std::int64_t b, std::int64_t rows, std::int64_t cols, dt type, bool transposed) {
  const dnnl::memory::dims strides = transposed ? dnnl::memory::dims{rows * cols, 1, rows}
                                                : dnnl::memory::dims{rows * cols, cols, 1};
  return dnnl::memory::desc({b, rows, cols}, type, strides);
}

bool quantized(const std::string& p) { return p.rfind("fp8", 0) == 0 || p == "nvfp4" || p == "mxfp4"; }

class GemmKernel : public Kernel {
 public:
  explicit GemmKernel(const OpInstance& inst)
      : prec_(inst.precision), phase_(inst.phase), b_(shape_value(inst, "batch")), m_(shape_value(inst, "m")),
        n_(shape_value(inst, "n")), k_(shape_value(inst, "k")) {
    inputs.push_back(make_tensor("A", DType::F32, {b_, m_, k_}));
    inputs.push_back(make_tensor("B", DType::F32, {b_, k_, n_}));
    const DType out = prec_ == "int8" ? DType::S32 : (prec_ == "fp32" || prec_ == "tf32" || prec_ == "fp16") ? DType::F32 : DType::BF16;
    outputs.push_back(make_tensor("C", out, {b_, m_, n_}));
    details["library"] = "oneDNN " + version();
  }

  void prepare() override {
    a_t_ = phase_ == "bwd_weight";
    b_t_ = phase_ == "fwd";
    if (quantized(prec_)) return prepare_quantized();
    dt type = dt::f32;
    if (prec_ == "bf16") type = dt::bf16;
    if (prec_ == "int8") type = dt::s8;
    if (prec_ == "tf32" || prec_ == "fp16") emulated_via = "fp32";
    abuf_ = stage(inputs[0], m_, k_, a_t_, type, scale_a_);
    bbuf_ = stage(inputs[1], k_, n_, b_t_, type, scale_b_);
    build(md(b_, m_, k_, type, a_t_), md(b_, k_, n_, type, b_t_));
  }

  void run() override {
    if (quantized(prec_)) {
      dequantize(qa_, static_cast<bf16*>(abuf_.data()));
      dequantize(qb_, static_cast<bf16*>(bbuf_.data()));
    }
    dnnl::stream s(engine());
    prim_.execute(s, {{DNNL_ARG_SRC, mem_a_}, {DNNL_ARG_WEIGHTS, mem_b_}, {DNNL_ARG_DST, mem_c_}});
    s.wait();
  }

  std::vector<std::vector<double>> results() const override {
    auto out = Kernel::results();
    if (prec_ == "int8")
      for (auto& v : out[0]) v *= double(scale_a_) * double(scale_b_);
    return out;
  }

 private:
  static std::string version() {
    const auto* v = dnnl::version();
    return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  }

  // Copies the logical [b, rows, cols] fp32 staging into the pass's layout and storage type.
  Buffer stage(const Tensor& t, std::int64_t rows, std::int64_t cols, bool transposed, dt type, float& scale) {
    const float* src = t.as<float>();
    const std::size_t n = t.size();
    float amax = 0;
    for (std::size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
    scale = type == dt::s8 ? (amax > 0 ? amax / 127.0f : 1.0f) : 1.0f;
    Buffer out(n * (type == dt::f32 ? 4 : type == dt::bf16 ? 2 : 1));
    parallel_for(b_ * rows, [&](std::int64_t lo, std::int64_t hi, int) {
      for (std::int64_t br = lo; br < hi; ++br) {
        const std::int64_t z = br / rows, r = br % rows;
        for (std::int64_t c = 0; c < cols; ++c) {
          const float v = src[br * cols + c];
          const std::int64_t dst = z * rows * cols + (transposed ? c * rows + r : r * cols + c);
          if (type == dt::bf16) st(static_cast<bf16*>(out.data()), dst, v);
          else if (type == dt::s8) static_cast<std::int8_t*>(out.data())[dst] = static_cast<std::int8_t>(std::lrint(v / scale));
          else static_cast<float*>(out.data())[dst] = round_operand(v);
        }
      }
    });
    return out;
  }

  float round_operand(float v) const {
    if (prec_ == "tf32") return float(numfmt::round_to(v, numfmt::kTf32));
    if (prec_ == "fp16") return float(numfmt::round_to(v, numfmt::kFp16));
    return v;
  }

  // Quantized operands, K-contiguous: A as [b·m, k], B as [b·n, k] (i.e. Bᵀ), plus BF16 staging.
  void prepare_quantized() {
    emulated_via = "bf16";
    const bool fp8 = prec_.rfind("fp8", 0) == 0;
    std::string pa = prec_, pb = prec_;
    if (fp8) {
      pa = prec_.find("e5m2") == 4 ? "fp8_e5m2" : "fp8_e4m3";
      pb = prec_.size() > 8 ? "fp8_" + prec_.substr(prec_.rfind('_') + 1) : pa;
    }
    std::vector<float> at(std::size_t(b_ * m_ * k_)), bt(std::size_t(b_ * n_ * k_));
    const float *A = inputs[0].as<float>(), *B = inputs[1].as<float>();
    for (std::int64_t z = 0; z < b_; ++z)
      for (std::int64_t l = 0; l < k_; ++l) {
        for (std::int64_t i = 0; i < m_; ++i) at[std::size_t((z * m_ + i) * k_ + l)] = A[(z * m_ + i) * k_ + l];
        for (std::int64_t j = 0; j < n_; ++j) bt[std::size_t((z * n_ + j) * k_ + l)] = B[(z * k_ + l) * n_ + j];
      }
    qa_.precision = pa;
    qa_.rows = b_ * m_;
    qa_.cols = k_;
    qb_.precision = pb;
    qb_.rows = b_ * n_;
    qb_.cols = k_;
    qa_.allocate();
    qb_.allocate();
    quantize(at.data(), qa_, {});
    quantize(bt.data(), qb_, {});
    abuf_ = Buffer(std::size_t(b_ * m_ * k_) * 2);
    bbuf_ = Buffer(std::size_t(b_ * n_ * k_) * 2);
    details["emulation"] = "operands stored " + prec_ + "; timed call dequantizes both to bf16, then bf16 GEMM";
    build(md(b_, m_, k_, dt::bf16, false), md(b_, k_, n_, dt::bf16, true));
  }

  void build(const dnnl::memory::desc& a, const dnnl::memory::desc& b) {
    const dt out = outputs[0].dtype == DType::S32 ? dt::s32 : outputs[0].dtype == DType::F32 ? dt::f32 : dt::bf16;
    const auto c = md(b_, m_, n_, out, false);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine());
    prim_ = dnnl::matmul(pd);
    if (!outputs[0].buffer.data()) outputs[0].allocate();
    mem_a_ = dnnl::memory(a, engine(), abuf_.data());
    mem_b_ = dnnl::memory(b, engine(), bbuf_.data());
    mem_c_ = dnnl::memory(c, engine(), outputs[0].buffer.data());
    details["algorithm"] = std::string("onednn matmul ") + pd.impl_info_str();
  }

  std::string prec_, phase_;
  std::int64_t b_, m_, n_, k_;
  bool a_t_ = false, b_t_ = false;
  float scale_a_ = 1, scale_b_ = 1;
  Buffer abuf_, bbuf_;
  QuantizedTensor qa_, qb_;
  dnnl::matmul prim_;
  dnnl::memory mem_a_, mem_b_, mem_c_;
};

// FP64 GEMM (native): rows split across the pool, i-k-j order so the inner loop streams B and C.
class Fp64GemmKernel : public Kernel {
 public:
  explicit Fp64GemmKernel(const OpInstance& inst)
      : b_(shape_value(inst, "batch")), m_(shape_value(inst, "m")), n_(shape_value(inst, "n")), k_(shape_value(inst, "k")) {
    inputs.push_back(make_tensor("A", DType::F64, {b_, m_, k_}));
    inputs.push_back(make_tensor("B", DType::F64, {b_, k_, n_}));
    outputs.push_back(make_tensor("C", DType::F64, {b_, m_, n_}));
    details["algorithm"] = "native fp64 i-k-j";
  }
  void run() override {
    const double *A = inputs[0].as<double>(), *B = inputs[1].as<double>();
    double* C = outputs[0].as<double>();
    parallel_for(b_ * m_, [&](std::int64_t lo, std::int64_t hi, int) {
      for (std::int64_t r = lo; r < hi; ++r) {
        const std::int64_t z = r / m_;
        double* c = C + r * n_;
        for (std::int64_t j = 0; j < n_; ++j) c[j] = 0;
        for (std::int64_t l = 0; l < k_; ++l) {
          const double a = A[r * k_ + l];
          const double* b = B + (z * k_ + l) * n_;
          for (std::int64_t j = 0; j < n_; ++j) c[j] += a * b[j];
        }
      }
    });
  }

 private:
  std::int64_t b_, m_, n_, k_;
};

// Y = Y_in + R·W_hotᵀ in BF16 through oneDNN (sum post-op accumulates into Y in place).
class HotPatchKernel : public Kernel {
 public:
  explicit HotPatchKernel(const OpInstance& inst)
      : t_(shape_value(inst, "tokens")), n_(shape_value(inst, "out")), h_(shape_value(inst, "hot")) {
    inputs.push_back(make_tensor("R", DType::BF16, {t_, h_}));
    inputs.push_back(make_tensor("W_hot", DType::BF16, {n_, h_}));
    inputs.push_back(make_tensor("Y_in", DType::BF16, {t_, n_}));
    outputs.push_back(make_tensor("Y", DType::BF16, {t_, n_}));
  }
  void prepare() override {
    std::memcpy(outputs[0].buffer.data(), inputs[2].buffer.data(), outputs[0].size() * 2);
    const auto a = md(1, t_, h_, dt::bf16, false), b = md(1, h_, n_, dt::bf16, true), c = md(1, t_, n_, dt::bf16, false);
    dnnl::post_ops po;
    po.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine());
    prim_ = dnnl::matmul(pd);
    mem_a_ = dnnl::memory(a, engine(), inputs[0].buffer.data());
    mem_b_ = dnnl::memory(b, engine(), inputs[1].buffer.data());
    mem_c_ = dnnl::memory(c, engine(), outputs[0].buffer.data());
    details["algorithm"] = std::string("onednn matmul + sum post-op ") + pd.impl_info_str();
  }
  void run() override {
    dnnl::stream s(engine());
    prim_.execute(s, {{DNNL_ARG_SRC, mem_a_}, {DNNL_ARG_WEIGHTS, mem_b_}, {DNNL_ARG_DST, mem_c_}});
    s.wait();
  }

 private:
  std::int64_t t_, n_, h_;
  dnnl::matmul prim_;
  dnnl::memory mem_a_, mem_b_, mem_c_;
};

// The emulated (quantized) precisions use block_quant_avx2.cpp: only on CPUs with AVX2.
RAFTER_REGISTER_CPU_KERNEL({"gemm", "cpu.onednn",
                            [](const OpInstance& i) { return i.precision != "fp64" && (!quantized(i.precision) || cpu_has_avx2()); },
                            [](const OpInstance& i) -> std::unique_ptr<Kernel> { return std::make_unique<GemmKernel>(i); }});
RAFTER_REGISTER_CPU_KERNEL({"gemm", "cpu.native", [](const OpInstance& i) { return i.precision == "fp64"; },
                            [](const OpInstance& i) -> std::unique_ptr<Kernel> { return std::make_unique<Fp64GemmKernel>(i); }});
RAFTER_REGISTER_CPU_KERNEL({"hot_channel_patch", "cpu.onednn", [](const OpInstance& i) { return i.precision == "bf16"; },
                            [](const OpInstance& i) -> std::unique_ptr<Kernel> { return std::make_unique<HotPatchKernel>(i); }});

}  // namespace
}  // namespace rafter::workloads::cpu
