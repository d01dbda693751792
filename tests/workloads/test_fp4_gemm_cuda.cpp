// The FP4 GEMM kernels (workloads/cuda/kernels_fp4_gemm.cu) against the FP64 product of
// quant_math's quantize_dequantize values, at shapes the catalogue check (capped at m=64, n=64,
// k=256) does not reach: several K splits, a partial row group, padded token tiles, batches, and a
// second call on the same workspace; and the backends' records for every pass and precision (the
// native cuBLASLt path on sm_100+, the emulated one on sm_90).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "rafter/workloads/backend.hpp"

#if RAFTER_HAVE_CUDA
#include <cuda_runtime.h>

#include "../../workloads/cuda/fp4_gemm.hpp"
#include "../../workloads/cuda/fp4_host.hpp"
#include "rafter/collector/gpu_timing.hpp"
#include "rafter/workloads/formats.hpp"

using namespace rafter::workloads;

namespace {

struct Shape4 {
  std::int64_t m, n, k, batch;
};

// Uniform values with magnitudes spread over 2^-6..2^6 by row, so that the block scales differ.
std::vector<double> random_matrix(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> x(std::size_t(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) x[std::size_t(r * cols + c)] = u(rng) * std::ldexp(1.0, int(r * 7 % 13) - 6);
  return x;
}

template <class T>
T* device_copy(const std::vector<T>& host) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return static_cast<T*>(p);
}

std::vector<double> bf16_to_host(const void* device, std::size_t count) {
  std::vector<std::uint16_t> bits(count);
  EXPECT_EQ(cudaMemcpy(bits.data(), device, count * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<double> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = rafter::workloads::numfmt::bf16_to_float(bits[i]);
  return out;
}

double rel_l2(const std::vector<double>& got, const std::vector<double>& ref) {
  double d = 0, r = 0;
  for (std::size_t i = 0; i < got.size(); ++i) d += (got[i] - ref[i]) * (got[i] - ref[i]), r += ref[i] * ref[i];
  return std::sqrt(d / r);
}

// With `hot` (batch 1): the hot-channel patch C += R·W_hotᵀ, R [m, hot] and W_hot [n, hot] in BF16.
void check_decode_gemm(const std::string& precision, const Shape4& s, std::int64_t hot = 0) {
  SCOPED_TRACE(precision + " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" +
               std::to_string(s.k) + " batch=" + std::to_string(s.batch) + " hot=" + std::to_string(hot));
  ASSERT_TRUE(cuda::fp4_decode_gemm_fits(s.m, s.n, s.k));
  const detail::QuantSpec sa{precision, s.batch * s.m, s.k, false, false};
  const detail::QuantSpec sb{precision, s.batch * s.n, s.k, precision == "nvfp4", false};
  const auto a = random_matrix(sa.rows, s.k, 1), b = random_matrix(sb.rows, s.k, 2);
  const cuda::Fp4Host ha = cuda::encode_fp4(sa, a), hb = cuda::encode_fp4(sb, b);
  const auto qa = detail::quantize_dequantize(sa, a), qb = detail::quantize_dequantize(sb, b);
  std::vector<double> ref(std::size_t(s.batch * s.m * s.n));
  for (std::int64_t z = 0; z < s.batch; ++z)
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.n; ++j) {
        double acc = 0;
        for (std::int64_t l = 0; l < s.k; ++l)
          acc += qa[std::size_t((z * s.m + i) * s.k + l)] * qb[std::size_t((z * s.n + j) * s.k + l)];
        ref[std::size_t((z * s.m + i) * s.n + j)] = acc;
      }
  cuda::Fp4HotPatch patch, padded_patch;
  std::vector<std::uint16_t> r_bits, w_bits;
  if (hot > 0) {
    const double scale = ha.tensor_scale * hb.tensor_scale;  // the patch about as large as the product
    auto bf16_rows = [&](std::int64_t rows, std::uint64_t seed, std::vector<std::uint16_t>& bits) {
      std::vector<double> v = random_matrix(rows, hot, seed);
      for (double& x : v) {
        bits.push_back(numfmt::float_to_bf16(float(x * std::sqrt(scale * 64))));
        x = numfmt::bf16_to_float(bits.back());
      }
      return v;
    };
    const auto r = bf16_rows(s.m, 3, r_bits), w = bf16_rows(s.n, 4, w_bits);
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.n; ++j)
        for (std::int64_t l = 0; l < hot; ++l)
          ref[std::size_t(i * s.n + j)] += r[std::size_t(i * hot + l)] * w[std::size_t(j * hot + l)];
    patch = {reinterpret_cast<const __nv_bfloat16*>(device_copy(r_bits)),
             reinterpret_cast<const __nv_bfloat16*>(device_copy(w_bits)), hot};
    if (hot % 8 != 0) {  // also in rows of a multiple of 8 (zeros after hot), as the backend stores them
      const std::int64_t ld = (hot + 7) / 8 * 8;
      auto pad = [&](const std::vector<std::uint16_t>& bits, std::int64_t rows) {
        std::vector<std::uint16_t> out(std::size_t(rows * ld), 0);
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t l = 0; l < hot; ++l) out[std::size_t(i * ld + l)] = bits[std::size_t(i * hot + l)];
        return reinterpret_cast<const __nv_bfloat16*>(device_copy(out));
      };
      padded_patch = {pad(r_bits, s.m), pad(w_bits, s.n), hot, ld};
    }
  }
  const cuda::Fp4Kind kind = precision == "nvfp4" ? cuda::Fp4Kind::Nvfp4 : cuda::Fp4Kind::Mxfp4;
  cuda::Fp4Matrix da{device_copy(ha.codes), device_copy(ha.scales)}, db{device_copy(hb.codes), device_copy(hb.scales)};
  void* c = nullptr;
  void* ws = nullptr;
  const std::size_t ws_bytes = cuda::fp4_decode_gemm_workspace_bytes(s.m, s.n, s.batch);
  ASSERT_EQ(cudaMalloc(&c, ref.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ws, ws_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(ws, 0, ws_bytes), cudaSuccess);
  // The weights as they are and, where the streaming kernel runs, also in its packed order (poisoned
  // first: every packed byte is written).
  cuda::Fp4Matrix packed;
  const bool streams = cuda::fp4_decode_gemm_streams(s.m, s.n, s.k, s.batch, hot);
  if (streams) {
    void *pc = nullptr, *ps = nullptr;
    const std::size_t cb = cuda::fp4_decode_packed_bytes(s.n, s.k, s.batch, kind, false),
                      sb2 = cuda::fp4_decode_packed_bytes(s.n, s.k, s.batch, kind, true);
    ASSERT_EQ(cudaMalloc(&pc, cb), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&ps, sb2), cudaSuccess);
    ASSERT_EQ(cudaMemset(pc, 0xA5, cb), cudaSuccess);
    ASSERT_EQ(cudaMemset(ps, 0xA5, sb2), cudaSuccess);
    cuda::fp4_pack_decode_weights(db, static_cast<std::uint8_t*>(pc), static_cast<std::uint8_t*>(ps), s.n, s.k,
                                  s.batch, kind, nullptr);
    packed = {static_cast<std::uint8_t*>(pc), static_cast<std::uint8_t*>(ps)};
  }
  for (int form = 0; form < (streams ? 2 : 1); ++form)
    for (int padded = 0; padded < (padded_patch.hot > 0 ? 2 : 1); ++padded)
      for (int call = 0; call < 2; ++call) {  // the second call finds the workspace zeroed by the first
        ASSERT_EQ(cudaMemset(c, 0xff, ref.size() * 2), cudaSuccess);  // NaN
        cuda::fp4_decode_gemm(da, db, static_cast<__nv_bfloat16*>(c), ha.tensor_scale * hb.tensor_scale, s.m, s.n,
                              s.k, s.batch, kind, ws, nullptr, padded == 1 ? padded_patch : patch,
                              form == 1 ? packed : cuda::Fp4Matrix{});
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const double err = rel_l2(bf16_to_host(c, ref.size()), ref);
        EXPECT_LT(err, 4e-3) << (form == 1 ? "packed weights, " : "") << (padded == 1 ? "padded patch rows, " : "")
                             << "call " << call;  // BF16 output rounding only
      }
  // The patch as the decode kernel's programmatic dependent (fp4_hot_patch_after, m ≤ 16), after
  // both kernels' plain run; rows of a multiple of 8 values, as the backend stores them.
  const cuda::Fp4HotPatch& aligned = hot % 8 == 0 ? patch : padded_patch;
  const std::int64_t ld = hot % 8 == 0 ? hot : padded_patch.ld;
  if (hot > 0 && cuda::fp4_hot_patch_after_fits(s.m, s.n, ld))
    for (int form = 0; form < (streams ? 2 : 1); ++form) {
      ASSERT_EQ(cudaMemset(c, 0xff, ref.size() * 2), cudaSuccess);  // NaN
      cuda::fp4_decode_gemm(da, db, static_cast<__nv_bfloat16*>(c), ha.tensor_scale * hb.tensor_scale, s.m, s.n,
                            s.k, s.batch, kind, ws, nullptr, {}, form == 1 ? packed : cuda::Fp4Matrix{});
      cuda::fp4_hot_patch_after(aligned.r, aligned.w, ld, static_cast<__nv_bfloat16*>(c), s.m, s.n, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const double err = rel_l2(bf16_to_host(c, ref.size()), ref);
      EXPECT_LT(err, 4e-3) << "dependent patch" << (form == 1 ? ", packed weights" : "");  // three BF16 roundings
    }
  cudaFree(const_cast<std::uint8_t*>(packed.codes));
  cudaFree(const_cast<std::uint8_t*>(packed.scales));
  // The dequantizer: code × block scale, which times the tensor scale is quantize_dequantize's value.
  void* deq = nullptr;
  ASSERT_EQ(cudaMalloc(&deq, qb.size() * 2), cudaSuccess);
  cuda::fp4_dequantize_bf16(db, static_cast<__nv_bfloat16*>(deq), sb.rows, s.k, kind, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = bf16_to_host(deq, qb.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < qb.size(); ++i)
    bad += std::fabs(got[i] * hb.tensor_scale - qb[i]) > 1e-6 * std::fabs(qb[i]);
  EXPECT_EQ(bad, 0u) << "dequantized values off the definition";
  for (const cuda::Fp4HotPatch& h : {patch, padded_patch}) {
    cudaFree(const_cast<__nv_bfloat16*>(h.r));
    cudaFree(const_cast<__nv_bfloat16*>(h.w));
  }
  for (void* p : {c, ws, deq, static_cast<void*>(const_cast<std::uint8_t*>(da.codes)),
                  static_cast<void*>(const_cast<std::uint8_t*>(da.scales)),
                  static_cast<void*>(const_cast<std::uint8_t*>(db.codes)),
                  static_cast<void*>(const_cast<std::uint8_t*>(db.scales))})
    cudaFree(p);
}

}  // namespace

TEST(Fp4GemmCuda, DecodeKernelAndDequantizerMatchTheDefinition) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  for (const char* p : {"nvfp4", "mxfp4"})
    for (const Shape4& s : {Shape4{1, 16, 128, 1}, Shape4{16, 208, 640, 2}, Shape4{40, 64, 1152, 1},
                            Shape4{64, 256, 2304, 1}, Shape4{16, 1024, 4096, 1},
                            // the streaming kernel: rows past n, batches, K slices of unequal length,
                            // row groups walked in rounds, m up to 32
                            Shape4{16, 208, 2048, 2}, Shape4{16, 256, 2816, 1}, Shape4{3, 25600, 4096, 1},
                            Shape4{32, 384, 2048, 1}})
      check_decode_gemm(p, s);
}

