// "cuda.cudnn": fused prefill attention (forward, and backward from the forward's softmax
// statistics) through cuDNN's SDPA, described with the cuDNN frontend's graph API. BF16 in and
// out, FP32 softmax and accumulation; causal or not; GQA (K/V with fewer heads); head dim 64, 128.
// FP8 E4M3 forward (sdpa_fp8, Hopper and later, cuDNN 9.1+): Q, K, V and O in E4M3 with their
// per-tensor descale/scale factors as device scalars, the softmax probabilities scaled by 448 into
// E4M3 for the PV product, the amax of the probabilities and of O written back.
// Q/O [b, s, h, d] and K/V [b, s, hkv, d] are handed to cuDNN in place, as [b, h, s, d] views
// through their strides. A graph is built once per (pass, shape) and cached for the process: a
// suite asks for the same shapes again and again, and building takes far longer than running.
// Built only where cuDNN and its frontend were found (cmake/RafterCuda.cmake).
#include <cudnn.h>
#include <cudnn_frontend.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "device_problem.hpp"

namespace rafter::workloads::cuda {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

enum class Pass { Forward, ForwardWithStats, Backward, ForwardFp8 };
enum Uid : std::int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  // FP8: device scalars, in this order in one buffer (kFp8Scalars of them)
  kDescaleQ,
  kDescaleK,
  kDescaleV,
  kDescaleS,
  kScaleS,
  kScaleO,
  kAmaxS,
  kAmaxO
};
constexpr int kFp8Scalars = kAmaxO - kDescaleQ + 1;
// The FP8 forward's fixed scales: the softmax probabilities (0..1) onto E4M3's range (max 448), and
// O (|O| <= max |V| <= 1 for the check's and the timing's inputs in [-1, 1]) kept above E4M3's
// smallest normal (2^-6) down to |O| ~ 2.4e-4.
constexpr float kFp8ScaleS = 448.0f, kFp8ScaleO = 64.0f;

using GraphKey = std::tuple<Pass, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool>;

struct Dims {
  std::int64_t b, s, h, hkv, d;
  bool causal;
  GraphKey key(Pass p) const { return {p, b, s, h, hkv, d, causal}; }
};

Dims dims_of(const OpInstance& in) {
  return {shape_value(in, "batch"),    shape_value(in, "seq"),      shape_value(in, "heads"),
          shape_value(in, "kv_heads"), shape_value(in, "head_dim"), shape_value(in, "causal") != 0};
}

void check_fe(fe::error_t e, const char* what) {
  if (!e.is_good()) throw InputError(fmt::format("cuDNN SDPA {}: {}", what, e.get_message()));
}

// One handle and one graph cache for the process, on the device current at first use. The CUDA
// runtime is initialised before them, so they are destroyed (graphs first, then the handle) before
// the runtime's own teardown: memcheck's leak check at exit finds nothing of cuDNN's left.
struct SdpaGraph;
struct CudnnState {
  std::mutex mu;
  cudnnHandle_t handle = nullptr;
  std::map<GraphKey, std::shared_ptr<SdpaGraph>> graphs;
  CudnnState() {
    cudaFree(nullptr);
    const cudnnStatus_t st = cudnnCreate(&handle);
    if (st != CUDNN_STATUS_SUCCESS) throw InputError(fmt::format("cudnnCreate: {}", cudnnGetErrorString(st)));
  }
  ~CudnnState() {
    graphs.clear();
    cudnnDestroy(handle);
  }
  CudnnState(const CudnnState&) = delete;
  CudnnState& operator=(const CudnnState&) = delete;
};
CudnnState& cudnn_state() {
  static CudnnState state;
  return state;
}
cudnnHandle_t handle() { return cudnn_state().handle; }

// A [b, heads, s, d] view of a token-major [b, s, heads, d] tensor.
TensorPtr token_major(fe::graph::Graph& g, const char* name, Uid uid, std::int64_t b, std::int64_t s,
                      std::int64_t heads, std::int64_t d) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({b, heads, s, d})
                      .set_stride({s * heads * d, d, heads * d, 1}));
}
void as_output(const TensorPtr& t, Uid uid, std::int64_t b, std::int64_t s, std::int64_t heads,
               std::int64_t d) {
  t->set_output(true).set_uid(uid).set_dim({b, heads, s, d}).set_stride({s * heads * d, d, heads * d, 1});
}
std::vector<std::int64_t> stats_dim(const Dims& a) { return {a.b, a.h, a.s, 1}; }
std::vector<std::int64_t> stats_stride(const Dims& a) { return {a.h * a.s, a.s, 1, 1}; }

