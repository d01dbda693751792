// Unfused attention on the GPU: QKᵀ and PV as strided-batched cuBLASLt GEMMs reading the heads in
// place (Q/O [b, s, h, d], K/V [b, kv, hkv, d], S/P [b, h, s, kv]), with our fused scale + causal
// mask + softmax kernel between them. attention_qk / attention_pv run alone ("cuda.cublaslt");
// attention_prefill / attention_decode run the three in sequence ("cuda.unfused"), timed as a
// whole and piece by piece (details.pieces).
//
// GQA: the g = h / hkv query heads that share a K/V head are not evenly strided in one batch, so a
// prefill issues one batched call (over the hkv K/V heads) per group member r and sequence b; with
// one query token (decode) the group's g rows are contiguous and one call per sequence suffices.
#include <fmt/format.h>

#include <cmath>

#include "cublaslt_gemm.hpp"
#include "device_problem.hpp"
#include "kernels.hpp"

namespace rafter::workloads::cuda {
namespace {

struct Dims {
  std::int64_t b, s, kv, h, hkv, d;
  bool causal;
  std::int64_t g() const { return h / hkv; }
};

Dims dims_of(const OpInstance& in) {
  Dims a{};
  a.b = shape_value(in, "batch", 1);
  a.h = shape_value(in, "heads");
  a.hkv = shape_value(in, "kv_heads", a.h);
  a.d = shape_value(in, "head_dim");
  if (in.op == "attention_decode") {
    a.s = 1, a.kv = shape_value(in, "kv_len"), a.causal = false;
  } else {
    a.s = shape_value(in, "seq");
    a.kv = shape_value(in, "kv_seq", a.s);
    a.causal = shape_value(in, "causal", in.op == "attention_pv" || in.op == "attention_qk" ? 0 : 1) != 0;
  }
  if (a.hkv <= 0 || a.h % a.hkv) throw InputError("heads must be a multiple of kv_heads");
  return a;
}

// One piece's GEMM and the base-pointer offsets (elements) of each call.
struct PieceGemm {
  std::unique_ptr<LtGemm> gemm;
  struct Call { std::int64_t a, b, c; };
  std::vector<Call> calls;
  GemmAlgoRecord algo;
  std::size_t elem = 2;
  void launch(cudaStream_t s, const void* A, const void* B, void* C) const {
    auto at = [&](const void* p, std::int64_t off) { return static_cast<const char*>(p) + off * std::int64_t(elem); };
    for (const auto& c : calls) gemm->launch_with(s, at(A, c.a), at(B, c.b), const_cast<char*>(at(C, c.c)));
  }
};

// S = Q·Kᵀ per head.
PieceGemm qk_gemm(const Dims& a, const std::string& precision) {
  GemmSpec s;
  s.precision = precision, s.trans_b = true, s.k = a.d, s.n = a.kv, s.batch = a.hkv;
  s.ldb = a.hkv * a.d, s.ldc = a.kv, s.stride_b = a.d;
  PieceGemm p;
  if (a.s == 1) {  // the group's g query rows are contiguous
    s.m = a.g(), s.lda = a.d, s.stride_a = a.g() * a.d, s.stride_c = a.g() * a.kv;
    for (std::int64_t b = 0; b < a.b; ++b) p.calls.push_back({b * a.h * a.d, b * a.kv * a.hkv * a.d, b * a.h * a.kv});
  } else {
    s.m = a.s, s.lda = a.h * a.d, s.stride_a = a.g() * a.d, s.stride_c = a.g() * a.s * a.kv;
    for (std::int64_t b = 0; b < a.b; ++b)
      for (std::int64_t r = 0; r < a.g(); ++r)
        p.calls.push_back({b * a.s * a.h * a.d + r * a.d, b * a.kv * a.hkv * a.d, (b * a.h + r) * a.s * a.kv});
  }
  p.gemm = std::make_unique<LtGemm>(s);
  p.elem = dtype_bytes(dtype_from_name(p.gemm->types().a));
  return p;
}

// O = P·V per head.
PieceGemm pv_gemm(const Dims& a, const std::string& precision) {
  GemmSpec s;
  s.precision = precision, s.k = a.kv, s.n = a.d, s.batch = a.hkv;
  s.lda = a.kv, s.ldb = a.hkv * a.d, s.stride_b = a.d;
  PieceGemm p;
  if (a.s == 1) {
    s.m = a.g(), s.ldc = a.d, s.stride_a = a.g() * a.kv, s.stride_c = a.g() * a.d;
    for (std::int64_t b = 0; b < a.b; ++b) p.calls.push_back({b * a.h * a.kv, b * a.kv * a.hkv * a.d, b * a.h * a.d});
  } else {
    s.m = a.s, s.ldc = a.h * a.d, s.stride_a = a.g() * a.s * a.kv, s.stride_c = a.g() * a.d;
    for (std::int64_t b = 0; b < a.b; ++b)
      for (std::int64_t r = 0; r < a.g(); ++r)
        p.calls.push_back({(b * a.h + r) * a.s * a.kv, b * a.kv * a.hkv * a.d, b * a.s * a.h * a.d + r * a.d});
  }
  p.gemm = std::make_unique<LtGemm>(s);
  p.elem = dtype_bytes(dtype_from_name(p.gemm->types().a));
  return p;
}

DType storage(const std::string& precision) {
  return precision == "fp32" ? DType::F32 : precision == "fp16" ? DType::F16 : DType::BF16;
}

// Chooses the piece's algorithm on its first call's operands (all calls share one layout).
void choose(PieceGemm& p, const void* A, const void* B, void* C, bool time_all) {
  auto at = [&](const void* q, std::int64_t off) { return static_cast<const char*>(q) + off * std::int64_t(p.elem); };
  p.gemm->bind(at(A, p.calls[0].a), at(B, p.calls[0].b), const_cast<char*>(at(C, p.calls[0].c)));
  p.algo = p.gemm->choose(time_all);
}

StreamFn bind_piece(const OpInstance& in, DeviceProblem& d, bool time_all, nlohmann::json* algo) {
  const Dims a = dims_of(in);
  const DType t = storage(in.precision);
  const auto sz = [](std::int64_t v) { return std::size_t(v); };
  auto p = std::make_shared<PieceGemm>(in.op == "attention_qk" ? qk_gemm(a, in.precision) : pv_gemm(a, in.precision));
  DeviceTensor *A, *B, *C;
  if (in.op == "attention_qk") {
    A = &d.input(0, t, sz(a.b * a.s * a.h * a.d));
    B = &d.input(1, t, sz(a.b * a.kv * a.hkv * a.d));
    C = &d.output(t, sz(a.b * a.h * a.s * a.kv), 0);
  } else {
    A = &d.input(0, t, sz(a.b * a.h * a.s * a.kv), 0, 1);
    B = &d.input(1, t, sz(a.b * a.kv * a.hkv * a.d));
    C = &d.output(t, sz(a.b * a.s * a.h * a.d), 0);
  }
  choose(*p, A->data(), B->data(), C->data(), time_all);
  if (algo) *algo = to_json(p->algo);
  const void *pa = A->data(), *pb = B->data();
  void* pc = C->data();
  return [p, pa, pb, pc](cudaStream_t s) { p->launch(s, pa, pb, pc); };
}

struct Composite {
  StreamFn qk, softmax, pv;
  nlohmann::json algos;
};

Composite bind_composite(const OpInstance& in, DeviceProblem& d, bool time_all) {
  const Dims a = dims_of(in);
  const DType t = storage(in.precision);
  const auto sz = [](std::int64_t v) { return std::size_t(v); };
  auto& Q = d.input(0, t, sz(a.b * a.s * a.h * a.d));
  auto& K = d.input(1, t, sz(a.b * a.kv * a.hkv * a.d));
  auto& V = d.input(2, t, sz(a.b * a.kv * a.hkv * a.d));
  auto& S = d.scratch(t, sz(a.b * a.h * a.s * a.kv));
  auto& P = d.scratch(t, sz(a.b * a.h * a.s * a.kv));
  auto& O = d.output(t, sz(a.b * a.s * a.h * a.d), 0);
  auto qk = std::make_shared<PieceGemm>(qk_gemm(a, in.precision));
  auto pv = std::make_shared<PieceGemm>(pv_gemm(a, in.precision));
  choose(*qk, Q.data(), K.data(), S.data(), time_all);
  choose(*pv, P.data(), V.data(), O.data(), time_all);
  Composite c;
  c.algos = {{"qk", to_json(qk->algo)}, {"pv", to_json(pv->algo)}, {"qk_calls", qk->calls.size()},
             {"pv_calls", pv->calls.size()}};
  const void *q = Q.data(), *k = K.data(), *v = V.data();
  void *s = S.data(), *p = P.data(), *o = O.data();
  const auto* sb = static_cast<const bf16*>(s);
  auto* pb = static_cast<bf16*>(p);
  const std::int64_t rows = a.b * a.h * a.s, kv = a.kv, q_len = a.s;
  const float scale = 1.0f / std::sqrt(float(a.d));
  const bool causal = a.causal;
  c.qk = [qk, q, k, s](cudaStream_t st) { qk->launch(st, q, k, s); };
  c.softmax = [=](cudaStream_t st) { softmax_fwd(sb, pb, rows, kv, q_len, scale, causal, st); };
  c.pv = [pv, p, v, o](cudaStream_t st) { pv->launch(st, p, v, o); };
  return c;
}

class AttentionGemmBackend : public CudaBackend {
 public:
  std::string name() const override { return "cuda.cublaslt"; }
  int priority() const override { return 10; }
  bool supports(const OpInstance& i) const override {
    return (i.op == "attention_qk" || i.op == "attention_pv") &&
           (i.precision == "bf16" || i.precision == "fp16" || i.precision == "fp32");
  }
  void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) override {
    record.backend = name();
    nlohmann::json algo;
    recording_failures(record, [&] {
      check_and_time(inst, ctx, [&](const OpInstance& in, DeviceProblem& d) {
        return bind_piece(in, d, d.checking() ? false : time_all_candidates(ctx.algo), d.checking() ? nullptr : &algo);
      }, record);
      record.details["algorithm"] = algo;
    });
  }
};

class UnfusedAttentionBackend : public CudaBackend {
 public:
  std::string name() const override { return "cuda.unfused"; }
  bool supports(const OpInstance& i) const override {
    return (i.op == "attention_prefill" || i.op == "attention_decode") && i.precision == "bf16" &&
           shape_limit(i).empty();
  }
  std::string shape_limit(const OpInstance& i) const override {  // each score row in one softmax
    if (i.precision != "bf16") return {};
    if (i.op == "attention_prefill") return row_kernel_limit(shape_value(i, "seq", 0));
    if (i.op == "attention_decode") return row_kernel_limit(shape_value(i, "kv_len", 0));
    return {};
  }
  void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) override {
    record.backend = name();
    recording_failures(record, [&] {
      run(inst, ctx, record);
    });
  }

