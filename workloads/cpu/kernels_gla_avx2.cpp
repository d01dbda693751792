// Native CPU kernel of gated linear attention in chunked form (forward). Per (batch, head):
// a dk×dv fp32 state; per chunk of C tokens with in-chunk cumulative log-gates b_t:
//   o_t = (q_t ∘ e^{b_t})·S + Σ_{τ≤t} A_tτ v_τ,   A_tτ = Σ_i q_ti k_τi e^{b_ti − b_τi}
//   S ← diag(e^{b_C})·S + Σ_τ (k_τ ∘ e^{b_C − b_τ})ᵀ v_τ
// which equals the recurrence S_t = diag(e^{g_t}) S_{t−1} + k_tᵀ v_t, o_t = q_t S_t.
// Each chunk is converted to fp32 once; then Q·S, A·V and the state update are register-tiled
// products. The scores split the chunk into sub-chunks of kSub tokens (as FLA's kernels do):
// a pair (t, τ) in different sub-chunks factors through r, the last token before t's sub-chunk,
// as (q_t∘e^{b_t−b_r})·(k_τ∘e^{b_r−b_τ}), a product; pairs within one sub-chunk take e^{b_t−b_τ}
// term by term. Every exponent is ≤ 0 (b falls with t), so nothing overflows however small the
// gates; the unsafe one-reference form k_τ∘e^{−b_τ} (e^{+160} for C=64 and gates of e^{-2.5})
// is never formed.
// Comparisons may not trap and sqrt sets no errno: lets the compiler if-convert and vectorize.
#ifndef __clang__  // a GCC pragma clang does not know; the clang build (RAFTER_FUZZ) needs no speed
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#endif
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "gla_kernel.hpp"

RAFTER_CPU_KERNELS_BEGIN
namespace rafter::workloads::cpu {
namespace {

constexpr std::int64_t kSub = 16;  // sub-chunk length of the scores (tokens)

// The tiles' 8-float register: one ymm, or in the baseline build two xmm (16 registers, no FMA:
// multiply, then add), whence its shorter tile.
#ifdef RAFTER_CPU_BASELINE
constexpr int kRows = 3;  // register tile: 3 rows × 16 columns = 12 xmm accumulators
struct F8 {
  __m128 lo, hi;
};
inline F8 f8_load(const float* p) { return {_mm_loadu_ps(p), _mm_loadu_ps(p + 4)}; }
inline void f8_store(float* p, F8 v) {
  _mm_storeu_ps(p, v.lo);
  _mm_storeu_ps(p + 4, v.hi);
}
inline F8 f8_set1(float x) { return {_mm_set1_ps(x), _mm_set1_ps(x)}; }
inline F8 f8_mul(F8 a, F8 b) { return {_mm_mul_ps(a.lo, b.lo), _mm_mul_ps(a.hi, b.hi)}; }
inline F8 f8_fmadd(F8 a, F8 b, F8 c) {
  return {_mm_add_ps(_mm_mul_ps(a.lo, b.lo), c.lo), _mm_add_ps(_mm_mul_ps(a.hi, b.hi), c.hi)};
}
#else
constexpr int kRows = 6;  // register tile: 6 rows × 16 columns = 12 ymm accumulators
using F8 = __m256;
inline F8 f8_load(const float* p) { return _mm256_loadu_ps(p); }
inline void f8_store(float* p, F8 v) { _mm256_storeu_ps(p, v); }
inline F8 f8_set1(float x) { return _mm256_set1_ps(x); }
inline F8 f8_mul(F8 a, F8 b) { return _mm256_mul_ps(a, b); }
inline F8 f8_fmadd(F8 a, F8 b, F8 c) { return _mm256_fmadd_ps(a, b, c); }
#endif

// One term a·b of a product: a is m×k with element (r, κ) at a[r·a_rs + κ·a_ks] (row- or
// column-major), b is k×n row-major (ldb). Causal: a is lower-triangular (row r is zero past
// column r), so row block [r0, r0+M) stops at κ = r0+M.
struct Product {
  const float* a;
  std::int64_t a_rs, a_ks;
  const float* b;
  std::int64_t ldb;
  std::int64_t k;
  bool causal = false;
};

// acc (M rows × 16 columns) += a·b over κ in [0, k_end), a and b already at the tile's corner.
template <int M>
[[gnu::always_inline]] inline void tile_terms(F8 (&acc)[M][2], const float* a, std::int64_t a_rs,
                                              std::int64_t a_ks, const float* b, std::int64_t ldb,
                                              std::int64_t k_end) {
  for (std::int64_t kk = 0; kk < k_end; ++kk, a += a_ks, b += ldb) {
    const F8 b0 = f8_load(b), b1 = f8_load(b + 8);
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
      const F8 x = f8_set1(a[r * a_rs]);
      acc[r][0] = f8_fmadd(x, b0, acc[r][0]);
      acc[r][1] = f8_fmadd(x, b1, acc[r][1]);
    }
  }
}

// c[r0.., j0..j0+16) over M rows: (scale ? scale_r·c : 0) + Σ terms.
template <int M>
inline void tile16(float* c, std::int64_t ldc, const float* scale, const Product* terms, int n_terms,
                   std::int64_t r0, std::int64_t j0) {
  F8 acc[M][2];
  c += r0 * ldc + j0;
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) {
    const F8 s = f8_set1(scale ? scale[r0 + r] : 0.0f);
    acc[r][0] = scale ? f8_mul(s, f8_load(c + r * ldc)) : s;
    acc[r][1] = scale ? f8_mul(s, f8_load(c + r * ldc + 8)) : s;
  }
  for (int p = 0; p < n_terms; ++p) {
    const Product& t = terms[p];
    tile_terms<M>(acc, t.a + r0 * t.a_rs, t.a_rs, t.a_ks, t.b + j0, t.ldb,
                  t.causal ? std::min(t.k, r0 + M) : t.k);
  }
#pragma GCC unroll 8
  for (int r = 0; r < M; ++r) {
    f8_store(c + r * ldc, acc[r][0]);
    f8_store(c + r * ldc + 8, acc[r][1]);
  }
}

