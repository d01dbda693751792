// "cuda.gla": gated linear attention on our kernels (kernels_gla.cu): gla_chunked's forward in the
// chunked form (scores, chunk-entry states, outputs; BF16/FP16 products on tensor cores), its
// backward (kernels_gla_bwd.cu: states recomputed, state gradients carried backward) and the
// gla_decode step (one streaming pass over the FP32 state). BF16, FP16 and FP32 storage.
// bench/gla_vs_fla.sh times both beside flash-linear-attention's Triton kernels.
#include <cmath>

#include "device_problem.hpp"
#include "gla.hpp"

namespace rafter::workloads::cuda {
namespace {

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

bool gla_precision(const std::string& p) { return p == "bf16" || p == "fp16" || p == "fp32"; }
DType dtype_of(const std::string& p) {
  return p == "bf16" ? DType::BF16 : p == "fp16" ? DType::F16 : DType::F32;
}
GlaType gla_type_of(const std::string& p) {
  return p == "bf16" ? GlaType::BF16 : p == "fp16" ? GlaType::F16 : GlaType::F32;
}

GlaShape chunked_shape(const OpInstance& in) {
  return {shape_value(in, "batch", 0),      shape_value(in, "seq", 0),        shape_value(in, "heads", 0),
          shape_value(in, "head_dim_k", 0), shape_value(in, "head_dim_v", 0), shape_value(in, "chunk", 0)};
}

// GLA's forget gates: log α with α in (0.6, 0.99), as the catalogue's problem draws them.
const double kGateLo = std::log(0.6), kGateHi = std::log(0.99);

class CudaGlaBackend : public CudaBackend {
 public:
  std::string name() const override { return "cuda.gla"; }
  bool supports(const OpInstance& i) const override { return handles(i) && shape_limit(i).empty(); }
  std::string shape_limit(const OpInstance& i) const override {
    if (!handles(i)) return {};
    if (i.op == "gla_chunked" && !gla_chunked_supports(chunked_shape(i)))
      return "the chunked kernels need head dims multiples of 16 and a chunk a multiple of 16 up to 64 that "
             "divides seq";
    if (i.op == "gla_decode" &&
        !gla_decode_supports(shape_value(i, "head_dim_k", 0), shape_value(i, "head_dim_v", 0)))
      return "the decode kernel needs head_dim_v a multiple of 4";
    return {};
  }
  void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) override {
    record.backend = name();
    recording_failures(record, [&] {
      if (inst.op == "gla_chunked") {
        check_and_time(
            inst, ctx, [](const OpInstance& in, DeviceProblem& d) { return bind_gla_chunked(in, d); },
            record);
        record.details["kernels"] =
            inst.phase == "bwd"
                ? "rafter CUDA chunked GLA backward: the forward's scores and chunk-entry states "
                  "recomputed, state gradients carried backward in FP32 registers and stored per chunk, "
                  "dq/dk/dv products on mma.sync (FP32 on CUDA cores), gate-decayed intra-chunk sums of "
                  "dq/dk on CUDA cores, dg as reverse cumulative sum of q*dq - k*dk in FP32"
                : "rafter CUDA chunked GLA: gate-decayed intra-chunk scores (sub-chunks of 16, mma.sync), "
                  "chunk-entry states carried in FP32 registers and stored per chunk, outputs Q·h + A·V "
                  "(mma.sync; FP32 on CUDA cores)";
      } else {
        check_and_time(
            inst, ctx, [](const OpInstance& in, DeviceProblem& d) { return bind_gla_decode(in, d); }, record);
        record.details["kernels"] =
            "rafter CUDA GLA decode: one launch, a block per 32 dv columns and head over all dk rows, FP32 "
            "state "
            "streamed once with 16-byte loads, the output's row-group sums met in shared memory";
      }
    });
  }

 private:
  // GLA's chunked forward and backward and its decode step, in a precision the kernels store, at any
  // shape.
  static bool handles(const OpInstance& i) {
    return gla_precision(i.precision) &&
           ((i.op == "gla_chunked" && (i.phase == "fwd" || i.phase == "bwd")) || i.op == "gla_decode");
  }
};

RAFTER_REGISTER_BACKEND(CudaGlaBackend);

}  // namespace

StreamFn bind_gla_chunked(const OpInstance& in, DeviceProblem& d) {
  const GlaShape s = chunked_shape(in);
  const DType t = dtype_of(in.precision);
  const GlaType gt = gla_type_of(in.precision);
  const auto nk = sz(s.batch * s.seq * s.heads * s.dk), nv = sz(s.batch * s.seq * s.heads * s.dv);
  const void* q = d.input(0, t, nk).data();
  const void* k = d.input(1, t, nk).data();
  const void* v = d.input(2, t, nv).data();
  const void* g = d.input(3, t, nk, kGateLo, kGateHi).data();
  if (in.phase == "bwd") {
    const void* dO = d.input(4, t, nv).data();
    void* dq = d.output(t, nk, 0).data();
    void* dk = d.output(t, nk, 1).data();
    void* dv = d.output(t, nv, 2).data();
    void* dg = d.output(t, nk, 3).data();
    void* scratch = d.scratch(DType::I8, gla_chunked_bwd_scratch_bytes(s, gt)).data();
    return
        [=](cudaStream_t stream) { gla_chunked_bwd(gt, q, k, v, g, dO, dq, dk, dv, dg, scratch, s, stream); };
  }
  void* o = d.output(t, nv, 0).data();
  void* scratch = d.scratch(DType::I8, gla_chunked_scratch_bytes(s, gt)).data();
  return [=](cudaStream_t stream) { gla_chunked_fwd(gt, q, k, v, g, o, scratch, s, stream); };
}

StreamFn bind_gla_decode(const OpInstance& in, DeviceProblem& d) {
  const auto bh = shape_value(in, "batch") * shape_value(in, "heads"), dk = shape_value(in, "head_dim_k"),
             dv = shape_value(in, "head_dim_v");
  const DType t = dtype_of(in.precision);
  const GlaType gt = gla_type_of(in.precision);
  const void* q = d.input(0, t, sz(bh * dk)).data();
  const void* k = d.input(1, t, sz(bh * dk)).data();
  const void* v = d.input(2, t, sz(bh * dv)).data();
  const void* g = d.input(3, t, sz(bh * dk), kGateLo, kGateHi).data();
  const auto* state_in = d.input(4, DType::F32, sz(bh * dk * dv)).as<float>();
  void* o = d.output(t, sz(bh * dv), 0).data();
  auto* state_out = d.output(DType::F32, sz(bh * dk * dv), 1).as<float>();
  return [=](cudaStream_t stream) { gla_decode(gt, q, k, v, g, state_in, o, state_out, bh, dk, dv, stream); };
}

}  // namespace rafter::workloads::cuda
