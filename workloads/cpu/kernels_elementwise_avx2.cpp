// Native CPU kernels of the row-wise and element-wise operators: rmsnorm, swiglu, residual_add,
// softmax, rope. fp32 arithmetic on fp32, bf16 or fp16 storage; rows split across the pinned pool; the
// inner loops are plain and branch-free so that the compiler vectorizes them.
// Comparisons may not trap and sqrt sets no errno: lets the compiler if-convert and vectorize.
#ifndef __clang__  // a GCC pragma clang does not know; the clang build (RAFTER_FUZZ) needs no speed
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "avx512_kernels.hpp"
#include "cpu_kernel.hpp"

RAFTER_CPU_KERNELS_BEGIN
namespace rafter::workloads::cpu {
namespace {

template <class T>
class RmsNormKernel : public Kernel {
 public:
  explicit RmsNormKernel(const OpInstance& inst)
      : t_(shape_value(inst, "tokens")), h_(shape_value(inst, "hidden")), bwd_(inst.phase == "bwd") {
    inputs.push_back(make_tensor("x", dtype_of<T>(), {t_, h_}));
    inputs.push_back(make_tensor("w", dtype_of<T>(), {h_}, 0.5, 1.5));
    if (bwd_) {
      inputs.push_back(make_tensor("dy", dtype_of<T>(), {t_, h_}));
      outputs.push_back(make_tensor("dx", dtype_of<T>(), {t_, h_}));
      outputs.push_back(make_tensor("dw", DType::F32, {h_}));
    } else {
      outputs.push_back(make_tensor("y", dtype_of<T>(), {t_, h_}));
    }
  }
  void run() override {
    const T *x = inputs[0].template as<T>(), *w = inputs[1].template as<T>();
    if (!bwd_) {
      T* y = outputs[0].template as<T>();
      parallel_for(t_, [&](std::int64_t b, std::int64_t e, int) {
        if constexpr (has_avx512_rows<T>) {
          if (avx512::available()) {
            if constexpr (std::is_same_v<T, bf16>) {
              if (h_ % 32 == 0) return avx512::rmsnorm_fwd_rows(x + b * h_, w, y + b * h_, e - b, h_);
            }
            for (std::int64_t r = b; r < e; ++r) avx512::rmsnorm_fwd(x + r * h_, w, y + r * h_, h_, r + 1 < e);
            return;
          }
        }
        for (std::int64_t r = b; r < e; ++r) {
          const T* xr = x + r * h_;
          const float ss = sum_squares(xr, h_);
          const float rs = 1.0f / std::sqrt(ss / float(h_) + 1e-5f);
          for (std::int64_t i = 0; i < h_; ++i) st(y + r * h_, i, ld(xr, i) * rs * ld(w, i));
        }
      }, row_grain(h_));
      return;
    }
    const T* dy = inputs[2].template as<T>();
    T* dx = outputs[0].template as<T>();
    const int threads = pool_threads();
    std::vector<std::vector<float>> dw_part(std::size_t(threads), std::vector<float>(std::size_t(h_), 0.0f));
    parallel_for(t_, [&](std::int64_t b, std::int64_t e, int wk) {
      float* dw = dw_part[std::size_t(wk)].data();
      if constexpr (has_avx512_rows<T>) {
        if (avx512::available()) {
          if constexpr (std::is_same_v<T, bf16>) {
            if (h_ % 32 == 0) return avx512::rmsnorm_bwd_rows(x + b * h_, w, dy + b * h_, dx + b * h_, dw, e - b, h_);
          }
          for (std::int64_t r = b; r < e; ++r) avx512::rmsnorm_bwd(x + r * h_, w, dy + r * h_, dx + r * h_, dw, h_, r + 1 < e);
          return;
        }
      }
      for (std::int64_t r = b; r < e; ++r) {
        const T *xr = x + r * h_, *dyr = dy + r * h_;
        const float ss = sum_squares(xr, h_);
        float lanes[16] = {}, dot = 0;
        std::int64_t i0 = 0;
        for (; i0 + 16 <= h_; i0 += 16)
          for (int j = 0; j < 16; ++j) lanes[j] += ld(w, i0 + j) * ld(dyr, i0 + j) * ld(xr, i0 + j);
        for (; i0 < h_; ++i0) dot += ld(w, i0) * ld(dyr, i0) * ld(xr, i0);
        for (float l : lanes) dot += l;
        const float rs = 1.0f / std::sqrt(ss / float(h_) + 1e-5f), c = rs * rs * rs / float(h_) * dot;
        for (std::int64_t i = 0; i < h_; ++i) {
          st(dx + r * h_, i, rs * ld(w, i) * ld(dyr, i) - ld(xr, i) * c);
          dw[i] += ld(dyr, i) * ld(xr, i) * rs;
        }
      }
    }, row_grain(h_));
    float* dw = outputs[1].template as<float>();
    for (std::int64_t i = 0; i < h_; ++i) {
      float s = 0;
      for (const auto& p : dw_part) s += p[std::size_t(i)];
      dw[i] = s;
    }
  }

