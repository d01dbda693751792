// Native CPU kernels of embedding (gather / scatter-add), cross_entropy (fused log-softmax,
// fwd/bwd) and the AdamW step (FP32 master weights and moments, low-precision gradient and copy).
// Comparisons may not trap and sqrt sets no errno: lets the compiler if-convert and vectorize.
#ifndef __clang__  // a GCC pragma clang does not know; the clang build (RAFTER_FUZZ) needs no speed
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "avx512_kernels.hpp"
#include "cpu_kernel.hpp"
#include "rafter/workloads/adamw.hpp"

RAFTER_CPU_KERNELS_BEGIN
namespace rafter::workloads::cpu {
namespace {

template <class T>
class EmbeddingKernel : public Kernel {
 public:
  explicit EmbeddingKernel(const OpInstance& inst)
      : t_(shape_value(inst, "tokens")), h_(shape_value(inst, "hidden")), v_(shape_value(inst, "vocab")),
        bwd_(inst.phase == "bwd") {
    inputs.push_back(make_tensor("ids", DType::S32, {t_}, 0, double(v_)));
    if (bwd_) {
      inputs.push_back(make_tensor("dy", dtype_of<T>(), {t_, h_}));
      inputs.push_back(make_tensor("dW_in", DType::F32, {v_, h_}));
      outputs.push_back(make_tensor("dW", DType::F32, {v_, h_}));
    } else {
      inputs.push_back(make_tensor("table", dtype_of<T>(), {v_, h_}));
      outputs.push_back(make_tensor("y", dtype_of<T>(), {t_, h_}));
    }
  }
  void prepare() override {  // the gradient accumulates in place
    if (bwd_) std::memcpy(outputs[0].buffer.data(), inputs[2].buffer.data(), outputs[0].size() * 4);
  }
  void run() override {
    const auto* ids = inputs[0].template as<std::int32_t>();
    if (!bwd_) {
      const T* table = inputs[1].template as<T>();
      T* y = outputs[0].template as<T>();
      const bool simd = avx512::available();
      parallel_for(t_, [&](std::int64_t b, std::int64_t e, int) {
        for (std::int64_t r = b; r < e; ++r) {
          const T* src = table + std::int64_t(ids[r]) * h_;
          const T* next = r + 1 < e ? table + std::int64_t(ids[r + 1]) * h_ : nullptr;
          if (simd) avx512::copy_stream(y + r * h_, src, std::size_t(h_) * sizeof(T), next);
          else std::memcpy(y + r * h_, src, std::size_t(h_) * sizeof(T));
        }
        if (simd) _mm_sfence();
      }, row_grain(h_));
      return;
    }
    const T* dy = inputs[1].template as<T>();
    float* dW = outputs[0].template as<float>();
    // Threads own column slices: repeated ids never race.
    parallel_for(h_, [&](std::int64_t c0, std::int64_t c1, int) {
      for (std::int64_t r = 0; r < t_; ++r) {
        float* row = dW + std::int64_t(ids[r]) * h_;
        for (std::int64_t c = c0; c < c1; ++c) row[c] += ld(dy, r * h_ + c);
      }
    }, row_grain(t_));
  }

 private:
  std::int64_t t_, h_, v_;
  bool bwd_;
};

template <class T>
class CrossEntropyKernel : public Kernel {
 public:
  explicit CrossEntropyKernel(const OpInstance& inst)
      : t_(shape_value(inst, "tokens")), v_(shape_value(inst, "vocab")), bwd_(inst.phase == "bwd") {
    inputs.push_back(make_tensor("logits", dtype_of<T>(), {t_, v_}, -5, 5));
    inputs.push_back(make_tensor("labels", DType::S32, {t_}, 0, double(v_)));
    if (bwd_) outputs.push_back(make_tensor("dlogits", dtype_of<T>(), {t_, v_}));
    else outputs.push_back(make_tensor("loss", DType::F32, {t_}));
  }
  void run() override {
    const T* z = inputs[0].template as<T>();
    const auto* labels = inputs[1].template as<std::int32_t>();
    parallel_for(t_, [&](std::int64_t b, std::int64_t e, int) {
      if constexpr (has_avx512_rows<T>) {
        // Backward: dz = softmax(z) − onehot(label), so the softmax kernel (one exp per value,
        // each row read once from DRAM) and then the labels' entries.
        if (bwd_ && avx512::available()) {
          T* d = outputs[0].template as<T>();
          std::vector<float> scratch(static_cast<std::size_t>(v_ + 16));
          avx512::softmax_rows(z + b * v_, d + b * v_, e - b, v_, scratch.data());
          for (std::int64_t r = b; r < e; ++r) st(d + r * v_, labels[r], ld(d + r * v_, labels[r]) - 1.0f);
          return;
        }
      }
      for (std::int64_t r = b; r < e; ++r) {
        const T* zr = z + r * v_;
        const std::int64_t label = labels[r];
        if constexpr (has_avx512_rows<T>) {
          if (avx512::available()) {
            float mx = 0;
            const float lse = avx512::logsumexp(zr, v_, &mx, r + 1 < e ? zr + v_ : nullptr);
            if (!bwd_) {
              outputs[0].template as<float>()[r] = lse - ld(zr, label);
              continue;
            }
            T* d = outputs[0].template as<T>() + r * v_;
            avx512::scaled_exp(zr, d, v_, mx, std::exp(mx - lse));
            _mm_sfence();  // the streamed row is read back below
            st(d, label, ld(d, label) - 1.0f);
            continue;
          }
        }
        const float mx = row_max(zr, v_), sum = sum_exp(zr, v_, mx);
        if (!bwd_) {
          outputs[0].template as<float>()[r] = std::log(sum) + mx - ld(zr, label);
          continue;
        }
        T* d = outputs[0].template as<T>() + r * v_;
        const float inv = 1.0f / sum;
        for (std::int64_t j = 0; j < v_; ++j) st(d, j, fast_exp(ld(zr, j) - mx) * inv);
        st(d, label, ld(d, label) - 1.0f);
      }
    }, row_grain(v_));
  }

