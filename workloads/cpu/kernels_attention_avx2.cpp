// Native CPU attention kernels: fused prefill and decode (one pass per query row: scores, softmax,
// P·V, all in fp32 registers/L1), the flash-style backward (scores recomputed), and the unfused
// pieces (QKᵀ, scale + mask + softmax, P·V). Layouts as in src/attention_math.hpp.
// Comparisons may not trap and sqrt sets no errno: lets the compiler if-convert and vectorize.
#ifndef __clang__  // a GCC pragma clang does not know; the clang build (RAFTER_FUZZ) needs no speed
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#endif
#include <algorithm>
#include <cmath>

#include "../src/attention_math.hpp"
#include "avx512_kernels.hpp"
#include "cpu_kernel.hpp"

RAFTER_CPU_KERNELS_BEGIN
namespace rafter::workloads::cpu {
namespace {

using detail::AttentionDims;
AttentionDims dims(const OpInstance& inst) {
  if (inst.op == "attention_decode")
    return {shape_value(inst, "batch"), 1, shape_value(inst, "kv_len"), shape_value(inst, "heads"),
            shape_value(inst, "kv_heads"), shape_value(inst, "head_dim"), true};
  return {shape_value(inst, "batch"), shape_value(inst, "seq"), shape_value(inst, "seq"), shape_value(inst, "heads"),
          shape_value(inst, "kv_heads"), shape_value(inst, "head_dim"), shape_value(inst, "causal") != 0};
}

// Scores of query row q (fp32, already scaled) against keys [0, n): fills s, returns the max.
template <class T>
float scores(const AttentionDims& a, const float* q, const T* K, std::int64_t b, std::int64_t h, std::int64_t n, float* s) {
  float mx = -INFINITY;
  for (std::int64_t j = 0; j < n; ++j) {
    const float acc = dot(q, K + a.kv_index(b, j, h), a.d);
    s[j] = acc;
    mx = std::max(mx, acc);
  }
  return mx;
}

template <class T>
class AttentionFwdKernel : public Kernel {
 public:
  explicit AttentionFwdKernel(const OpInstance& inst) : a_(dims(inst)) {
    inputs.push_back(make_tensor("Q", dtype_of<T>(), {a_.batch, a_.q_len, a_.heads, a_.d}));
    inputs.push_back(make_tensor("K", dtype_of<T>(), {a_.batch, a_.kv_len, a_.kv_heads, a_.d}));
    inputs.push_back(make_tensor("V", dtype_of<T>(), {a_.batch, a_.kv_len, a_.kv_heads, a_.d}));
    outputs.push_back(make_tensor("O", dtype_of<T>(), {a_.batch, a_.q_len, a_.heads, a_.d}));
    details["algorithm"] = "native row-wise fused attention (fp32 softmax)";
  }
  void run() override {
    if (a_.q_len == 1) return run_decode();
    const T *Q = inputs[0].template as<T>(), *K = inputs[1].template as<T>(), *V = inputs[2].template as<T>();
    T* O = outputs[0].template as<T>();
    const float scale = float(a_.scale());
    parallel_for(a_.batch * a_.heads * a_.q_len, [&](std::int64_t lo, std::int64_t hi, int) {
      std::vector<float> s(static_cast<std::size_t>(a_.kv_len)), q(static_cast<std::size_t>(a_.d)), o(static_cast<std::size_t>(a_.d));
      for (std::int64_t item = lo; item < hi; ++item) {
        const std::int64_t i = item % a_.q_len, h = (item / a_.q_len) % a_.heads, b = item / (a_.q_len * a_.heads);
        const std::int64_t n = a_.visible(i), qi = a_.q_index(b, i, h);
        for (std::int64_t x = 0; x < a_.d; ++x) q[std::size_t(x)] = ld(Q, qi + x) * scale;
        const float mx = scores(a_, q.data(), K, b, h, n, s.data());
        float sum = 0;
        for (std::int64_t j = 0; j < n; ++j) sum += (s[std::size_t(j)] = fast_exp(s[std::size_t(j)] - mx));
        std::fill(o.begin(), o.end(), 0.0f);
        for (std::int64_t j = 0; j < n; ++j) {
          const T* v = V + a_.kv_index(b, j, h);
          const float p = s[std::size_t(j)];
          for (std::int64_t x = 0; x < a_.d; ++x) o[std::size_t(x)] += p * ld(v, x);
        }
        const float inv = 1.0f / sum;
        for (std::int64_t x = 0; x < a_.d; ++x) st(O, qi + x, o[std::size_t(x)] * inv);
      }
    });
  }