 private:
  std::int64_t t_, h_;
  bool bwd_;
};

template <class T>
class SwigluKernel : public Kernel {
 public:
  explicit SwigluKernel(const OpInstance& inst)
      : t_(shape_value(inst, "tokens")), f_(shape_value(inst, "ffn")), bwd_(inst.phase == "bwd") {
    inputs.push_back(make_tensor("gate_up", dtype_of<T>(), {t_, 2 * f_}, -4, 4));
    if (bwd_) {
      inputs.push_back(make_tensor("dy", dtype_of<T>(), {t_, f_}));
      outputs.push_back(make_tensor("d_gate_up", dtype_of<T>(), {t_, 2 * f_}));
    } else {
      outputs.push_back(make_tensor("y", dtype_of<T>(), {t_, f_}));
    }
  }
  void run() override {
    const T* gu = inputs[0].template as<T>();
    const T* dy = bwd_ ? inputs[1].template as<T>() : nullptr;
    T* out = outputs[0].template as<T>();
    const std::int64_t f = f_;
    const bool bwd = bwd_;
    // Everything by value: no store can alias the loop's bounds or pointers.
    const bool simd = avx512::available();
    parallel_for(t_, [=](std::int64_t b, std::int64_t e, int) {
      for (std::int64_t r = b; r < e; ++r) {
        const T *g = gu + r * 2 * f, *u = g + f;
        if constexpr (has_avx512_rows<T>) {
          if (simd) {
            if (bwd) avx512::swiglu_bwd(g, u, dy + r * f, out + r * 2 * f, out + r * 2 * f + f, f);
            else avx512::swiglu_fwd(g, u, out + r * f, f);
            if (r + 1 == e) _mm_sfence();  // the rows' streamed stores, fenced once per block
            continue;
          }
        }
        if (!bwd) {
          T* o = out + r * f;
#pragma GCC unroll 4
          for (std::int64_t i = 0; i < f; ++i) {
            const float gv = ld(g, i);
            st(o, i, gv / (1.0f + fast_exp(-gv)) * ld(u, i));
          }
          continue;
        }
        T *og = out + r * 2 * f, *ou = og + f;
        const T* d = dy + r * f;
        for (std::int64_t i = 0; i < f; ++i) {
          const float gv = ld(g, i), uv = ld(u, i), dv = ld(d, i);
          const float sig = 1.0f / (1.0f + fast_exp(-gv));
          st(og, i, dv * uv * sig * (1.0f + gv * (1.0f - sig)));
          st(ou, i, dv * gv * sig);
        }
      }
    }, row_grain(f_));
  }

 private:
  std::int64_t t_, f_;
  bool bwd_;
};

template <class T>
class ResidualKernel : public Kernel {
 public:
  explicit ResidualKernel(const OpInstance& inst) : n_(shape_value(inst, "tokens") * shape_value(inst, "hidden")) {
    const std::int64_t t = shape_value(inst, "tokens"), h = shape_value(inst, "hidden");
    inputs.push_back(make_tensor("a", dtype_of<T>(), {t, h}));
    inputs.push_back(make_tensor("b", dtype_of<T>(), {t, h}));
    outputs.push_back(make_tensor("y", dtype_of<T>(), {t, h}));
  }
  void run() override {
    const T *a = inputs[0].template as<T>(), *b = inputs[1].template as<T>();
    T* y = outputs[0].template as<T>();
    parallel_for(n_, [&](std::int64_t lo, std::int64_t hi, int) {
      if constexpr (has_avx512_rows<T>)
        if (avx512::available()) return avx512::add(a + lo, b + lo, y + lo, hi - lo);
      for (std::int64_t i = lo; i < hi; ++i) st(y, i, ld(a, i) + ld(b, i));
    }, 16384);
  }

