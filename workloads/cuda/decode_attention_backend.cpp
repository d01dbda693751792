// "cuda.decode": attention_decode (one query token per sequence against a BF16 KV cache) on the
// faster of two kernels for the shape, both checked against the reference:
// - cuDNN's SDPA forward with a query length of 1 (cudnn_attention.cpp; where cuDNN was found,
//   head dims 64 and 128): what PyTorch's SDPA runs for decode;
// - our split-KV kernel (kernels_attention_decode.cu): the cache cut into chunks for enough blocks
//   at small batch, GQA groups served once per KV head (groups of 8 on tensor cores), the chunks
//   merged in log-sum-exp form.
// With ExecContext.algo "best" (the default) the two run on the same full-size tensors in four
// timings ordered ABBA under the record's own timing conditions, and the one with the lower sum
// runs the record; "heuristic" takes cuDNN where it fits. The shape's optional `splits` fixes our
// kernel's chunk count and so asks for it alone. A candidate that fails its check is not timed (the
// record is Invalid only when none passes). details.decode: the kernel chosen, how, each
// candidate's check, contest timings and its own details (our kernel's plan, cuDNN's engine).
#include <fmt/format.h>

#include "cublaslt_gemm.hpp"
#include "cudnn_attention.hpp"
#include "device_problem.hpp"
#include "kernels.hpp"

namespace rafter::workloads::cuda {
namespace {

enum class Kernel { SplitKv, Cudnn };
const char* kernel_name(Kernel k) { return k == Kernel::Cudnn ? "cudnn" : "splitkv"; }

struct Dims {
  std::int64_t b, kv, h, hkv, hd;
  explicit Dims(const OpInstance& in)
      : b(shape_value(in, "batch")),
        kv(shape_value(in, "kv_len")),
        h(shape_value(in, "heads")),
        hkv(shape_value(in, "kv_heads")),
        hd(shape_value(in, "head_dim")) {}
};

DecodeTensors decode_tensors(const Dims& a, DeviceProblem& d) {
  const auto sz = [](std::int64_t v) { return std::size_t(v); };
  return {d.input(0, DType::BF16, sz(a.b * a.h * a.hd)).as_bf16(),
          d.input(1, DType::BF16, sz(a.b * a.kv * a.hkv * a.hd)).as_bf16(),
          d.input(2, DType::BF16, sz(a.b * a.kv * a.hkv * a.hd)).as_bf16(),
          d.output(DType::BF16, sz(a.b * a.h * a.hd), 0).as_bf16()};
}

StreamFn bind_splitkv(const OpInstance& in, const Dims& a, const DecodeTensors& t, DeviceProblem& d, int sms,
                      nlohmann::json* details) {
  const DecodePlan plan =
      decode_attention_plan(a.b, a.kv, a.h, a.hkv, a.hd, sms, shape_value(in, "splits", 0));
  auto* part =
      d.scratch(DType::F32, std::size_t(decode_attention_partial_floats(plan, a.b, a.h, a.hd))).as<float>();
  if (details)
    *details = {
        {"splits", plan.splits},
        {"chunk_tokens", plan.chunk},
        {"heads_per_block", plan.tensor_cores ? a.h / a.hkv : std::int64_t(plan.heads_per_block)},
        {"tensor_cores", plan.tensor_cores},
        {"kernel", plan.tensor_cores
                       ? "rafter split-KV decode, GQA group of 8 on mma.sync: BF16 K/V tiles of 16 tokens "
                         "through a cp.async ring, S = Q·Kᵀ and P·V on tensor cores, FP32 online softmax, "
                         "partials merged by a second kernel"
                       : "rafter split-KV decode: BF16 K/V streamed with 16-byte loads, FP32 online "
                         "softmax, partials merged by a second kernel"}};
  return [=](cudaStream_t s) {
    decode_attention(t.q, t.k, t.v, t.o, part, plan, a.b, a.kv, a.h, a.hkv, a.hd, s);
  };
}

StreamFn bind_kernel(Kernel k, const OpInstance& in, DeviceProblem& d, const DecodeTensors& t, int sms,
                     nlohmann::json* details) {
  const Dims a(in);
#if RAFTER_HAVE_CUDNN
  if (k == Kernel::Cudnn) return bind_cudnn_decode(t, a.b, a.kv, a.h, a.hkv, a.hd, d, details);
#endif
  return bind_splitkv(in, a, t, d, sms, details);
}

std::vector<Kernel> candidates(const OpInstance& in) {
  std::vector<Kernel> out;
#if RAFTER_HAVE_CUDNN
  if (!in.shape.count("splits") && cudnn_decode_supports(shape_value(in, "head_dim", 0)))
    out.push_back(Kernel::Cudnn);
#endif
  out.push_back(Kernel::SplitKv);
  return out;
}

// Runs f, a bind of kernel k. cuDNN refusing a shape (InputError from its graph build) drops it,
// its reason under cand[k]["unavailable"] (false); our kernel's failure fails the record.
template <class F>
bool bound(Kernel k, nlohmann::json& cand, F&& f) {
  try {
    f();
    return true;
  } catch (const InputError& e) {
    if (k == Kernel::SplitKv) throw;
    cand[kernel_name(k)]["unavailable"] = e.what();
    return false;
  }
}

class DecodeBackend : public CudaBackend {
 public:
  std::string name() const override { return "cuda.decode"; }
  int priority() const override { return 20; }  // ahead of the unfused path (cuda.unfused)
  bool supports(const OpInstance& i) const override {
    return i.op == "attention_decode" && i.precision == "bf16" &&
           decode_attention_supports(shape_value(i, "head_dim", 0));
  }
  void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) override {
    record.backend = name();
    recording_failures(record, [&] { run(inst, ctx, record); });
  }