// The hot-channel patch in both decode kernels' epilogue (and as their programmatic dependent, at
// m ≤ 16): staged by cp.async (rows of a multiple of 8
// values) or copied (other widths; hot 20 and 41 also in rows of 24 and 48), row groups in rounds
// (with the whole and the split cluster barrier), rows past n; the one-shot kernel at m > 32.
TEST(Fp4GemmCuda, DecodeKernelWithItsHotPatch) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  for (const char* p : {"nvfp4", "mxfp4"}) {
    check_decode_gemm(p, Shape4{3, 25600, 4096, 1}, 32);
    check_decode_gemm(p, Shape4{16, 25600, 4096, 1}, 32);  // split barrier, W_hot double-buffered in rounds
    check_decode_gemm(p, Shape4{16, 208, 2048, 1}, 20);
    check_decode_gemm(p, Shape4{16, 1024, 4096, 1}, 41);  // 1 % of K
    check_decode_gemm(p, Shape4{16, 1024, 8192, 1}, 112);
    check_decode_gemm(p, Shape4{40, 64, 1152, 1}, 24);
    check_decode_gemm(p, Shape4{40, 64, 1152, 1}, 20);  // the one-shot kernel, patch rows padded and not
  }
}

namespace {

int device_major() {
  int dev = 0, major = 0;
  EXPECT_EQ(cudaGetDevice(&dev), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), cudaSuccess);
  return major;
}

