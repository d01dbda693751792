// GEMM on the CPU. cpu.onednn: FP32, BF16 (avx512_bf16 where present) and INT8 (s8·s8 → s32,
// per-tensor symmetric scales) through oneDNN's matmul; TF32 and FP16 emulated (inputs rounded to
// the format, FP32 GEMM: the products of TF32/FP16 values are exact in FP32); FP8, NVFP4, MXFP4
// emulated: operands stored quantized, the timed call dequantizes them to BF16 and runs the BF16
// GEMM. cpu.native: FP64 (oneDNN has no f64 matmul). The hot-channel patch: hot_patch_onednn.cpp;
// an FP4 GEMM with `hot` runs it right after its matmul, into C (on the GPU it is extra K instead).
// Where oneDNN has no matmul for the storage type on this CPU (BF16 without AVX-512 in oneDNN 2.6,
// INT8 without VNNI: its sums saturate; asked of oneDNN, onednn_matmul.hpp), or only a slow
// emulation (BF16 on a CPU without BF16 dot products), the GEMM still runs,
// emulated via FP32: the operands stay stored in their precision and the timed call widens them to
// FP32 (a framework's BF16 GEMM on such a CPU pays that conversion too), runs oneDNN's FP32 matmul
// and rounds the result into the precision's output type; FP8/FP4 operands are dequantized
// straight to FP32. details["path"] says which path ran and what its time includes.
// Operand layouts follow the pass (operator ops_gemm.cpp): fwd A[m,k]·W[n,k]ᵀ, bwd_input dY[m,k]·W[k,n],
// bwd_weight dYᵀ (stored [k,m])·X[k,n]; quantized operands are kept K-contiguous (A[m,k], B as [n,k]).
#include <cmath>

#include "block_quant.hpp"
#include "cpu_kernel.hpp"
#include "hot_patch_onednn.hpp"
#include "onednn_matmul.hpp"
#include "rafter/collector/timing.hpp"

namespace rafter::workloads::cpu {
namespace {

bool quantized(const std::string& p) { return p.rfind("fp8", 0) == 0 || p == "nvfp4" || p == "mxfp4"; }

class GemmKernel : public Kernel {
 public:
  explicit GemmKernel(const OpInstance& inst)
      : prec_(inst.precision),
        phase_(inst.phase),
        b_(shape_value(inst, "batch")),
        m_(shape_value(inst, "m")),
        n_(shape_value(inst, "n")),
        k_(shape_value(inst, "k")),
        hot_(shape_value(inst, "hot", 0)) {
    inputs.push_back(make_tensor("A", DType::F32, {b_, m_, k_}));
    inputs.push_back(make_tensor("B", DType::F32, {b_, k_, n_}));
    if (hot_ > 0) {  // batch 1 (ops_gemm.cpp)
      inputs.push_back(make_tensor("R", DType::BF16, {m_, hot_}));
      inputs.push_back(make_tensor("W_hot", DType::BF16, {n_, hot_}));
    }
    const DType out = prec_ == "int8" ? DType::S32 : (prec_ == "fp32" || prec_ == "tf32" || prec_ == "fp16") ? DType::F32 : DType::BF16;
    outputs.push_back(make_tensor("C", out, {b_, m_, n_}));
    details["library"] = "oneDNN " + onednn_version();
  }

  void prepare() override {
    a_t_ = phase_ == "bwd_weight";
    b_t_ = phase_ == "fwd";
    if (quantized(prec_)) {
      prepare_quantized();
      if (hot_ > 0) prepare_patch();
      return;
    }
    dt type = dt::f32;
    if (prec_ == "bf16") type = dt::bf16;
    if (prec_ == "int8") type = dt::s8;
    if (prec_ == "tf32" || prec_ == "fp16") emulated_via = "fp32";
    abuf_ = stage(inputs[0], m_, k_, a_t_, type, scale_a_);
    bbuf_ = stage(inputs[1], k_, n_, b_t_, type, scale_b_);
    stored_ = type;
    if (type == dt::bf16 && !onednn_native_bf16_matmul()) return prepare_bf16_without_dot_products();
    if (type == dt::s8 && !onednn_has_matmul(type, type, out_type())) return prepare_widened();
    build(matmul_md(b_, m_, k_, type, a_t_), matmul_md(b_, k_, n_, type, b_t_));
  }

