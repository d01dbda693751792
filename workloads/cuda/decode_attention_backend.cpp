// "cuda.splitkv": attention_decode (one query token per sequence against a BF16 KV cache) on our
// split-KV kernel (kernels_attention_decode.cu): the cache cut into chunks for enough blocks at
// small batch, GQA groups served once per KV head, the chunks merged in log-sum-exp form. The shape's
// optional `splits` fixes the chunk count (0 or absent: the kernel's own choice). Decode runs here rather
// than on cuDNN's SDPA, whose flash kernels tile blocks of query rows (a decode step has one per head);
// bench/attention_vs_pytorch.sh times PyTorch's cuDNN SDPA on the same decode shapes beside this kernel.
#include "device_problem.hpp"
#include "kernels.hpp"

namespace rafter::workloads::cuda {
namespace {

StreamFn bind_decode(const OpInstance& in, DeviceProblem& d, int sms, nlohmann::json* details) {
  const auto b = shape_value(in, "batch"), kv = shape_value(in, "kv_len"), h = shape_value(in, "heads"),
             hkv = shape_value(in, "kv_heads"), hd = shape_value(in, "head_dim");
  const auto sz = [](std::int64_t v) { return std::size_t(v); };
  const DecodePlan plan = decode_attention_plan(b, kv, h, hkv, hd, sms, shape_value(in, "splits", 0));
  const auto* q = d.input(0, DType::BF16, sz(b * h * hd)).as_bf16();
  const auto* k = d.input(1, DType::BF16, sz(b * kv * hkv * hd)).as_bf16();
  const auto* v = d.input(2, DType::BF16, sz(b * kv * hkv * hd)).as_bf16();
  auto* o = d.output(DType::BF16, sz(b * h * hd), 0).as_bf16();
  auto* part = d.scratch(DType::F32, sz(decode_attention_partial_floats(plan, b, h, hd))).as<float>();
  if (details)
    *details = {
        {"splits", plan.splits},
        {"chunk_tokens", plan.chunk},
        {"heads_per_block", plan.tensor_cores ? h / hkv : std::int64_t(plan.heads_per_block)},
        {"tensor_cores", plan.tensor_cores},
        {"kernel", plan.tensor_cores
                       ? "rafter split-KV decode, GQA group of 8 on mma.sync: BF16 K/V tiles of 16 tokens "
                         "through a cp.async ring, S = Q·Kᵀ and P·V on tensor cores, FP32 online softmax, "
                         "partials merged by a second kernel"
                       : "rafter split-KV decode: BF16 K/V streamed with 16-byte loads, FP32 online "
                         "softmax, partials merged by a second kernel"}};
  return [=](cudaStream_t s) { decode_attention(q, k, v, o, part, plan, b, kv, h, hkv, hd, s); };
}

class SplitKvDecodeBackend : public CudaBackend {
 public:
  std::string name() const override { return "cuda.splitkv"; }
  int priority() const override { return 20; }
  bool supports(const OpInstance& i) const override {
    return i.op == "attention_decode" && i.precision == "bf16" &&
           decode_attention_supports(shape_value(i, "head_dim", 0));
  }
  void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) override {
    record.backend = name();
    recording_failures(record, [&] {
      nlohmann::json details;
      check_and_time(
          inst, ctx,
          [&](const OpInstance& in, DeviceProblem& d) {
            const int sms = device_facts(current_device_index(ctx.device)).value("sms", 1);
            return bind_decode(in, d, sms, d.checking() ? nullptr : &details);
          },
          record);
      record.details["decode"] = details;
    });
  }
};

RAFTER_REGISTER_BACKEND(SplitKvDecodeBackend);

}  // namespace
}  // namespace rafter::workloads::cuda