Backend* backend_named(const std::string& name) {
  for (Backend* b : BackendRegistry::instance().all())
    if (b->name() == name) return b;
  return nullptr;
}

OpInstance fp4_gemm(const char* precision, const char* phase, std::int64_t m) {
  OpInstance i;
  i.op = "gemm", i.phase = phase, i.precision = precision;
  i.shape = {{"m", m}, {"n", 192}, {"k", 512}, {"batch", 1}};
  return i;
}

}  // namespace

// The backend profile_instance picks: the native one on sm_100+ (NVFP4 at least; MXFP4 where
// cuBLASLt offers it), the emulated one on sm_90. Either way the record says which path ran.
TEST(Fp4GemmCuda, EveryPassAndPathIsCheckedAndLabelled) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  const int major = device_major();
  ExecContext ctx;
  ctx.device = "cuda:0";
  ctx.policy = rafter::RepeatPolicy::quick();
  for (const char* p : {"nvfp4", "mxfp4"})
    for (const char* phase : {"fwd", "bwd_input", "bwd_weight"})
      for (std::int64_t m : {16, 256}) {
        const OpInstance i = fp4_gemm(p, phase, m);
        SCOPED_TRACE(std::string(p) + " " + phase + " m=" + std::to_string(m));
        const rafter::OperatorRecord r = profile_instance(i, ctx, {});
        const bool mxfp4_on_blackwell = major >= 10 && std::string(p) == "mxfp4";  // either
        EXPECT_TRUE(r.backend == (major >= 10 ? "cuda.fp4_native" : "cuda.fp4_emulated") ||
                    (mxfp4_on_blackwell && r.backend == "cuda.fp4_emulated"))
            << r.backend;
        EXPECT_EQ(r.status, rafter::RecordStatus::Ok) << r.note;
        EXPECT_TRUE(r.check.passed);
        EXPECT_LT(r.check.error, 1e-2);  // the reference multiplies the quantized values: BF16 output rounding only
        const std::string path = r.details.value("path", "");
        if (r.backend == "cuda.fp4_native") {
          EXPECT_FALSE(r.emulated);
          EXPECT_EQ(r.emulated_via, "");
          EXPECT_NE(path.find("native FP4"), std::string::npos);
        } else {
          // Emulated, so that the roofline judges it on the tensor cores it ran on: FP16 ones for
          // NVFP4 in the streaming decode kernel, BF16 ones everywhere else.
          EXPECT_TRUE(r.emulated);
          const bool f16 = std::string(p) == "nvfp4" && path.find("streamed") != std::string::npos;
          EXPECT_EQ(r.emulated_via, f16 ? "fp16" : "bf16") << path;
          EXPECT_NE(path.find(m <= 64 ? "fused decode" : "cuBLASLt"), std::string::npos);
        }
      }
}