 private:
  // Decode: the cache is token-major ([batch, kv_len, kv_heads, d], FlashInfer's NHD), so a thread
  // walks the keys once for a contiguous range of heads: each key's heads are adjacent in memory
  // (one stream, no page-sized strides between consecutive reads).
  void run_decode() {
    const T *Q = inputs[0].template as<T>(), *K = inputs[1].template as<T>(), *V = inputs[2].template as<T>();
    T* O = outputs[0].template as<T>();
    const float scale = float(a_.scale());
    const std::int64_t H = a_.heads, n = a_.kv_len, d = a_.d;
    if constexpr (std::is_same_v<T, bf16>) {
      if (avx512::available() && d % 32 == 0) {
        const avx512::DecodeArgs args{Q, K, V, O, n, H, a_.kv_heads, d, scale};
        parallel_for(a_.batch * H, [&](std::int64_t lo, std::int64_t hi, int) {
          std::vector<float> sc(static_cast<std::size_t>(H * n)), acc(static_cast<std::size_t>(H * d));
          for (std::int64_t item = lo; item < hi;) {
            const std::int64_t b = item / H, hs = item % H, he = std::min(H, hs + (hi - item));
            avx512::attention_decode(args, b, hs, he, sc.data(), acc.data());
            item += he - hs;
          }
        });
        return;
      }
    }
    parallel_for(a_.batch * H, [&](std::int64_t lo, std::int64_t hi, int) {
      std::vector<float> sc(static_cast<std::size_t>(H * n)), q(static_cast<std::size_t>(H * d)), o(static_cast<std::size_t>(H * d));
      for (std::int64_t item = lo; item < hi;) {
        const std::int64_t b = item / H, hs = item % H, he = std::min(H, hs + (hi - item));
        for (std::int64_t h = hs; h < he; ++h)
          for (std::int64_t x = 0; x < d; ++x) q[std::size_t(h * d + x)] = ld(Q, a_.q_index(b, 0, h) + x) * scale;
        for (std::int64_t j = 0; j < n; ++j)
          for (std::int64_t h = hs; h < he; ++h) sc[std::size_t(h * n + j)] = dot(&q[std::size_t(h * d)], K + a_.kv_index(b, j, h), d);
        for (std::int64_t h = hs; h < he; ++h) {
          float* row = &sc[std::size_t(h * n)];
          const float mx = row_max(row, n);
          float sum = 0;
          for (std::int64_t j = 0; j < n; ++j) sum += (row[j] = fast_exp(row[j] - mx));
          const float inv = 1.0f / sum;
          for (std::int64_t j = 0; j < n; ++j) row[j] *= inv;
        }
        std::fill(o.begin(), o.end(), 0.0f);
        for (std::int64_t j = 0; j < n; ++j)
          for (std::int64_t h = hs; h < he; ++h) {
            const float p = sc[std::size_t(h * n + j)];
            const T* v = V + a_.kv_index(b, j, h);
            float* oh = &o[std::size_t(h * d)];
            for (std::int64_t x = 0; x < d; ++x) oh[x] += p * ld(v, x);
          }
        for (std::int64_t h = hs; h < he; ++h)
          for (std::int64_t x = 0; x < d; ++x) st(O, a_.q_index(b, 0, h) + x, o[std::size_t(h * d + x)]);
        item += he - hs;
      }
    });
  }

