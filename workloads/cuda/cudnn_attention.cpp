// "cuda.cudnn": fused prefill attention (forward, and backward from the forward's softmax
// statistics) through cuDNN's SDPA, described with the cuDNN frontend's graph API. BF16 in and
// out, FP32 softmax and accumulation; causal or not; GQA (K/V with fewer heads); head dim 64, 128.
// Decode (attention_decode: one query token per sequence against a BF16 KV cache) runs the same
// forward with a query length of 1, for cuda.decode (decode_attention_backend.cpp), which weighs it
// against our split-KV kernel. FP8 E4M3 forward and backward (sdpa_fp8 / sdpa_fp8_backward, Hopper
// and later, cuDNN 9.1+): Q, K, V, O, dO, dQ, dK and dV in E4M3 with per-tensor descale/scale
// factors as device scalars, the softmax probabilities scaled by 448 into E4M3, each amax written
// back; the backward's output and dP scales set from the amax of an untimed first call (current
// scaling).
// Q/O [b, s, h, d] and K/V [b, s, hkv, d] are handed to cuDNN in place, as [b, h, s, d] views
// through their strides. A graph is built once per (pass, shape) and cached for the process: a
// suite asks for the same shapes again and again, and building takes far longer than running.
// Built only where cuDNN and its frontend were found (cmake/RafterCuda.cmake).
// Our headers first: their nlohmann/json (Debian's) then serves the frontend too, which would
// otherwise bring its bundled copy (another inline ABI namespace) into this file's OperatorRecord
// and into bind_cudnn_decode's signature.
#include "cudnn_attention.hpp"

#include "device_problem.hpp"
// clang-format off
#include <cudnn.h>
#include <cudnn_frontend.h>
// clang-format on
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>

namespace rafter::workloads::cuda {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

enum class Pass { Forward, ForwardWithStats, Backward, ForwardFp8, ForwardFp8WithStats, BackwardFp8 };
bool is_fp8(Pass p) {
  return p == Pass::ForwardFp8 || p == Pass::ForwardFp8WithStats || p == Pass::BackwardFp8;
}
bool with_stats(Pass p) { return p == Pass::ForwardWithStats || p == Pass::ForwardFp8WithStats; }
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
  // FP8: device scalars, one buffer of kFp8Scalars in this order (a pass uses those it names)
  kDescaleQ,
  kDescaleK,
  kDescaleV,
  kDescaleS,
  kScaleS,
  kScaleO,
  kAmaxS,
  kAmaxO,
  kDescaleO,
  kDescaleDO,
  kDescaleDP,
  kScaleDQ,
  kScaleDK,
  kScaleDV,
  kScaleDP,
  kAmaxDQ,
  kAmaxDK,
  kAmaxDV,
  kAmaxDP
};
constexpr int kFp8Scalars = kAmaxDP - kDescaleQ + 1;
// The FP8 forward's fixed scales: the softmax probabilities (0..1) onto E4M3's range (max 448), and
// O (|O| <= max |V| <= 1 for the check's and the timing's inputs in [-1, 1]) kept above E4M3's
// smallest normal (2^-6) down to |O| ~ 2.4e-4.
constexpr float kFp8ScaleS = 448.0f, kFp8ScaleO = 64.0f;

using GraphKey = std::tuple<Pass, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                            std::int64_t, bool>;

// s query tokens against kv key/value tokens per sequence (equal in prefill; 1 and kv_len in decode).
struct Dims {
  std::int64_t b, s, kv, h, hkv, d;
  bool causal;
  GraphKey key(Pass p) const { return {p, b, s, kv, h, hkv, d, causal}; }
};

Dims dims_of(const OpInstance& in) {
  Dims a{};
  a.b = shape_value(in, "batch");
  a.s = a.kv = shape_value(in, "seq");
  a.h = shape_value(in, "heads");
  a.hkv = shape_value(in, "kv_heads");
  a.d = shape_value(in, "head_dim");
  a.causal = shape_value(in, "causal") != 0;
  return a;
}

// cuDNN's message up to its first line break: past it, some messages dump the graph as JSON.
void check_fe(fe::error_t e, const char* what) {
  if (e.is_good()) return;
  const std::string message = e.get_message();
  throw InputError(fmt::format("cuDNN SDPA {}: {}", what, message.substr(0, message.find('\n'))));
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

void scalar_outputs(std::initializer_list<std::pair<TensorPtr, Uid>> outputs) {
  for (const auto& [t, uid] : outputs)
    t->set_output(true)
        .set_uid(uid)
        .set_dim({1, 1, 1, 1})
        .set_stride({1, 1, 1, 1})
        .set_data_type(fe::DataType_t::FLOAT);
}

void stats_output(const TensorPtr& stats, const Dims& a) {
  stats->set_output(true)
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim(stats_dim(a))
      .set_stride(stats_stride(a));
}

TensorPtr stats_input(fe::graph::Graph& g, const Dims& a) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name("stats")
                      .set_uid(kStats)
                      .set_dim(stats_dim(a))
                      .set_stride(stats_stride(a))
                      .set_data_type(fe::DataType_t::FLOAT));
}

void describe_fp8_forward(fe::graph::Graph& g, Pass pass, const Dims& a, const TensorPtr& Q,
                          const TensorPtr& K, const TensorPtr& V, float scale) {
  auto opt = fe::graph::SDPA_fp8_attributes()
                 .set_name("sdpa_fp8")
                 .set_generate_stats(with_stats(pass))
                 .set_attn_scale(scale);
  if (a.causal) opt.set_causal_mask(true);
  auto [O, stats, amax_s, amax_o] =
      g.sdpa_fp8(Q, K, V, fp8_scalar(g, "descale_q", kDescaleQ), fp8_scalar(g, "descale_k", kDescaleK),
                 fp8_scalar(g, "descale_v", kDescaleV), fp8_scalar(g, "descale_s", kDescaleS),
                 fp8_scalar(g, "scale_s", kScaleS), fp8_scalar(g, "scale_o", kScaleO), opt);
  as_output(O, kO, a.b, a.s, a.h, a.d);
  scalar_outputs({{amax_s, kAmaxS}, {amax_o, kAmaxO}});
  if (with_stats(pass)) stats_output(stats, a);
}

void describe_fp8_backward(fe::graph::Graph& g, const Dims& a, const TensorPtr& Q, const TensorPtr& K,
                           const TensorPtr& V, float scale) {
  auto O = token_major(g, "O", kO, a.b, a.s, a.h, a.d);
  auto dO = token_major(g, "dO", kDO, a.b, a.s, a.h, a.d);
  auto opt = fe::graph::SDPA_fp8_backward_attributes().set_name("sdpa_fp8_backward").set_attn_scale(scale);
  if (a.causal) opt.set_causal_mask(true);
  const auto sc = [&g](const char* name, Uid uid) { return fp8_scalar(g, name, uid); };
  auto [dQ, dK, dV, amax_dq, amax_dk, amax_dv, amax_dp] =
      g.sdpa_fp8_backward(Q, K, V, O, dO, stats_input(g, a), sc("descale_q", kDescaleQ),
                          sc("descale_k", kDescaleK), sc("descale_v", kDescaleV), sc("descale_o", kDescaleO),
                          sc("descale_do", kDescaleDO), sc("descale_s", kDescaleS),
                          sc("descale_dp", kDescaleDP), sc("scale_s", kScaleS), sc("scale_dq", kScaleDQ),
                          sc("scale_dk", kScaleDK), sc("scale_dv", kScaleDV), sc("scale_dp", kScaleDP), opt);
  as_output(dQ, kDQ, a.b, a.s, a.h, a.d);
  as_output(dK, kDK, a.b, a.kv, a.hkv, a.d);
  as_output(dV, kDV, a.b, a.kv, a.hkv, a.d);
  scalar_outputs({{amax_dq, kAmaxDQ}, {amax_dk, kAmaxDK}, {amax_dv, kAmaxDV}, {amax_dp, kAmaxDP}});
}

void describe(fe::graph::Graph& g, Pass pass, const Dims& a) {
  g.set_io_data_type(is_fp8(pass) ? fe::DataType_t::FP8_E4M3 : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto Q = token_major(g, "Q", kQ, a.b, a.s, a.h, a.d);
  auto K = token_major(g, "K", kK, a.b, a.kv, a.hkv, a.d);
  auto V = token_major(g, "V", kV, a.b, a.kv, a.hkv, a.d);
  const float scale = 1.0f / std::sqrt(float(a.d));
  if (pass == Pass::BackwardFp8) return describe_fp8_backward(g, a, Q, K, V, scale);
  if (is_fp8(pass)) return describe_fp8_forward(g, pass, a, Q, K, V, scale);
  if (pass != Pass::Backward) {
    auto opt = fe::graph::SDPA_attributes().set_name("sdpa").set_attn_scale(scale);
    opt.set_generate_stats(with_stats(pass));
    // Causal only in prefill, where q_len = kv_len: top-left and bottom-right agree.
    if (a.causal) opt.set_causal_mask(true);
    auto [O, stats] = g.sdpa(Q, K, V, opt);
    as_output(O, kO, a.b, a.s, a.h, a.d);
    if (with_stats(pass)) stats_output(stats, a);
    return;
  }
  auto O = token_major(g, "O", kO, a.b, a.s, a.h, a.d);
  auto dO = token_major(g, "dO", kDO, a.b, a.s, a.h, a.d);
  auto opt = fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(scale);
  if (a.causal) opt.set_causal_mask(true);
  auto [dQ, dK, dV] = g.sdpa_backward(Q, K, V, O, dO, stats_input(g, a), opt);
  as_output(dQ, kDQ, a.b, a.s, a.h, a.d);
  as_output(dK, kDK, a.b, a.kv, a.hkv, a.d);
  as_output(dV, kDV, a.b, a.kv, a.hkv, a.d);
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

// Every FP8 scalar in one device buffer (by uid, from kDescaleQ), with a host copy: descales of
// the inputs 1 (the check's and the timing's inputs are E4M3 values in [-1, 1]), the
// probabilities' and O's fixed scales and their inverses, the backward's output scales 1 until
// set from their amax, amax slots 0.
class Fp8Scalars {
 public:
  explicit Fp8Scalars(DeviceProblem& d)
      : device_(static_cast<float*>(d.scratch(DType::F32, kFp8Scalars).data())) {
    host_.fill(1.0f);
    set(kDescaleS, 1 / kFp8ScaleS);
    set(kScaleS, kFp8ScaleS);
    set(kScaleO, kFp8ScaleO);
    set(kDescaleO, 1 / kFp8ScaleO);
    for (Uid u : {kAmaxS, kAmaxO, kAmaxDQ, kAmaxDK, kAmaxDV, kAmaxDP}) set(u, 0);
    upload();
  }
  float get(Uid u) const { return host_[std::size_t(u - kDescaleQ)]; }
  void set(Uid u, float v) { host_[std::size_t(u - kDescaleQ)] = v; }
  void upload() {
    RAFTER_CUDA_CHECK(cudaMemcpy(device_, host_.data(), sizeof host_, cudaMemcpyHostToDevice));
  }
  void download() {
    RAFTER_CUDA_CHECK(cudaMemcpy(host_.data(), device_, sizeof host_, cudaMemcpyDeviceToHost));
  }
  // The scalars `pass` reads and writes, added to its variant pack.
  void add_to(std::unordered_map<std::int64_t, void*>& pack, Pass pass) const {
    static const Uid fwd[] = {kDescaleQ, kDescaleK, kDescaleV, kDescaleS, kScaleS, kScaleO, kAmaxS, kAmaxO};
    static const Uid bwd[] = {kDescaleQ,  kDescaleK, kDescaleV, kDescaleO, kDescaleDO, kDescaleS,
                              kDescaleDP, kScaleS,   kScaleDQ,  kScaleDK,  kScaleDV,   kScaleDP,
                              kAmaxDQ,    kAmaxDK,   kAmaxDV,   kAmaxDP};
    const auto add = [&](const auto& uids) {
      for (Uid u : uids) pack[u] = device_ + (u - kDescaleQ);
    };
    if (pass == Pass::BackwardFp8)
      add(bwd);
    else
      add(fwd);
  }

 private:
  float* device_;
  std::array<float, kFp8Scalars> host_{};
};

// BF16, or FP8 E4M3 with its scalars (Fp8Scalars).
StreamFn bind_forward(const OpInstance& in, DeviceProblem& d, nlohmann::json* details) {
  const Dims a = dims_of(in);
  const bool fp8 = in.precision == "fp8_e4m3";
  const DType t = fp8 ? DType::E4M3 : DType::BF16;
  const auto sz = [](std::int64_t v) { return std::size_t(v); };
  auto g = cached_graph(fp8 ? Pass::ForwardFp8 : Pass::Forward, a);
  void* q = d.input(0, t, sz(a.b * a.s * a.h * a.d)).data();
  void* k = d.input(1, t, sz(a.b * a.kv * a.hkv * a.d)).data();
  void* v = d.input(2, t, sz(a.b * a.kv * a.hkv * a.d)).data();
  void* o = d.output(t, sz(a.b * a.s * a.h * a.d), 0, fp8 ? 1.0 / kFp8ScaleO : 1.0).data();
  void* ws = workspace_of(d, *g);
  std::unordered_map<std::int64_t, void*> pack{{kQ, q}, {kK, k}, {kV, v}, {kO, o}};
  if (fp8) Fp8Scalars(d).add_to(pack, Pass::ForwardFp8);
  if (details) {
    *details = graph_details(*g);
    if (fp8)
      (*details)["fp8_scales"] = {{"descale_q_k_v", 1}, {"scale_s", kFp8ScaleS}, {"scale_o", kFp8ScaleO}};
  }
  return [g, pack, ws](cudaStream_t s) mutable { execute(*g, pack, ws, s); };
}

// The backward's inputs O and the softmax statistics come from one untimed forward on the same
// Q, K, V, run here at bind time. FP8: then one untimed backward with unit output scales, into
// scratch, whose amax set the scales of dQ, dK, dV and dP so that each one's amax lands at 256 of
// E4M3's 448 (current scaling, as a recipe's amax history would); the checked outputs are read at
// those scales.
StreamFn bind_backward(const OpInstance& in, DeviceProblem& d, nlohmann::json* details) {
  const Dims a = dims_of(in);
  const bool fp8 = in.precision == "fp8_e4m3";
  const DType t = fp8 ? DType::E4M3 : DType::BF16;
  const auto sz = [](std::int64_t v) { return std::size_t(v); };
  const std::size_t nq = sz(a.b * a.s * a.h * a.d), nkv = sz(a.b * a.kv * a.hkv * a.d);
  auto fwd = cached_graph(fp8 ? Pass::ForwardFp8WithStats : Pass::ForwardWithStats, a);
  auto bwd = cached_graph(fp8 ? Pass::BackwardFp8 : Pass::Backward, a);
  void* q = d.input(0, t, nq).data();
  void* k = d.input(1, t, nkv).data();
  void* v = d.input(2, t, nkv).data();
  void* dout = d.input(3, t, nq).data();
  void* o = d.scratch(t, nq).data();
  void* stats = d.scratch(DType::F32, sz(a.b * a.h * a.s)).data();
  std::optional<Fp8Scalars> scalars;
  if (fp8) scalars.emplace(d);
  std::unordered_map<std::int64_t, void*> fwd_pack{{kQ, q}, {kK, k}, {kV, v}, {kO, o}, {kStats, stats}};
  if (fp8) scalars->add_to(fwd_pack, Pass::ForwardFp8WithStats);
  execute(*fwd, fwd_pack, workspace_of(d, *fwd), nullptr);
  void* ws = workspace_of(d, *bwd);
  std::unordered_map<std::int64_t, void*> pack{{kQ, q}, {kK, k},     {kV, v},
                                               {kO, o}, {kDO, dout}, {kStats, stats}};
  nlohmann::json scales;
  if (fp8) {
    scalars->add_to(pack, Pass::BackwardFp8);
    auto first = pack;
    first[kDQ] = d.scratch(t, nq).data();
    first[kDK] = d.scratch(t, nkv).data();
    first[kDV] = d.scratch(t, nkv).data();
    execute(*bwd, first, ws, nullptr);
    RAFTER_CUDA_CHECK(cudaDeviceSynchronize());
    scalars->download();
    for (const auto& [amax, scale] : {std::pair{kAmaxDQ, kScaleDQ}, std::pair{kAmaxDK, kScaleDK},
                                      std::pair{kAmaxDV, kScaleDV}, std::pair{kAmaxDP, kScaleDP}}) {
      const float m = scalars->get(amax);
      scalars->set(scale, m > 0 && std::isfinite(m) ? 256.0f / m : 1.0f);
    }
    scalars->set(kDescaleDP, 1 / scalars->get(kScaleDP));
    scalars->upload();
    scales = {{"descale_q_k_v_do", 1},
              {"scale_s", kFp8ScaleS},
              {"descale_o", 1 / kFp8ScaleO},
              {"scale_dq", scalars->get(kScaleDQ)},
              {"scale_dk", scalars->get(kScaleDK)},
              {"scale_dv", scalars->get(kScaleDV)},
              {"scale_dp", scalars->get(kScaleDP)},
              {"from", "amax of an untimed first backward, mapped to 256"}};
  }
  RAFTER_CUDA_CHECK(cudaDeviceSynchronize());
  const auto out_scale = [&](Uid u) { return fp8 ? 1.0 / scalars->get(u) : 1.0; };
  pack[kDQ] = d.output(t, nq, 0, out_scale(kScaleDQ)).data();
  pack[kDK] = d.output(t, nkv, 1, out_scale(kScaleDK)).data();
  pack[kDV] = d.output(t, nkv, 2, out_scale(kScaleDV)).data();
  if (details) {
    *details = {{"backward", graph_details(*bwd)}, {"forward_for_stats", graph_details(*fwd)}};
    if (fp8) (*details)["fp8_scales"] = scales;
  }
  return [bwd, pack, ws](cudaStream_t s) mutable { execute(*bwd, pack, ws, s); };
}

}  // namespace

bool cudnn_decode_supports(std::int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

StreamFn bind_cudnn_decode(const DecodeTensors& t, std::int64_t batch, std::int64_t kv_len,
                           std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim, DeviceProblem& d,
                           nlohmann::json* details) {
  const Dims a{batch, 1, kv_len, heads, kv_heads, head_dim, false};
  auto g = cached_graph(Pass::Forward, a);
  void* ws = workspace_of(d, *g);
  std::unordered_map<std::int64_t, void*> pack{
      {kQ, const_cast<bf16*>(t.q)}, {kK, const_cast<bf16*>(t.k)}, {kV, const_cast<bf16*>(t.v)}, {kO, t.o}};
  if (details) {
    *details = graph_details(*g);
    (*details)["kernel"] =
        "cuDNN SDPA forward, query length 1 (BF16, FP32 softmax), inference (no statistics)";
  }
  return [g, pack, ws](cudaStream_t s) mutable { execute(*g, pack, ws, s); };
}

namespace {

class CudnnAttentionBackend : public CudaBackend {
 public:
  std::string name() const override { return "cuda.cudnn"; }
  int priority() const override { return 20; }  // ahead of the unfused path (cuda.unfused)
  bool supports(const OpInstance& i) const override { return handles(i) && shape_limit(i).empty(); }
  std::string shape_limit(const OpInstance& i) const override {
    if (!handles(i)) return {};
    const auto d = shape_value(i, "head_dim", 0);
    // cuDNN 9's FP8 backward on sm_90 takes head dim 128 only (its validate() refuses 64: "hidden_dim
    // shoud be equal to 128", seen with cuDNN 9.14 on an H100).
    if (i.op == "attention_backward" && i.precision == "fp8_e4m3" && d != 128)
      return fmt::format("cuDNN's FP8 backward on sm_90 takes head_dim 128 only, got {}", d);
    if (d != 64 && d != 128)
      return fmt::format("rafter builds cuDNN's SDPA for head_dim 64 and 128, got {}", d);
    // One token: cuDNN 9.14's backward refuses it in validate() ("s_q = s_kv = 1 is not supported"),
    // and its FP8 forward has no engine for it (seen on an H200).
    if (shape_value(i, "seq", 0) == 1 && (i.op == "attention_backward" || i.precision == "fp8_e4m3"))
      return "cuDNN's SDPA on sm_90 has no " +
             std::string(i.op == "attention_backward" ? "backward" : "FP8 forward") +
             " for a sequence of one token";
    return {};
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
      const bool fp8 = inst.precision == "fp8_e4m3";
      record.details["kernels"] =
          backward ? fmt::format(
                         "cuDNN SDPA{} backward ({}, FP32 softmax); O and the softmax statistics from an "
                         "untimed cuDNN forward{}",
                         fp8 ? " FP8" : "", fp8 ? "Q, K, V, O, dO, dQ, dK, dV in E4M3" : "BF16",
                         fp8 ? "; output scales from an untimed backward's amax" : "")
          : fp8 ? "cuDNN SDPA FP8 forward (Q, K, V, O in E4M3; FP32 softmax; probabilities in E4M3 for PV), "
                  "inference (no statistics)"
                : "cuDNN SDPA forward (BF16, FP32 softmax), inference (no statistics)";
    });
  }

 private:
  // The operators and precisions it builds graphs for, at any shape.
  static bool handles(const OpInstance& i) {
    return (i.op == "attention_prefill" || i.op == "attention_backward") &&
           (i.precision == "bf16" || i.precision == "fp8_e4m3");
  }
};

RAFTER_REGISTER_BACKEND(CudnnAttentionBackend);

}  // namespace
}  // namespace rafter::workloads::cuda
