// The oneDNN engine, its ISA hold, matmul descriptors and capability checks, and the FP32
// widening of operands oneDNN has no matmul for.
#include "onednn_matmul.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "rafter/collector/cpu_isa.hpp"

namespace rafter::workloads::cpu {
namespace {

// RAFTER_CPU_ISA holds oneDNN too, so that one variable makes this CPU look like a narrower one
// to every path rafter runs; oneDNN's own ONEDNN_MAX_CPU_ISA (or the older DNNL_MAX_CPU_ISA), when
// set, is the user's word and wins. oneDNN's narrowest ISA is SSE4.1, so `scalar` holds it there.
void hold_onednn_isa() {
  if (std::getenv("ONEDNN_MAX_CPU_ISA") || std::getenv("DNNL_MAX_CPU_ISA")) return;
  const auto held = held_cpu_isa();
  if (!held || *held == CpuIsa::Avx512) return;
  // A refusal (oneDNN already generated code in this process) leaves its ISA as it was; nothing is
  // mislabelled by that, since what its matmul can do is asked of oneDNN itself (onednn_has_matmul).
  (void)dnnl::set_max_cpu_isa(*held == CpuIsa::Avx2 ? dnnl::cpu_isa::avx2 : dnnl::cpu_isa::sse41);
}

}  // namespace

dnnl::engine& onednn_engine() {
  static dnnl::engine e = [] {
    hold_onednn_isa();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

std::string onednn_version() {
  const auto* v = dnnl::version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

dnnl::memory::desc matmul_md(std::int64_t b, std::int64_t rows, std::int64_t cols, dt type, bool transposed) {
  const dnnl::memory::dims strides = transposed ? dnnl::memory::dims{rows * cols, 1, rows}
                                                : dnnl::memory::dims{rows * cols, cols, 1};
  return dnnl::memory::desc({b, rows, cols}, type, strides);
}

namespace {

// oneDNN's int8 GEMMs on CPUs without VNNI (AVX2, SSE4.1 kernels) multiply through vpmaddubsw,
// which sums each pair of u8·s8 products into int16 with saturation: a matmul descriptor is
// created, and then gives wrong sums (|a|, |b| near 127: 2·255·127 > 32767). So for s8 the
// question is asked by running it: 16×16 products of K = 64 terms 127·127, exact in int32.
bool int8_matmul_is_exact(const dnnl::matmul::primitive_desc& pd) {
  constexpr int kM = 16, kK = 64;
  std::vector<std::int8_t> a(kM * kK, 127), b(kK * kM, 127);
  std::vector<std::int32_t> c(kM * kM, 0);
  auto& e = onednn_engine();
  dnnl::memory ma(pd.src_desc(), e, a.data()), mb(pd.weights_desc(), e, b.data()), mc(pd.dst_desc(), e, c.data());
  dnnl::stream s(e);
  dnnl::matmul(pd).execute(s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
  s.wait();
  return std::all_of(c.begin(), c.end(), [](std::int32_t v) { return v == kK * 127 * 127; });
}

}  // namespace

bool onednn_has_matmul(dt src, dt weights, dt dst, bool sum_post_op) {
  static std::mutex m;
  static std::map<std::tuple<dt, dt, dt, bool>, bool> known;
  std::lock_guard<std::mutex> lock(m);
  const auto key = std::make_tuple(src, weights, dst, sum_post_op);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  bool ok = true;
  try {
    dnnl::primitive_attr attr;
    if (sum_post_op) {
      dnnl::post_ops po;
      po.append_sum(1.0f);
      attr.set_post_ops(po);
    }
    const dnnl::matmul::desc d(matmul_md(1, 16, 64, src, false), matmul_md(1, 64, 16, weights, true),
                               matmul_md(1, 16, 16, dst, false));
    dnnl::matmul::primitive_desc pd(d, attr, onednn_engine());
    if (src == dt::s8 && weights == dt::s8 && dst == dt::s32 && !sum_post_op) ok = int8_matmul_is_exact(pd);
  } catch (const dnnl::error&) {
    ok = false;
  }
  known.emplace(key, ok);
  return ok;
}

namespace {

// BF16 dot products (AVX512_BF16; every CPU with AMX-BF16 has them too) in the ISA oneDNN itself
// runs here: the CPU's, under rafter's hold (hold_onednn_isa) or the user's ONEDNN_MAX_CPU_ISA.
// oneDNN's ISA values are nested bit sets (avx512_core_amx holds avx512_core_bf16's bits).
bool onednn_isa_has_bf16_dot() {
  (void)onednn_engine();  // the hold first: oneDNN fixes its ISA when first asked
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

std::string onednn_isa_name() {
  using isa = dnnl::cpu_isa;
  static const std::pair<isa, const char*> names[] = {{isa::sse41, "sse41"},
                                                      {isa::avx, "avx"},
                                                      {isa::avx2, "avx2"},
                                                      {isa::avx2_vnni, "avx2_vnni"},
                                                      {isa::avx512_core, "avx512_core"},
                                                      {isa::avx512_core_vnni, "avx512_core_vnni"},
                                                      {isa::avx512_core_bf16, "avx512_core_bf16"},
                                                      {isa::avx512_core_amx, "avx512_core_amx"}};
  const isa effective = dnnl::get_effective_cpu_isa();
  for (const auto& [value, name] : names)
    if (value == effective) return name;
  return "ISA " + std::to_string(static_cast<unsigned>(effective));
}

}  // namespace

bool onednn_native_bf16_matmul(bool sum_post_op) {
  return onednn_isa_has_bf16_dot() && onednn_has_matmul(dt::bf16, dt::bf16, dt::bf16, sum_post_op);
}

std::string onednn_no_bf16_note() {
  if (!onednn_has_matmul(dt::bf16, dt::bf16, dt::bf16))
    return ": oneDNN " + onednn_version() + " has no bf16 matmul on this CPU";
  return ": oneDNN " + onednn_version() + " runs " + onednn_isa_name() +
         " here, without bf16 dot products (AVX512_BF16, AMX-BF16), where its bf16 matmul emulates them, "
         "slower than its fp32 one";
}

void widen(const void* from, dt type, float* to, std::int64_t n) {
  parallel_for(n, [&](std::int64_t lo, std::int64_t hi, int) {
    if (type == dt::bf16) {
      const auto* x = static_cast<const bf16*>(from);
      for (std::int64_t i = lo; i < hi; ++i) to[i] = ld(x, i);
    } else {
      const auto* x = static_cast<const std::int8_t*>(from);
      for (std::int64_t i = lo; i < hi; ++i) to[i] = float(x[i]);
    }
  }, 16384);
}

void narrow(const float* from, dt type, void* to, std::int64_t n) {
  parallel_for(n, [&](std::int64_t lo, std::int64_t hi, int) {
    if (type == dt::bf16) {
      auto* y = static_cast<bf16*>(to);
      for (std::int64_t i = lo; i < hi; ++i) st(y, i, from[i]);
    } else {
      auto* y = static_cast<std::int32_t*>(to);
      for (std::int64_t i = lo; i < hi; ++i) y[i] = static_cast<std::int32_t>(std::lrint(from[i]));
    }
  }, 16384);
}

}  // namespace rafter::workloads::cpu