struct SdpaGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  std::int64_t workspace_bytes = 0;
  std::string plan;
};

TensorPtr fp8_scalar(fe::graph::Graph& g, const char* name, Uid uid) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({1, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(fe::DataType_t::FLOAT));
}

void describe_fp8_forward(fe::graph::Graph& g, const Dims& a, const TensorPtr& Q, const TensorPtr& K,
                          const TensorPtr& V, float scale) {
  auto opt =
      fe::graph::SDPA_fp8_attributes().set_name("sdpa_fp8").set_generate_stats(false).set_attn_scale(scale);
  if (a.causal) opt.set_causal_mask(true);
  auto [O, stats, amax_s, amax_o] =
      g.sdpa_fp8(Q, K, V, fp8_scalar(g, "descale_q", kDescaleQ), fp8_scalar(g, "descale_k", kDescaleK),
                 fp8_scalar(g, "descale_v", kDescaleV), fp8_scalar(g, "descale_s", kDescaleS),
                 fp8_scalar(g, "scale_s", kScaleS), fp8_scalar(g, "scale_o", kScaleO), opt);
  as_output(O, kO, a.b, a.s, a.h, a.d);
  for (const auto& [t, uid] : {std::pair{amax_s, kAmaxS}, std::pair{amax_o, kAmaxO}})
    t->set_output(true)
        .set_uid(uid)
        .set_dim({1, 1, 1, 1})
        .set_stride({1, 1, 1, 1})
        .set_data_type(fe::DataType_t::FLOAT);
}

void describe(fe::graph::Graph& g, Pass pass, const Dims& a) {
  g.set_io_data_type(pass == Pass::ForwardFp8 ? fe::DataType_t::FP8_E4M3 : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto Q = token_major(g, "Q", kQ, a.b, a.s, a.h, a.d);
  auto K = token_major(g, "K", kK, a.b, a.s, a.hkv, a.d);
  auto V = token_major(g, "V", kV, a.b, a.s, a.hkv, a.d);
  const float scale = 1.0f / std::sqrt(float(a.d));
  if (pass == Pass::ForwardFp8) return describe_fp8_forward(g, a, Q, K, V, scale);
  if (pass != Pass::Backward) {
    auto opt = fe::graph::SDPA_attributes().set_name("sdpa").set_attn_scale(scale);
    opt.set_generate_stats(pass == Pass::ForwardWithStats);
    if (a.causal) opt.set_causal_mask(true);  // q_len = kv_len: top-left and bottom-right agree
    auto [O, stats] = g.sdpa(Q, K, V, opt);
    as_output(O, kO, a.b, a.s, a.h, a.d);
    if (pass == Pass::ForwardWithStats)
      stats->set_output(true)
          .set_uid(kStats)
          .set_data_type(fe::DataType_t::FLOAT)
          .set_dim(stats_dim(a))
          .set_stride(stats_stride(a));
    return;
  }
  auto O = token_major(g, "O", kO, a.b, a.s, a.h, a.d);
  auto dO = token_major(g, "dO", kDO, a.b, a.s, a.h, a.d);
  auto stats = g.tensor(fe::graph::Tensor_attributes()
                            .set_name("stats")
                            .set_uid(kStats)
                            .set_dim(stats_dim(a))
                            .set_stride(stats_stride(a))
                            .set_data_type(fe::DataType_t::FLOAT));
  auto opt = fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(scale);
  if (a.causal) opt.set_causal_mask(true);
  auto [dQ, dK, dV] = g.sdpa_backward(Q, K, V, O, dO, stats, opt);
  as_output(dQ, kDQ, a.b, a.s, a.h, a.d);
  as_output(dK, kDK, a.b, a.s, a.hkv, a.d);
  as_output(dV, kDV, a.b, a.s, a.hkv, a.d);
}

std::shared_ptr<SdpaGraph> build(Pass pass, const Dims& a) {
  auto made = std::make_shared<SdpaGraph>();
  made->graph = std::make_shared<fe::graph::Graph>();
  fe::graph::Graph& g = *made->graph;
  describe(g, pass, a);
  check_fe(g.validate(), "validate");
  check_fe(g.build_operation_graph(handle()), "build_operation_graph");
  check_fe(g.create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
  check_fe(g.check_support(handle()), "check_support");
  check_fe(g.build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans");
  check_fe(g.get_workspace_size(made->workspace_bytes), "get_workspace_size");
  check_fe(g.get_plan_name(made->plan), "get_plan_name");
  return made;
}

std::shared_ptr<SdpaGraph> cached_graph(Pass pass, const Dims& a) {
  CudnnState& state = cudnn_state();
  std::lock_guard lock(state.mu);
  auto& slot = state.graphs[a.key(pass)];
  if (!slot) slot = build(pass, a);
  return slot;
}

void execute(const SdpaGraph& g, std::unordered_map<std::int64_t, void*>& pack, void* workspace,
             cudaStream_t s) {
  const cudnnStatus_t st = cudnnSetStream(handle(), s);
  if (st != CUDNN_STATUS_SUCCESS)
    throw InputError(fmt::format("cudnnSetStream: {}", cudnnGetErrorString(st)));
  check_fe(g.graph->execute(handle(), pack, workspace), "execute");
}

nlohmann::json graph_details(const SdpaGraph& g) {
  return {{"plan", g.plan},
          {"workspace_bytes", g.workspace_bytes},
          {"heuristics", "cuDNN heuristics mode A, first supported plan"},
          {"cudnn_version", cudnnGetVersion()},
          {"cudnn_frontend_version", CUDNN_FRONTEND_VERSION}};
}

void* workspace_of(DeviceProblem& d, const SdpaGraph& g) {
  return d.scratch(DType::I8, std::size_t(std::max<std::int64_t>(g.workspace_bytes, 1))).data();
}

// BF16, or FP8 E4M3 with its scalars: descales 1 (the inputs are E4M3 as they are), the
// probabilities' and O's fixed scales, two amax slots.
StreamFn bind_forward(const OpInstance& in, DeviceProblem& d, nlohmann::json* details) {
  const Dims a = dims_of(in);
  const bool fp8 = in.precision == "fp8_e4m3";
  const DType t = fp8 ? DType::E4M3 : DType::BF16;
  const auto sz = [](std::int64_t v) { return std::size_t(v); };
  auto g = cached_graph(fp8 ? Pass::ForwardFp8 : Pass::Forward, a);
  void* q = d.input(0, t, sz(a.b * a.s * a.h * a.d)).data();
  void* k = d.input(1, t, sz(a.b * a.s * a.hkv * a.d)).data();
  void* v = d.input(2, t, sz(a.b * a.s * a.hkv * a.d)).data();
  void* o = d.output(t, sz(a.b * a.s * a.h * a.d), 0, fp8 ? 1.0 / kFp8ScaleO : 1.0).data();
  void* ws = workspace_of(d, *g);
  std::unordered_map<std::int64_t, void*> pack{{kQ, q}, {kK, k}, {kV, v}, {kO, o}};
  if (fp8) {
    auto* scalars = static_cast<float*>(d.scratch(DType::F32, kFp8Scalars).data());
    const float host[kFp8Scalars] = {1, 1, 1, 1 / kFp8ScaleS, kFp8ScaleS, kFp8ScaleO, 0, 0};
    RAFTER_CUDA_CHECK(cudaMemcpy(scalars, host, sizeof host, cudaMemcpyHostToDevice));
    for (int i = 0; i < kFp8Scalars; ++i) pack[kDescaleQ + i] = scalars + i;
  }
  if (details) {
    *details = graph_details(*g);
    if (fp8)
      (*details)["fp8_scales"] = {{"descale_q_k_v", 1}, {"scale_s", kFp8ScaleS}, {"scale_o", kFp8ScaleO}};
  }
  return [g, pack, ws](cudaStream_t s) mutable { execute(*g, pack, ws, s); };
}

// The backward's inputs O and the softmax statistics come from one untimed forward on the same
// Q, K, V, run here at bind time.
StreamFn bind_backward(const OpInstance& in, DeviceProblem& d, nlohmann::json* details) {
  const Dims a = dims_of(in);
  const auto sz = [](std::int64_t v) { return std::size_t(v); };
  auto fwd = cached_graph(Pass::ForwardWithStats, a);
  auto bwd = cached_graph(Pass::Backward, a);
  void* q = d.input(0, DType::BF16, sz(a.b * a.s * a.h * a.d)).data();
  void* k = d.input(1, DType::BF16, sz(a.b * a.s * a.hkv * a.d)).data();
  void* v = d.input(2, DType::BF16, sz(a.b * a.s * a.hkv * a.d)).data();
  void* dout = d.input(3, DType::BF16, sz(a.b * a.s * a.h * a.d)).data();
  void* dq = d.output(DType::BF16, sz(a.b * a.s * a.h * a.d), 0).data();
  void* dk = d.output(DType::BF16, sz(a.b * a.s * a.hkv * a.d), 1).data();
  void* dv = d.output(DType::BF16, sz(a.b * a.s * a.hkv * a.d), 2).data();
  void* o = d.scratch(DType::BF16, sz(a.b * a.s * a.h * a.d)).data();
  void* stats = d.scratch(DType::F32, sz(a.b * a.h * a.s)).data();
  std::unordered_map<std::int64_t, void*> fwd_pack{{kQ, q}, {kK, k}, {kV, v}, {kO, o}, {kStats, stats}};
  execute(*fwd, fwd_pack, workspace_of(d, *fwd), nullptr);
  RAFTER_CUDA_CHECK(cudaDeviceSynchronize());
  void* ws = workspace_of(d, *bwd);
  if (details) *details = {{"backward", graph_details(*bwd)}, {"forward_for_stats", graph_details(*fwd)}};
  return [bwd, q, k, v, o, dout, stats, dq, dk, dv, ws](cudaStream_t s) {
    std::unordered_map<std::int64_t, void*> pack{{kQ, q},         {kK, k},   {kV, v},   {kO, o},  {kDO, dout},
                                                 {kStats, stats}, {kDQ, dq}, {kDK, dk}, {kDV, dv}};
    execute(*bwd, pack, ws, s);
  };
}

class CudnnAttentionBackend : public CudaBackend {
 public:
  std::string name() const override { return "cuda.cudnn"; }
  int priority() const override { return 20; }  // ahead of the unfused path (cuda.unfused)
  bool supports(const OpInstance& i) const override {
    const auto d = shape_value(i, "head_dim", 0);
    const bool precision =
        i.precision == "bf16" || (i.precision == "fp8_e4m3" && i.op == "attention_prefill");  // FP8: forward
    return (i.op == "attention_prefill" || i.op == "attention_backward") && precision &&
           (d == 64 || d == 128);
  }
  void execute(const OpInstance& inst, const ExecContext& ctx, OperatorRecord& record) override {
    record.backend = name();
    recording_failures(record, [&] {
      nlohmann::json details;
      const bool backward = inst.op == "attention_backward";
      check_and_time(
          inst, ctx,
          [&](const OpInstance& in, DeviceProblem& d) {
            nlohmann::json* out = d.checking() ? nullptr : &details;
            return backward ? bind_backward(in, d, out) : bind_forward(in, d, out);
          },
          record);
      record.details["cudnn"] = details;
      record.details["kernels"] =
          backward ? "cuDNN SDPA backward (BF16, FP32 softmax); O and the softmax statistics from an untimed "
                     "cuDNN forward"
          : inst.precision == "fp8_e4m3"
              ? "cuDNN SDPA FP8 forward (Q, K, V, O in E4M3; FP32 softmax; probabilities in E4M3 for PV), "
                "inference (no statistics)"
              : "cuDNN SDPA forward (BF16, FP32 softmax), inference (no statistics)";
    });
  }
};

RAFTER_REGISTER_BACKEND(CudnnAttentionBackend);

}  // namespace
}  // namespace rafter::workloads::cuda