  AttentionDims a_;
};

template <class T>
class AttentionBwdKernel : public Kernel {
 public:
  explicit AttentionBwdKernel(const OpInstance& inst) : a_(dims(inst)) {
    for (const char* n : {"Q", "K", "V"})
      inputs.push_back(make_tensor(n, dtype_of<T>(), {a_.batch, *n == 'Q' ? a_.q_len : a_.kv_len, *n == 'Q' ? a_.heads : a_.kv_heads, a_.d}));
    inputs.push_back(make_tensor("dO", dtype_of<T>(), {a_.batch, a_.q_len, a_.heads, a_.d}));
    outputs.push_back(make_tensor("dQ", dtype_of<T>(), {a_.batch, a_.q_len, a_.heads, a_.d}));
    outputs.push_back(make_tensor("dK", dtype_of<T>(), {a_.batch, a_.kv_len, a_.kv_heads, a_.d}));
    outputs.push_back(make_tensor("dV", dtype_of<T>(), {a_.batch, a_.kv_len, a_.kv_heads, a_.d}));
    details["algorithm"] = "native row-wise attention backward (scores recomputed)";
  }
  void run() override {
    const T *Q = inputs[0].template as<T>(), *K = inputs[1].template as<T>(), *V = inputs[2].template as<T>(), *dO = inputs[3].template as<T>();
    const float scale = float(a_.scale());
    const std::int64_t group = a_.heads / a_.kv_heads, kvd = a_.kv_len * a_.d;
    // One work item per (batch, kv head): it owns that head's dK and dV, so nothing races.
    parallel_for(a_.batch * a_.kv_heads, [&](std::int64_t lo, std::int64_t hi, int) {
      std::vector<float> s(static_cast<std::size_t>(a_.kv_len)), dp(static_cast<std::size_t>(a_.kv_len)), q(static_cast<std::size_t>(a_.d)),
          dq(static_cast<std::size_t>(a_.d)), dk(static_cast<std::size_t>(kvd)), dv(static_cast<std::size_t>(kvd));
      for (std::int64_t item = lo; item < hi; ++item) {
        const std::int64_t b = item / a_.kv_heads, hk = item % a_.kv_heads;
        std::fill(dk.begin(), dk.end(), 0.0f);
        std::fill(dv.begin(), dv.end(), 0.0f);
        for (std::int64_t h = hk * group; h < (hk + 1) * group; ++h)
          for (std::int64_t i = 0; i < a_.q_len; ++i) row(b, h, i, Q, K, V, dO, scale, s, dp, q, dq, dk, dv);
        for (std::int64_t j = 0; j < a_.kv_len; ++j)
          for (std::int64_t x = 0; x < a_.d; ++x) {
            const std::int64_t idx = ((b * a_.kv_len + j) * a_.kv_heads + hk) * a_.d + x;
            st(outputs[1].template as<T>(), idx, dk[std::size_t(j * a_.d + x)]);
            st(outputs[2].template as<T>(), idx, dv[std::size_t(j * a_.d + x)]);
          }
      }
    });
  }

 private:
  void row(std::int64_t b, std::int64_t h, std::int64_t i, const T* Q, const T* K, const T* V, const T* dO, float scale,
           std::vector<float>& s, std::vector<float>& dp, std::vector<float>& q, std::vector<float>& dq,
           std::vector<float>& dk, std::vector<float>& dv) {
    const std::int64_t n = a_.visible(i), qi = a_.q_index(b, i, h);
    for (std::int64_t x = 0; x < a_.d; ++x) q[std::size_t(x)] = ld(Q, qi + x) * scale;
    const float mx = scores(a_, q.data(), K, b, h, n, s.data());
    float sum = 0, D = 0;
    for (std::int64_t j = 0; j < n; ++j) sum += (s[std::size_t(j)] = fast_exp(s[std::size_t(j)] - mx));
    for (std::int64_t j = 0; j < n; ++j) {
      s[std::size_t(j)] /= sum;
      const float acc = dot(dO + qi, V + a_.kv_index(b, j, h), a_.d);
      dp[std::size_t(j)] = acc;
      D += s[std::size_t(j)] * acc;
    }
    std::fill(dq.begin(), dq.end(), 0.0f);
    for (std::int64_t j = 0; j < n; ++j) {
      const float p = s[std::size_t(j)], ds = p * (dp[std::size_t(j)] - D) * scale;
      const T* k = K + a_.kv_index(b, j, h);
      float *dkj = &dk[std::size_t(j * a_.d)], *dvj = &dv[std::size_t(j * a_.d)];
      for (std::int64_t x = 0; x < a_.d; ++x) {
        dq[std::size_t(x)] += ds * ld(k, x);
        dkj[x] += ds * ld(Q, qi + x);
        dvj[x] += p * ld(dO, qi + x);
      }
    }
    for (std::int64_t x = 0; x < a_.d; ++x) st(outputs[0].template as<T>(), qi + x, dq[std::size_t(x)]);
  }
  AttentionDims a_;
};

struct Unfused {
  std::int64_t b, s, kv, h, hkv, d;
  bool causal;
};
Unfused unfused(const OpInstance& i) {
  return {shape_value(i, "batch"), shape_value(i, "seq"), shape_value(i, "kv_seq"), shape_value(i, "heads"),
          shape_value(i, "kv_heads", shape_value(i, "heads")), shape_value(i, "head_dim"), shape_value(i, "causal") != 0};
}

// attention_qk (mode 0), attention_softmax (1), attention_pv (2).
template <class T>
class UnfusedKernel : public Kernel {
 public:
  explicit UnfusedKernel(const OpInstance& inst)
      : u_(unfused(inst)), mode_(inst.op == "attention_qk" ? 0 : inst.op == "attention_softmax" ? 1 : 2) {
    const std::vector<std::int64_t> q{u_.b, u_.s, u_.h, u_.d}, kv{u_.b, u_.kv, u_.hkv, u_.d}, sc{u_.b, u_.h, u_.s, u_.kv};
    if (mode_ == 0) {
      inputs.push_back(make_tensor("Q", dtype_of<T>(), q));
      inputs.push_back(make_tensor("K", dtype_of<T>(), kv));
      outputs.push_back(make_tensor("S", dtype_of<T>(), sc));
    } else if (mode_ == 1) {
      inputs.push_back(make_tensor("S", dtype_of<T>(), sc, -8, 8));
      outputs.push_back(make_tensor("P", dtype_of<T>(), sc));
    } else {
      inputs.push_back(make_tensor("P", dtype_of<T>(), sc, 0, 1));
      inputs.push_back(make_tensor("V", dtype_of<T>(), kv));
      outputs.push_back(make_tensor("O", dtype_of<T>(), q));
    }
  }
  void run() override {
    parallel_for(u_.b * u_.h * u_.s, [&](std::int64_t lo, std::int64_t hi, int) {
      std::vector<float> acc(static_cast<std::size_t>(std::max(u_.kv, u_.d)));
      for (std::int64_t r = lo; r < hi; ++r) row(r, acc.data());
    });
  }

 private:
  void row(std::int64_t r, float* acc) {
    const std::int64_t i = r % u_.s, h = (r / u_.s) % u_.h, b = r / (u_.s * u_.h);
    const std::int64_t qoff = ((b * u_.s + i) * u_.h + h) * u_.d;
    auto koff = [&](std::int64_t j) { return ((b * u_.kv + j) * u_.hkv + h / (u_.h / u_.hkv)) * u_.d; };
    if (mode_ == 0) {
      const T *Q = inputs[0].template as<T>(), *K = inputs[1].template as<T>();
      for (std::int64_t j = 0; j < u_.kv; ++j) {
        st(outputs[0].template as<T>(), r * u_.kv + j, dot(Q + qoff, K + koff(j), u_.d));
      }
    } else if (mode_ == 1) {
      const T* S = inputs[0].template as<T>() + r * u_.kv;
      T* P = outputs[0].template as<T>() + r * u_.kv;
      const float scale = 1.0f / std::sqrt(float(u_.d));
      const std::int64_t n = u_.causal ? std::min(u_.kv, i + (u_.kv - u_.s) + 1) : u_.kv;
      const float mx = row_max(S, n, scale);
      float sum = 0;
      for (std::int64_t j = 0; j < n; ++j) sum += (acc[j] = fast_exp(ld(S, j) * scale - mx));
      for (std::int64_t j = 0; j < u_.kv; ++j) st(P, j, j < n ? acc[j] / sum : 0.0f);
    } else {
      const T *P = inputs[0].template as<T>() + r * u_.kv, *V = inputs[1].template as<T>();
      std::fill(acc, acc + u_.d, 0.0f);
      for (std::int64_t j = 0; j < u_.kv; ++j) {
        const float p = ld(P, j);
        for (std::int64_t x = 0; x < u_.d; ++x) acc[x] += p * ld(V, koff(j) + x);
      }
      for (std::int64_t x = 0; x < u_.d; ++x) st(outputs[0].template as<T>(), qoff + x, acc[x]);
    }
  }
  Unfused u_;
  int mode_;
};

}  // namespace
}  // namespace rafter::workloads::cpu
RAFTER_CPU_KERNELS_END

namespace rafter::workloads::cpu {
namespace {

RAFTER_REGISTER_CPU_KERNEL({"attention_prefill", "cpu.native", activation_here, make_typed<AttentionFwdKernel>});
RAFTER_REGISTER_CPU_KERNEL({"attention_decode", "cpu.native", activation_here, make_typed<AttentionFwdKernel>});
RAFTER_REGISTER_CPU_KERNEL({"attention_backward", "cpu.native", activation_here, make_typed<AttentionBwdKernel>});
RAFTER_REGISTER_CPU_KERNEL({"attention_qk", "cpu.native", activation_here, make_typed<UnfusedKernel>});
RAFTER_REGISTER_CPU_KERNEL({"attention_softmax", "cpu.native", activation_here, make_typed<UnfusedKernel>});
RAFTER_REGISTER_CPU_KERNEL({"attention_pv", "cpu.native", activation_here, make_typed<UnfusedKernel>});

}  // namespace
}  // namespace rafter::workloads::cpu