 private:
  static void run(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) {
    std::shared_ptr<Composite> full;
    nlohmann::json pieces;
    // Each piece timed alone on the same (still allocated) tensors: the post-QK work stands alone.
    ExecContext piece_ctx = ctx;
    piece_ctx.counters = false;  // pieces are timed only: the counted pass covers the whole operator
    auto time_pieces = [&] {
      for (auto [name, fn] : {std::pair{"qk", full->qk}, {"softmax", full->softmax}, {"pv", full->pv}}) {
        OperatorRecord r;
        time_into_record(fn, piece_ctx, r);
        pieces[name] = {{"seconds", r.time->value}, {"min_seconds", r.time->stats.min},
                        {"samples", r.time->stats.samples}};
      }
    };
    check_and_time(inst, ctx, [&](const OpInstance& in, DeviceProblem& d) -> StreamFn {
      auto c = std::make_shared<Composite>(bind_composite(in, d, d.checking() ? false : time_all_candidates(ctx.algo)));
      if (!d.checking()) full = c;
      return [c](cudaStream_t s) { c->qk(s); c->softmax(s); c->pv(s); };
    }, record, time_pieces);
    record.details["pieces"] = pieces;
    record.details["algorithm"] = full->algos;
    record.details["unfused"] = "QKᵀ batched GEMM → rafter softmax (scale + causal mask) → PV batched GEMM; "
                                "all scores computed (no masked-block skipping in the GEMMs)";
  }
};

RAFTER_REGISTER_BACKEND(AttentionGemmBackend);
RAFTER_REGISTER_BACKEND(UnfusedAttentionBackend);

}  // namespace
}  // namespace rafter::workloads::cuda