template <int M>
inline void tile_rows(float* c, std::int64_t ldc, const float* scale, const Product* terms, int n_terms,
                      std::int64_t r0, std::int64_t rows, std::int64_t j0) {
  if constexpr (M > 0) {
    if (rows == M) return tile16<M>(c, ldc, scale, terms, n_terms, r0, j0);
    tile_rows<M - 1>(c, ldc, scale, terms, n_terms, r0, rows, j0);
  }
}

// c (m×n, ldc) = (scale ? diag(scale)·c : 0) + Σ terms. Columns in blocks of 16 (outer: a block of
// b stays in L1 across the row tiles); the last n mod 16 columns one element at a time.
void product(float* c, std::int64_t ldc, std::int64_t m, std::int64_t n, const float* scale,
             std::initializer_list<Product> list) {
  const Product* terms = list.begin();
  const int n_terms = int(list.size());
  std::int64_t j0 = 0;
  for (; j0 + 16 <= n; j0 += 16)
    for (std::int64_t r0 = 0; r0 < m; r0 += kRows)
      tile_rows<kRows>(c, ldc, scale, terms, n_terms, r0, std::min<std::int64_t>(kRows, m - r0), j0);
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t j = j0; j < n; ++j) {
      float s = scale ? scale[r] * c[r * ldc + j] : 0.0f;
      for (const Product& t : list) {
        const std::int64_t k_end = t.causal ? std::min(t.k, r + 1) : t.k;
        for (std::int64_t kk = 0; kk < k_end; ++kk) s += t.a[r * t.a_rs + kk * t.a_ks] * t.b[kk * t.ldb + j];
      }
      c[r * ldc + j] = s;
    }
}

// Σ_i x_i y_i e^{bx_i − by_i}, 16 lanes (vectorizes without reassociation).
inline float decayed_dot(const float* x, const float* y, const float* bx, const float* by, std::int64_t n) {
  float lanes[16] = {};
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) lanes[l] += x[i + l] * y[i + l] * fast_exp(bx[i + l] - by[i + l]);
  float s = 0;
  for (; i < n; ++i) s += x[i] * y[i] * fast_exp(bx[i] - by[i]);
  for (float a : lanes) s += a;
  return s;
}

// fp32 working set of one thread: the chunk's rows converted once, the carried state, the
// decayed operands and the scores (stored transposed: AT[τ][t] = A_tτ).
struct GlaScratch {
  std::vector<float> S, q, k, v, cum, kr, qr, qrT, AT, o, decay;
  GlaScratch(std::int64_t C, std::int64_t dk, std::int64_t dv)
      : S(std::size_t(dk * dv)),
        q(std::size_t(C * dk)),
        k(std::size_t(C * dk)),
        v(std::size_t(C * dv)),
        cum(std::size_t(C * dk)),
        kr(std::size_t(C * dk)),
        qr(std::size_t(kSub * dk)),
        qrT(std::size_t(dk * kSub)),
        AT(std::size_t(C * C)),
        o(std::size_t(C * dv)),
        decay(std::size_t(dk)) {}
};

template <class T>
class GlaKernel : public GlaKernelBase {
 public:
  explicit GlaKernel(const OpInstance& inst) : GlaKernelBase(inst, dtype_of<T>()) {
    outputs.push_back(make_tensor("o", dtype_of<T>(), {B_, s_, H_, dv_}));
    details["algorithm"] =
        "native chunked GLA (fp32 state; chunk staged in fp32, register-tiled products, sub-chunked "
        "gate-decayed scores)";
  }
  void run() override {
    parallel_for(B_ * H_, [&](std::int64_t lo, std::int64_t hi, int) {
      GlaScratch w(C_, dk_, dv_);
      for (std::int64_t item = lo; item < hi; ++item) head(item / H_, item % H_, w);
    });
  }

 private:
  const T* in(int i) const { return inputs[std::size_t(i)].template as<T>(); }

  void head(std::int64_t b, std::int64_t h, GlaScratch& w) const {
    std::fill(w.S.begin(), w.S.end(), 0.0f);
    T* out = outputs[0].template as<T>();
    for (std::int64_t t0 = 0; t0 < s_; t0 += C_) {
      load_chunk(b, h, t0, w);
      scores(w);
      // q_t∘e^{b_t} in place (q is not needed any more), then o = (q∘e^b)·S + A·V.
      for (std::int64_t x = 0; x < C_ * dk_; ++x) w.q[std::size_t(x)] *= fast_exp(w.cum[std::size_t(x)]);
      product(w.o.data(), dv_, C_, dv_, nullptr,
              {{w.q.data(), dk_, 1, w.S.data(), dv_, dk_}, {w.AT.data(), 1, C_, w.v.data(), dv_, C_, true}});
      for (std::int64_t t = 0; t < C_; ++t) {
        const float* ot = &w.o[std::size_t(t * dv_)];
        const auto base = vidx(b, t0 + t, h);
        for (std::int64_t j = 0; j < dv_; ++j) st(out, base + j, ot[j]);
      }
      advance_state(w);
    }
  }

  // Converts the chunk starting at t0 to fp32 and forms its cumulative log-gates.
  void load_chunk(std::int64_t b, std::int64_t h, std::int64_t t0, GlaScratch& w) const {
    stage_chunk<T>(b, h, t0, w.q.data(), w.k.data(), w.cum.data(), w.v.data());
  }

  // AT (C×C, A_tτ at [τ][t], zero for τ > t): per sub-chunk of tokens [s0, s1), the earlier
  // tokens through the reference r = s0 − 1 as one product, the sub-chunk's own triangle term by term.
  void scores(GlaScratch& w) const {
    std::fill(w.AT.begin(), w.AT.end(), 0.0f);
    for (std::int64_t s0 = 0; s0 < C_; s0 += kSub) {
      const std::int64_t s1 = std::min(C_, s0 + kSub), n = s1 - s0;
      if (s0 > 0) {
        const float* br = &w.cum[std::size_t((s0 - 1) * dk_)];
        for (std::int64_t t = s0; t < s1; ++t)  // q_t∘e^{b_t − b_r}, t > r
          decay_row(&w.q[std::size_t(t * dk_)], &w.cum[std::size_t(t * dk_)], br,
                    &w.qr[std::size_t((t - s0) * dk_)]);
        for (std::int64_t i = 0; i < dk_; ++i)
          for (std::int64_t t = 0; t < n; ++t) w.qrT[std::size_t(i * n + t)] = w.qr[std::size_t(t * dk_ + i)];
        for (std::int64_t tau = 0; tau < s0; ++tau)  // k_τ∘e^{b_r − b_τ}, τ ≤ r
          decay_row(&w.k[std::size_t(tau * dk_)], br, &w.cum[std::size_t(tau * dk_)],
                    &w.kr[std::size_t(tau * dk_)]);
        product(&w.AT[std::size_t(s0)], C_, s0, n, nullptr, {{w.kr.data(), dk_, 1, w.qrT.data(), n, dk_}});
      }
      for (std::int64_t t = s0; t < s1; ++t)
        for (std::int64_t tau = s0; tau <= t; ++tau)
          w.AT[std::size_t(tau * C_ + t)] =
              decayed_dot(&w.q[std::size_t(t * dk_)], &w.k[std::size_t(tau * dk_)],
                          &w.cum[std::size_t(t * dk_)], &w.cum[std::size_t(tau * dk_)], dk_);
    }
  }

  // out = x∘e^{bx − by} (the callers keep bx ≤ by)
  void decay_row(const float* x, const float* bx, const float* by, float* out) const {
    for (std::int64_t i = 0; i < dk_; ++i) out[i] = x[i] * fast_exp(bx[i] - by[i]);
  }

  // S ← diag(e^{b_C})·S + (K∘e^{b_C − b})ᵀ·V
  void advance_state(GlaScratch& w) const {
    const float* last = &w.cum[std::size_t((C_ - 1) * dk_)];
    for (std::int64_t i = 0; i < dk_; ++i) w.decay[std::size_t(i)] = fast_exp(last[i]);
    for (std::int64_t tau = 0; tau < C_; ++tau)
      decay_row(&w.k[std::size_t(tau * dk_)], last, &w.cum[std::size_t(tau * dk_)],
                &w.kr[std::size_t(tau * dk_)]);
    product(w.S.data(), dv_, dk_, dv_, w.decay.data(), {{w.kr.data(), 1, dk_, w.v.data(), dv_, C_}});
  }

};

}  // namespace
}  // namespace rafter::workloads::cpu
RAFTER_CPU_KERNELS_END

namespace rafter::workloads::cpu {
namespace {

RAFTER_REGISTER_CPU_KERNEL({"gla_chunked", "cpu.native",
                            [](const OpInstance& i) {
                              return kernel_build_runs_here() && is_activation_precision(i) && i.phase == "fwd";
                            },
                            make_typed<GlaKernel>});

}  // namespace
}  // namespace rafter::workloads::cpu
