// "cuda.fp4_native": the catalogue's gemm in NVFP4 (and MXFP4 where cuBLASLt offers it) on FP4
// tensor cores, sm_100 and later, through cuBLASLt's block-scaled path: E2M1 operands
// (CUDA_R_4F_E2M1), an A and a B scale mode VEC16_UE4M3 (NVFP4) or VEC32_UE8M0 (MXFP4) with the
// block scales in cuBLASLt's tiled 128×4 layout (workloads/src/block_scale_layout.hpp), FP32
// accumulation, BF16 output, the two FP32 tensor scales folded into alpha. Operands are the
// recipe's K-contiguous copies, as for cuda.fp4_emulated (A' [m,k], B' [n,k]): the TN layout
// cuBLASLt asks of FP4. Chosen at run time: it supports an instance only on a device of compute
// capability 10.0 or more whose cuBLASLt offers an algorithm for the format, so on sm_90 the
// emulated backend keeps running. It has not run here: no Blackwell GPU was available.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>

#include "../src/block_scale_layout.hpp"
#include "cublaslt_gemm.hpp"
#include "device_problem.hpp"
#include "fp4_host.hpp"

namespace rafter::workloads::cuda {
namespace {

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }
std::int64_t block_of(const std::string& precision) { return precision == "nvfp4" ? 16 : 32; }

// Compute capability major of the current device; 0 without a usable one.
int device_major() {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
    cudaGetLastError();  // leave no sticky error behind for the next CUDA call
    return 0;
  }
  return major;
}

// Whether cuBLASLt's heuristic offers a block-scaled algorithm for `precision` on this device (a
// 128×128×128 problem, asked once per process and precision): cuBLASLt documents NVFP4's E2M1
// with UE4M3 per 16; E2M1 with UE8M0 per 32 (MXFP4) is taken only where it answers.
bool cublaslt_offers(const std::string& precision) {
  static std::mutex mutex;
  static std::map<std::string, bool> offered;
  const std::lock_guard lock(mutex);
  if (auto it = offered.find(precision); it != offered.end()) return it->second;
  bool ok = false;
  try {
    GemmSpec spec;
    spec.m = spec.n = spec.k = 128, spec.trans_b = true, spec.precision = precision;
    LtGemm gemm(spec);
    gemm.choose(false);
    ok = true;
  } catch (const InputError&) {
    cudaGetLastError();
  }
  return offered[precision] = ok;
}

GemmSpec native_spec(const OpInstance& in) {
  GemmSpec s;
  s.m = shape_value(in, "m"), s.n = shape_value(in, "n"), s.k = shape_value(in, "k");
  s.batch = shape_value(in, "batch", 1), s.trans_b = true, s.precision = in.precision;
  return s;
}

// Row-major [rows, cols] → [cols, rows].
std::vector<double> transposed(const std::vector<double>& v, std::int64_t rows, std::int64_t cols) {
  std::vector<double> t(v.size());
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) t[sz(j * rows + i)] = v[sz(i * cols + j)];
  return t;
}

const std::uint8_t* bytes_on_device(DeviceProblem& d, const std::vector<std::uint8_t>& host) {
  DeviceTensor& t = d.adopt(alloc_tensor(DType::I8, host.size()));
  RAFTER_CUDA_CHECK(cudaMemcpy(t.data(), host.data(), host.size(), cudaMemcpyHostToDevice));
  return t.as<std::uint8_t>();
}

struct NativeOperands {
  const std::uint8_t *a_codes = nullptr, *a_scales = nullptr, *b_codes = nullptr, *b_scales = nullptr;
  float alpha = 1.0f;
};

// Check data: the problem's A [m,k] and B [k,n] quantized as the pass stores them (fp4_host, as
// cuda.fp4_emulated does; weights in 16×16 blocks), the problem's values replaced by their
// dequantized ones, the scales tiled for cuBLASLt at bind time (untimed, as a quantizer writing
// that layout directly would leave them). Timing data: random codes, and random scale bytes
// straight into the tiled tensors (the layout does not matter to random data).
NativeOperands native_operands(const OpInstance& in, DeviceProblem& d) {
  const auto m = shape_value(in, "m"), n = shape_value(in, "n"), k = shape_value(in, "k");
  const bool nv = in.precision == "nvfp4";
  const std::int64_t blocks = k / block_of(in.precision);
  const detail::BlockScaleLayout la{m, blocks}, lb{n, blocks};
  NativeOperands o;
  if (Problem* p = d.problem()) {
    const detail::QuantSpec sa{in.precision, m, k, false, false};
    const detail::QuantSpec sb{in.precision, n, k, nv && in.phase != "bwd_weight" && n % 16 == 0, false};
    auto& a = p->inputs[0].data;
    const std::vector<double> bt = transposed(p->inputs[1].data, k, n);
    const Fp4Host ha = encode_fp4(sa, a), hb = encode_fp4(sb, bt);
    a = detail::quantize_dequantize(sa, a);
    p->inputs[1].data = transposed(detail::quantize_dequantize(sb, bt), n, k);
    o.a_codes = bytes_on_device(d, ha.codes), o.b_codes = bytes_on_device(d, hb.codes);
    o.a_scales = bytes_on_device(d, detail::to_block_scale_layout(ha.scales, m, blocks));
    o.b_scales = bytes_on_device(d, detail::to_block_scale_layout(hb.scales, n, blocks));
    o.alpha = ha.tensor_scale * hb.tensor_scale;
    return o;
  }
  const double lo = nv ? 0x30 : 120, hi = nv ? 0x48 : 128;  // E4M3 0.5 to 3.75, E8M0 2^-7 to 1
  auto random_bytes = [&](std::size_t count, double from, double to, std::uint64_t seed) {
    DeviceTensor& t = d.adopt(alloc_tensor(DType::I8, count));
    fill_random(t, from, to, seed);
    return t.as<std::uint8_t>();
  };
  o.a_codes = random_bytes(sz(m * k / 2), -128, 128, 11), o.a_scales = random_bytes(la.bytes(), lo, hi, 12);
  o.b_codes = random_bytes(sz(n * k / 2), -128, 128, 13), o.b_scales = random_bytes(lb.bytes(), lo, hi, 14);
  return o;
}

StreamFn bind_native(const OpInstance& in, DeviceProblem& d, bool time_all, nlohmann::json* algorithm) {
  const GemmSpec spec = native_spec(in);
  const NativeOperands o = native_operands(in, d);
  auto* c = d.output(DType::BF16, sz(spec.m * spec.n), 0).as_bf16();
  auto gemm = std::make_shared<LtGemm>(spec);
  gemm->bind_block_scaled(o.a_codes, o.b_codes, c, o.a_scales, o.b_scales);
  gemm->set_alpha(o.alpha);
  const GemmAlgoRecord algo = gemm->choose(time_all);
  if (algorithm) *algorithm = to_json(algo);
  return [gemm](cudaStream_t s) { gemm->launch(s); };
}

class Fp4NativeGemmBackend : public CudaBackend {
 public:
  std::string name() const override { return "cuda.fp4_native"; }
  int priority() const override { return 10; }  // ahead of cuda.fp4_emulated where it supports the instance
  // Batches of one (the training linears): the scale pointers are per matrix.
  bool supports(const OpInstance& inst) const override {
    if (inst.op != "gemm" || (inst.precision != "nvfp4" && inst.precision != "mxfp4")) return false;
    const GemmSpec s = native_spec(inst);
    return s.batch == 1 && gemm_shape_problem(s).empty() && device_major() >= 10 &&
           cublaslt_offers(inst.precision);
  }
  void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) override {
    record.backend = name();
    recording_failures(record, [&] { run(inst, ctx, record); });
  }

 private:
  static void run(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) {
    nlohmann::json algorithm;
    const bool time_all = time_all_candidates(ctx.algo);
    BindFn bind = [&](const OpInstance& in, DeviceProblem& d) {
      const bool full = !d.checking();
      return bind_native(in, d, full && time_all, full ? &algorithm : nullptr);
    };
    check_and_time(inst, ctx, bind, record);
    const bool nv = inst.precision == "nvfp4";
    record.details["path"] = fmt::format(
        "native FP4 tensor cores: cuBLASLt block-scaled GEMM, E2M1 × {} block scales (scale mode {}), FP32 "
        "accumulation, BF16 output, the FP32 tensor scales as alpha",
        nv ? "E4M3 1×16" : "E8M0 1×32", nv ? "VEC16_UE4M3" : "VEC32_UE8M0");
    record.details["layout"] = fmt::format(
        "K-contiguous FP4 copies: A' [m,k], B' [n,k] (TN){}; block scales in cuBLASLt's tiled 128×4 layout, "
        "converted at bind time (untimed)",
        inst.phase == "bwd_weight" || !nv ? "" : "; the weight operand B in 16×16 blocks");
    if (!algorithm.is_null()) record.details["algorithm"] = algorithm;
  }
};

RAFTER_REGISTER_BACKEND(Fp4NativeGemmBackend);

}  // namespace
}  // namespace rafter::workloads::cuda