  void run() override {
    if (quantized(prec_) && via_fp32_) {
      dequantize(qa_, static_cast<float*>(a32_.data()));
      dequantize(qb_, static_cast<float*>(b32_.data()));
    } else if (quantized(prec_)) {
      dequantize(qa_, static_cast<bf16*>(abuf_.data()));
      dequantize(qb_, static_cast<bf16*>(bbuf_.data()));
    } else if (via_fp32_) {
      widen(abuf_.data(), stored_, static_cast<float*>(a32_.data()), b_ * m_ * k_);
      widen(bbuf_.data(), stored_, static_cast<float*>(b32_.data()), b_ * k_ * n_);
    }
    dnnl::stream s(onednn_engine());
    prim_.execute(s, {{DNNL_ARG_SRC, mem_a_}, {DNNL_ARG_WEIGHTS, mem_b_}, {DNNL_ARG_DST, mem_c_}});
    s.wait();
    if (via_fp32_) narrow(static_cast<const float*>(c32_.data()), out_type(), outputs[0].buffer.data(), b_ * m_ * n_);
    if (hot_ > 0) patch_.run();
  }

  std::vector<std::vector<double>> results() const override {
    auto out = Kernel::results();
    if (prec_ == "int8")
      for (auto& v : out[0]) v *= double(scale_a_) * double(scale_b_);
    return out;
  }