 private:
  std::int64_t n_;
};

template <class T>
class SoftmaxKernel : public Kernel {
 public:
  explicit SoftmaxKernel(const OpInstance& inst) : r_(shape_value(inst, "rows")), c_(shape_value(inst, "cols")) {
    inputs.push_back(make_tensor("x", dtype_of<T>(), {r_, c_}, -4, 4));
    outputs.push_back(make_tensor("y", dtype_of<T>(), {r_, c_}));
  }
  void run() override {
    const T* x = inputs[0].template as<T>();
    T* y = outputs[0].template as<T>();
    // One exp per element: exps go to a row buffer (L1/L2) and are scaled on the way out.
    parallel_for(r_, [&](std::int64_t b, std::int64_t e, int) {
      std::vector<float> ex(static_cast<std::size_t>(c_));
      if constexpr (has_avx512_rows<T>)
        if (avx512::available()) return avx512::softmax_rows(x + b * c_, y + b * c_, e - b, c_, ex.data());
      for (std::int64_t r = b; r < e; ++r) {
        const T* xr = x + r * c_;
        const float mx = row_max(xr, c_);
        float lanes[64] = {}, sum = 0;  // 64 lanes: enough independent exps to fill the FMA pipes
        std::int64_t j = 0;
        for (; j + 64 <= c_; j += 64)
          for (int l = 0; l < 64; ++l) lanes[l] += (ex[std::size_t(j + l)] = fast_exp(ld(xr, j + l) - mx));
        for (; j < c_; ++j) sum += (ex[std::size_t(j)] = fast_exp(ld(xr, j) - mx));
        for (float l : lanes) sum += l;
        const float inv = 1.0f / sum;
        for (std::int64_t k = 0; k < c_; ++k) st(y + r * c_, k, ex[std::size_t(k)] * inv);
      }
    }, row_grain(c_));
  }

 private:
  std::int64_t r_, c_;
};

template <class T>
class RopeKernel : public Kernel {
 public:
  explicit RopeKernel(const OpInstance& inst)
      : t_(shape_value(inst, "tokens")), h_(shape_value(inst, "heads")), d_(shape_value(inst, "head_dim")),
        seq_(shape_value(inst, "seq")), sign_(inst.phase == "bwd" ? -1.0f : 1.0f) {
    inputs.push_back(make_tensor("x", dtype_of<T>(), {t_, h_, d_}));
    outputs.push_back(make_tensor("y", dtype_of<T>(), {t_, h_, d_}));
  }
  void prepare() override {  // the cos/sin table, as frameworks cache it
    const std::int64_t half = d_ / 2;
    cos_.resize(std::size_t(seq_ * half));
    sin_.resize(std::size_t(seq_ * half));
    for (std::int64_t p = 0; p < seq_; ++p)
      for (std::int64_t i = 0; i < half; ++i) {
        const double th = double(p) * std::pow(10000.0, -2.0 * double(i) / double(d_));
        cos_[std::size_t(p * half + i)] = float(std::cos(th));
        sin_[std::size_t(p * half + i)] = sign_ * float(std::sin(th));
      }
  }
  void run() override {
    const T* x = inputs[0].template as<T>();
    T* y = outputs[0].template as<T>();
    const std::int64_t half = d_ / 2;
    const bool simd = has_avx512_rows<T> && avx512::available() && half % 16 == 0;
    parallel_for(t_, [&](std::int64_t b, std::int64_t e, int) {
      for (std::int64_t r = b; r < e; ++r) {
        const float *c = &cos_[std::size_t((r % seq_) * half)], *s = &sin_[std::size_t((r % seq_) * half)];
        if constexpr (has_avx512_rows<T>) {
          if (simd) {
            avx512::rope_token(x + r * h_ * d_, y + r * h_ * d_, c, s, h_, d_);
            continue;
          }
        }
        for (std::int64_t hh = 0; hh < h_; ++hh) {
          const std::int64_t base = (r * h_ + hh) * d_;
          for (std::int64_t i = 0; i < half; ++i) {
            const float a = ld(x, base + i), bb = ld(x, base + half + i);
            st(y, base + i, a * c[i] - bb * s[i]);
            st(y, base + half + i, bb * c[i] + a * s[i]);
          }
        }
      }
      if (simd) _mm_sfence();
    }, row_grain(h_ * d_));
  }

 private:
  std::int64_t t_, h_, d_, seq_;
  float sign_;
  std::vector<float> cos_, sin_;
};

}  // namespace
}  // namespace rafter::workloads::cpu
RAFTER_CPU_KERNELS_END

namespace rafter::workloads::cpu {
namespace {

RAFTER_REGISTER_CPU_KERNEL({"rmsnorm", "cpu.native", activation_here, make_typed<RmsNormKernel>});
RAFTER_REGISTER_CPU_KERNEL({"swiglu", "cpu.native", activation_here, make_typed<SwigluKernel>});
RAFTER_REGISTER_CPU_KERNEL({"residual_add", "cpu.native", activation_here, make_typed<ResidualKernel>});
RAFTER_REGISTER_CPU_KERNEL({"softmax", "cpu.native", activation_here, make_typed<SoftmaxKernel>});
RAFTER_REGISTER_CPU_KERNEL({"rope", "cpu.native",
                            [](const OpInstance& i) { return activation_here(i) && shape_value(i, "head_dim") % 2 == 0; },
                            make_typed<RopeKernel>});

}  // namespace
}  // namespace rafter::workloads::cpu