 private:
  static void run(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) {
    require_gpu(ctx.device);
    const int sms = device_facts(current_device_index(ctx.device)).value("sms", 1);
    nlohmann::json cand = nlohmann::json::object();
    std::map<Kernel, CheckResult> checks;
    std::vector<Kernel> viable;
    // Each candidate checked on the catalogue's check problem.
    for (Kernel k : candidates(inst)) {
      std::optional<CheckResult> check;
      const bool ok = bound(k, cand, [&] {
        check = check_candidate(
            inst, ctx,
            [&](const OpInstance& in, DeviceProblem& d) {
              return bind_kernel(k, in, d, decode_tensors(Dims(in), d), sms, nullptr);
            },
            cand, kernel_name(k));
      });
      if (!ok) continue;
      if (check) checks[k] = *check;
      if (!check || check->passed) viable.push_back(k);  // a kernel that fails its check is not timed
    }
    if (viable.empty()) viable.push_back(Kernel::SplitKv);  // timed all the same; the record is Invalid

    DeviceProblem full(nullptr, ctx.seed + 1);
    const DecodeTensors t = decode_tensors(Dims(inst), full);
    std::map<Kernel, StreamFn> fns;
    for (Kernel k : viable)
      bound(k, cand, [&] { fns[k] = bind_kernel(k, inst, full, t, sms, &cand[kernel_name(k)]["details"]); });
    RAFTER_CUDA_CHECK(cudaDeviceSynchronize());

    Kernel chosen = fns.count(Kernel::Cudnn) ? Kernel::Cudnn : Kernel::SplitKv;
    std::string how = fns.size() == 1 ? "the only candidate" : "heuristic: cuDNN where it fits";
    if (fns.size() > 1 && time_all_candidates(ctx.algo)) {
      // ABBA (time_contest); the lower sum of medians runs the record, which is timed afresh.
      const Kernel order[] = {Kernel::Cudnn, Kernel::SplitKv};
      std::vector<std::pair<std::string, StreamFn>> candidates;
      for (Kernel k : order) candidates.emplace_back(kernel_name(k), fns.at(k));
      chosen = order[time_contest(candidates, 0, ctx, cand)];
      how = "fastest of four timings ordered ABBA (sum of medians)";
    }

    record.status = RecordStatus::Ok;
    if (ctx.check) {
      record.check = checks.at(chosen);
      mark_failed_check(record, kernel_name(chosen));
    }
    time_into_record(fns.at(chosen), ctx, record);
    record.details["decode"] = {{"kernel", kernel_name(chosen)}, {"choice", how}, {"candidates", cand}};
  }
};

RAFTER_REGISTER_BACKEND(DecodeBackend);

}  // namespace
}  // namespace rafter::workloads::cuda