 private:
  dt out_type() const {
    return outputs[0].dtype == DType::S32 ? dt::s32 : outputs[0].dtype == DType::F32 ? dt::f32 : dt::bf16;
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

  // A BF16 GEMM on a CPU without BF16 dot products. Where oneDNN has a BF16 matmul it emulates them
  // (converting inside its kernel, which reads 2 bytes a weight); rafter's FP32 path widens the
  // operands in the timed call (6 bytes a weight more) for oneDNN's faster FP32 matmul. Which wins
  // depends on the shape (an Ice Lake VM, 4096² weights: at 128 tokens FP32 2.5x faster), so both
  // are timed here, each as the timed call runs (one warm-up, the better of two), and the faster
  // stays; details.contest holds both times.
  void prepare_bf16_without_dot_products() {
    if (!onednn_has_matmul(dt::bf16, dt::bf16, dt::bf16)) return prepare_widened();
    const auto seconds = [this] {  // one warm-up, the better of two timed calls
      return measure_seconds(RepeatPolicy{1, 2, 2, 0, 0}, [this] { run(); }).min;
    };
    build(matmul_md(b_, m_, k_, dt::bf16, a_t_), matmul_md(b_, k_, n_, dt::bf16, b_t_));
    const std::string bf16_algorithm = details["algorithm"];
    const double bf16_seconds = seconds();
    prepare_widened();
    const double fp32_seconds = seconds();
    details["contest"] = {{"onednn_bf16_matmul", {{"seconds", bf16_seconds}, {"algorithm", bf16_algorithm}}},
                          {"fp32_path", {{"seconds", fp32_seconds}, {"algorithm", details["algorithm"]}}},
                          {"chosen", fp32_seconds <= bf16_seconds ? "fp32_path" : "onednn_bf16_matmul"}};
    if (fp32_seconds <= bf16_seconds) return;
    via_fp32_ = false;  // oneDNN's own emulation: still FP32 arithmetic, judged on the FP32 roofs
    a32_ = Buffer();
    b32_ = Buffer();
    c32_ = Buffer();
    details["path"] =
        "oneDNN's bf16 matmul, which converts to fp32 inside its kernel" + onednn_no_bf16_note();
    build(matmul_md(b_, m_, k_, dt::bf16, a_t_), matmul_md(b_, k_, n_, dt::bf16, b_t_));
  }

  // oneDNN has no matmul for the storage type here: FP32 copies of the operands (filled in the
  // timed call) and of the result, an FP32 matmul between them.
  void prepare_widened() {
    const bool bf16 = stored_ == dt::bf16;
    details["path"] =
        std::string(bf16 ? "bf16" : "int8") +
        " operands converted to fp32 in the timed call, oneDNN fp32 matmul, result converted to " +
        (bf16 ? "bf16" + onednn_no_bf16_note()
              : "int32" + no_matmul_note("int8") + " that sums exactly (no VNNI: int16 saturation)");
    use_fp32(b_ * m_ * k_, b_ * k_ * n_);
    build(matmul_md(b_, m_, k_, dt::f32, a_t_), matmul_md(b_, k_, n_, dt::f32, b_t_));
  }

  std::string no_matmul_note(const std::string& type) const {
    return ": oneDNN " + onednn_version() + " has no " + type + " matmul on this CPU";
  }

  void use_fp32(std::int64_t a_elements, std::int64_t b_elements) {
    via_fp32_ = true;
    emulated_via = "fp32";
    a32_ = Buffer(std::size_t(a_elements) * 4);
    b32_ = Buffer(std::size_t(b_elements) * 4);
    c32_ = Buffer(std::size_t(b_ * m_ * n_) * 4);
  }

  // Quantized operands, K-contiguous: A as [b·m, k], B as [b·n, k] (i.e. Bᵀ), plus BF16 staging
  // (FP32 where oneDNN has no BF16 matmul).
  void prepare_quantized() {
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
    const bool bf16_gemm = onednn_native_bf16_matmul();
    const dt staging = bf16_gemm ? dt::bf16 : dt::f32;
    emulated_via = bf16_gemm ? "bf16" : "fp32";
    details["emulation"] = "operands stored " + prec_ + "; timed call dequantizes both to " + emulated_via + ", then " +
                           emulated_via + " GEMM" + (bf16_gemm ? "" : ", result converted to bf16");
    if (bf16_gemm) {
      abuf_ = Buffer(std::size_t(b_ * m_ * k_) * 2);
      bbuf_ = Buffer(std::size_t(b_ * n_ * k_) * 2);
    } else {
      details["path"] =
          "operands dequantized to fp32 in the timed call, oneDNN fp32 matmul, result converted to bf16" +
          onednn_no_bf16_note();
      use_fp32(b_ * m_ * k_, b_ * n_ * k_);
    }
    build(matmul_md(b_, m_, k_, staging, false), matmul_md(b_, k_, n_, staging, true));
  }

  // C += R·W_hotᵀ in BF16 after the GEMM, timed with it.
  void prepare_patch() {
    nlohmann::json how;
    patch_.prepare(m_, n_, hot_, inputs[2].buffer.data(), inputs[3].buffer.data(), outputs[0].buffer.data(),
                   how);
    how["channels"] = hot_;
    how["how"] = "a second oneDNN matmul R·W_hotᵀ added into C after the GEMM, timed with it";
    details["hot_patch"] = how;
  }

  void build(const dnnl::memory::desc& a, const dnnl::memory::desc& b) {
    const bool fp32 = via_fp32_;
    const auto c = matmul_md(b_, m_, n_, fp32 ? dt::f32 : out_type(), false);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), onednn_engine());
    prim_ = dnnl::matmul(pd);
    if (!outputs[0].buffer.data()) outputs[0].allocate();
    mem_a_ = dnnl::memory(a, onednn_engine(), fp32 ? a32_.data() : abuf_.data());
    mem_b_ = dnnl::memory(b, onednn_engine(), fp32 ? b32_.data() : bbuf_.data());
    mem_c_ = dnnl::memory(c, onednn_engine(), fp32 ? c32_.data() : outputs[0].buffer.data());
    details["algorithm"] = std::string("onednn matmul ") + pd.impl_info_str();
  }

  std::string prec_, phase_;
  std::int64_t b_, m_, n_, k_, hot_;
  bool a_t_ = false, b_t_ = false;
  float scale_a_ = 1, scale_b_ = 1;
  dt stored_ = dt::f32;     // the operands' storage type (not quantized)
  bool via_fp32_ = false;  // run as an FP32 matmul on widened or dequantized operands
  Buffer abuf_, bbuf_, a32_, b32_, c32_;
  QuantizedTensor qa_, qb_;
  HotPatchMatmul patch_;
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

RAFTER_REGISTER_CPU_KERNEL({"gemm", "cpu.onednn", [](const OpInstance& i) { return i.precision != "fp64"; },
                            [](const OpInstance& i) -> std::unique_ptr<Kernel> { return std::make_unique<GemmKernel>(i); }});
RAFTER_REGISTER_CPU_KERNEL({"gemm", "cpu.native", [](const OpInstance& i) { return i.precision == "fp64"; },
                            [](const OpInstance& i) -> std::unique_ptr<Kernel> { return std::make_unique<Fp64GemmKernel>(i); }});

}  // namespace
}  // namespace rafter::workloads::cpu