 private:
  std::int64_t t_, v_;
  bool bwd_;
};

template <class T>
class AdamwKernel : public Kernel {
 public:
  explicit AdamwKernel(const OpInstance& inst) : n_(shape_value(inst, "params")) {
    inputs.push_back(make_tensor("p", DType::F32, {n_}));
    inputs.push_back(make_tensor("m", DType::F32, {n_}, -1e-2, 1e-2));
    inputs.push_back(make_tensor("v", DType::F32, {n_}, 1e-6, 1e-4));
    inputs.push_back(make_tensor("g", dtype_of<T>(), {n_}, -1e-2, 1e-2));
    outputs.push_back(make_tensor("p_out", DType::F32, {n_}));
    outputs.push_back(make_tensor("m_out", DType::F32, {n_}));
    outputs.push_back(make_tensor("v_out", DType::F32, {n_}));
    outputs.push_back(make_tensor("copy", dtype_of<T>(), {n_}));
  }
  void prepare() override {  // the step updates p, m, v in place
    for (int i = 0; i < 3; ++i) std::memcpy(outputs[std::size_t(i)].buffer.data(), inputs[std::size_t(i)].buffer.data(), std::size_t(n_) * 4);
  }
  void run() override {
    const AdamwHyper hp;
    const float b1 = float(hp.beta1), b2 = float(hp.beta2), lr = float(hp.lr), eps = float(hp.eps),
                wd = float(hp.weight_decay);
    const float c1 = 1.0f / float(1 - std::pow(hp.beta1, hp.step)), c2 = 1.0f / float(1 - std::pow(hp.beta2, hp.step));
    float *p = outputs[0].template as<float>(), *m = outputs[1].template as<float>(), *v = outputs[2].template as<float>();
    const T* g = inputs[3].template as<T>();
    T* copy = outputs[3].template as<T>();
    // Pointers copied into the lambda: captured by reference, stores to m/v could alias them and
    // the loop would not vectorize. sqrt goes through _mm256_sqrt_ps (_mm_sqrt_ps in the baseline
    // build): std::sqrt may set errno, which keeps the compiler from vectorizing a loop around it.
    if constexpr (has_avx512_rows<T>) {
      if (avx512::available()) {  // chunks of whole 64-byte lines: the copy's streaming stores stay aligned
        const avx512::AdamwConsts k{b1, b2, lr, eps, wd, c1, c2};
        const std::int64_t n = n_;
        parallel_for((n + 31) / 32, [=](std::int64_t lo, std::int64_t hi, int) {
          avx512::adamw_step(k, p, m, v, g, copy, lo * 32, std::min(n, hi * 32));
        }, 512);
        return;
      }
    }
    parallel_for(n_, [=](std::int64_t lo, std::int64_t hi, int) {
      alignas(32) float den[256];
      for (std::int64_t b0 = lo; b0 < hi; b0 += 256) {
        const std::int64_t nb = std::min<std::int64_t>(256, hi - b0);
        for (std::int64_t j = 0; j < nb; ++j) {
          const float gi = ld(g, b0 + j);
          m[b0 + j] = b1 * m[b0 + j] + (1 - b1) * gi;
          v[b0 + j] = b2 * v[b0 + j] + (1 - b2) * gi * gi;
          den[j] = v[b0 + j] * c2;
        }
        std::int64_t j = 0;
#ifdef RAFTER_CPU_BASELINE
        for (; j + 4 <= nb; j += 4) _mm_store_ps(den + j, _mm_sqrt_ps(_mm_load_ps(den + j)));
#else
        for (; j + 8 <= nb; j += 8) _mm256_store_ps(den + j, _mm256_sqrt_ps(_mm256_load_ps(den + j)));
#endif
        for (; j < nb; ++j) den[j] = std::sqrt(den[j]);
        for (j = 0; j < nb; ++j) {
          const std::int64_t i = b0 + j;
          const float w = p[i] - lr * ((m[i] * c1) / (den[j] + eps) + wd * p[i]);
          p[i] = w;
          st(copy, i, w);
        }
      }
    }, 16384);
  }

 private:
  std::int64_t n_;
};

}  // namespace
}  // namespace rafter::workloads::cpu
RAFTER_CPU_KERNELS_END

namespace rafter::workloads::cpu {
namespace {

RAFTER_REGISTER_CPU_KERNEL({"embedding", "cpu.native", activation_here, make_typed<EmbeddingKernel>});
RAFTER_REGISTER_CPU_KERNEL({"cross_entropy", "cpu.native", activation_here, make_typed<CrossEntropyKernel>});
RAFTER_REGISTER_CPU_KERNEL({"adamw", "cpu.native", activation_here, make_typed<AdamwKernel>});

}  // namespace
}  // namespace rafter::workloads::cpu
