// "cuda.native": our memory-bound kernels for the catalogue's non-GEMM operators, BF16 storage.
// Each bind function allocates the instance's tensors through a DeviceProblem (check data or random)
// in the catalogue problem's input/output order and returns the launch.
#include <cmath>
#include <map>

#include "device_problem.hpp"
#include "kernels.hpp"
#include "rafter/workloads/adamw.hpp"

namespace rafter::workloads::cuda {
namespace {

using Bind = StreamFn (*)(const OpInstance&, DeviceProblem&);
std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }
std::int64_t dim(const OpInstance& i, const char* k, std::int64_t fallback = 0) {
  return shape_value(i, k, fallback);
}

StreamFn bind_rmsnorm(const OpInstance& in, DeviceProblem& d) {
  const auto t = dim(in, "tokens"), h = dim(in, "hidden");
  auto* x = d.input(0, DType::BF16, sz(t * h)).as_bf16();
  auto* w = d.input(1, DType::BF16, sz(h), 0.5, 1.5).as_bf16();
  if (in.phase == "bwd") {
    auto* dy = d.input(2, DType::BF16, sz(t * h)).as_bf16();
    auto* dx = d.output(DType::BF16, sz(t * h), 0).as_bf16();
    auto* dw = d.output(DType::F32, sz(h), 1).as<float>();
    auto* part = d.scratch(DType::F32, sz(rmsnorm_bwd_partials(t, h))).as<float>();
    return [=](cudaStream_t s) { rmsnorm_bwd(x, w, dy, dx, dw, part, t, h, 1e-5f, s); };
  }
  auto* y = d.output(DType::BF16, sz(t * h), 0).as_bf16();
  return [=](cudaStream_t s) { rmsnorm_fwd(x, w, y, nullptr, t, h, 1e-5f, s); };
}

StreamFn bind_swiglu(const OpInstance& in, DeviceProblem& d) {
  const auto t = dim(in, "tokens"), f = dim(in, "ffn");
  auto* gu = d.input(0, DType::BF16, sz(t * 2 * f), -4, 4).as_bf16();
  if (in.phase == "bwd") {
    auto* dy = d.input(1, DType::BF16, sz(t * f)).as_bf16();
    auto* dgu = d.output(DType::BF16, sz(t * 2 * f), 0).as_bf16();
    return [=](cudaStream_t s) { swiglu_bwd(gu, dy, dgu, t, f, s); };
  }
  auto* y = d.output(DType::BF16, sz(t * f), 0).as_bf16();
  return [=](cudaStream_t s) { swiglu_fwd(gu, y, t, f, s); };
}

StreamFn bind_softmax(const OpInstance& in, DeviceProblem& d) {
  const auto r = dim(in, "rows"), n = dim(in, "cols");
  auto* x = d.input(0, DType::BF16, sz(r * n), -6, 6).as_bf16();
  auto* y = d.output(DType::BF16, sz(r * n), 0).as_bf16();
  return [=](cudaStream_t s) { softmax_fwd(x, y, r, n, 1, 1.0f, false, s); };
}

StreamFn bind_attention_softmax(const OpInstance& in, DeviceProblem& d) {
  const auto b = dim(in, "batch"), h = dim(in, "heads"), s_len = dim(in, "seq"), kv = dim(in, "kv_seq"),
             hd = dim(in, "head_dim");
  const bool causal = dim(in, "causal", 1) != 0;
  const auto rows = b * h * s_len;
  auto* x = d.input(0, DType::BF16, sz(rows * kv), -8, 8).as_bf16();
  auto* y = d.output(DType::BF16, sz(rows * kv), 0).as_bf16();
  const float scale = 1.0f / std::sqrt(float(hd));
  return [=](cudaStream_t s) { softmax_fwd(x, y, rows, kv, s_len, scale, causal, s); };
}

StreamFn bind_rope(const OpInstance& in, DeviceProblem& d) {
  const auto t = dim(in, "tokens"), h = dim(in, "heads"), hd = dim(in, "head_dim"), seq = dim(in, "seq");
  auto* x = d.input(0, DType::BF16, sz(t * h * hd)).as_bf16();
  auto* y = d.output(DType::BF16, sz(t * h * hd), 0).as_bf16();
  const bool inverse = in.phase == "bwd";
  return [=](cudaStream_t s) { rope_fwd(x, nullptr, y, nullptr, t, seq, h, 0, hd, 10000.f, inverse, s); };
}

StreamFn bind_residual(const OpInstance& in, DeviceProblem& d) {
  const auto n = dim(in, "tokens") * dim(in, "hidden");
  auto* a = d.input(0, DType::BF16, sz(n)).as_bf16();
  auto* b = d.input(1, DType::BF16, sz(n)).as_bf16();
  auto* y = d.output(DType::BF16, sz(n), 0).as_bf16();
  return [=](cudaStream_t s) { residual_add(a, b, y, n, s); };
}

StreamFn bind_embedding(const OpInstance& in, DeviceProblem& d) {
  const auto t = dim(in, "tokens"), h = dim(in, "hidden"), v = dim(in, "vocab");
  auto* ids = d.input(0, DType::I32, sz(t), 0, double(v)).as<std::int32_t>();
  if (in.phase == "bwd") {
    auto* dy = d.input(1, DType::BF16, sz(t * h)).as_bf16();
    auto* dw = d.in_out(2, DType::F32, sz(v * h), 0).as<float>();  // accumulated in place
    void* ws = d.scratch(DType::I8, embedding_bwd_workspace_bytes(t)).data();
    return [=](cudaStream_t s) { embedding_bwd_sorted(ids, dy, dw, t, h, v, ws, s); };
  }
  auto* table = d.input(1, DType::BF16, sz(v * h)).as_bf16();
  auto* y = d.output(DType::BF16, sz(t * h), 0).as_bf16();
  return [=](cudaStream_t s) { embedding_fwd(ids, table, y, t, h, s); };
}

StreamFn bind_cross_entropy(const OpInstance& in, DeviceProblem& d) {
  const auto t = dim(in, "tokens"), v = dim(in, "vocab");
  auto* z = d.input(0, DType::BF16, sz(t * v), -5, 5).as_bf16();
  auto* labels = d.input(1, DType::I32, sz(t), 0, double(v)).as<std::int32_t>();
  if (in.phase == "bwd") {
    auto* dz = d.output(DType::BF16, sz(t * v), 0).as_bf16();
    return [=](cudaStream_t s) { cross_entropy_bwd_online(z, labels, dz, t, v, 1.0f, s); };
  }
  auto* loss = d.output(DType::F32, sz(t), 0).as<float>();
  return [=](cudaStream_t s) { cross_entropy_fwd(z, labels, loss, nullptr, t, v, s); };
}

StreamFn bind_adamw(const OpInstance& in, DeviceProblem& d) {
  const auto n = dim(in, "params");
  auto* p = d.in_out(0, DType::F32, sz(n), 0).as<float>();
  auto* m = d.in_out(1, DType::F32, sz(n), 1, -1e-2, 1e-2).as<float>();
  auto* v = d.in_out(2, DType::F32, sz(n), 2, 1e-6, 1e-4).as<float>();
  auto* g = d.input(3, DType::BF16, sz(n), -1e-2, 1e-2).as_bf16();
  auto* copy = d.output(DType::BF16, sz(n), 3).as_bf16();
  const AdamwHyper hp;
  AdamWParams ap{float(hp.lr), float(hp.beta1), float(hp.beta2), float(hp.eps), float(hp.weight_decay), hp.step};
  return [=](cudaStream_t s) { adamw_step(p, g, m, v, copy, n, ap, s); };
}

const std::map<std::string, Bind, std::less<>>& binds() {
  static const std::map<std::string, Bind, std::less<>> table{
      {"rmsnorm", bind_rmsnorm},     {"swiglu", bind_swiglu},
      {"softmax", bind_softmax},     {"attention_softmax", bind_attention_softmax},
      {"rope", bind_rope},           {"residual_add", bind_residual},
      {"embedding", bind_embedding}, {"cross_entropy", bind_cross_entropy},
      {"adamw", bind_adamw}};
  return table;
}

class CudaNativeBackend : public CudaBackend {
 public:
  std::string name() const override { return "cuda.native"; }
  bool supports(const OpInstance& inst) const override {
    return inst.precision == "bf16" && binds().count(inst.op) > 0 && shape_limit(inst).empty();
  }
  std::string shape_limit(const OpInstance& i) const override {
    if (i.precision != "bf16") return {};
    if (i.op == "rmsnorm") return row_kernel_limit(shape_value(i, "hidden", 0));
    if (i.op == "softmax") return row_kernel_limit(shape_value(i, "cols", 0));
    if (i.op == "attention_softmax") return row_kernel_limit(shape_value(i, "kv_seq", 0));
    if (i.op == "rope") return rope_limit(shape_value(i, "head_dim", 0));
    if (i.op == "embedding") return embedding_limit(shape_value(i, "hidden", 0));
    return {};
  }
  void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) override {
    record.backend = name();
    recording_failures(record, [&] {
      check_and_time(inst, ctx, binds().find(inst.op)->second, record);
      record.details["kernels"] = "rafter CUDA (BF16 storage, FP32 math, 16-byte accesses)";
    });
  }
};

RAFTER_REGISTER_BACKEND(CudaNativeBackend);

}  // namespace
}  // namespace rafter::workloads::cuda