// The memory plan of a decode GEMM with a hot patch: R and W_hot are copied into rows of a multiple
// of 8 values only where hot is not one (BF16, m + n rows); no GPU needed.
TEST(Fp4GemmCuda, MemoryPlanCountsPaddedPatchRowsOnlyWhereCopied) {
  Backend* emulated = backend_named("cuda.fp4_emulated");
  ASSERT_NE(emulated, nullptr);
  const auto extra = [&](std::int64_t hot) {
    OpInstance i = fp4_gemm("nvfp4", "fwd", 16);  // m 16, n 192, k 512: the decode path
    if (hot > 0) i.shape["hot"] = hot;
    return emulated->extra_memory_bytes(i, 1e6);
  };
  EXPECT_EQ(extra(24), extra(0));
  EXPECT_EQ(extra(41) - extra(0), 2.0 * (16 + 192) * 48);
}

// On Blackwell the native backend outranks the emulated one: the emulated kernels stay checked
// through their backend directly. On sm_90 the native one declines every instance.
TEST(Fp4GemmCuda, EmulatedBackendDirectlyAndNativeOnlyFromSm100) {
  if (rafter::gpu::device_count() == 0) GTEST_SKIP() << "no GPU";
  Backend* emulated = backend_named("cuda.fp4_emulated");
  Backend* native = backend_named("cuda.fp4_native");
  ASSERT_NE(emulated, nullptr);
  ASSERT_NE(native, nullptr);
  ExecContext ctx;
  ctx.device = "cuda:0";
  ctx.policy = rafter::RepeatPolicy::quick();
  const OpInstance i = fp4_gemm("nvfp4", "fwd", 256);
  EXPECT_EQ(native->supports(i), device_major() >= 10);
  rafter::OperatorRecord r;
  emulated->execute(i, ctx, r);
  EXPECT_EQ(r.status, rafter::RecordStatus::Ok) << r.note;
  EXPECT_TRUE(r.check.passed);
  EXPECT_EQ(r.emulated_via, "bf16");
}

#else
TEST(Fp4GemmCuda, NeedsTheCudaBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif
