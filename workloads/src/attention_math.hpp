// FP64 attention math shared by the attention references (fused, unfused, backward, decode).
// Layouts: Q/O [batch, q_len, heads, d], K/V [batch, kv_len, kv_heads, d] (token-major, as the
// projections write them). Query i sees key j when !causal or j <= i + (kv_len - q_len).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace rafter::workloads::detail {

// Unmasked (query, key) pairs under a causal mask whose last query sees every key: the sum over
// queries of clamp(i + kv - q + 1, 0, kv), in closed form and in double (a loop over 2^48 queries
// would never end, and the count overflows int64 long before).
inline double causal_pairs(double q_len, double kv_len) {
  if (kv_len >= q_len) return q_len * (kv_len - q_len) + q_len * (q_len + 1) / 2;
  return kv_len * (kv_len + 1) / 2;  // the first q - kv queries see no key
}

struct AttentionDims {
  std::int64_t batch, q_len, kv_len, heads, kv_heads, d;
  bool causal;
  std::int64_t q_index(std::int64_t b, std::int64_t i, std::int64_t h) const {
    return ((b * q_len + i) * heads + h) * d;
  }
  std::int64_t kv_index(std::int64_t b, std::int64_t j, std::int64_t h) const {
    return ((b * kv_len + j) * kv_heads + h / (heads / kv_heads)) * d;
  }
  std::int64_t visible(std::int64_t i) const {  // number of keys query i sees
    return causal ? std::clamp<std::int64_t>(i + (kv_len - q_len) + 1, 0, kv_len) : kv_len;
  }
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(d)); }
  // Unmasked (query, key) pairs of one head of one sequence.
  double pairs_per_head() const { return causal ? causal_pairs(double(q_len), double(kv_len)) : double(q_len) * double(kv_len); }
};

// Softmax probabilities of query (b, i, h) over its visible keys.
inline std::vector<double> attention_probs(const AttentionDims& a, const std::vector<double>& Q,
                                           const std::vector<double>& K, std::int64_t b, std::int64_t i,
                                           std::int64_t h) {
  const std::int64_t n = a.visible(i);
  std::vector<double> p(static_cast<std::size_t>(n));
  double mx = -INFINITY;
  for (std::int64_t j = 0; j < n; ++j) {
    double s = 0;
    for (std::int64_t x = 0; x < a.d; ++x) s += Q[a.q_index(b, i, h) + x] * K[a.kv_index(b, j, h) + x];
    p[j] = s * a.scale();
    mx = std::max(mx, p[j]);
  }
  double sum = 0;
  for (auto& v : p) sum += (v = std::exp(v - mx));
  for (auto& v : p) v /= sum;
  return p;
}

inline void attention_forward_reference(const AttentionDims& a, const std::vector<double>& Q,
                                        const std::vector<double>& K, const std::vector<double>& V,
                                        std::vector<double>& O) {
  for (std::int64_t b = 0; b < a.batch; ++b)
    for (std::int64_t i = 0; i < a.q_len; ++i)
      for (std::int64_t h = 0; h < a.heads; ++h) {
        const auto p = attention_probs(a, Q, K, b, i, h);
        for (std::int64_t x = 0; x < a.d; ++x) {
          double acc = 0;
          for (std::size_t j = 0; j < p.size(); ++j) acc += p[j] * V[a.kv_index(b, j, h) + x];
          O[a.q_index(b, i, h) + x] = acc;
        }
      }
}

}  // namespace rafter::workloads::detail
